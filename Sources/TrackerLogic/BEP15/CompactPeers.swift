/// The peers of an announce's answer in the form they take on the wire: BEP 23's compact
/// entries for IPv4 (address then port, big-endian, 6 bytes) or BEP 15's for IPv6 (18
/// bytes). The swarm writes them here once, where it reads its table, and the codec
/// copies them into the datagram whole.
///
/// Why bytes and not `[PeerEndpoint]`: an answer is what a tracker builds most. Fifty
/// IPv4 peers are 300 bytes here against 1,200 as endpoints, which is past glibc's
/// per-thread cache of small blocks; a master holds a whole transaction's answers at
/// once, so each of those arrays went through the allocator's slow path, and building and
/// encoding the endpoints cost a standalone node about 5 % of its CPU.
///
/// Invariant: `bytes.count` is a whole number of `family`'s entries. Every initialiser
/// keeps it: the wire form is checked, the others write whole entries.
public struct CompactPeers: Sendable, CustomStringConvertible {
    public let family: IPAddress.Family
    public private(set) var bytes: [UInt8]

    /// Bytes of one entry of `family`.
    public static func entrySize(_ family: IPAddress.Family) -> Int { family == .v4 ? 6 : 18 }

    public init(family: IPAddress.Family = .v4) {
        self.family = family
        bytes = []
    }

    /// `endpoints` of `family` (the first one's if nil); any of the other family is left
    /// out, since an answer carries one family.
    public init(_ endpoints: [PeerEndpoint], family: IPAddress.Family? = nil) {
        let family = family ?? endpoints.first?.ip.family ?? .v4
        let kept = endpoints.filter { $0.ip.family == family }
        self.init(family: family, count: kept.count) { w in
            for e in kept { w.put(e.ip); w.put(e.port) }
        }
    }

    /// Entries as a tracker sent them; nil unless they are whole entries of `family`.
    public init?(family: IPAddress.Family, wire: some Collection<UInt8>) {
        guard wire.count % Self.entrySize(family) == 0 else { return nil }
        self.family = family
        bytes = Array(wire)
    }

    /// Up to `count` entries written by `body` through one pointer. `body` writes whole
    /// entries of `family`, at most `count` of them (`BigEndianWriter`'s invariant).
    @inline(__always)
    init(family: IPAddress.Family, count: Int, writing body: (inout BigEndianWriter) -> Void) {
        self.family = family
        let size = Self.entrySize(family)
        bytes = [UInt8](unsafeUninitializedCapacity: count * size) { out, initialized in
            var w = BigEndianWriter(UnsafeMutableRawBufferPointer(out))
            body(&w)
            initialized = w.written - w.written % size
        }
    }

    public var count: Int { bytes.count / Self.entrySize(family) }
    public var isEmpty: Bool { bytes.isEmpty }

    /// The entries decoded, in order (for clients, tests and the simulator; the serving
    /// path never decodes them).
    public var endpoints: [PeerEndpoint] {
        let size = Self.entrySize(family)
        var out: [PeerEndpoint] = []
        out.reserveCapacity(count)
        var i = 0
        while i + size <= bytes.count {
            var ip: UInt64 = 0, low: UInt64 = 0
            let addressBytes = size - 2
            for j in 0..<min(addressBytes, 8) { ip = ip << 8 | UInt64(bytes[i + j]) }
            for j in min(addressBytes, 8)..<addressBytes { low = low << 8 | UInt64(bytes[i + j]) }
            let port = UInt16(bytes[i + addressBytes]) << 8 | UInt16(bytes[i + addressBytes + 1])
            let address: IPAddress = family == .v4 ? .v4(UInt32(truncatingIfNeeded: ip)) : .v6(ip, low)
            out.append(PeerEndpoint(ip: address, port: port))
            i += size
        }
        return out
    }

    public var description: String { "\(endpoints)" }
}

extension CompactPeers: Hashable {
    /// No peers is no peers, of either family (the family only tells how to read entries).
    public static func == (l: CompactPeers, r: CompactPeers) -> Bool {
        l.bytes == r.bytes && (l.bytes.isEmpty || l.family == r.family)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes)
        if !bytes.isEmpty { hasher.combine(family) }
    }
}
