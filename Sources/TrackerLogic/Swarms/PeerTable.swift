/// An address as a table of one family stores it: 4 bytes for IPv4, 16 for IPv6, no
/// enum tag — the table already says which family it holds.
protocol StoredAddress: Sendable, Equatable {
    static var family: IPAddress.Family { get }
    init?(_ ip: IPAddress)
    var ip: IPAddress { get }
    func hash(into hasher: inout Hasher)
    /// The address part of a compact peer entry (BEP 23), without its family.
    func put(into w: inout BigEndianWriter)
}

struct IPv4Bits: StoredAddress {
    var value: UInt32

    init?(_ ip: IPAddress) {
        guard case .v4(let v) = ip else { return nil }
        value = v
    }

    static var family: IPAddress.Family { .v4 }
    var ip: IPAddress { .v4(value) }
    func hash(into hasher: inout Hasher) { hasher.combine(value) }
    @inline(__always) func put(into w: inout BigEndianWriter) { w.put(value) }
}

struct IPv6Bits: StoredAddress {
    var high: UInt64
    var low: UInt64

    init?(_ ip: IPAddress) {
        guard case .v6(let h, let l) = ip else { return nil }
        high = h; low = l
    }

    static var family: IPAddress.Family { .v6 }
    var ip: IPAddress { .v6(high, low) }
    func hash(into hasher: inout Hasher) { hasher.combine(high); hasher.combine(low) }
    @inline(__always) func put(into w: inout BigEndianWriter) { w.put(high); w.put(low) }
}

/// One peer as stored: 64 bytes for IPv4 (72 for IPv6) against 80 for a `PeerRecord`.
/// The field order is the layout: integers first, the address before the 20-byte id so
/// that the id's 4-byte tail and the port share the last word.
struct StoredPeer<Address: StoredAddress>: Sendable {
    var uploaded: Int64
    var downloaded: Int64
    var left: Int64
    var lastAnnounce: Int64
    var address: Address
    var peerID: PeerID
    var port: UInt16

    init?(_ r: PeerRecord) {
        guard let address = Address(r.endpoint.ip) else { return nil }
        uploaded = r.uploaded; downloaded = r.downloaded; left = r.left
        lastAnnounce = r.lastAnnounce.milliseconds
        self.address = address; peerID = r.peerID; port = r.endpoint.port
    }

    var record: PeerRecord {
        PeerRecord(peerID: peerID, endpoint: endpoint, uploaded: uploaded, downloaded: downloaded, left: left,
                   lastAnnounce: Instant(milliseconds: lastAnnounce))
    }

    var endpoint: PeerEndpoint { PeerEndpoint(ip: address.ip, port: port) }

    func holds(_ peerID: PeerID, _ address: Address) -> Bool { self.peerID == peerID && self.address == address }
}

/// Peers of one address family, stored densely so that a random window of them can be
/// handed out without copying or hashing the whole swarm; removal swaps with the last.
///
/// Most swarms are small, so a table of up to `scanLimit` peers has no index at all and
/// finds a peer by scanning its records (a few cache lines). A larger one adds an
/// open-addressing index of positions (4 bytes a slot, at most half full, linear probing
/// with backward-shift deletion) hashed by the process-seeded `Hasher`, so that peer ids
/// chosen by an attacker cannot pile up in one probe run. Nothing that the cluster
/// compares or replicates depends on the index: only the record order does, and that is
/// the order of inserts and swap-removals.
struct PeerTable<Address: StoredAddress>: Sendable {
    private(set) var stored: [StoredPeer<Address>] = []
    /// Position + 1 of each indexed record; 0 is an empty slot. Empty while the table is
    /// small enough to scan.
    private var slots: [UInt32] = []
    /// `slots.count - 1`, or 0 while there is no index (a size is a power of two, at least
    /// 64). Kept beside the arrays' references, in the swarm's own bytes: a lookup finds
    /// its slot from the hash alone, without first waiting for the slot array's header to
    /// come from memory (a cache miss per announce on every node, in `tracker bench
    /// --replica`'s commit stage).
    private var slotMask = 0

    static var scanLimit: Int { 16 }

    init() {}

    var count: Int { stored.count }
    var records: [PeerRecord] { stored.map(\.record) }

    subscript(key: PeerKey) -> PeerRecord? {
        guard let address = Address(key.ip), let i = position(key.peerID, address) else { return nil }
        return stored[i].record
    }

    func contains(_ key: PeerKey) -> Bool {
        guard let address = Address(key.ip) else { return false }
        return position(key.peerID, address) != nil
    }

    /// Returns the record it replaced, if any. A record of the other family is ignored.
    @discardableResult
    mutating func upsert(_ record: PeerRecord) -> PeerRecord? {
        guard let peer = StoredPeer<Address>(record) else { return nil }
        if let i = position(peer.peerID, peer.address) {
            let old = stored[i].record
            stored[i] = peer
            return old
        }
        if stored.count == stored.capacity {
            // Grow by a quarter, not double: a swarm's array is most of its memory, and
            // most swarms stay small, where doubling would leave a third of it unused.
            stored.reserveCapacity(stored.count + max(stored.count / 4, 1))
        }
        stored.append(peer)
        if slotMask != 0 || stored.count > Self.scanLimit {
            if slots.count < 2 * stored.count { rebuildIndex() } else { insertSlot(for: stored.count - 1) }
        }
        return nil
    }

