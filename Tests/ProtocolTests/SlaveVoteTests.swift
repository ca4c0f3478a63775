import Testing
import TrackerLogic

/// A slave's OK vouches for one transaction, digest and all: a master counts it only for
/// that one, and a slave gives it to no other under the same transaction id.
@Suite("A vote vouches for one transaction") struct SlaveVoteTests {
    let t0 = Instant(milliseconds: 7_000_000)
    let e3 = n3Epoch
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    /// n2 following n3, master of e1.3, since `t0`.
    func slave() -> (TrackerNode, Instant) { n2FollowingN3(from: t0, ids: ids) }

    func fromMaster(_ message: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil, message: message))
    }

    func first(expiring ms: Int64) -> Transaction {
        Transaction(ref: TxRef(epoch: e3, txid: 1), updates: [.expire(before: t0 + Milliseconds(ms))])
    }

    func votes(_ actions: [NodeAction]) -> [ClusterMessage] {
        actions.compactMap { if case .send(let env) = $0, case .vote = env.message { return env.message } else { return nil } }
    }

    /// e1.3#1 committed; a PREPARE of another e1.3#1 (a second leader of e1.3: two
    /// processes given one id) gets not-in-sync, and the committed one again gets OK.
    @Test func aSlaveVotesOKOnACommittedTransactionIdOnlyForTheTransactionItCommitted() {
        var (n, t) = slave()
        let ours = first(expiring: 1), theirs = first(expiring: 2)
        #expect(ours.digest != theirs.digest)
        t = t + Milliseconds(10)
        #expect(votes(n.stepEchoing(fromMaster(.prepare(ours, previous: .zero, previousDigest: 0)), now: t))
            == [.vote(txid: 1, digest: ours.digest, verdict: .ok)])
        _ = n.stepEchoing(fromMaster(.commit(ours.ref, digest: ours.digest)), now: t + Milliseconds(1))
        #expect(n.replica.lastCommitted == ours.ref)
        #expect(votes(n.stepEchoing(fromMaster(.prepare(theirs, previous: .zero, previousDigest: 0)), now: t + Milliseconds(2)))
            == [.vote(txid: 1, digest: theirs.digest, verdict: .notInSync)])
        #expect(votes(n.stepEchoing(fromMaster(.prepare(ours, previous: .zero, previousDigest: 0)), now: t + Milliseconds(3)))
            == [.vote(txid: 1, digest: ours.digest, verdict: .ok)])
        #expect(n.replica.lastCommitted == ours.ref)
    }
}
