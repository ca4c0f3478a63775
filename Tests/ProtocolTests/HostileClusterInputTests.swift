import NIOCore
import Testing
import TrackerLogic

/// The attacks a hostile broker participant tried on real nodes, replayed against one
/// node's state machine: none may trap it, and none may make it follow, vote for or
/// answer anything it should not.
@Suite("Hostile cluster input") struct HostileClusterInputTests {
    let t0 = Instant(milliseconds: 1_000_000)

    func node(_ id: UInt32, restoring: DurableState? = nil) -> TrackerNode {
        TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))),
                    seed: 7, now: t0, restoring: restoring)
    }

    /// A lone node run until it masters its own epoch (the disk takes every epoch write).
    func master(_ id: UInt32) -> (TrackerNode, Instant) {
        var n = node(id)
        var t = t0
        for _ in 0..<100 where !n.isServing {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n.stepEchoing(.tick, now: t) { _ = n.stepEchoing(.epochStored(e), now: t) }
        }
        return (n, t)
    }

    func env(from: UInt32, incarnation: UInt64 = 77, epoch: Epoch, to: UInt32? = nil, _ m: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(from), incarnation: incarnation, epoch: epoch, to: to.map { NodeID($0) }, message: m))
    }

    /// Found on real nodes: a COORDINATOR from the master's own id, in its own epoch,
    /// tripped a precondition ("a slave with master state"). A node never takes orders
    /// from "itself".
    @Test func aCoordinatorFromTheMastersOwnIDChangesNothing() {
        var (n, t) = master(3)
        #expect(n.isServing)
        let epoch = n.epoch
        for message in [ClusterMessage.coordinator(lastCommitted: .zero), .prepare(Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: []), previous: .zero, previousDigest: 0),
                        .commit(TxRef(epoch: epoch, txid: 1), digest: 0), .mergeRequest, .leaving, .election(lastCommitted: .zero)] {
            t = t + Milliseconds(10)
            let actions = n.stepEchoing(env(from: 3, epoch: epoch, message), now: t)
            #expect(n.role == .master && n.isServing && n.epoch == epoch, "after \(message.name)")
            #expect(!actions.contains { if case .exit = $0 { return true } else { return false } })
        }
        #expect(n.replica.lastCommitted == .zero, "nothing forged was committed")
    }

    /// Found on real nodes: an epoch at the top of the term space made `successor` trap
    /// two seconds later. Such a term is refused by the codec; a node that holds the
    /// highest acceptable term cannot claim another and waits, without trapping.
    @Test func theTopOfTheTermSpaceNeverTraps() {
        var n = node(2)
        var t = t0 + ClusterConfig().startupListen
        _ = n.stepEchoing(.tick, now: t)
        let top = Epoch(term: Epoch.maxTerm, master: NodeID(9))
        _ = n.stepEchoing(env(from: 9, epoch: top, .keepalive(Keepalive(role: .master, master: NodeID(9), lastCommitted: .zero, inSync: true))), now: t)
        #expect(n.epoch == top)
        for _ in 0..<100 {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n.stepEchoing(.tick, now: t) { _ = n.stepEchoing(.epochStored(e), now: t) }
        }
        #expect(n.epoch == top, "no epoch above the top is ever claimed")
        #expect(n.role == .candidate)
        let impossible = Epoch(term: UInt32.max, master: NodeID(9))
        _ = n.stepEchoing(env(from: 9, epoch: impossible, .answer), now: t)
        #expect(n.epoch == top, "an impossible epoch handed in directly is dropped")
    }

    /// A stored epoch no node can hold (the -1 a forged term left in `cluster_meta`) is
    /// reported and reset, not a crash loop.
    @Test func anImpossibleStoredEpochIsResetOnStart() {
        let n = node(1, restoring: DurableState(snapshot: nil, epoch: Epoch(packed: UInt64.max)))
        #expect(n.epoch == .zero)
        #expect(n.restoreProblems.count == 1)
        let fine = node(1, restoring: DurableState(snapshot: nil, epoch: Epoch(term: 4, master: NodeID(2))))
        #expect(fine.epoch == Epoch(term: 4, master: NodeID(2)) && fine.restoreProblems.isEmpty)
    }

    /// A forged member at the top of the id range must not make `--id auto` overflow.
    @Test func autoIDsNeverOverflow() {
        var membership = Membership()
        membership.heard(ClusterEnvelope(from: NodeID(UInt32.max), incarnation: 1, epoch: .zero, to: nil, message: .answer), now: t0)
        membership.heard(ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: .zero, to: nil, message: .answer), now: t0)
        #expect(membership.nextFreeID(after: [NodeID(2)]) == NodeID(3))
    }

    /// A flood of HELLOs from made-up `--id auto` incarnations hands out a bounded number
    /// of ids.
    @Test func idAssignmentIsBounded() {
        var (n, t) = master(1)
        var assigned = 0
        for i in 0..<5000 {
            t = t + Milliseconds(1)
            let actions = n.stepEchoing(env(from: 0, incarnation: UInt64(i), epoch: .zero, .hello(Hello(lastCommitted: .zero, hasState: false))), now: t)
            assigned += actions.filter { if case .broadcast(let e) = $0, case .idAssigned = e.message { return true } else { return false } }.count
        }
        #expect(assigned <= 4096)
        #expect(n.isServing)
    }

    /// Votes for transactions that do not exist, and PREPAREs whose numbering does not
    /// follow their `previous`, are ignored.
    @Test func votesAndPreparesThatDoNotFitAreIgnored() {
        var (n, t) = master(2)
        t = t + Milliseconds(5)
        let none = n.stepEchoing(env(from: 1, epoch: n.epoch, .vote(txid: 99, digest: 1, verdict: .ok)), now: t)
        #expect(none.isEmpty)
        var slave = node(1)
        let e = Epoch(term: 3, master: NodeID(2))
        _ = slave.stepEchoing(.tick, now: t0 + ClusterConfig().startupListen)
        _ = slave.stepEchoing(env(from: 2, epoch: e, .coordinator(lastCommitted: .zero)), now: t0 + ClusterConfig().startupListen)
        let skewed = Transaction(ref: TxRef(epoch: e, txid: 40), updates: [])
        let votes = slave.stepEchoing(env(from: 2, epoch: e, .prepare(skewed, previous: .zero, previousDigest: 0)), now: t0 + ClusterConfig().startupListen)
        #expect(!votes.contains { if case .send(let s) = $0, case .vote = s.message { return true } else { return false } })
    }
}
