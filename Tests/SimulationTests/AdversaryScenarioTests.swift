import Simulation
import Testing
import TrackerLogic

/// The hostile broker participant. The randomized suite already draws one in about 30 %
/// of its scenarios; these tests pin down what it must and must not achieve.
@Suite("Hostile broker participant")
struct AdversaryScenarioTests {
    /// Seeds whose scenario the generator gave an adversary of this kind.
    static func seeds(_ kind: Adversary.Kind, count: Int) -> [UInt64] {
        var out: [UInt64] = []
        var seed: UInt64 = 1
        while out.count < count {
            if Scenario(seed: seed).adversary?.kind == kind { out.append(seed) }
            seed += 1
        }
        return out
    }

    /// Without the key, nothing at all changes: the same scenario with and without the
    /// outsider makes the same node-visible moves (trace hash) and the same commits,
    /// and every forged frame is dropped by the channel, counted by reason.
    @Test func anOutsiderChangesNothing() {
        var hostile = 0
        for seed in Self.seeds(.outsider, count: 60) {
            var quiet = Scenario(seed: seed)
            quiet.adversary = nil
            var attackedSim = Simulator(scenario: Scenario(seed: seed))
            var quietSim = Simulator(scenario: quiet)
            let attacked = attackedSim.run(), baseline = quietSim.run()
            #expect(attacked.passed, "\(attacked)")
            #expect(attacked.traceHash == baseline.traceHash && attacked.commits == baseline.commits,
                    "seed \(seed): the outsider changed what the nodes did")
            hostile += attacked.hostileDelivered
            #expect(attacked.hostileRejected == attacked.hostileDelivered, "seed \(seed): every delivered forgery is rejected")
        }
        #expect(hostile > 1000, "the outsider was busy: \(hostile) frames delivered")
    }

    /// With the key (a compromised host), safety holds and the cluster recovers once the
    /// attack stops; the top-of-range terms and replays are refused on the way.
    @Test func anInsiderBreaksNoInvariant() {
        var rejected: [ClusterRejection: Int] = [:]
        for seed in Self.seeds(.insider, count: 60) {
            let report = Simulator.run(seed: seed)
            #expect(report.passed, "\(report)")
            for (reason, n) in report.rejectedFrames { rejected[reason, default: 0] += n }
        }
        #expect((rejected[.malformed] ?? 0) > 0, "top-of-range terms were refused by the codec: \(rejected)")
        #expect((rejected[.replayed] ?? 0) > 0, "replays were refused by the window: \(rejected)")
    }
}
