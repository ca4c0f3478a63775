/// The query of an HTTP tracker request (BEP 3 announce, BEP 48 scrape), decoded from
/// hostile bytes. Binary values (`info_hash`, `peer_id`) are percent-decoded strictly:
/// `%` must be followed by two hex digits, `+` is a plain byte (a space only in forms,
/// never in a hash), and each must come out exactly 20 bytes. Numbers are decimal digits
/// only, within their range, with no sign. A parameter given twice is refused, except
/// `info_hash` in a scrape. Every refusal says which parameter, for the `failure reason`.
public enum HTTPTrackerQuery {
    /// The longest query read at all (a scrape of `maxScrapeHashes` hashes, each 60
    /// bytes percent-encoded, fits with room to spare).
    public static let maxQueryBytes = 8192
    /// At most as many hashes as a BEP 15 scrape, so both protocols answer alike.
    public static let maxScrapeHashes = BEP15Codec.maxScrapeHashes

    /// Splits a query (the part after `?`) into decoded name/value pairs, in order.
    public static func pairs(_ query: some Collection<UInt8>) -> Result<[(name: [UInt8], value: [UInt8])], HTTPQueryError> {
        guard query.count <= maxQueryBytes else { return .failure(.tooLong(query.count)) }
        var out: [(name: [UInt8], value: [UInt8])] = []
        for field in Array(query).split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let parts = field.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0]) else { return .failure(.badEncoding(String(decoding: parts[0], as: UTF8.self))) }
            let rawValue: ArraySlice<UInt8> = parts.count > 1 ? parts[1] : []
            guard let value = percentDecoded(rawValue) else { return .failure(.badEncoding(String(decoding: name, as: UTF8.self))) }
            out.append((name, value))
        }
        return .success(out)
    }

    /// `%XX` to its byte; nil for a `%` not followed by two hex digits.
    public static func percentDecoded(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                let h = bytes.index(after: i)
                guard h != bytes.endIndex else { return nil }
                let l = bytes.index(after: h)
                guard l != bytes.endIndex, let hi = hexValue(bytes[h]), let lo = hexValue(bytes[l]) else { return nil }
                out.append(hi << 4 | lo)
                i = bytes.index(after: l)
            } else {
                out.append(b)
                i = bytes.index(after: i)
            }
        }
        return out
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    /// Decimal digits only (1 to 19 of them), at most `max`.
    static func number(_ bytes: some Collection<UInt8>, max: UInt64) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 19 else { return nil }
        var n: UInt64 = 0
        for b in bytes {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            n = n &* 10 &+ UInt64(b &- UInt8(ascii: "0"))
        }
        return n <= max ? n : nil
    }
}

/// An HTTP announce as the client sent it (BEP 3, BEP 23's `compact`, BEP 7's addresses
/// through `ip` only when trusted).
public struct HTTPAnnounce: Hashable, Sendable {
    public var infoHash: InfoHash
    public var peerID: PeerID
    public var port: UInt16
    public var uploaded: Int64
    public var downloaded: Int64
    public var left: Int64
    public var event: AnnounceEvent
    /// nil: the tracker's default.
    public var numWant: Int?
    /// The client's `key`, as it sent it (at most 64 bytes).
    public var key: [UInt8]?
    /// `compact=0` asks for the dictionary model; anything else, or nothing, for compact peers.
    public var compact: Bool
    public var noPeerID: Bool
    /// The address the client says it has (`ip`), used only from trusted sources.
    public var announcedIP: [UInt8]?
    /// The user's key from the path (`/announce/<key>`), for a private tracker.
    public var trackerKey: TrackerKey?

    public init(infoHash: InfoHash, peerID: PeerID, port: UInt16, uploaded: Int64, downloaded: Int64, left: Int64,
                event: AnnounceEvent, numWant: Int?, key: [UInt8]?, compact: Bool, noPeerID: Bool, announcedIP: [UInt8]?) {
        self.infoHash = infoHash; self.peerID = peerID; self.port = port
        self.uploaded = uploaded; self.downloaded = downloaded; self.left = left; self.event = event
        self.numWant = numWant; self.key = key; self.compact = compact; self.noPeerID = noPeerID; self.announcedIP = announcedIP
    }

