import Testing
import TrackerLogic

/// A slave applies a catch-up only if it answers its current state and was sent in
/// the epoch it follows: a reply delayed past an election, or sent by the same master in
/// an earlier reign, belongs to a log that need not be this one (seed 3223: a node
/// following e6.6 applied a catch-up its master had sent as master of e4.6). The seed's
/// scenario line stopped failing with the rule removed once the code around it changed;
/// this test does not depend on an interleaving.
@Suite("Catch-up") struct CatchUpTests {
    let t0 = Instant(milliseconds: 9_000_000)
    let current = Epoch(term: 6, master: NodeID(6))
    let earlier = Epoch(term: 4, master: NodeID(6))
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    /// n2, fresh, following n6, master of e6.6.
    func aSlave() -> (TrackerNode, Instant) {
        var n2 = TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
        let keepalive = NodeEvent.cluster(ClusterEnvelope(from: NodeID(6), incarnation: 6000, epoch: current, to: nil, message: .keepalive(
            Keepalive(role: .master, master: NodeID(6), lastCommitted: .zero, inSync: true, address: ""))))
        let last = follow(&n2, hearing: keepalive, from: t0, until: t0 + Milliseconds(4000))
        return (n2, last)
    }

    func catchUp(sentIn epoch: Epoch) -> NodeEvent {
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [])
        return .cluster(ClusterEnvelope(from: NodeID(6), incarnation: 6000, epoch: epoch, to: NodeID(2),
                                        message: .catchUp(after: .zero, [tx])))
    }

    @Test func aCatchUpSentInTheEpochFollowedIsApplied() {
        var (n2, t) = aSlave()
        #expect(n2.role == .slave)
        _ = n2.stepEchoing(catchUp(sentIn: current), now: t + Milliseconds(10))
        #expect(n2.replica.lastCommitted == TxRef(epoch: current, txid: 1))
    }

    @Test func aCatchUpSentInAnEarlierReignOfTheSameMasterIsNot() {
        var (n2, t) = aSlave()
        #expect(n2.role == .slave)
        _ = n2.stepEchoing(catchUp(sentIn: earlier), now: t + Milliseconds(10))
        #expect(n2.replica.lastCommitted == .zero)
    }

    /// The catch-up carrying transactions 1...`through` of the current reign, sent in it.
    func catchUp(through: UInt64) -> NodeEvent {
        let txs = (1...through).map { Transaction(ref: TxRef(epoch: current, txid: $0), updates: []) }
        return .cluster(ClusterEnvelope(from: NodeID(6), incarnation: 6000, epoch: current, to: NodeID(2),
                                        message: .catchUp(after: .zero, txs)))
    }

    /// The master's snapshot after transactions 1...`through` of the current reign.
    func snapshot(through: UInt64) -> NodeEvent {
        var (other, t) = aSlave()
        _ = other.stepEchoing(catchUp(through: through), now: t + Milliseconds(10))
        return .cluster(ClusterEnvelope(from: NodeID(6), incarnation: 6000, epoch: current, to: NodeID(2),
                                        message: .snapshot(other.replica.snapshot())))
    }

    /// A master's log only grows within its reign, so its snapshot older than a commit of
    /// that reign the slave holds is one the broker delivered again: installing it would
    /// undo acknowledged commits (seed 8267757876683373: the slave then voted OK for
    /// another transaction under a ref it had applied). A newer one is installed.
    @Test func aSnapshotOlderThanACommitOfItsReignIsIgnored() {
        var (n2, t) = aSlave()
        _ = n2.stepEchoing(catchUp(through: 2), now: t + Milliseconds(10))
        #expect(n2.replica.lastCommitted == TxRef(epoch: current, txid: 2))
        _ = n2.stepEchoing(snapshot(through: 1), now: t + Milliseconds(20))
        #expect(n2.replica.lastCommitted == TxRef(epoch: current, txid: 2))
        _ = n2.stepEchoing(snapshot(through: 3), now: t + Milliseconds(30))
        #expect(n2.replica.lastCommitted == TxRef(epoch: current, txid: 3))
    }
}
