import NIOCore
import STOMP
import Testing

/// STOMP 1.2 framing, byte for byte.
@Suite struct StompFrameTests {
    func text(_ b: ByteBuffer) -> String { String(decoding: b.readableBytesView, as: UTF8.self) }

    func decodeAll(_ bytes: [UInt8]) throws -> [StompCodec.Decoded] {
        var b = ByteBuffer(bytes: bytes)
        var out: [StompCodec.Decoded] = []
        while let d = try StompCodec.decode(&b) { out.append(d) }
        #expect(b.readableBytes == 0)
        return out
    }

    @Test func encodesSendWithContentLengthAndEscapes() {
        let frame = StompFrame("SEND", headers: [("destination", "/topic/a"), ("odd:name", "line\nbreak\\x\r")],
                               body: ByteBuffer(bytes: [1, 0, 2]))
        let encoded = StompCodec.encode(frame)
        #expect(Array(encoded.readableBytesView) == Array("SEND\ndestination:/topic/a\nodd\\cname:line\\nbreak\\\\x\\r\ncontent-length:3\n\n".utf8) + [1, 0, 2, 0])
    }

    @Test func connectHeadersAreNotEscaped() {
        let encoded = StompCodec.encode(StompFrame("CONNECT", headers: [("accept-version", "1.2"), ("login", "a:b")]))
        #expect(text(encoded) == "CONNECT\naccept-version:1.2\nlogin:a:b\n\n\0")
    }

    @Test func decodesBinaryBodyByContentLength() throws {
        let bytes = Array("MESSAGE\ndestination:/topic/x\ncontent-length:4\n\n".utf8) + [0, 1, 0, 2, 0]
        let frames = try decodeAll(bytes)
        guard case .frame(let f) = frames.first else { Issue.record("no frame"); return }
        #expect(f.command == "MESSAGE")
        #expect(f["destination"] == "/topic/x")
        #expect(Array(f.body.readableBytesView) == [0, 1, 0, 2])
    }

    @Test func decodesNulTerminatedBodyCRLFAndHeartbeats() throws {
        let frames = try decodeAll(Array("\n\r\nRECEIPT\r\nreceipt-id:r-1\r\n\r\nhi\0\n".utf8))
        #expect(frames.count == 4)
        #expect(frames[0] == .heartbeat && frames[1] == .heartbeat && frames[3] == .heartbeat)
        guard case .frame(let f) = frames[2] else { Issue.record("no frame"); return }
        #expect(f.command == "RECEIPT" && f["receipt-id"] == "r-1" && text(f.body) == "hi")
    }

    @Test func unescapesAndKeepsTheFirstRepeatedHeader() throws {
        let frames = try decodeAll(Array("MESSAGE\nk:a\\cb\\nc\\\\\nk:second\n\n\0".utf8))
        guard case .frame(let f) = frames.first else { Issue.record("no frame"); return }
        #expect(f["k"] == "a:b\nc\\")
        #expect(f.headers.count == 2)
    }

