/// The repository: info hash → swarm. Changes only through `apply(_:)`.
public struct SwarmStore: Sendable {
    public private(set) var swarms: [InfoHash: Swarm] = [:]
    /// Registered .torrent files: names for the swarms tab, and the access list.
    public private(set) var catalogue = Catalogue()
    /// A replica's peers that left by a stop (`Swarm`, `PeerStops`).
    public private(set) var stops = PeerStops()
    /// Kept by every change (`Digest.element` of what came and went), so that
    /// `Digest.of(store)` and `peerCount` cost nothing however large the repository.
    private(set) var digestSum: UInt64 = 0
    private(set) var digestCount: UInt64 = 0
    public private(set) var peerCount = 0
    /// Announces that changed no record, a later request of the peer being held (`Swarm`)
    /// or its key refused (private mode): counted so a commit's rows know when an
    /// announce is not its record.
    public private(set) var superseded: UInt64 = 0
    /// Never below the peer count of any swarm held: every change raises it to its swarm's
    /// count, and an expiry (a pass over every swarm) sets it to the largest. A capacity
    /// check that finds it under the per-swarm limit reads no swarm: on a master that read
    /// is a copy of the swarm out of the dictionary (`Dictionary` lends no value).
    public private(set) var swarmPeersBound = 0
    /// False for a standalone tracker: nothing compares its repository with another or
    /// merges into it, so it skips the digest bookkeeping (`Digest.of` makes a pass
    /// instead) and the order rule with its stops (`Swarm`).
    public let keepsDigest: Bool

    public init(keepsDigest: Bool = true) { self.keepsDigest = keepsDigest }

    /// Whether committing `m` would change this repository. A diverged replica's offer is
    /// mostly what the master already holds (the same announces, often the same
    /// transactions under another epoch's label); only the rest needs a commit, and a
    /// commit is what a strict quorum may lack while the diverged node cannot vote. Reads
    /// one swarm's copy; false only with the digest kept (a standalone node merges nothing).
    public func changes(by m: SwarmMerge) -> Bool {
        guard keepsDigest else { return true }
        if m.stops.contains(where: { s in stops.at(s.key, in: m.infoHash).map { $0 < s.at } ?? true }) { return true }
        var swarm = swarms[m.infoHash] ?? Swarm()
        let change = swarm.merge(m, stops: stops, digest: true)
        return change.sum != 0 || change.elements != 0 || change.peers != 0
    }

    /// `stamp`: the transaction that carries it (`CatalogueStamps`; nil for a standalone
    /// node, which keeps no history). Returns why an announce applied nothing for want of
    /// its user, else nil: the master answers it with that refusal (`Replica.refusal`).
    @discardableResult
    public mutating func apply(_ update: SwarmUpdate, stamp: TxRef? = nil) -> String? {
        switch update {
        case .announce(let a):
            // Private mode: an announce whose user the policy refuses as it stands at this
            // update (an earlier update or commit disabled or removed the user, or switched
            // the mode to private since the announce was decided) applies nothing. Judged
            // here only, in the transaction's order, so the master's answer and every
            // replica agree. Counted as superseded: a commit's rows then read the record
            // from memory.
            if let refused = catalogue.access.userRefusal(key: a.trackerKey) {
                superseded &+= 1
                return refused
            }
            guard let key = a.trackerKey else { place(a); return nil }
            // A keyed announce (private mode) is added to its user's totals too, measured
            // against the peer's record before it, unless a later request superseded it.
            let previous = peer(a.key, in: a.infoHash), before = superseded
            place(a)
            guard superseded == before, let (old, new) = catalogue.count(a, previous: previous, key: key) else { return nil }
            if keepsDigest { account(Swarm.Change(sum: Digest.element(new) &- Digest.element(old), elements: 0, peers: 0)) }
        case .merge(let m):
            for s in m.stops { account(stops.remember(s, in: m.infoHash)) }
            var swarm = swarms.removeValue(forKey: m.infoHash) ?? Swarm()
            account(swarm.merge(m, stops: stops, digest: keepsDigest))
            if !swarm.isEmpty { swarms[m.infoHash] = swarm }
        case .catalogue(let change):
            guard keepsDigest else { catalogue.apply(change, stamp: stamp); return nil }
            // What the entries the change touches add to the digest, before and after.
            let before = Digest.elements(touchedBy: change, in: catalogue)
            catalogue.apply(change, stamp: stamp)
            let after = Digest.elements(touchedBy: change, in: catalogue)
            account(Swarm.Change(sum: after.sum &- before.sum, elements: after.count - before.count, peers: 0))
        case .expire(let before):
            // Swarms are independent, so the visiting order cannot change the result.
            var largest = 0
            for hash in Array(swarms.keys) {
                guard var swarm = swarms.removeValue(forKey: hash) else { continue }
                account(swarm.expire(before: before, in: hash, digest: keepsDigest))
                largest = max(largest, swarm.peerCount)
                if !swarm.isEmpty { swarms[hash] = swarm }
            }
            swarmPeersBound = largest
            account(stops.expire(before: before))
        }
        return nil
    }