    /// Decodes an announce's query; the error names the parameter. The refusals, and
    /// their order, are those of taking the query's pairs (`HTTPTrackerQuery.pairs`: an
    /// encoding error first, then a repeated name) and reading the parameters in a fixed
    /// order. It reads the query in place in one pass, with no allocation for the
    /// parameters every announce carries: an announce on a connection of its own costs
    /// its decoding on top of the connection's.
    public static func decode(query: some Collection<UInt8>) -> Result<HTTPAnnounce, HTTPQueryError> {
        guard query.count <= HTTPTrackerQuery.maxQueryBytes else { return .failure(.tooLong(query.count)) }
        if let decoded = query.withContiguousStorageIfAvailable(decode(buffer:)) { return decoded }
        return Array(query).withUnsafeBufferPointer(decode(buffer:))
    }

    /// The parameters an announce reads, by their index in `Parameter.names`.
    enum Parameter: Int, CaseIterable {
        case infoHash, peerID, port, uploaded, downloaded, left, event, numWant, key, compact, noPeerID, ip

        static let names: [[UInt8]] = ["info_hash", "peer_id", "port", "uploaded", "downloaded", "left", "event", "numwant",
                                       "key", "compact", "no_peer_id", "ip"].map { Array($0.utf8) }

        var name: String { String(decoding: Self.names[rawValue], as: UTF8.self) }

        static func named(_ name: UnsafeBufferPointer<UInt8>) -> Parameter? {
            for p in allCases where names[p.rawValue].count == name.count && names[p.rawValue].elementsEqual(name) { return p }
            return nil
        }
    }

