import Simulation
import Testing
import TrackerLogic

/// One test per requirement of the spec, each a hand-made scenario.
@Suite("Named cluster scenarios")
struct NamedScenarioTests {
    let t0 = Scenario.start

    func at(_ ms: Int64) -> Instant { t0 + Milliseconds(ms) }

    func settled(_ nodes: Int, quorum: QuorumMode = .live, peers: Int = 4, seed: UInt64 = 1) -> Simulator {
        var sim = Simulator(scenario: .calm(seed: seed, nodes: nodes, quorum: quorum, peers: peers))
        sim.start()
        sim.advance(to: at(8_000))
        return sim
    }

    func masterID(_ sim: Simulator) -> NodeID? { sim.servingSlot.flatMap { sim.node($0)?.id } }

    @Test func startupElectsTheHighestID() {
        let sim = settled(5)
        #expect(masterID(sim) == NodeID(5))
        for s in 0..<4 { #expect(sim.node(s)?.master == NodeID(5)) }
        #expect(sim.firstViolation == nil)
    }

    @Test func masterKilledHighestLiveIDWins() {
        var sim = settled(5)
        sim.inject(.crash(4))
        sim.advance(by: Milliseconds.seconds(8))
        #expect(masterID(sim) == NodeID(4))
        for s in 0..<3 { #expect(sim.node(s)?.master == NodeID(4) && sim.node(s)?.role == .slave) }
        #expect(sim.finish().passed)
    }

    @Test func twoMissedKeepalivesMarkANodeDown() {
        var sim = settled(3)
        let master = sim.servingSlot!
        sim.inject(.crash(0))
        let lastHeard = sim.node(master)!.membership[NodeID(1)]!.lastHeard
        let down = sim.node(master)!.config.downAfter
        sim.advance(to: lastHeard + down - Milliseconds(20))
        #expect(sim.node(master)!.membership.isLive(NodeID(1), now: sim.currentTime, downAfter: down))
        sim.advance(to: lastHeard + down + Milliseconds(20))
        #expect(!sim.node(master)!.membership.isLive(NodeID(1), now: sim.currentTime, downAfter: down))
        #expect(down == Milliseconds.seconds(2), "the spec: 2 intervals of 1 s")
    }

    @Test func noPeerIsServedDuringAnElection() {
        var sim = settled(3, peers: 6)
        let crashAt = sim.currentTime
        let lastHeard = (0..<2).compactMap { sim.node($0)?.membership[NodeID(3)]?.lastHeard }.max() ?? crashAt
        sim.inject(.crash(2))
        var servingAgain: Instant?
        while servingAgain == nil && sim.currentTime < crashAt + Milliseconds.seconds(15) {
            sim.advance(by: Milliseconds(10))
            if let s = sim.servingSlot, s != 2 { servingAgain = sim.currentTime }
        }
        let resumed = try! #require(servingAgain)
        #expect(resumed - lastHeard >= Milliseconds.seconds(2), "failure detection takes two intervals after the last keepalive")
        let during = sim.replies.filter { $0.at > crashAt && $0.at < resumed - Milliseconds(10) }
        #expect(during.isEmpty, "replies during the election: \(during.count)")
        sim.advance(by: Milliseconds.seconds(5))
        #expect(sim.replies.contains { $0.at > resumed && $0.slot == 1 }, "the new master serves")
    }

    @Test func aJoiningNodeReceivesTheFullState() {
        var sim = Simulator(scenario: .calm(nodes: 4, peers: 6, faults: [(20_000, .join(3))]))
        sim.start()
        sim.advance(to: at(19_000))
        #expect(sim.node(3) == nil)
        let before = sim.node(sim.servingSlot!)!.replica.store.peerCount
        #expect(before > 0)
        sim.advance(to: at(26_000))
        let joined = try! #require(sim.node(3))
        #expect(joined.inSync)
        #expect(joined.replica.store.peerCount >= before)
        #expect(sim.finish().passed)
    }

    /// Whatever the incarnations drawn, the newcomer yields while it is still starting.
    @Test(arguments: 1...16 as ClosedRange<UInt64>)
    func aDuplicateIDIsRefused(seed: UInt64) {
        var sim = settled(3, seed: seed)
        let impostor = sim.startExtraNode(id: NodeID(2))
        sim.advance(by: Milliseconds.seconds(6))
        #expect(sim.node(impostor) == nil)
        #expect(sim.exits.contains { $0.slot == impostor && $0.reason == .idInUse(NodeID(2)) })
        #expect(sim.node(1)?.role == .slave, "the original n2 keeps running")
        #expect(sim.finish().passed)
    }

    @Test func autoIDTakesAFreeID() {
        var sim = settled(3)
        let newcomer = sim.startExtraNode(id: .unassigned)
        sim.advance(by: Milliseconds.seconds(8))
        let node = try! #require(sim.node(newcomer))
        #expect(node.id == NodeID(4))
        #expect(node.inSync || node.role == .master)
    }

    @Test func anErrorVoteAbortsAndThePeerGetsAnError() {
        var sim = settled(3, quorum: .live, peers: 6)
        let master = sim.servingSlot!
        let slaves = (0..<3).filter { $0 != master }
        for s in slaves { sim.inject(.storeFails(s)) }
        sim.inject(.storeFails(master))
        // A transaction whose votes were already in may still commit; then writes fail.
        sim.advance(by: Milliseconds(1500))
        let before = sim.node(master)!.replica.lastCommitted
        let errorsBefore = sim.peerErrors.count
        sim.advance(by: Milliseconds.seconds(6))
        #expect(sim.node(master)!.replica.lastCommitted == before, "nothing commits without OK votes")
        #expect(sim.peerErrors.count > errorsBefore)
        #expect(sim.peerErrors.last?.contains("could not store") == true)
        for s in 0..<3 { sim.inject(.storeHeals(s)) }
        sim.advance(by: Milliseconds.seconds(6))
        #expect(sim.node(master)!.replica.lastCommitted > before, "commits resume once stores heal")
        #expect(sim.finish().passed)
    }

    @Test func strictModeHaltsCommitsWhenAMajorityDies() {
        var sim = settled(5, quorum: .strict, peers: 6)
        for s in [4, 3, 2] { sim.inject(.crash(s)) }
        sim.advance(by: Milliseconds(500))
        let frozen = (0..<2).map { sim.node($0)!.replica.lastCommitted }
        let answered = sim.peerAnnounceReplies
        sim.advance(by: Milliseconds.seconds(12))
        #expect((0..<2).map { sim.node($0)!.replica.lastCommitted } == frozen)
        #expect(sim.peerAnnounceReplies == answered, "no announce is acknowledged without a majority")
        #expect(sim.firstViolation == nil)
    }

    @Test func liveModeALoneSurvivorKeepsServing() {
        var sim = settled(3, quorum: .live, peers: 6)
        sim.inject(.crash(2))
        sim.inject(.crash(1))
        sim.advance(by: Milliseconds.seconds(6))
        let answered = sim.peerAnnounceReplies
        #expect(sim.servingSlot == 0)
        sim.advance(by: Milliseconds.seconds(6))
        #expect(sim.peerAnnounceReplies > answered)
        #expect(sim.finish().passed)
    }

    @Test func aSlowNodeLeavesTheClusterConsistent() {
        var sim = Simulator(scenario: .calm(nodes: 3, peers: 6, faults: [(5_000, .slow(1, extraDelay: 450))]))
        sim.start()
        sim.advance(to: at(25_000))
        #expect(sim.servingSlot == 2, "a slow slave does not unseat the master")
        let report = sim.finish()
        #expect(report.passed, "\(report)")
        #expect(sim.node(1)!.replica == sim.node(2)!.replica)
    }

    @Test func aPartitionedMinoritysAnnouncesAreMergedAfterHealing() {
        var sim = Simulator(scenario: .calm(nodes: 5, quorum: .live, peers: 7,
                                            faults: [(6_000, .partition([3, 4])), (16_000, .heal)]))
        sim.start()
        sim.advance(to: at(14_000))
        // Live mode: both sides elect a master and serve.
        let serving = (0..<5).filter { sim.node($0)?.isServing == true }
        #expect(serving.count == 2, "serving: \(serving)")
        let report = sim.finish()
        #expect(report.passed, "\(report)")
    }

    @Test func aCleanShutdownEmptiesTheRepository() {
        var sim = settled(3, peers: 6)
        sim.advance(by: Milliseconds.seconds(4))
        #expect(sim.node(0)!.replica.store.peerCount > 0)
        sim.inject(.shutdown(0))
        #expect(sim.node(0) == nil)
        #expect(sim.exits.contains { $0.slot == 0 && $0.reason == .leftCluster })
        sim.inject(.restart(0))
        #expect(sim.node(0)!.replica.lastCommitted.txid == 0, "it restarts empty")
        sim.advance(by: Milliseconds.seconds(8))
        #expect(sim.node(0)!.inSync)
        #expect(sim.finish().passed)
    }

    /// Live mode, the minority side {3, 4} elects its own master and an operator registers
    /// a torrent on it; the majority registers another. After healing both are on every
    /// replica: the minority's catalogue is merged like its announces.
    @Test func registrationsOnBothSidesOfAPartitionSurviveHealing() throws {
        var scenario = Scenario.calm(nodes: 5, quorum: .live, peers: 3, faults: [(6_000, .partition([3, 4])), (16_000, .heal)])
        scenario.operatorActions = [OperatorAction(at: Scenario.start + Milliseconds(11_000), slot: 3, change: .register(1)),
                                    OperatorAction(at: Scenario.start + Milliseconds(11_500), slot: 0, change: .register(2))]
        var sim = Simulator(scenario: scenario)
        sim.start()
        sim.advance(to: at(14_000))
        let one = try #require(OperatorAction.torrent(1)).infoHash, two = try #require(OperatorAction.torrent(2)).infoHash
        #expect(sim.node(4)?.replica.store.catalogue.isRegistered(one) == true, "the minority committed its registration")
        #expect(sim.node(4)?.replica.store.catalogue.isRegistered(two) == false)
        let report = sim.finish()
        #expect(report.passed, "\(report)")
        for slot in 0..<5 {
            let catalogue = try #require(sim.node(slot)).replica.store.catalogue
            #expect(catalogue.isRegistered(one) && catalogue.isRegistered(two), "s\(slot)")
        }
    }
}
