/// A peer's IP address. The family matters: BEP 15 answers a request that came over
/// IPv6 with 18-byte peer entries, and peers of one family are useless to the other.
public enum IPAddress: Hashable, Comparable, Sendable, CustomStringConvertible {
    case v4(UInt32)
    case v6(UInt64, UInt64)

    public enum Family: UInt8, Sendable, Hashable { case v4 = 4, v6 = 6 }

    public var family: Family {
        switch self {
        case .v4: return .v4
        case .v6: return .v6
        }
    }

    /// Parses dotted IPv4 or RFC 4291 IPv6 text (with `::` compression and an optional
    /// trailing dotted quad); brackets are accepted around IPv6.
    public init?(_ text: some StringProtocol) {
        var s = Substring(text)
        if s.hasPrefix("[") && s.hasSuffix("]") { s = s.dropFirst().dropLast() }
        if let v4 = IPAddress.parseV4(s) { self = .v4(v4); return }
        guard let (hi, lo) = IPAddress.parseV6(s) else { return nil }
        self = .v6(hi, lo)
    }

    static func parseV4(_ s: Substring) -> UInt32? {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy(\.isASCII), let octet = UInt8(part) else { return nil }
            value = value << 8 | UInt32(octet)
        }
        return value
    }

    static func parseV6(_ s: Substring) -> (UInt64, UInt64)? {
        guard s.contains(":") else { return nil }
        var groups: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        var halves: [Substring] = [s]
        if let gap = s.firstRange(of: "::") {
            halves = [s[..<gap.lowerBound], s[gap.upperBound...]]
            if halves[1].firstRange(of: "::") != nil { return nil }
        }
        func parse(_ part: Substring) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, f) in fields.enumerated() {
                if i == fields.count - 1, f.contains("."), let v4 = parseV4(f) {
                    out.append(UInt16(v4 >> 16)); out.append(UInt16(v4 & 0xFFFF))
                } else {
                    guard !f.isEmpty, f.count <= 4, let g = UInt16(f, radix: 16) else { return nil }
                    out.append(g)
                }
            }
            return out
        }
        guard let head = parse(halves[0]) else { return nil }
        groups = head
        if halves.count == 2 {
            sawGap = true
            guard let t = parse(halves[1]) else { return nil }
            tail = t
        }
        let missing = 8 - groups.count - tail.count
        if sawGap { guard missing >= 1 else { return nil }; groups += Array(repeating: 0, count: missing) + tail }
        guard groups.count == 8 else { return nil }
        var hi: UInt64 = 0, lo: UInt64 = 0
        for i in 0..<4 { hi = hi << 16 | UInt64(groups[i]) }
        for i in 4..<8 { lo = lo << 16 | UInt64(groups[i]) }
        return (hi, lo)
    }

    public var description: String {
        switch self {
        case .v4(let v):
            return "\(v >> 24).\(v >> 16 & 0xFF).\(v >> 8 & 0xFF).\(v & 0xFF)"
        case .v6(let hi, let lo):
            var groups: [UInt16] = []
            for i in stride(from: 48, through: 0, by: -16) { groups.append(UInt16(truncatingIfNeeded: hi >> UInt64(i))) }
            for i in stride(from: 48, through: 0, by: -16) { groups.append(UInt16(truncatingIfNeeded: lo >> UInt64(i))) }
            // RFC 5952: compress the longest run (length >= 2) of zero groups.
            var bestStart = -1, bestLen = 0, i = 0
            while i < 8 {
                if groups[i] == 0 {
                    var j = i
                    while j < 8 && groups[j] == 0 { j += 1 }
                    if j - i > bestLen && j - i >= 2 { bestStart = i; bestLen = j - i }
                    i = j
                } else { i += 1 }
            }
            func hex(_ r: ArraySlice<UInt16>) -> String { r.map { String($0, radix: 16) }.joined(separator: ":") }
            if bestStart < 0 { return hex(groups[...]) }
            return hex(groups[..<bestStart]) + "::" + hex(groups[(bestStart + bestLen)...])
        }
    }

    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) names an IPv4 peer: dual-stack
    /// sockets report IPv4 senders that way, and the peer is reachable over IPv4.
    public var unmapped: IPAddress {
        if case .v6(0, let lo) = self, lo >> 32 == 0xFFFF { return .v4(UInt32(truncatingIfNeeded: lo)) }
        return self
    }
}

/// Where a peer is reachable: the datagram's source, or an announced port on it.
public struct PeerEndpoint: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var ip: IPAddress
    public var port: UInt16

    public init(ip: IPAddress, port: UInt16) { self.ip = ip; self.port = port }

    /// `1.2.3.4:5`, `[::1]:5`.
    public init?(_ text: some StringProtocol) {
        let s = Substring(text)
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            let host = s[s.index(after: s.startIndex)..<close]
            let rest = s[s.index(after: close)...]
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()), let ip = IPAddress(host) else { return nil }
            self.init(ip: ip, port: port)
        } else {
            guard let colon = s.lastIndex(of: ":"), let port = UInt16(s[s.index(after: colon)...]),
                  let ip = IPAddress(s[..<colon]), ip.family == .v4 else { return nil }
            self.init(ip: ip, port: port)
        }
    }

    public var description: String {
        switch ip {
        case .v4: return "\(ip):\(port)"
        case .v6: return "[\(ip)]:\(port)"
        }
    }

    public static func < (l: PeerEndpoint, r: PeerEndpoint) -> Bool { (l.ip, l.port) < (r.ip, r.port) }
}
