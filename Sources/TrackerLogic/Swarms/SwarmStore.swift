/// The repository: info hash → swarm. Changes only through `apply(_:)`.
public struct SwarmStore: Sendable, Equatable {
    public private(set) var swarms: [InfoHash: Swarm] = [:]
    /// Registered .torrent files: names for the swarms tab, and the access list.
    public private(set) var catalogue = Catalogue()

    public init() {}

    public mutating func apply(_ update: SwarmUpdate) {
        switch update {
        case .announce(let a):
            if a.event == .stopped {
                // A stop for an unknown swarm creates nothing.
                guard var swarm = swarms.removeValue(forKey: a.infoHash) else { return }
                swarm.apply(a)
                if !swarm.isEmpty { swarms[a.infoHash] = swarm }
            } else {
                swarms[a.infoHash, default: Swarm()].apply(a)
            }
        case .merge(let m):
            var swarm = swarms.removeValue(forKey: m.infoHash) ?? Swarm()
            swarm.merge(m)
            if !swarm.isEmpty { swarms[m.infoHash] = swarm }
        case .catalogue(let change):
            catalogue.apply(change)
        case .expire(let before):
            // Swarms are independent, so the visiting order cannot change the result.
            for hash in Array(swarms.keys) {
                guard var swarm = swarms.removeValue(forKey: hash) else { continue }
                swarm.expire(before: before)
                if !swarm.isEmpty { swarms[hash] = swarm }
            }
        }
    }

    public mutating func apply(_ updates: some Sequence<SwarmUpdate>) {
        for u in updates { apply(u) }
    }

    public subscript(infoHash: InfoHash) -> Swarm? { swarms[infoHash] }

    /// How many peers the swarm holds and whether `key` is one of them (nil: no such
    /// swarm): all that the capacity check of every announce needs. The swarm is still
    /// copied out of the dictionary to answer (a retain per table it holds, ~4 % of a
    /// standalone node's CPU); `Dictionary` offers no borrowing read to avoid it.
    public func occupancy(of infoHash: InfoHash, holding key: PeerKey) -> (peers: Int, holdsKey: Bool)? {
        guard let i = swarms.index(forKey: infoHash) else { return nil }
        return swarms.values[i].occupancy(holding: key)
    }

    public func scrape(_ infoHash: InfoHash) -> ScrapeEntry {
        swarms[infoHash]?.scrapeEntry ?? ScrapeEntry(seeders: 0, completed: 0, leechers: 0)
    }

    public var swarmCount: Int { swarms.count }
    public var peerCount: Int { swarms.values.reduce(0) { $0 + $1.peerCount } }

    /// The whole repository as merge values, in a canonical order: what a snapshot carries.
    public func content() -> [SwarmMerge] {
        swarms.sorted { $0.key < $1.key }.map { $0.value.content($0.key) }
    }

    /// One swarm as a merge value, nil when the repository does not hold it.
    public func content(of infoHash: InfoHash) -> SwarmMerge? {
        swarms[infoHash]?.content(infoHash)
    }

    /// Rebuilds a repository from `content()` and `catalogue.sorted`.
    public init(content: [SwarmMerge], torrents: [RegisteredTorrent] = []) {
        for m in content { apply(.merge(m)) }
        for t in torrents { catalogue.apply(.register(t)) }
    }

    /// Info hashes in a stable order, for anything that must be deterministic.
    public var sortedInfoHashes: [InfoHash] { swarms.keys.sorted() }
}