    /// What a cluster of one does with an announce: admit it, apply it and read its
    /// answer in one access to its swarm. Three reads of `swarms[infoHash]` would hash
    /// the info hash three times and copy the swarm out twice (`Dictionary` has no
    /// borrowing read: a copy retains and releases every table the swarm holds), on the
    /// hottest path of a standalone node. `admit` gets the swarm's peer count (nil: no such
    /// swarm), the number of swarms and of peers in all, and whether the announcing peer is already in the
    /// swarm (a lookup: ask only when it matters), and returns why the announce is
    /// refused, if it is; a stop is always admitted.
    public mutating func announce(_ a: Announce, wanting count: Int, rng: inout SeededGenerator,
                                  admit: (_ peers: Int?, _ swarms: Int, _ totalPeers: Int, _ holdsPeer: () -> Bool) -> String?)
        -> AnnounceOutcome {
        if a.event != .stopped, let key = a.trackerKey {
            // Private mode: counted to its user once applied, as `apply` counts it.
            let previous = peer(a.key, in: a.infoHash)
            var plain = a
            plain.trackerKey = nil
            let outcome = announce(plain, wanting: count, rng: &rng, admit: admit)
            if case .applied = outcome, let (old, new) = catalogue.count(a, previous: previous, key: key), keepsDigest {
                account(Swarm.Change(sum: Digest.element(new) &- Digest.element(old), elements: 0, peers: 0))
            }
            return outcome
        }
        guard a.event != .stopped else {
            apply(.announce(a))
            return .applied(AnnounceAnswer(peers: CompactPeers(family: a.endpoint.ip.family), swarm: swarms[a.infoHash]))
        }
        guard let i = swarms.index(forKey: a.infoHash) else {
            if let refusal = admit(nil, swarms.count, peerCount, { false }) { return .refused(refusal) }
            var swarm = Swarm()
            account(swarm.apply(a, digest: keepsDigest))
            swarms[a.infoHash] = swarm
            return .applied(AnnounceAnswer(peers: swarm.selectPeers(for: a.key, count: count, rng: &rng), swarm: swarm))
        }
        let (keepsDigest, swarmCount, totalPeers) = (keepsDigest, swarms.count, peerCount)
        let (outcome, change) = Self.inPlace(&swarms.values[i]) { swarm -> (AnnounceOutcome, Swarm.Change?) in
            if let refusal = admit(swarm.peerCount, swarmCount, totalPeers, { swarm.holds(a.key) }) { return (.refused(refusal), nil) }
            let change = swarm.apply(a, digest: keepsDigest)
            let peers = swarm.selectPeers(for: a.key, count: count, rng: &rng)
            return (.applied(AnnounceAnswer(peers: peers, swarm: swarm)), change)
        }
        if let change { account(change) }
        return outcome
    }

