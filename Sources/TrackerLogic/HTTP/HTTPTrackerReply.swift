/// The HTTP tracker's answers (BEP 3, BEP 23, BEP 7, BEP 48), from the same
/// `TrackerResponse` a BEP 15 datagram carries: both protocols are answered by one core,
/// and only the wire differs.
///
/// Invariant: every body is canonical bencode (`Bencode.encoded` gives the same bytes for
/// the same dictionary; `HTTPTrackerReplyTests` holds the two together). The announce
/// body, the one written under load, is written directly in its keys' sorted order.
public enum HTTPTrackerReply {
    /// What the request asked that its answer's wire depends on (the exchange keeps it
    /// while the core decides).
    public struct Shape: Hashable, Sendable {
        /// BEP 23's compact strings (the default); false: BEP 3's list of dictionaries.
        public var compact: Bool
        /// A scrape's hashes, in the order its entries answer them.
        public var scraped: [InfoHash]
        public init(compact: Bool = true, scraped: [InfoHash] = []) { self.compact = compact; self.scraped = scraped }
    }

    /// The bencoded body for `response`.
    public static func body(_ response: TrackerResponse, shape: Shape = Shape()) -> [UInt8] {
        switch response {
        case .announce(let a): announce(a, shape: shape)
        case .scrape(let s): Bencode.dictionary(pairs: [("files", files(s, hashes: shape.scraped))]).encoded
        case .error(let e): failure(e.message)
        case .connect: failure("connect is a UDP tracker request")
        }
    }

    public static func failure(_ reason: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(reason.utf8.count + 24)
        out += Key.failure
        string(Array(reason.utf8), into: &out)
        out.append(UInt8(ascii: "e"))
        return out
    }

    /// `complete`, `incomplete`, `interval`, `min interval` (half the interval: a client
    /// re-announces no sooner unless an event says so), then the peers: `peers` in the
    /// announcer's family when IPv4, and for IPv6 an empty `peers` and `peers6` (BEP 7).
    static func announce(_ a: AnnounceResponse, shape: Shape) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(a.compactPeers.bytes.count + 96)
        out.append(UInt8(ascii: "d"))
        out += Key.complete; integer(Int64(a.seeders), into: &out)
        out += Key.incomplete; integer(Int64(a.leechers), into: &out)
        out += Key.interval; integer(Int64(a.interval), into: &out)
        out += Key.minInterval; integer(Int64(max(1, a.interval / 2)), into: &out)
        out += Key.peers
        if !shape.compact {
            out.append(UInt8(ascii: "l"))
            for e in a.compactPeers.endpoints {
                out += Key.ip; string(Array("\(e.ip)".utf8), into: &out)
                out += Key.port; integer(Int64(e.port), into: &out)
                out.append(UInt8(ascii: "e"))
            }
            out.append(UInt8(ascii: "e"))
        } else if a.compactPeers.family == .v4 {
            string(a.compactPeers.bytes, into: &out)
        } else {
            string([], into: &out)
            out += Key.peers6; string(a.compactPeers.bytes, into: &out)
        }
        out.append(UInt8(ascii: "e"))
        return out
    }

    /// BEP 48's `files`: each hash once (a dictionary's keys are unique and sorted).
    static func files(_ s: ScrapeResponse, hashes: [InfoHash]) -> Bencode {
        .dictionary(zip(hashes, s.entries).map { hash, e in
            BencodeEntry(key: hash.bytes, value: .dictionary(pairs: [
                ("complete", .integer(Int64(e.seeders))), ("downloaded", .integer(Int64(e.completed))),
                ("incomplete", .integer(Int64(e.leechers))),
            ]), range: 0..<0)
        })
    }

    static func integer(_ n: Int64, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "i"))
        out += String(n).utf8
        out.append(UInt8(ascii: "e"))
    }

    static func string(_ bytes: [UInt8], into out: inout [UInt8]) {
        out += String(bytes.count).utf8
        out.append(UInt8(ascii: ":"))
        out += bytes
    }

    /// Keys as bencoded strings, made once; the dictionary model's entries open with `d`.
    enum Key {
        static let failure = Array("d14:failure reason".utf8)
        static let complete = Array("8:complete".utf8), incomplete = Array("10:incomplete".utf8)
        static let interval = Array("8:interval".utf8), minInterval = Array("12:min interval".utf8)
        static let peers = Array("5:peers".utf8), peers6 = Array("6:peers6".utf8)
        static let ip = Array("d2:ip".utf8), port = Array("4:port".utf8)
    }

    /// A whole HTTP/1.1 response: status line, headers, body. A HEAD gets the headers alone.
    public static func message(status: Int = 200, reason: String = "OK", body: [UInt8], keepAlive: Bool, headOnly: Bool = false,
                               contentType: String = "text/plain") -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(body.count + 128)
        out += "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n".utf8
        out += (keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n").utf8
        if !headOnly { out += body }
        return out
    }
}
