import NIOCore
import Testing
import TrackerLogic

/// Election corner cases driven by hand, event by event.
@Suite("Election") struct ElectionTests {
    let t0 = Instant(milliseconds: 1_000_000)

    func node(_ id: UInt32, epoch: Epoch) -> TrackerNode {
        TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))),
                    seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: epoch))
    }

    /// Found by real processes: n1's disk remembered epoch e13.2, led by an earlier process
    /// with id 2 (whose disk was another), while n2's own disk said e12.2. Seeing "its own"
    /// higher epoch in n1's ELECTION, n2 dropped its election and stayed a candidate forever.
    @Test func anEpochOfAnEarlierIncarnationOfOurIDDoesNotStallTheElection() {
        var n2 = node(2, epoch: Epoch(term: 12, master: NodeID(2)))
        let startup = t0 + ClusterConfig().startupListen
        _ = n2.step(.tick, now: startup)
        #expect(n2.role == .candidate)
        let stale = Epoch(term: 13, master: NodeID(2))
        let election = ClusterEnvelope(from: NodeID(1), incarnation: 5, epoch: stale, to: nil,
                                       message: .election(lastCommitted: .zero))
        let answers = n2.step(.cluster(election), now: startup + Milliseconds(10))
        #expect(answers.contains { if case .send(let e) = $0, case .answer = e.message { return e.to == NodeID(1) } else { return false } })
        var t = startup + Milliseconds(10)
        for _ in 0..<40 where n2.role != .master {
            t = t + Milliseconds(100)
            // The disk takes every epoch it is given.
            for case .persistEpoch(let e) in n2.step(.tick, now: t) { _ = n2.step(.epochStored(e), now: t) }
        }
        #expect(n2.role == .master)
        #expect(n2.epoch > stale, "a new reign claims an epoch above every one seen")
    }

    /// A candidate leads only once its epoch is on disk: a lost epoch write means no reign.
    @Test func aCandidateLeadsOnlyOnceItsEpochIsStored() throws {
        var n1 = node(1, epoch: .zero)
        var t = t0 + ClusterConfig().startupListen
        _ = n1.step(.tick, now: t)
        #expect(n1.role == .candidate)
        var claimed: Epoch?
        for _ in 0..<15 {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n1.step(.tick, now: t) { claimed = e }
        }
        let epoch = try #require(claimed)
        #expect(n1.role == .candidate, "no COORDINATOR before the epoch is durable")
        // The write never lands; the claim lapses and the next one asks for a higher epoch.
        var next: Epoch?
        for _ in 0..<30 where next == nil {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n1.step(.tick, now: t) { next = e }
        }
        _ = n1.step(.epochStored(epoch), now: t)
        #expect(n1.role == .candidate, "a late confirmation of an abandoned claim crowns nobody")
        let second = try #require(next)
        #expect(second > epoch)
        _ = n1.step(.epochStored(second), now: t)
        #expect(n1.role == .master && n1.epoch == second)
    }
}