    private static func decode(buffer q: UnsafeBufferPointer<UInt8>) -> Result<HTTPAnnounce, HTTPQueryError> {
        // Where each known parameter's value lies in the query, still encoded (-1: absent).
        var starts = InlineArray<12, Int>(repeating: -1), ends = InlineArray<12, Int>(repeating: -1)
        var repeated: Parameter?
        var otherNames: [[UInt8]] = [], otherRepeated: [UInt8]?
        var i = 0
        while i < q.count {
            var end = i
            while end < q.count, q[end] != UInt8(ascii: "&") { end += 1 }
            defer { i = end + 1 }
            guard end > i else { continue }
            var eq = i
            while eq < end, q[eq] != UInt8(ascii: "=") { eq += 1 }
            let rawName = UnsafeBufferPointer(rebasing: q[i..<eq])
            let valueStart = min(eq + 1, end)
            // nil: a bad encoding; .some(nil): a name the announce does not read.
            let named: Parameter?? = PercentDecoding.withDecoded(rawName) { $0.map(Parameter.named) }
            guard let parameter = named else { return .failure(.badEncoding(String(decoding: rawName, as: UTF8.self))) }
            guard PercentDecoding.decodedCount(UnsafeBufferPointer(rebasing: q[valueStart..<end])) != nil else {
                let name = PercentDecoding.withDecoded(rawName) { String(decoding: $0 ?? UnsafeBufferPointer(start: nil, count: 0), as: UTF8.self) }
                return .failure(.badEncoding(name))
            }
            if let parameter {
                if starts[parameter.rawValue] >= 0 { repeated = repeated ?? parameter }
                starts[parameter.rawValue] = valueStart; ends[parameter.rawValue] = end
            } else {
                let name = PercentDecoding.withDecoded(rawName) { Array($0 ?? UnsafeBufferPointer(start: nil, count: 0)) }
                if otherNames.contains(name) { otherRepeated = otherRepeated ?? name } else { otherNames.append(name) }
            }
        }
        // The first name given twice, as a pass over the pairs in order would meet it.
        if repeated != nil || otherRepeated != nil {
            return .failure(.repeated(firstRepeatedName(q)))
        }
        func value(_ p: Parameter) -> UnsafeBufferPointer<UInt8>? {
            starts[p.rawValue] < 0 ? nil : UnsafeBufferPointer(rebasing: q[starts[p.rawValue]..<ends[p.rawValue]])
        }
        func bytes20(_ p: Parameter) -> Result<Bytes20, HTTPQueryError> {
            guard let v = value(p) else { return .failure(.missing(p.name)) }
            guard let b = PercentDecoding.bytes20(v) else {
                return .failure(.invalid(p.name, "must be 20 bytes, not \(PercentDecoding.decodedCount(v) ?? 0)"))
            }
            return .success(b)
        }
        func number(_ p: Parameter, max: UInt64) -> UInt64? {
            value(p).flatMap { v in PercentDecoding.withDecoded(v) { $0.flatMap { HTTPTrackerQuery.number($0, max: max) } } }
        }
        func amount(_ p: Parameter) -> Result<Int64, HTTPQueryError> {
            guard value(p) != nil else { return .failure(.missing(p.name)) }
            guard let n = number(p, max: UInt64(Int64.max)) else { return .failure(.invalid(p.name, "must be a number of bytes")) }
            return .success(Int64(n))
        }
        func decoded(_ p: Parameter) -> [UInt8]? {
            value(p).map { v in PercentDecoding.withDecoded(v) { Array($0 ?? UnsafeBufferPointer(start: nil, count: 0)) } }
        }
        let infoHash: InfoHash, peerID: PeerID
        switch bytes20(.infoHash) { case .success(let b): infoHash = b; case .failure(let e): return .failure(e) }
        switch bytes20(.peerID) { case .success(let b): peerID = b; case .failure(let e): return .failure(e) }
        guard value(.port) != nil else { return .failure(.missing("port")) }
        guard let port = number(.port, max: UInt64(UInt16.max)), port > 0 else { return .failure(.invalid("port", "must be 1 to 65535")) }
        let uploaded: Int64, downloaded: Int64, left: Int64
        switch amount(.uploaded) { case .success(let n): uploaded = n; case .failure(let e): return .failure(e) }
        switch amount(.downloaded) { case .success(let n): downloaded = n; case .failure(let e): return .failure(e) }
        switch amount(.left) { case .success(let n): left = n; case .failure(let e): return .failure(e) }
        var event = AnnounceEvent.none
        if let v = value(.event) {
            let word = PercentDecoding.withDecoded(v) { d in AnnounceEvent.httpWords.first { w in d.map { w.text.elementsEqual($0) } ?? false } }
            guard let word else {
                let text = PercentDecoding.withDecoded(v) { String(decoding: $0 ?? UnsafeBufferPointer(start: nil, count: 0), as: UTF8.self) }
                return .failure(.invalid("event", "'\(text.prefix(16))' is not started, completed, stopped or empty"))
            }
            event = word.event
        }
        var numWant: Int?
        if value(.numWant) != nil {
            guard let n = number(.numWant, max: 1_000_000) else { return .failure(.invalid("numwant", "must be a count")) }
            numWant = Int(n)
        }
        if let v = value(.key), (PercentDecoding.decodedCount(v) ?? 0) > 64 { return .failure(.invalid("key", "is longer than 64 bytes")) }
        if let v = value(.ip), (PercentDecoding.decodedCount(v) ?? 0) > 64 { return .failure(.invalid("ip", "is longer than 64 bytes")) }
        let compact = value(.compact).map { v in PercentDecoding.withDecoded(v) { !($0?.elementsEqual([UInt8(ascii: "0")]) ?? false) } } ?? true
        let noPeerID = value(.noPeerID).map { v in PercentDecoding.withDecoded(v) { $0?.elementsEqual([UInt8(ascii: "1")]) ?? false } } ?? false
        return .success(HTTPAnnounce(
            infoHash: infoHash, peerID: peerID, port: UInt16(port), uploaded: uploaded, downloaded: downloaded, left: left,
            event: event, numWant: numWant, key: decoded(.key), compact: compact, noPeerID: noPeerID, announcedIP: decoded(.ip)))
    }

    /// The decoded name of the first pair whose name an earlier pair had (the rare path
    /// of a refusal: it takes the pairs as `HTTPTrackerQuery.pairs` does).
    private static func firstRepeatedName(_ q: UnsafeBufferPointer<UInt8>) -> String {
        var seen = Set<[UInt8]>()
        if case .success(let pairs) = HTTPTrackerQuery.pairs(q) {
            for (name, _) in pairs where !seen.insert(name).inserted { return String(decoding: name, as: UTF8.self) }
        }
        return ""
    }
}

extension AnnounceEvent {
    /// The words of an HTTP announce's `event` (BEP 3; `paused`, BEP 21's, counts as none).
    static let httpWords: [(text: [UInt8], event: AnnounceEvent)] = [
        ([], .none), (Array("empty".utf8), .none), (Array("paused".utf8), .none), (Array("started".utf8), .started),
        (Array("completed".utf8), .completed), (Array("stopped".utf8), .stopped),
    ]
}

