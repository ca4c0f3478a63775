import Testing
import TrackerLogic

/// The HTTP tracker's codecs, byte for byte: the bencoded replies and the strict decoding
/// of announce and scrape queries from hostile bytes.
@Suite("HTTP tracker query and bencode")
struct HTTPTrackerQueryTests {
    let hash = InfoHash(bytes: (1...20).map { UInt8($0) })!
    /// The hash percent-encoded as clients send it: unreserved bytes as they are.
    let hashQuery = (1...20).map { String(format: "%%%02X", $0) }.joined()

    func q(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func repliesEncodeCanonically() {
        let reply = Bencode.dictionary(pairs: [
            ("peers", .bytes([10, 0, 0, 1, 0x1A, 0xE1])), ("interval", .integer(1800)),
            ("incomplete", .integer(3)), ("complete", .integer(5)), ("min interval", .integer(900)),
        ])
        #expect(reply.encoded == q("d8:completei5e10:incompletei3e8:intervali1800e12:min intervali900e5:peers6:")
            + [10, 0, 0, 1, 0x1A, 0xE1] + q("e"))
        #expect(Bencode.integer(0).encoded == q("i0e"))
        #expect(Bencode.integer(-42).encoded == q("i-42e"))
        #expect(Bencode.integer(.min).encoded == q("i-9223372036854775808e"))
        #expect(Bencode.list([.text("a"), .list([]), .dictionary([])]).encoded == q("l1:aledee"))
        #expect(Bencode.dictionary(pairs: [("failure reason", .text("unregistered torrent"))]).encoded
            == q("d14:failure reason20:unregistered torrente"))
        // A key given twice keeps its last value; keys sort as bytes, not as text.
        #expect(Bencode.dictionary(pairs: [("b", .integer(1)), ("a", .integer(2)), ("b", .integer(3))]).encoded == q("d1:ai2e1:bi3ee"))
        #expect(Bencode.dictionary(pairs: [("\u{e9}", .integer(1)), ("z", .integer(2))]).encoded == q("d1:zi2e2:\u{e9}i1ee"))
    }

    @Test func whatItEncodesTheDecoderTakesBack() throws {
        let value = Bencode.dictionary(pairs: [("files", .dictionary(pairs: [("\u{1}\u{2}", .dictionary(pairs: [("complete", .integer(1))]))])),
                                        ("peers", .list([.dictionary(pairs: [("ip", .text("10.0.0.1")), ("port", .integer(6881))])]))])
        let decoded = try BencodeDecoder().decode(value.encoded)
        #expect(decoded.encoded == value.encoded)
    }

    @Test func anAnnounceAsAClientSendsItDecodes() throws {
        let query = "info_hash=\(hashQuery)&peer_id=-qB4250-abcdefghijkl&port=6881&uploaded=10&downloaded=20&left=100"
            + "&corrupt=0&key=ABCD1234&event=started&numwant=200&compact=1&no_peer_id=1&supportcrypto=1"
        let a = try HTTPAnnounce.decode(query: q(query)).get()
        #expect(a.infoHash == hash)
        #expect(a.peerID == PeerID(bytes: q("-qB4250-abcdefghijkl")))
        #expect(a.port == 6881 && a.uploaded == 10 && a.downloaded == 20 && a.left == 100)
        #expect(a.event == .started && a.numWant == 200 && a.key == q("ABCD1234"))
        #expect(a.compact && a.noPeerID && a.announcedIP == nil)
        // Unreserved bytes may come as they are; `+` is a plain byte, never a space.
        let plain = try HTTPAnnounce.decode(query: q("info_hash=aaaaaaaaaaaaaaaaaaa%2B&peer_id=bbbbbbbbbbbbbbbbbbb+&port=1"
                                                     + "&uploaded=0&downloaded=0&left=0&compact=0")).get()
        #expect(plain.infoHash.bytes.last == UInt8(ascii: "+") && plain.peerID.bytes.last == UInt8(ascii: "+"))
        #expect(!plain.compact && plain.event == .none && plain.numWant == nil)
    }

    @Test(arguments: [
        ("peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=0&left=0", "missing info_hash"),
        ("info_hash=%01%02&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=0&left=0", "info_hash must be 20 bytes, not 2"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=0&uploaded=0&downloaded=0&left=0", "port must be 1 to 65535"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=65536&uploaded=0&downloaded=0&left=0", "port must be 1 to 65535"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=-1&downloaded=0&left=0", "uploaded must be a number of bytes"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=9223372036854775808&left=0",
         "downloaded must be a number of bytes"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=0", "missing left"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=0&left=0",
         "'peer_id' given twice"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijk%2&port=1&uploaded=0&downloaded=0&left=0", "bad percent-encoding in 'peer_id'"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=0&left=0&event=finished",
         "event 'finished' is not started, completed, stopped or empty"),
        ("info_hash=HASH&peer_id=-qB4250-abcdefghijkl&port=1&uploaded=0&downloaded=0&left=0&numwant=x", "numwant must be a count"),
    ])
    func aBadAnnounceSaysWhichParameter(query: String, reason: String) {
        let bytes = q(query.replacingOccurrences(of: "HASH", with: hashQuery))
        guard case .failure(let e) = HTTPAnnounce.decode(query: bytes) else { Issue.record("accepted \(query)"); return }
        #expect(e.description == reason)
    }

    @Test func anOversizedQueryIsRefusedUnread() {
        let long = [UInt8](repeating: UInt8(ascii: "a"), count: HTTPTrackerQuery.maxQueryBytes + 1)
        #expect(HTTPAnnounce.decode(query: long) == .failure(.tooLong(HTTPTrackerQuery.maxQueryBytes + 1)))
    }

    @Test func aScrapeNamesItsHashesInOrderUpToTheCap() throws {
        let other = InfoHash(bytes: [UInt8](repeating: 0x61, count: 20))!
        #expect(try HTTPScrape.decode(query: q("info_hash=\(hashQuery)&info_hash=aaaaaaaaaaaaaaaaaaaa")).get() == [hash, other])
        #expect(HTTPScrape.decode(query: q("")) == .failure(.missing("info_hash")))
        let many = Array(repeating: "info_hash=\(hashQuery)", count: HTTPTrackerQuery.maxScrapeHashes + 1).joined(separator: "&")
        #expect(HTTPScrape.decode(query: q(many)) == .failure(.invalid("info_hash", "at most 74 per scrape")))
        #expect(HTTPScrape.decode(query: q("info_hash=%01")) == .failure(.invalid("info_hash", "must be 20 bytes, not 1")))
    }

    /// The announce decoder reads the query in place, in one pass; what it accepts and
    /// what it refuses, with which reason, is exactly what taking the pairs and then the
    /// parameters by name gives (`referenceDecode`, the plain reading). Hostile queries
    /// drawn from names, encodings, repeats and values each path treats apart.
    @Test func theOnePassDecoderAgreesWithThePlainReading() {
        var rng = SeededGenerator(seed: 63)
        let names = ["info_hash", "peer_id", "port", "uploaded", "downloaded", "left", "event", "numwant", "key", "compact",
                     "no_peer_id", "ip", "info%5Fhash", "p%6Frt", "supportcrypto", "corrupt", "%zz", "", "x%4"]
        let values = ["", "0", "1", "6881", "65536", "-1", "9223372036854775807", "9223372036854775808", "%31%30", "started",
                      "st%61rted", "paused", "finished", "%", "%4", "%G0", hashQuery, String(repeating: "a", count: 20),
                      "-qB4250-abcdefghijkl", String(repeating: "k", count: 65), "%2B" + String(repeating: "b", count: 19)]
        let base = ["info_hash=\(hashQuery)", "peer_id=-qB4250-abcdefghijkl", "port=6881", "uploaded=0", "downloaded=0", "left=0"]
        var accepted = 0
        for _ in 0..<20_000 {
            var fields = base.filter { _ in rng.next(upperBound: UInt64(4)) != 0 }
            for _ in 0..<Int(rng.next(upperBound: UInt64(5))) {
                let name = names[Int(rng.next(upperBound: UInt64(names.count)))]
                let value = values[Int(rng.next(upperBound: UInt64(values.count)))]
                let field = rng.next(upperBound: UInt64(10)) == 0 ? name : "\(name)=\(value)"
                fields.insert(field, at: Int(rng.next(upperBound: UInt64(fields.count + 1))))
            }
            let query = q(fields.joined(separator: rng.next(upperBound: UInt64(8)) == 0 ? "&&" : "&"))
            let decoded = HTTPAnnounce.decode(query: query)
            #expect(decoded == Self.referenceDecode(query), "\(String(decoding: query, as: UTF8.self))")
            if case .success = decoded { accepted += 1 }
        }
        #expect(accepted > 1_000, "the draw reaches accepted announces too")
    }

    /// The plain reading: the query's pairs (`HTTPTrackerQuery.pairs`), a name given twice
    /// refused, then each parameter by name in a fixed order.
    static func referenceDecode(_ query: [UInt8]) -> Result<HTTPAnnounce, HTTPQueryError> {
        let pairs: [(name: [UInt8], value: [UInt8])]
        switch HTTPTrackerQuery.pairs(query) {
        case .success(let p): pairs = p
        case .failure(let e): return .failure(e)
        }
        var seen: [String: [UInt8]] = [:]
        for (name, value) in pairs {
            let key = String(decoding: name, as: UTF8.self)
            guard seen[key] == nil else { return .failure(.repeated(key)) }
            seen[key] = value
        }
        func number(_ v: [UInt8], max: UInt64) -> UInt64? {
            guard !v.isEmpty, v.count <= 19, v.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            let n = v.reduce(UInt64(0)) { $0 &* 10 &+ UInt64($1 - 48) }
            return n <= max ? n : nil
        }
        func bytes20(_ name: String) -> Result<Bytes20, HTTPQueryError> {
            guard let v = seen[name] else { return .failure(.missing(name)) }
            guard let b = Bytes20(bytes: v) else { return .failure(.invalid(name, "must be 20 bytes, not \(v.count)")) }
            return .success(b)
        }
        func amount(_ name: String) -> Result<Int64, HTTPQueryError> {
            guard let v = seen[name] else { return .failure(.missing(name)) }
            guard let n = number(v, max: UInt64(Int64.max)) else { return .failure(.invalid(name, "must be a number of bytes")) }
            return .success(Int64(n))
        }
        let infoHash: InfoHash, peerID: PeerID, uploaded: Int64, downloaded: Int64, left: Int64
        switch bytes20("info_hash") { case .success(let b): infoHash = b; case .failure(let e): return .failure(e) }
        switch bytes20("peer_id") { case .success(let b): peerID = b; case .failure(let e): return .failure(e) }
        guard let portText = seen["port"] else { return .failure(.missing("port")) }
        guard let port = number(portText, max: UInt64(UInt16.max)), port > 0 else { return .failure(.invalid("port", "must be 1 to 65535")) }
        switch amount("uploaded") { case .success(let n): uploaded = n; case .failure(let e): return .failure(e) }
        switch amount("downloaded") { case .success(let n): downloaded = n; case .failure(let e): return .failure(e) }
        switch amount("left") { case .success(let n): left = n; case .failure(let e): return .failure(e) }
        let event: AnnounceEvent
        switch seen["event"].map({ String(decoding: $0, as: UTF8.self) }) {
        case nil, "", "empty", "paused": event = .none
        case "started": event = .started
        case "completed": event = .completed
        case "stopped": event = .stopped
        case let other?: return .failure(.invalid("event", "'\(other.prefix(16))' is not started, completed, stopped or empty"))
        }
        var numWant: Int?
        if let v = seen["numwant"] {
            guard let n = number(v, max: 1_000_000) else { return .failure(.invalid("numwant", "must be a count")) }
            numWant = Int(n)
        }
        if let k = seen["key"], k.count > 64 { return .failure(.invalid("key", "is longer than 64 bytes")) }
        if let ip = seen["ip"], ip.count > 64 { return .failure(.invalid("ip", "is longer than 64 bytes")) }
        return .success(HTTPAnnounce(
            infoHash: infoHash, peerID: peerID, port: UInt16(port), uploaded: uploaded, downloaded: downloaded, left: left,
            event: event, numWant: numWant, key: seen["key"], compact: seen["compact"] != Array("0".utf8),
            noPeerID: seen["no_peer_id"].map { $0 == Array("1".utf8) } ?? false, announcedIP: seen["ip"]))
    }
}
