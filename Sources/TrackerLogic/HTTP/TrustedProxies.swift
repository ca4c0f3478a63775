/// An address block, as `--trusted-proxies` names them: `10.0.0.0/8`, `2001:db8::/32`,
/// or one address (a whole-length prefix).
public struct IPNetwork: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var prefixLength: Int

    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let ip = IPAddress(parts[0]) else { return nil }
        let full = ip.family == .v4 ? 32 : 128
        var length = full
        if parts.count == 2 {
            guard parts[1].count <= 3, parts[1].allSatisfy(\.isASCII), let n = Int(parts[1]), (0...full).contains(n) else { return nil }
            length = n
        }
        self.address = ip.masked(to: length)
        self.prefixLength = length
    }

    public func contains(_ ip: IPAddress) -> Bool {
        let ip = ip.unmapped
        guard ip.family == address.family else { return false }
        return ip.masked(to: prefixLength) == address
    }

    public var description: String { "\(address)/\(prefixLength)" }
}

extension IPAddress {
    /// The first `length` bits kept, the rest zero.
    func masked(to length: Int) -> IPAddress {
        func mask(_ bits: Int) -> UInt64 { bits <= 0 ? 0 : bits >= 64 ? .max : ~(UInt64.max >> UInt64(bits)) }
        switch self {
        case .v4(let v):
            return .v4(length <= 0 ? 0 : length >= 32 ? v : v & ~(UInt32.max >> UInt32(length)))
        case .v6(let hi, let lo):
            return .v6(hi & mask(length), lo & mask(length - 64))
        }
    }
}

/// Where an HTTP tracker request came from: the connection's address, or, when that is a
/// trusted reverse proxy, the client the proxy names.
///
/// Invariant: a header is read only from a connection whose address is trusted, and the
/// client taken from it is the nearest address (from the right, each proxy appends the
/// one it heard from) that is not itself a trusted proxy. A client that sends its own
/// `X-Forwarded-For` through the proxy adds entries on the left, which are never reached
/// past an untrusted one: nobody can name their own address by writing a header.
public struct TrustedProxies: Hashable, Sendable {
    public var networks: [IPNetwork]

    public init(_ networks: [IPNetwork] = []) { self.networks = networks }

    /// Parses `CIDR,CIDR,…`; the error names the first entry that is not one.
    public static func parse(_ text: String) -> Result<TrustedProxies, ProxyListError> {
        var out: [IPNetwork] = []
        for part in text.split(separator: ",") {
            let entry = part.trimmingSpaces
            guard let n = IPNetwork(entry) else { return .failure(ProxyListError(entry: String(entry.prefix(64)))) }
            out.append(n)
        }
        return .success(TrustedProxies(out))
    }

    public struct ProxyListError: Error, Hashable, Sendable, CustomStringConvertible {
        public var entry: String
        public init(entry: String) { self.entry = entry }
        public var description: String { "'\(entry)' is not an address or ADDRESS/PREFIX" }
    }

    public var isEmpty: Bool { networks.isEmpty }

    public func trusts(_ ip: IPAddress) -> Bool { networks.contains { $0.contains(ip) } }

    /// The client's address for a request that came over a connection from `connection`.
    /// `Forwarded` is read before `X-Forwarded-For` when a proxy sent both.
    public func client(connection: IPAddress, head: HTTPRequestHead) -> IPAddress {
        guard trusts(connection) else { return connection }
        if let f = head.forwarded, let ip = nearestUntrusted(Self.forwardedFor(f)) { return ip }
        if let x = head.forwardedFor, let ip = nearestUntrusted(Self.list(x)) { return ip }
        return connection
    }

    /// From the right: the first entry that is not a trusted proxy. nil when an entry is
    /// not an address (what lies left of it cannot be believed either) or all are trusted.
    func nearestUntrusted(_ entries: [Substring]) -> IPAddress? {
        for entry in entries.reversed() {
            guard let ip = Self.address(entry) else { return nil }
            if !trusts(ip) { return ip.unmapped }
        }
        return nil
    }

    static func list(_ value: [UInt8]) -> [Substring] {
        String(decoding: value, as: UTF8.self).split(separator: ",").map { $0.trimmingSpaces }
    }

    /// The `for=` of each element of a `Forwarded` value, in order.
    static func forwardedFor(_ value: [UInt8]) -> [Substring] {
        list(value).compactMap { element in
            for pair in element.split(separator: ";") {
                let kv = pair.trimmingSpaces.split(separator: "=", maxSplits: 1)
                guard kv.count == 2, kv[0].lowercased() == "for" else { continue }
                var v = kv[1]
                if v.hasPrefix("\""), v.hasSuffix("\""), v.count >= 2 { v = v.dropFirst().dropLast() }
                return v
            }
            return nil
        }
    }

    /// An address, with a port or brackets as proxies write them (`1.2.3.4:5678`,
    /// `[2001:db8::1]:5678`).
    static func address(_ entry: Substring) -> IPAddress? {
        if let ip = IPAddress(entry) { return ip }
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            return IPAddress(entry[entry.index(after: entry.startIndex)..<close])
        }
        if let colon = entry.lastIndex(of: ":"), entry.firstIndex(of: ":") == colon { return IPAddress(entry[..<colon]) }
        return nil
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
