/// When peers last left by a stop, by swarm: what a replica keeps so that a peer's older
/// record never comes back (the order rule of `Swarm`). A standalone tracker keeps none.
///
/// Invariant: a peer with a record and a stop has a record later than the stop. An
/// expiry drops stops as it drops records, by the same cutoff; a master merges nothing
/// older than that cutoff (`NodeContext.unexpired`), so a record from before a dropped
/// stop cannot come back either.
public struct PeerStops: Sendable, Equatable {
    public private(set) var bySwarm: [InfoHash: [PeerKey: Instant]] = [:]

    public init() {}

    public func at(_ key: PeerKey, in infoHash: InfoHash) -> Instant? {
        guard !bySwarm.isEmpty, let i = bySwarm.index(forKey: infoHash) else { return nil }
        return bySwarm.values[i][key]
    }

    /// One swarm's stops in a canonical order (what `SwarmMerge.stops` carries).
    public func stops(in infoHash: InfoHash) -> [PeerStop] {
        (bySwarm[infoHash] ?? [:]).map { PeerStop(key: $0.key, at: $0.value) }.sorted { $0.key < $1.key }
    }

    /// Keeps the later of the peer's stops; what that did to the repository's digest.
    mutating func remember(_ s: PeerStop, in infoHash: InfoHash) -> Swarm.Change {
        let old = bySwarm[infoHash]?[s.key]
        if let old, old >= s.at { return Swarm.Change(sum: 0, elements: 0, peers: 0) }
        bySwarm[infoHash, default: [:]][s.key] = s.at
        let added = Digest.element(infoHash, stop: s)
        guard let old else { return Swarm.Change(sum: added, elements: 1, peers: 0) }
        return Swarm.Change(sum: added &- Digest.element(infoHash, stop: PeerStop(key: s.key, at: old)), elements: 0, peers: 0)
    }

    /// Drops the stops older than `before` (an expiry); what that did to the digest.
    mutating func expire(before: Instant) -> Swarm.Change {
        var change = Swarm.Change(sum: 0, elements: 0, peers: 0)
        for hash in Array(bySwarm.keys) {
            guard let stops = bySwarm[hash], stops.values.contains(where: { $0 < before }) else { continue }
            var kept = stops
            for (key, at) in stops where at < before {
                kept[key] = nil
                change.sum &-= Digest.element(hash, stop: PeerStop(key: key, at: at))
                change.elements -= 1
            }
            bySwarm[hash] = kept.isEmpty ? nil : kept
        }
        return change
    }
}
