import NIOCore
import STOMP
import Testing
import TrackerLogic

/// The stream decoder hands out exactly what `StompCodec.decode` does on the whole
/// stream, however the bytes are cut into reads, and refuses an oversized frame while it
/// is still arriving.
@Suite struct StompStreamDecoderTests {
    let stream: [UInt8] = Array("\n\r\nRECEIPT\r\nreceipt-id:r-1\r\n\r\nhi\0\n".utf8)
        + Array("MESSAGE\ndestination:/topic/x\ncontent-length:4\n\n".utf8) + [0, 1, 0, 2, 0]
        + Array("MESSAGE\ndestination:/topic/y\nx:a\\nb\n\nno length\0".utf8)
        + Array("ERROR\ncontent-length:3\ncontent-length:9\nmessage:first length counts\n\nabc\0\n".utf8)

    func whole() throws -> [StompCodec.Decoded] {
        var b = ByteBuffer(bytes: stream)
        var out: [StompCodec.Decoded] = []
        while let d = try StompCodec.decode(&b) { out.append(d) }
        return out
    }

    /// Feeds `bytes` in reads of the sizes `cut` draws, as a socket would.
    func fed(_ bytes: [UInt8], limits: StompLimits = StompLimits(), cut: (Int) -> Int) throws -> [StompCodec.Decoded] {
        var decoder = StompStreamDecoder(limits: limits)
        var buffer = ByteBuffer()
        var out: [StompCodec.Decoded] = []
        var at = 0
        while at < bytes.count {
            let n = min(bytes.count - at, max(1, cut(at)))
            buffer.writeBytes(bytes[at..<(at + n)])
            at += n
            while let d = try decoder.decode(&buffer) { out.append(d) }
        }
        #expect(buffer.readableBytes == 0)
        return out
    }

    @Test func byteByByteGivesWhatTheWholeStreamGives() throws {
        let expected = try whole()
        #expect(expected.count == 8)
        #expect(try fed(stream) { _ in 1 } == expected)
    }

    @Test(arguments: 1...40) func anyCutGivesWhatTheWholeStreamGives(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        #expect(try fed(stream) { _ in 1 + rng.below(12) } == (try whole()))
    }

    @Test func aBodyWithoutLengthIsRefusedOnceOverTheLimitNotAtItsEnd() {
        var limits = StompLimits()
        limits.maxBodyBytes = 1000
        let header = Array("MESSAGE\ndestination:/topic/x\n\n".utf8)
        #expect(throws: StompFrameError.self) {
            _ = try fed(header + [UInt8](repeating: 0x41, count: 1500), limits: limits) { _ in 100 }
        }
        #expect(throws: StompFrameError.self) {
            _ = try fed(Array("MESSAGE\ncontent-length:1001\n\n".utf8), limits: limits) { _ in 5 }
        }
    }

    @Test func aHeaderSectionOverTheLimitIsRefusedWhileItArrives() {
        var limits = StompLimits()
        limits.maxHeaderBytes = 200
        #expect(throws: StompFrameError.self) {
            _ = try fed(Array("MESSAGE\n".utf8) + [UInt8](repeating: 0x41, count: 300), limits: limits) { _ in 7 }
        }
    }

    @Test func aBadContentLengthIsNamed() throws {
        let error = #expect(throws: StompFrameError.self) {
            _ = try fed(Array("MESSAGE\ncontent-length:x\n\n".utf8)) { _ in 3 }
        }
        #expect(error?.description == "bad content-length 'x'")
    }
}

