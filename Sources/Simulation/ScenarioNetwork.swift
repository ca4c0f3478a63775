import TrackerLogic

/// The network part of a scenario: loss, duplication, delays, clock drift, corruption,
/// broker redelivery and frame size, from a stream of its own (`ScenarioStream`).
struct NetworkOptions {
    /// A calm network: no loss or duplication, short delays, and few mixed faults
    /// (`Scenario.drawFaults`).
    var calm: Bool
    var lossRate: Double
    var duplicateRate: Double
    var minDelay: Int64
    var maxDelay: Int64
    var clockDrift: [Int64]
    var corruptRate = 0.0
    var redeliveryRate = 0.0
    var fragmentBytes = ClusterChannel.defaultFragmentBytes

    static func draw(seed: UInt64, nodes: Int) -> NetworkOptions {
        var rng = ScenarioStream.named(seed, "network")
        let calm = rng.chance(0.15)
        let minDelay = Int64(1 + rng.below(5))
        var options = NetworkOptions(
            calm: calm,
            lossRate: calm ? 0 : Double(rng.below(31)) / 100,
            duplicateRate: calm ? 0 : Double(rng.below(11)) / 100,
            minDelay: minDelay,
            maxDelay: minDelay + Int64(rng.below(calm ? 10 : 120)),
            clockDrift: (0..<nodes).map { _ in rng.chance(0.3) ? Int64(rng.below(801)) - 400 : 0 })
        if rng.chance(0.3) { options.corruptRate = Double(1 + rng.below(5)) / 100 }
        if rng.chance(0.3) { options.redeliveryRate = Double(1 + rng.below(10)) / 100 }
        if rng.chance(0.3) { options.fragmentBytes = 64 + rng.below(449) }
        return options
    }
}