    /// An announce into its swarm: a stop removes the peer, anything else places its record.
    private mutating func place(_ a: Announce) {
        if a.event == .stopped {
            // A replica keeps the stop even for a swarm it does not hold: a merge may
            // bring the peer's older record.
            if keepsDigest { account(stops.remember(PeerStop(key: a.key, at: a.at), in: a.infoHash)) }
            // A stop for an unknown swarm creates no swarm.
            guard var swarm = swarms.removeValue(forKey: a.infoHash) else { return }
            account(swarm.apply(a, digest: keepsDigest))
            if !swarm.isEmpty { swarms[a.infoHash] = swarm }
        } else {
            let stoppedAt = keepsDigest ? stops.at(a.key, in: a.infoHash) : nil
            account(swarms[a.infoHash, default: Swarm()].apply(a, digest: keepsDigest, stoppedAt: stoppedAt))
        }
    }

    /// Runs `body` on the value in place: `&swarms.values[i]` goes through the
    /// dictionary's modify accessor, which lends the swarm instead of copying it.
    private static func inPlace<T>(_ swarm: inout Swarm, _ body: (inout Swarm) -> T) -> T { body(&swarm) }

    private mutating func account(_ change: Swarm.Change) {
        if change.superseded { superseded &+= 1 }
        digestSum &+= change.sum
        digestCount &+= UInt64(truncatingIfNeeded: change.elements)
        peerCount += change.peers
        swarmPeersBound = max(swarmPeersBound, change.swarmPeers)
    }

    public mutating func apply(_ updates: some Sequence<SwarmUpdate>, stamp: TxRef? = nil) {
        for u in updates { apply(u, stamp: stamp) }
    }

    public subscript(infoHash: InfoHash) -> Swarm? { swarms[infoHash] }

    /// How many peers a swarm holds, read in place; nil when the store does not hold it.
    public func peerCount(in infoHash: InfoHash) -> Int? {
        guard let i = swarms.index(forKey: infoHash) else { return nil }
        return swarms.values[i].peerCount
    }

    /// One peer's record, read in place (`store[infoHash]?.peer(key)` copies the swarm
    /// out first): what a commit's rows read for every announce.
    public func peer(_ key: PeerKey, in infoHash: InfoHash) -> PeerRecord? {
        guard let i = swarms.index(forKey: infoHash) else { return nil }
        return swarms.values[i].peer(key)
    }

    /// Whether the swarm counts `key`'s completion, read in place.
    public func hasCompleted(_ key: PeerKey, in infoHash: InfoHash) -> Bool {
        guard let i = swarms.index(forKey: infoHash) else { return false }
        return swarms.values[i].completedPeers.contains(key)
    }

    /// What an announce the store already holds is answered from, read in place.
    /// Mutating only to reach the swarm through the dictionary's modify accessor
    /// (`inPlace`): `Dictionary` has no borrowing read, and its getters (`self[infoHash]`,
    /// `swarms.values[i]`) copy the swarm out, retaining and releasing every table it
    /// holds, which a master paid once for every answer. Nothing changes, but storage
    /// shared with a copy (a `PeerImage` of the commit being answered) is copied here,
    /// once per image, where the next commit made while the store writer still held the
    /// image copied it before. `count`: how
    /// many peers other than `key` to pick (nil: none, and no draw from `rng`). Nil when
    /// the store holds no such swarm.
    public mutating func answer(for key: PeerKey, in infoHash: InfoHash, wanting count: Int?,
                                rng: inout SeededGenerator) -> SwarmAnswer? {
        guard let i = swarms.index(forKey: infoHash) else { return nil }
        return Self.inPlace(&swarms.values[i]) { swarm in
            // Not `count.map { swarm… }`: a closure within captures a copy of the swarm.
            var peers = CompactPeers(family: key.ip.family)
            if let count { peers = swarm.selectPeers(for: key, count: count, rng: &rng) }
            return SwarmAnswer(answer: AnnounceAnswer(peers: peers, seeders: swarm.seeders, leechers: swarm.leechers),
                               holds: swarm.holds(key))
        }
    }

    /// A swarm's completion count, read in place; nil when the store does not hold it.
    public func completed(in infoHash: InfoHash) -> Int? {
        guard let i = swarms.index(forKey: infoHash) else { return nil }
        return swarms.values[i].completed
    }

