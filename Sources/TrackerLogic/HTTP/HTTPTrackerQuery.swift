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
    static func number(_ bytes: [UInt8], max: UInt64) -> UInt64? {
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

    /// Decodes an announce's query; the error names the parameter.
    public static func decode(query: some Collection<UInt8>) -> Result<HTTPAnnounce, HTTPQueryError> {
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
        func bytes20(_ name: String) -> Result<Bytes20, HTTPQueryError> {
            guard let v = seen[name] else { return .failure(.missing(name)) }
            guard let b = Bytes20(bytes: v) else { return .failure(.invalid(name, "must be 20 bytes, not \(v.count)")) }
            return .success(b)
        }
        func amount(_ name: String, required: Bool) -> Result<Int64, HTTPQueryError> {
            guard let v = seen[name] else { return required ? .failure(.missing(name)) : .success(0) }
            guard let n = HTTPTrackerQuery.number(v, max: UInt64(Int64.max)) else {
                return .failure(.invalid(name, "must be a number of bytes"))
            }
            return .success(Int64(n))
        }
        let infoHash: InfoHash, peerID: PeerID
        switch bytes20("info_hash") { case .success(let b): infoHash = b; case .failure(let e): return .failure(e) }
        switch bytes20("peer_id") { case .success(let b): peerID = b; case .failure(let e): return .failure(e) }
        guard let portText = seen["port"] else { return .failure(.missing("port")) }
        guard let port = HTTPTrackerQuery.number(portText, max: UInt64(UInt16.max)), port > 0 else {
            return .failure(.invalid("port", "must be 1 to 65535"))
        }
        let uploaded: Int64, downloaded: Int64, left: Int64
        switch amount("uploaded", required: true) { case .success(let n): uploaded = n; case .failure(let e): return .failure(e) }
        switch amount("downloaded", required: true) { case .success(let n): downloaded = n; case .failure(let e): return .failure(e) }
        switch amount("left", required: true) { case .success(let n): left = n; case .failure(let e): return .failure(e) }
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
            guard let n = HTTPTrackerQuery.number(v, max: 1_000_000) else { return .failure(.invalid("numwant", "must be a count")) }
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