/// Strict percent-decoding in place: `%` must be followed by two hex digits; every other
/// byte stands for itself.
enum PercentDecoding {
    /// How many bytes `bytes` decodes to; nil when its encoding is bad.
    static func decodedCount(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 0, n = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, HTTPTrackerQuery.hexValue(bytes[i + 1]) != nil, HTTPTrackerQuery.hexValue(bytes[i + 2]) != nil else { return nil }
                i += 3
            } else {
                i += 1
            }
            n += 1
        }
        return n
    }

    /// Calls `body` with the decoded bytes (nil when the encoding is bad): the bytes
    /// themselves when there is nothing to decode, else a copy decoded on the stack.
    static func withDecoded<R>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>?) -> R) -> R {
        guard bytes.contains(UInt8(ascii: "%")) else { return body(bytes) }
        guard let count = decodedCount(bytes) else { return body(nil) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { out in
            var i = 0, n = 0
            while i < bytes.count {
                if bytes[i] == UInt8(ascii: "%"), let hi = HTTPTrackerQuery.hexValue(bytes[i + 1]), let lo = HTTPTrackerQuery.hexValue(bytes[i + 2]) {
                    out[n] = hi << 4 | lo
                    i += 3
                } else {
                    out[n] = bytes[i]
                    i += 1
                }
                n += 1
            }
            return body(UnsafeBufferPointer(out))
        }
    }

    /// Twenty decoded bytes as a `Bytes20`, or nil when they are not twenty or the
    /// encoding is bad: one pass, the words built as the bytes come.
    static func bytes20(_ bytes: UnsafeBufferPointer<UInt8>) -> Bytes20? {
        var a: UInt64 = 0, b: UInt64 = 0, c: UInt32 = 0
        var i = 0, n = 0
        while i < bytes.count {
            var byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let hi = HTTPTrackerQuery.hexValue(bytes[i + 1]),
                      let lo = HTTPTrackerQuery.hexValue(bytes[i + 2]) else { return nil }
                byte = hi << 4 | lo
                i += 3
            } else {
                i += 1
            }
            switch n {
            case 0..<8: a = a << 8 | UInt64(byte)
            case 8..<16: b = b << 8 | UInt64(byte)
            case 16..<20: c = c << 8 | UInt32(byte)
            default: return nil
            }
            n += 1
        }
        return n == 20 ? Bytes20(a: a, b: b, c: c) : nil
    }
}

/// An HTTP scrape (BEP 48): the hashes asked for, in order; none asks for every swarm,
/// which this tracker refuses as a BEP 15 scrape of nothing would be.
public enum HTTPScrape {
    public static func decode(query: some Collection<UInt8>) -> Result<[InfoHash], HTTPQueryError> {
        let pairs: [(name: [UInt8], value: [UInt8])]
        switch HTTPTrackerQuery.pairs(query) {
        case .success(let p): pairs = p
        case .failure(let e): return .failure(e)
        }
        var hashes: [InfoHash] = []
        for (name, value) in pairs where name == Array("info_hash".utf8) {
            guard let h = Bytes20(bytes: value) else { return .failure(.invalid("info_hash", "must be 20 bytes, not \(value.count)")) }
            hashes.append(h)
            guard hashes.count <= HTTPTrackerQuery.maxScrapeHashes else {
                return .failure(.invalid("info_hash", "at most \(HTTPTrackerQuery.maxScrapeHashes) per scrape"))
            }
        }
        guard !hashes.isEmpty else { return .failure(.missing("info_hash")) }
        return .success(hashes)
    }
}

/// Why an HTTP tracker request's query was refused: the text of its `failure reason`.
public enum HTTPQueryError: Error, Hashable, Sendable, CustomStringConvertible {
    case tooLong(Int)
    case badEncoding(String)
    case repeated(String)
    case missing(String)
    case invalid(String, String)

    public var description: String {
        switch self {
        case .tooLong(let n): "query of \(n) bytes; at most \(HTTPTrackerQuery.maxQueryBytes)"
        case .badEncoding(let name): "bad percent-encoding in '\(name.prefix(32))'"
        case .repeated(let name): "'\(name.prefix(32))' given twice"
        case .missing(let name): "missing \(name)"
        case .invalid(let name, let why): "\(name) \(why)"
        }
    }
}
