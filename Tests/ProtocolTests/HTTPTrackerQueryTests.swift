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
}