    /// A header splits at its first colon octet, whatever follows it (a combining mark
    /// makes no `Character` of the colon), and each side is decoded on its own: invalid
    /// UTF-8 becomes U+FFFD. CONNECTED keeps its backslashes; CR before LF ends a line.
    @Test func splitsHeadersAtTheFirstColonOctet() throws {
        let bytes = Array("MESSAGE\r\nurl:http://a:1/\r\nmark:\u{301}x\nempty:\n:nameless\n".utf8)
            + Array("bad:".utf8) + [0xFF, 0x41] + Array("\nid:ID\\chost\\c1".utf8) + [0xE2] + Array("\\n\n".utf8)
            + Array("\n\0CONNECTED\nserver:a\\cb\n\n\0".utf8)
        let frames = try decodeAll(bytes)
        guard frames.count == 2, case .frame(let m) = frames[0], case .frame(let c) = frames[1] else {
            Issue.record("two frames expected: \(frames)"); return
        }
        #expect(m.headers.map(\.name) == ["url", "mark", "empty", "", "bad", "id"])
        #expect(m.headers.map(\.value) == ["http://a:1/", "\u{301}x", "", "nameless", "\u{FFFD}A", "ID:host:1\u{FFFD}\n"])
        #expect(c.command == "CONNECTED" && c["server"] == "a\\cb")
        var nul = ByteBuffer(bytes: Array("MESSAGE\nk:a".utf8) + [0] + Array("b\n\n\0".utf8))
        #expect {
            _ = try StompCodec.decode(&nul)
        } throws: { error in
            "\(error)" == "NUL inside a header"
        }
    }

    @Test func roundTripsRandomFrames() throws {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("ab:\\\n\r c-/é".unicodeScalars)
        for _ in 0..<500 {
            func word() -> String {
                var s = ""
                for _ in 0..<Int.random(in: 0...8, using: &rng) { s.unicodeScalars.append(alphabet.randomElement(using: &rng)!) }
                return s
            }
            let headers = (0..<Int.random(in: 0...4, using: &rng)).map { _ in ("h" + word(), word()) }
            let body = ByteBuffer(bytes: (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let frame = StompFrame("SEND", headers: headers + [("content-length", "\(body.readableBytes)")], body: body)
            // Any strict prefix is incomplete: the decoder waits and consumes nothing.
            let encoded = StompCodec.encode(frame)
            var prefix = encoded.getSlice(at: encoded.readerIndex, length: Int.random(in: 0..<encoded.readableBytes, using: &rng))!
            let before = prefix.readableBytes
            #expect(try StompCodec.decode(&prefix) == nil)
            #expect(prefix.readableBytes == before)
            var whole = StompCodec.encode(frame)
            #expect(try StompCodec.decode(&whole) == .frame(frame))
        }
    }

    @Test func incompleteInputConsumesNothing() throws {
        let full = Array("MESSAGE\ncontent-length:5\n\nabcde\0".utf8)
        for n in 0..<full.count {
            var b = ByteBuffer(bytes: full[0..<n])
            #expect(try StompCodec.decode(&b) == nil)
            #expect(b.readableBytes == n)
        }
    }

    @Test(arguments: [
        ("BOGUS\n\n\0", "unknown command"),
        ("MESSAGE\nnocolon\n\n\0", "without ':'"),
        ("MESSAGE\nk:\\t\n\n\0", "undefined escape"),
        ("MESSAGE\ncontent-length:x\n\n\0", "bad content-length"),
        ("MESSAGE\ncontent-length:-1\n\n\0", "bad content-length"),
        ("MESSAGE\ncontent-length:2\n\nabc\0", "not followed by NUL"),
        ("\rX", "bare carriage return"),
    ])
    func rejectsMalformedFrames(input: String, reason: String) {
        var b = ByteBuffer(string: input)
        #expect {
            _ = try StompCodec.decode(&b)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test func limitsBoundTheBuffering() {
        var limits = StompLimits()
        limits.maxBodyBytes = 10
        limits.maxHeaderBytes = 64
        var big = ByteBuffer(string: "MESSAGE\ncontent-length:11\n\n")
        #expect(throws: StompFrameError.self) { _ = try StompCodec.decode(&big, limits: limits) }
        var endless = ByteBuffer(string: "MESSAGE\n" + String(repeating: "h:v\n", count: 40))
        #expect(throws: StompFrameError.self) { _ = try StompCodec.decode(&endless, limits: limits) }
        var unterminated = ByteBuffer(string: "MESSAGE\n\n" + String(repeating: "x", count: 20))
        #expect(throws: StompFrameError.self) { _ = try StompCodec.decode(&unterminated, limits: limits) }
    }

    @Test func brokerURLs() throws {
        let s = try StompSettings(url: "stomp://user:pw@localhost:61613")
        #expect(s.brokers == [BrokerAddress(host: "127.0.0.1", port: 61613)] && s.login == "user" && s.passcode == "pw")
        #expect(try StompSettings(url: "stomp://[::1]:1/").primary.host == "::1")
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "tcp://127.0.0.1:61613") }
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "stomp://127.0.0.1") }
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "stomp://127.0.0.1:70000") }
    }

    /// A failover list: tried in order; one set of credentials; no broker twice.
    @Test func brokerFailoverLists() throws {
        let s = try StompSettings(url: "stomp://u:p@10.0.0.1:61613, stomp://10.0.0.2:61614")
        #expect(s.brokers == [BrokerAddress(host: "10.0.0.1", port: 61613), BrokerAddress(host: "10.0.0.2", port: 61614)])
        #expect(s.login == "u" && s.passcode == "p")
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "stomp://a:1,stomp://a:1") }
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "stomp://u:p@a:1,stomp://v:q@b:1") }
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "stomp://a:1,") }
        #expect(throws: BrokerURLError.self) { _ = try StompSettings(url: "stomp://a:1,b:2") }
    }
}