    public func scrape(_ infoHash: InfoHash) -> ScrapeEntry {
        var entry = swarms[infoHash]?.scrapeEntry ?? ScrapeEntry(seeders: 0, completed: 0, leechers: 0)
        if !catalogue.completedBase.isEmpty, let base = catalogue.completedBase[infoHash] {
            entry.completed = UInt32(clamping: Int(entry.completed) + base)
        }
        return entry
    }

    /// How often the swarm was completed, counting what a full stop kept
    /// (`Catalogue.completedBase`).
    public func completedTotal(_ infoHash: InfoHash) -> Int {
        (completed(in: infoHash) ?? 0) + (catalogue.completedBase[infoHash] ?? 0)
    }

    /// The completion counts of registered torrents' swarms, as a stop keeps them, in
    /// hash order.
    public var keptCompletionCounts: [KeptEntry] {
        Set(catalogue.torrents.values.flatMap(\.metadata.swarmHashes)).sorted().compactMap { h in
            let n = completedTotal(h)
            return n > 0 ? .completed(h, n) : nil
        }
    }

    public var swarmCount: Int { swarms.count }

    /// The whole repository as merge values, in a canonical order: what a snapshot carries.
    public func content() -> [SwarmMerge] {
        Set(swarms.keys).union(stops.bySwarm.keys).sorted().compactMap(content(of:))
    }

    /// One swarm as a merge value with its stops, nil when the repository holds neither.
    public func content(of infoHash: InfoHash) -> SwarmMerge? {
        let stops = stops.stops(in: infoHash)
        guard var content = swarms[infoHash]?.content(infoHash) else {
            return stops.isEmpty ? nil : SwarmMerge(infoHash: infoHash, peers: [], completed: [], stops: stops)
        }
        content.stops = stops
        return content
    }

    /// Rebuilds a repository from `content()`, `catalogue.sorted` and `catalogue.access`.
    public init(content: [SwarmMerge], torrents: [RegisteredTorrent] = [], access: AccessPolicy = AccessPolicy(),
                stamps: CatalogueStamps = CatalogueStamps(), completedBase: [InfoHash: Int] = [:]) {
        keepsDigest = true
        for m in content { apply(.merge(m)) }
        for t in torrents { apply(.catalogue(.register(t))) }
        catalogue.install(stamps)
        catalogue.install(completedBase: completedBase)
        for (h, n) in completedBase { account(Swarm.Change(sum: Digest.element(h, completedBase: n), elements: 1, peers: 0)) }
        let before = Digest.elements(of: catalogue.access)
        catalogue.install(access)
        let after = Digest.elements(of: access)
        account(Swarm.Change(sum: after.sum &- before.sum, elements: after.count - before.count, peers: 0))
    }

    /// Info hashes in a stable order, for anything that must be deterministic.
    public var sortedInfoHashes: [InfoHash] { swarms.keys.sorted() }
}

extension SwarmStore: Equatable {
    /// Equal content; what each side keeps about it (digest sums, counts) follows.
    public static func == (l: SwarmStore, r: SwarmStore) -> Bool {
        l.swarms == r.swarms && l.stops == r.stops && l.catalogue == r.catalogue
    }
}

/// What the answer to an applied announce needs from its swarm.
public struct AnnounceAnswer: Sendable, Equatable {
    public var peers: CompactPeers
    public var seeders: Int
    public var leechers: Int

    public init(peers: CompactPeers, seeders: Int, leechers: Int) {
        self.peers = peers; self.seeders = seeders; self.leechers = leechers
    }

    init(peers: CompactPeers, swarm: Swarm?) {
        self.init(peers: peers, seeders: swarm?.seeders ?? 0, leechers: swarm?.leechers ?? 0)
    }
}

/// What an announce's swarm tells it once the announce is held (`SwarmStore.answer`): the
/// peers picked for it and the swarm's counts, and whether the swarm holds the announcing
/// peer (a stop later in the same transaction may have removed it).
public struct SwarmAnswer: Sendable, Equatable {
    public var answer: AnnounceAnswer
    public var holds: Bool
}

/// `SwarmStore.announce`: refused (the reason goes to the peer) or applied.
public enum AnnounceOutcome: Sendable, Equatable {
    case refused(String)
    case applied(AnnounceAnswer)
}
