import TrackerLogic

/// The workload part of a scenario: peers, swarms, and the announce interval and peer
/// timeout they run under, from a stream of its own.
struct WorkloadOptions {
    var peers: Int
    var torrents: Int
    var announceInterval: UInt32
    var peerTimeout: Milliseconds
    /// Peers that speak HTTP (`Scenario.httpPeers`), from a stream of their own: a seed
    /// drawn before HTTP peers existed draws the rest as it did.
    var httpPeers: Int

    static func draw(seed: UInt64) -> WorkloadOptions {
        var rng = ScenarioStream.named(seed, "workload")
        let peers = 2 + rng.below(6)
        let torrents = 1 + rng.below(3)
        let short = rng.chance(0.3)
        var web = ScenarioStream.named(seed, "workload.http")
        let httpPeers = web.chance(0.5) ? 1 + web.below(peers) : 0
        return WorkloadOptions(peers: peers, torrents: torrents, announceInterval: short ? 6 : 1800,
                               peerTimeout: short ? Milliseconds.seconds(12) : Milliseconds.seconds(3600), httpPeers: httpPeers)
    }
}
