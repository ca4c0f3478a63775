import TrackerLogic
import TrackerRuntime

/// The steady state of a busy tracker, for the in-process benches (`StoreBench`,
/// `ReplicaBench`): every announce is a re-announce of a peer the repository holds, with
/// a new byte count, so each one replaces a record somewhere, as it does at a node under
/// `tracker bench` load once the swarms are full.
struct Reannounces {
    private let peers: [(InfoHash, PeerRecord)]
    private var rng: SeededGenerator

    /// Nil when the snapshot holds no peer to announce again.
    init?(of snapshot: Snapshot, seed: UInt64) {
        peers = snapshot.content.flatMap { swarm in swarm.peers.map { (swarm.infoHash, $0) } }
        guard !peers.isEmpty else { return nil }
        rng = SeededGenerator(seed: seed &+ 1)
    }

    var peerCount: Int { peers.count }

    /// `count` announces of peers drawn at random, stamped `at`.
    mutating func next(_ count: Int, at: Instant) -> [SwarmUpdate] {
        var updates: [SwarmUpdate] = []
        updates.reserveCapacity(count)
        for _ in 0..<count {
            let (hash, peer) = peers[rng.below(peers.count)]
            updates.append(.announce(Announce(
                infoHash: hash, peerID: peer.peerID, endpoint: peer.endpoint,
                uploaded: peer.uploaded &+ Int64(rng.below(1 << 20)), downloaded: peer.downloaded,
                left: peer.left, event: .none, at: at)))
        }
        return updates
    }
}
