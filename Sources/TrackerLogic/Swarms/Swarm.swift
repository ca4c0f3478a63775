/// What the tracker remembers of one peer (the dashboard shows all of it).
public struct PeerRecord: Hashable, Sendable {
    public var peerID: PeerID
    public var endpoint: PeerEndpoint
    public var uploaded: Int64
    public var downloaded: Int64
    public var left: Int64
    public var lastAnnounce: Instant

    public var key: PeerKey { PeerKey(peerID: peerID, ip: endpoint.ip) }
    public var isSeeder: Bool { left == 0 }

    public init(peerID: PeerID, endpoint: PeerEndpoint, uploaded: Int64, downloaded: Int64, left: Int64, lastAnnounce: Instant) {
        self.peerID = peerID; self.endpoint = endpoint; self.uploaded = uploaded
        self.downloaded = downloaded; self.left = left; self.lastAnnounce = lastAnnounce
    }

    init(_ a: Announce) {
        self.init(peerID: a.peerID, endpoint: a.endpoint, uploaded: a.uploaded,
                  downloaded: a.downloaded, left: a.left, lastAnnounce: a.at)
    }
}

/// Peers of one address family, stored densely so that a random window of them can be
/// handed out without copying or hashing the whole swarm; removal swaps with the last.
struct PeerTable: Sendable {
    private(set) var entries: [PeerRecord] = []
    private var index: [PeerKey: Int] = [:]

    var count: Int { entries.count }

    subscript(key: PeerKey) -> PeerRecord? {
        index[key].map { entries[$0] }
    }

    /// Returns the record it replaced, if any.
    @discardableResult
    mutating func upsert(_ record: PeerRecord) -> PeerRecord? {
        if let i = index[record.key] {
            let old = entries[i]
            entries[i] = record
            return old
        }
        index[record.key] = entries.count
        entries.append(record)
        return nil
    }

    @discardableResult
    mutating func remove(_ key: PeerKey) -> PeerRecord? {
        guard let i = index.removeValue(forKey: key) else { return nil }
        let removed = entries[i]
        let last = entries.removeLast()
        if i < entries.count {
            entries[i] = last
            index[last.key] = i
        }
        return removed
    }

    /// Removes every record for which `shouldRemove` holds; returns them.
    mutating func removeAll(where shouldRemove: (PeerRecord) -> Bool) -> [PeerRecord] {
        var removed: [PeerRecord] = []
        var i = 0
        while i < entries.count {
            if shouldRemove(entries[i]) {
                removed.append(entries[i])
                remove(entries[i].key)
            } else {
                i += 1
            }
        }
        return removed
    }

    /// Up to `count` peers from a random starting point, wrapping, skipping `excluded`.
    func window(count: Int, excluding excluded: PeerKey?, rng: inout SeededGenerator) -> [PeerEndpoint] {
        let n = entries.count
        guard n > 0, count > 0 else { return [] }
        var out: [PeerEndpoint] = []
        out.reserveCapacity(min(count, n))
        let start = n > count + 1 ? rng.below(n) : 0
        var i = start
        for _ in 0..<n {
            let record = entries[i]
            if record.key != excluded {
                out.append(record.endpoint)
                if out.count == count { break }
            }
            i += 1
            if i == n { i = 0 }
        }
        return out
    }
}

/// One torrent's peers and completion count.
public struct Swarm: Sendable {
    var v4 = PeerTable()
    var v6 = PeerTable()
    /// Peers that reported completion. A set, not a counter: the count can then neither
    /// double count a peer that reports twice nor double count when replicas merge.
    public private(set) var completedPeers: Set<PeerKey> = []
    public private(set) var seeders = 0
    public private(set) var leechers = 0

    public init() {}

    public var peerCount: Int { v4.count + v6.count }
    public var completed: Int { completedPeers.count }
    public var isEmpty: Bool { peerCount == 0 && completedPeers.isEmpty }

    /// Every peer, IPv4 first, in storage order.
    public var peers: [PeerRecord] { v4.entries + v6.entries }

    public func peer(_ key: PeerKey) -> PeerRecord? { table(key.ip.family)[key] }

    func table(_ family: IPAddress.Family) -> PeerTable { family == .v4 ? v4 : v6 }

    mutating func apply(_ a: Announce) {
        let key = a.key
        switch a.event {
        case .stopped:
            let removed = a.endpoint.ip.family == .v4 ? v4.remove(key) : v6.remove(key)
            if let removed { count(removed, sign: -1) }
        case .none, .started, .completed:
            let record = PeerRecord(a)
            let old = a.endpoint.ip.family == .v4 ? v4.upsert(record) : v6.upsert(record)
            if let old { count(old, sign: -1) }
            count(record, sign: 1)
            if a.event == .completed { completedPeers.insert(key) }
        }
    }

    mutating func merge(_ m: SwarmMerge) {
        for record in m.peers {
            let key = record.key
            if let existing = peer(key), existing.lastAnnounce > record.lastAnnounce { continue }
            let old = key.ip.family == .v4 ? v4.upsert(record) : v6.upsert(record)
            if let old { count(old, sign: -1) }
            count(record, sign: 1)
        }
        completedPeers.formUnion(m.completed)
    }

    /// This swarm as a merge value, in a canonical order.
    func content(_ infoHash: InfoHash) -> SwarmMerge {
        SwarmMerge(infoHash: infoHash, peers: peers.sorted { $0.key < $1.key }, completed: completedPeers.sorted())
    }

    mutating func expire(before: Instant) {
        for record in v4.removeAll(where: { $0.lastAnnounce < before }) { count(record, sign: -1) }
        for record in v6.removeAll(where: { $0.lastAnnounce < before }) { count(record, sign: -1) }
    }

    private mutating func count(_ record: PeerRecord, sign: Int) {
        if record.isSeeder { seeders += sign } else { leechers += sign }
    }

    /// Peers for a requester, of the requester's family, never the requester itself.
    public func selectPeers(for requester: PeerKey, count: Int, rng: inout SeededGenerator) -> [PeerEndpoint] {
        table(requester.ip.family).window(count: count, excluding: requester, rng: &rng)
    }

    public var scrapeEntry: ScrapeEntry {
        ScrapeEntry(seeders: UInt32(clamping: seeders), completed: UInt32(clamping: completed),
                    leechers: UInt32(clamping: leechers))
    }
}

extension Swarm: Equatable {
    /// Replicas are equal when they hold the same records and completions, whatever order
    /// their tables happen to store them in.
    public static func == (l: Swarm, r: Swarm) -> Bool {
        guard l.v4.count == r.v4.count, l.v6.count == r.v6.count, l.completedPeers == r.completedPeers else { return false }
        for record in l.v4.entries where r.v4[record.key] != record { return false }
        for record in l.v6.entries where r.v6[record.key] != record { return false }
        return true
    }
}
