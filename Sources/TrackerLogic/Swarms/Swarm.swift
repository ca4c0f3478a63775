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

/// One torrent's peers and completion count.
///
/// On a replica, a peer's record is the one of its latest request, wherever that request
/// was committed: requests are ordered by `Announce.at`, the time a node received them.
/// An announce older than the record, or than the peer's last stop (`PeerStops`, which
/// the store keeps beside its swarms), changes nothing; a stop removes only a record no
/// newer than itself. So neither a merge from a branch that diverged nor a request held
/// through an election brings a peer back, or back with older values. Within one
/// master's log the order of commits and of receipt agree; the rule matters where
/// branches or reigns meet. Two requests of one peer closer together than the nodes'
/// clocks are apart may be ordered by the clocks.
public struct Swarm: Sendable {
    var v4 = PeerTable<IPv4Bits>()
    var v6 = PeerTable<IPv6Bits>()
    /// Peers that reported completion. A set, not a counter: the count can then neither
    /// double count a peer that reports twice nor double count when replicas merge.
    public private(set) var completedPeers = CompletedPeers()
    /// The tables' sizes and the completions' count, kept in the swarm's own bytes by
    /// every change (`count`, `complete`): reading them waits on no array's header, a
    /// cache miss apiece on every announce on every node. `peerCount` is
    /// `seederCount + leecherCount`, which the tables' counts always equal.
    private var seederCount: UInt32 = 0
    private var leecherCount: UInt32 = 0
    private var completedCount: UInt32 = 0
    /// The sum of `Digest.element` over every peer and completion: kept up to date by
    /// each change, so the repository's digest never needs a pass over a million peers.
    private(set) var digestSum: UInt64 = 0

    public init() {}

    public var seeders: Int { Int(seederCount) }
    public var leechers: Int { Int(leecherCount) }
    public var peerCount: Int { Int(seederCount) + Int(leecherCount) }
    public var completed: Int { Int(completedCount) }
    public var isEmpty: Bool { peerCount == 0 && completedCount == 0 }

    /// Every peer, IPv4 first, in storage order.
    public var peers: [PeerRecord] { v4.records + v6.records }

    public func peer(_ key: PeerKey) -> PeerRecord? { key.ip.family == .v4 ? v4[key] : v6[key] }

    func holds(_ key: PeerKey) -> Bool { key.ip.family == .v4 ? v4.contains(key) : v6.contains(key) }

    /// What one change did to the swarm's digest sum and counts (the repository keeps
    /// the totals), and how many peers the swarm holds after it (0 for a change to no
    /// swarm). `sum` wraps: it is a difference modulo 2^64.
    struct Change {
        var sum: UInt64
        var elements: Int
        var peers: Int
        var swarmPeers = 0
        /// An announce that changed no record: the swarm held a later request of its peer.
        var superseded = false
    }

    private var tally: (sum: UInt64, elements: Int, peers: Int) { (digestSum, peerCount + completed, peerCount) }

    private func change(since before: (sum: UInt64, elements: Int, peers: Int)) -> Change {
        let after = tally
        return Change(sum: after.sum &- before.sum, elements: after.elements - before.elements, peers: after.peers - before.peers,
                      swarmPeers: after.peers)
    }

    /// `digest`: keep `digestSum` and the order rule (a replica does; a standalone
    /// tracker, which never compares or merges repositories, saves the two hashes per
    /// announce, and its one log is its only order: its clock may step back).
    /// `stoppedAt`: the peer's stop (`PeerStops`).
    mutating func apply(_ a: Announce, digest: Bool, stoppedAt: Instant? = nil) -> Change {
        let before = tally
        let applied: Bool
        switch a.event {
        case .stopped:
            applied = remove(a.key, upTo: a.at, in: a.infoHash, digest: digest)
        case .none, .started, .completed:
            applied = place(PeerRecord(a), stoppedAt: stoppedAt, in: a.infoHash, digest: digest)
            // A completion is a fact whatever the order: the set only grows.
            if a.event == .completed { complete(a.key, in: a.infoHash, digest: digest) }
        }
        var change = change(since: before)
        change.superseded = !applied
        return change
    }

