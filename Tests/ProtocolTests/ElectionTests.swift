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
        _ = n2.stepEchoing(.tick, now: startup)
        #expect(n2.role == .candidate)
        let stale = Epoch(term: 13, master: NodeID(2))
        let election = ClusterEnvelope(from: NodeID(1), incarnation: 5, epoch: stale, to: nil,
                                       message: .election(lastCommitted: .zero))
        let answers = n2.stepEchoing(.cluster(election), now: startup + Milliseconds(10))
        #expect(answers.contains { if case .send(let e) = $0, case .answer = e.message { return e.to == NodeID(1) } else { return false } })
        var t = startup + Milliseconds(10)
        for _ in 0..<40 where n2.role != .master {
            t = t + Milliseconds(100)
            // The disk takes every epoch it is given.
            for case .persistEpoch(let e) in n2.stepEchoing(.tick, now: t) { _ = n2.stepEchoing(.epochStored(e), now: t) }
        }
        #expect(n2.role == .master)
        #expect(n2.epoch > stale, "a new reign claims an epoch above every one seen")
    }

    /// Bully: an ANSWER promises that its sender runs. n3, starting, answers n2's ELECTION
    /// (n2 runs to take over from the lower master n1), then hears n1's keepalives: at the
    /// end of its startup it runs, as it promised, rather than following n1. Following,
    /// it left n2 awaiting a COORDINATOR that never came and staying out of n1's
    /// transactions meanwhile, and n1, counting n2 as a live voter, committed nothing for
    /// seconds (seed 99664880033019799). Without the ELECTION it follows n1.
    @Test(arguments: [true, false])
    func aStartingNodeThatAnsweredAnElectionRunsWhenItsStartupEnds(answered: Bool) {
        let e2 = Epoch(term: 2, master: NodeID(1))
        var n3 = node(3, epoch: e2)
        var t = t0 + Milliseconds(100)
        func hear(_ from: UInt32, _ message: ClusterMessage) -> [NodeAction] {
            n3.stepEchoing(.cluster(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: e2, to: nil,
                                                    message: message)), now: t)
        }
        if answered {
            let answers = hear(2, .election(lastCommitted: .zero))
            #expect(answers.contains { if case .send(let e) = $0, case .answer = e.message { e.to == NodeID(2) } else { false } })
        }
        while t < t0 + ClusterConfig().startupListen {
            _ = hear(1, .keepalive(Keepalive(role: .master, master: NodeID(1), lastCommitted: .zero, inSync: true)))
            t = t + Milliseconds(250)
        }
        #expect(n3.role == .starting)
        let actions = n3.stepEchoing(.tick, now: t)
        let ranElection = actions.contains { if case .broadcast(let e) = $0, case .election = e.message { true } else { false } }
        #expect(ranElection == answered, "\(actions)")
        #expect(n3.role == (answered ? .candidate : .slave))
        #expect(n3.paths[.answeredWhileStartingRan] == (answered ? 1 : 0))
    }

    /// A candidate leads only once its epoch is on disk: a lost epoch write means no reign.
    @Test func aCandidateLeadsOnlyOnceItsEpochIsStored() throws {
        var n1 = node(1, epoch: .zero)
        var t = t0 + ClusterConfig().startupListen
        _ = n1.stepEchoing(.tick, now: t)
        #expect(n1.role == .candidate)
        var claimed: Epoch?
        for _ in 0..<15 {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n1.stepEchoing(.tick, now: t) { claimed = e }
        }
        let epoch = try #require(claimed)
        #expect(n1.role == .candidate, "no COORDINATOR before the epoch is durable")
        // The write never lands; the claim lapses and the next one asks for a higher epoch.
        var next: Epoch?
        for _ in 0..<30 where next == nil {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n1.stepEchoing(.tick, now: t) { next = e }
        }
        _ = n1.stepEchoing(.epochStored(epoch), now: t)
        #expect(n1.role == .candidate, "a late confirmation of an abandoned claim crowns nobody")
        let second = try #require(next)
        #expect(second > epoch)
        _ = n1.stepEchoing(.epochStored(second), now: t)
        #expect(n1.role == .master && n1.epoch == second)
    }

    /// n2 follows n3; n3 falls silent. Once n3 has missed its keepalives no higher id is
    /// alive, so n2 claims the next epoch in the same step that starts its election,
    /// instead of waiting an answer timeout for answers nobody can send.
    @Test func aCandidateWithNoLiveHigherIDClaimsAtOnce() throws {
        let e3 = Epoch(term: 1, master: NodeID(3))
        var n2 = node(2, epoch: e3)
        let keepalive = { (at: Instant) in
            ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                            message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "")))
        }
        var t = t0
        while t < t0 + ClusterConfig().startupListen + Milliseconds(1000) {
            _ = n2.stepEchoing(.cluster(keepalive(t)), now: t)
            _ = n2.stepEchoing(.tick, now: t)
            t = t + Milliseconds(500)
        }
        #expect(n2.role == .slave && n2.master == NodeID(3))
        let lastHeard = t - Milliseconds(500)
        var claimedAt: Instant?
        while claimedAt == nil && t < lastHeard + Milliseconds(5000) {
            t = t + Milliseconds(50)
            let actions = n2.stepEchoing(.tick, now: t)
            if actions.contains(where: { if case .persistEpoch(let e) = $0 { return e.master == NodeID(2) } else { return false } }) {
                claimedAt = t
                #expect(actions.contains { if case .broadcast(let env) = $0, case .election = env.message { return true } else { return false } },
                        "the ELECTION still goes out, for the lower ids")
            }
        }
        let claimed = try #require(claimedAt)
        #expect(claimed - lastHeard <= ClusterConfig().downAfter + Milliseconds(100),
                "claimed \((claimed - lastHeard).value) ms after the last keepalive: no answer timeout on top of detection")
    }

    /// n1 noticed the silence of n3 a few milliseconds before n2 did: its ELECTION reaches
    /// n2 while n3 still counts as live there. n2 answers and runs its own election, and
    /// claims the moment n3 misses its keepalives at n2 (its next wake is that moment),
    /// not an answer timeout later. (Found by a real kill -9: 3.0 s to the first reply.)
    @Test func aLowerElectionJustBeforeTheMasterTimesOutDoesNotAddAnAnswerTimeout() throws {
        let e3 = Epoch(term: 1, master: NodeID(3))
        var n2 = node(2, epoch: e3)
        var t = t0
        while t < t0 + ClusterConfig().startupListen + Milliseconds(1000) {
            _ = n2.stepEchoing(.cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                                                 message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "")))), now: t)
            _ = n2.stepEchoing(.tick, now: t)
            t = t + Milliseconds(500)
        }
        #expect(n2.role == .slave && n2.master == NodeID(3))
        let lastHeard = t - Milliseconds(500)
        let expiry = lastHeard + ClusterConfig().downAfter + Milliseconds(1)
        // n2 wakes when it asked to (a node that runs later than that was paused: see
        // PauseTests) until just before n3 expires.
        while n2.nextWake(now: t) < expiry - Milliseconds(20) {
            t = n2.nextWake(now: t)
            _ = n2.stepEchoing(.tick, now: t)
        }
        t = expiry - Milliseconds(20)
        let election = ClusterEnvelope(from: NodeID(1), incarnation: 1000, epoch: e3, to: nil, message: .election(lastCommitted: .zero))
        let answered = n2.stepEchoing(.cluster(election), now: t)
        #expect(answered.contains { if case .send(let e) = $0, case .answer = e.message { return e.to == NodeID(1) } else { return false } })
        #expect(n2.role == .candidate)
        #expect(!answered.contains { if case .persistEpoch = $0 { return true } else { return false } }, "n3 is still live here")
        var claimedAt: Instant?
        for _ in 0..<100 where claimedAt == nil {
            t = n2.nextWake(now: t)
            if n2.stepEchoing(.tick, now: t).contains(where: { if case .persistEpoch(let e) = $0 { return e.master == NodeID(2) } else { return false } }) {
                claimedAt = t
            }
        }
        let claimed = try #require(claimedAt)
        #expect(claimed <= expiry + Milliseconds(1), "claimed \((claimed - expiry).value) ms after n3 timed out")
    }

    /// The same ELECTION while n3 is alive: n2 waits for n3's answer and does not claim.
    @Test func aLowerElectionWhileTheMasterIsAliveClaimsNothing() {
        let e3 = Epoch(term: 1, master: NodeID(3))
        var n2 = node(2, epoch: e3)
        var t = t0
        func keepalive() -> ClusterEnvelope {
            ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                            message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "")))
        }
        while t < t0 + ClusterConfig().startupListen + Milliseconds(1000) {
            _ = n2.stepEchoing(.cluster(keepalive()), now: t)
            _ = n2.stepEchoing(.tick, now: t)
            t = t + Milliseconds(500)
        }
        let election = ClusterEnvelope(from: NodeID(1), incarnation: 1000, epoch: e3, to: nil, message: .election(lastCommitted: .zero))
        _ = n2.stepEchoing(.cluster(election), now: t)
        #expect(n2.role == .candidate)
        let answer = ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: NodeID(2), message: .answer)
        _ = n2.stepEchoing(.cluster(answer), now: t + Milliseconds(5))
        for step in 1...10 {
            let now = t + Milliseconds(100 * Int64(step))
            if step % 5 == 0 { _ = n2.stepEchoing(.cluster(keepalive()), now: now) }
            #expect(!n2.stepEchoing(.tick, now: now).contains { if case .persistEpoch = $0 { return true } else { return false } })
        }
    }
}