    @discardableResult
    mutating func remove(_ key: PeerKey) -> PeerRecord? {
        guard let address = Address(key.ip), let i = position(key.peerID, address) else { return nil }
        return remove(at: i)
    }

    /// Removes every record for which `shouldRemove` holds; returns them.
    mutating func removeAll(where shouldRemove: (PeerRecord) -> Bool) -> [PeerRecord] {
        var removed: [PeerRecord] = []
        var i = 0
        while i < stored.count {
            let record = stored[i].record
            if shouldRemove(record) {
                removed.append(record)
                _ = remove(at: i)
            } else {
                i += 1
            }
        }
        return removed
    }

    /// Up to `count` peers from a random starting point, wrapping, skipping `excluded`,
    /// written as an answer carries them.
    func window(count: Int, excluding excluded: PeerKey?, rng: inout SeededGenerator) -> CompactPeers {
        let n = stored.count
        guard n > 0, count > 0 else { return CompactPeers(family: Address.family) }
        let skipped = excluded.flatMap { key in Address(key.ip).map { (key.peerID, $0) } }
        let wanted = min(count, n)
        var i = n > count + 1 ? rng.below(n) : 0
        return stored.withUnsafeBufferPointer { stored in
            CompactPeers(family: Address.family, count: wanted) { w in
                var written = 0
                for _ in 0..<n {
                    if skipped.map({ !stored[i].holds($0.0, $0.1) }) ?? true {
                        stored[i].address.put(into: &w)
                        w.put(stored[i].port)
                        written += 1
                        if written == wanted { break }
                    }
                    i += 1
                    if i == n { i = 0 }
                }
            }
        }
    }

    // MARK: Finding and indexing

    private func position(_ peerID: PeerID, _ address: Address) -> Int? {
        let mask = slotMask
        if mask == 0 {
            return stored.firstIndex { $0.holds(peerID, address) }
        }
        var s = Self.home(peerID, address, mask: mask)
        while slots[s] != 0 {
            let i = Int(slots[s]) - 1
            if stored[i].holds(peerID, address) { return i }
            s = (s + 1) & mask
        }
        return nil
    }

    private static func home(_ peerID: PeerID, _ address: Address, mask: Int) -> Int {
        var hasher = Hasher()
        hasher.combine(peerID)
        address.hash(into: &hasher)
        return hasher.finalize() & mask
    }

    private func home(of position: Int, mask: Int) -> Int {
        Self.home(stored[position].peerID, stored[position].address, mask: mask)
    }

    /// The slot that holds `position`; the caller knows it is indexed.
    private func slot(of position: Int) -> Int {
        let mask = slotMask
        var s = home(of: position, mask: mask)
        while Int(slots[s]) - 1 != position { s = (s + 1) & mask }
        return s
    }

    private mutating func insertSlot(for position: Int) {
        let mask = slotMask
        var s = home(of: position, mask: mask)
        while slots[s] != 0 { s = (s + 1) & mask }
        slots[s] = UInt32(truncatingIfNeeded: position + 1)
    }

    /// A power of two at least four times the count (half full after the next doubling of
    /// the count), or no index when the table is small enough to scan.
    private mutating func rebuildIndex() {
        guard stored.count > Self.scanLimit else { slots = []; slotMask = 0; return }
        var size = 64
        while size < 4 * stored.count { size *= 2 }
        slots = Array(repeating: 0, count: size)
        slotMask = size - 1
        for position in stored.indices { insertSlot(for: position) }
    }

    private mutating func remove(at i: Int) -> PeerRecord {
        let removed = stored[i].record
        let last = stored.count - 1
        if slotMask != 0 {
            deleteSlot(slot(of: i))
            if i != last { slots[slot(of: last)] = UInt32(truncatingIfNeeded: i + 1) }
        }
        stored.swapAt(i, last)
        stored.removeLast()
        if slotMask != 0, stored.count <= Self.scanLimit / 2 || slots.count > 16 * max(stored.count, 1) {
            rebuildIndex()
        }
        return removed
    }

    /// Backward-shift deletion: later members of the probe run move up so that every
    /// lookup still finds its record before an empty slot.
    private mutating func deleteSlot(_ hole: Int) {
        let mask = slotMask
        var hole = hole
        var s = hole
        while true {
            s = (s + 1) & mask
            guard slots[s] != 0 else { break }
            let h = home(of: Int(slots[s]) - 1, mask: mask)
            // The record at s may move to the hole only if its home is not cyclically in (hole, s].
            let staysPut = hole <= s ? (hole < h && h <= s) : (hole < h || h <= s)
            if staysPut { continue }
            slots[hole] = slots[s]
            hole = s
        }
        slots[hole] = 0
    }
}