    /// `stops`: the store's, the merge's own already among them.
    mutating func merge(_ m: SwarmMerge, stops: PeerStops, digest: Bool) -> Change {
        let before = tally
        for s in m.stops { remove(s.key, upTo: s.at, in: m.infoHash, digest: digest) }
        for record in m.peers { place(record, stoppedAt: stops.at(record.key, in: m.infoHash), in: m.infoHash, digest: digest) }
        for key in m.completed { complete(key, in: m.infoHash, digest: digest) }
        return change(since: before)
    }

    mutating func expire(before: Instant, in infoHash: InfoHash, digest: Bool) -> Change {
        let start = tally
        expireRecords(before: before, in: infoHash, digest: digest)
        return change(since: start)
    }

    /// A record in, unless the swarm holds a later request of its peer: a later record
    /// (an equal time is a later commit of the same instant, and replaces), or a stop at
    /// or after it. False when it stayed out.
    @discardableResult
    private mutating func place(_ record: PeerRecord, stoppedAt: Instant?, in infoHash: InfoHash, digest: Bool) -> Bool {
        let key = record.key
        if digest {
            if let existing = peer(key), existing.lastAnnounce > record.lastAnnounce { return false }
            if let stoppedAt, stoppedAt >= record.lastAnnounce { return false }
        }
        let old = key.ip.family == .v4 ? v4.upsert(record) : v6.upsert(record)
        count(record, replacing: old, in: infoHash, digest: digest)
        return true
    }

    /// A stop at `at`: the peer's record goes unless it is later. False when it stayed.
    @discardableResult
    private mutating func remove(_ key: PeerKey, upTo at: Instant, in infoHash: InfoHash, digest: Bool) -> Bool {
        guard let existing = peer(key) else { return true }
        guard existing.lastAnnounce <= at || !digest else { return false }
        if let removed = key.ip.family == .v4 ? v4.remove(key) : v6.remove(key) {
            count(removed, sign: -1, in: infoHash, digest: digest)
        }
        return true
    }

    private mutating func complete(_ key: PeerKey, in infoHash: InfoHash, digest: Bool) {
        guard completedPeers.insert(key) else { return }
        completedCount &+= 1
        if digest { digestSum &+= Digest.element(infoHash, completion: key) }
    }

    /// This swarm as a merge value, in a canonical order.
    func content(_ infoHash: InfoHash) -> SwarmMerge {
        SwarmMerge(infoHash: infoHash, peers: peers.sorted { $0.key < $1.key }, completed: completedPeers.sorted())
    }

    private mutating func expireRecords(before: Instant, in infoHash: InfoHash, digest: Bool) {
        for record in v4.removeAll(where: { $0.lastAnnounce < before }) { count(record, sign: -1, in: infoHash, digest: digest) }
        for record in v6.removeAll(where: { $0.lastAnnounce < before }) { count(record, sign: -1, in: infoHash, digest: digest) }
    }

    /// Counts follow the tables, which never hold more than memory allows: the wrapping
    /// arithmetic cannot wrap in practice and never traps.
    private mutating func count(_ record: PeerRecord, sign: Int, in infoHash: InfoHash, digest: Bool) {
        let delta = UInt32(truncatingIfNeeded: sign)
        if record.isSeeder { seederCount &+= delta } else { leecherCount &+= delta }
        guard digest else { return }
        let element = Digest.element(infoHash, record)
        if sign > 0 { digestSum &+= element } else { digestSum &-= element }
    }

    /// `record` came in, in place of `old` if that was there (an upsert).
    private mutating func count(_ record: PeerRecord, replacing old: PeerRecord?, in infoHash: InfoHash, digest: Bool) {
        guard let old else { return count(record, sign: 1, in: infoHash, digest: digest) }
        count(old, sign: -1, in: infoHash, digest: false)
        count(record, sign: 1, in: infoHash, digest: false)
        guard digest else { return }
        let elements = Digest.elements(infoHash, replacing: old, with: record)
        digestSum = digestSum &- elements.old &+ elements.new
    }

    /// Peers for a requester, of the requester's family, never the requester itself.
    public func selectPeers(for requester: PeerKey, count: Int, rng: inout SeededGenerator) -> CompactPeers {
        requester.ip.family == .v4 ? v4.window(count: count, excluding: requester, rng: &rng)
            : v6.window(count: count, excluding: requester, rng: &rng)
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
        for record in l.v4.records where r.v4[record.key] != record { return false }
        for record in l.v6.records where r.v6[record.key] != record { return false }
        return true
    }
}
