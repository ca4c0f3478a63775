import Simulation
import Testing
import TrackerLogic

/// The broker and the peer network are separate channels: losing one must not look like
/// losing the other nodes (issue 10, item 2).
@Suite("Broker outage and peer-network keepalives")
struct BrokerOutageTests {
    let t0 = Scenario.start

    func settled(_ nodes: Int, quorum: QuorumMode) -> Simulator {
        var sim = Simulator(scenario: .calm(seed: 3, nodes: nodes, quorum: quorum, peers: 6))
        sim.start()
        sim.advance(to: t0 + Milliseconds(8_000))
        return sim
    }

    func servingSlots(_ sim: Simulator) -> [Int] { (0..<sim.slotCount).filter { sim.node($0)?.isServing == true } }

    /// Live mode: with the broker gone the master hears its slaves on the peer network,
    /// nobody elects, and it goes on acknowledging announces alone; when the broker returns
    /// the slaves catch up and every replica is equal again.
    @Test func theMasterServesAloneAndNobodyElectsWhileTheBrokerIsDown() throws {
        var sim = settled(3, quorum: .live)
        let master = try #require(sim.servingSlot)
        let epoch = try #require(sim.node(master)?.epoch)
        let outage = sim.currentTime
        sim.inject(.brokerOutage)
        var ticks = 0
        while sim.currentTime < outage + Milliseconds.seconds(10) {
            sim.advance(by: Milliseconds(50))
            #expect(servingSlots(sim) == [master], "only the master serves during the outage")
            for s in 0..<3 { #expect(sim.node(s)?.epoch == epoch, "no node claims an epoch") }
            ticks += 1
        }
        let answered = sim.replies.filter { $0.at > outage + Milliseconds(100) && !$0.isError }
        #expect(answered.count > 0 && answered.allSatisfy { $0.slot == master })
        let committed = try #require(sim.node(master)?.replica.lastCommitted)
        #expect(committed.txid > 0)
        sim.inject(.heal)
        sim.advance(by: Milliseconds.seconds(6))
        for s in 0..<3 { #expect(sim.node(s)?.replica.lastCommitted ?? .zero >= committed, "s\(s) caught up") }
        #expect(sim.finish().passed)
    }

    /// Strict mode: alone, the master cannot reach a majority of the cluster; peers get
    /// errors, never an acknowledgement, and still nobody else serves.
    @Test func strictModeStopsAcknowledgingWhileTheBrokerIsDown() throws {
        var sim = settled(3, quorum: .strict)
        let master = try #require(sim.servingSlot)
        let committed = try #require(sim.node(master)?.replica.lastCommitted)
        let outage = sim.currentTime
        sim.inject(.brokerOutage)
        sim.advance(by: Milliseconds.seconds(10))
        #expect(servingSlots(sim) == [master])
        #expect(sim.node(master)?.replica.lastCommitted == committed, "no commit without a majority")
        let late = sim.replies.filter { $0.at > outage + Milliseconds.seconds(1) }
        #expect(!late.isEmpty && late.allSatisfy { $0.isError || $0.slot == master })
        sim.inject(.heal)
        sim.advance(by: Milliseconds.seconds(6))
        #expect(sim.finish().passed)
    }

    /// The peer network cut, the broker whole: the broker keeps the cluster together as
    /// before (one master, commits from everyone).
    @Test func aPeerNetworkPartitionAloneChangesNothing() throws {
        var sim = settled(3, quorum: .strict)
        let master = try #require(sim.servingSlot)
        let before = try #require(sim.node(master)?.replica.lastCommitted)
        sim.inject(.peerNetworkPartition([master]))
        sim.advance(by: Milliseconds.seconds(8))
        #expect(servingSlots(sim) == [master])
        #expect((sim.node(master)?.replica.lastCommitted.txid ?? 0) > before.txid)
        sim.inject(.heal)
        #expect(sim.finish().passed)
    }
}
