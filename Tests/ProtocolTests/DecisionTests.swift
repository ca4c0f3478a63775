import Testing
import TrackerLogic

/// Every prepared transaction gets its decision, even when the COMMIT or ABORT that told
/// it was lost and the cluster goes quiet (`Decision.swift`).
@Suite("A voter learns every decision") struct DecisionTests: MasterFixture {
    let t0 = Instant(milliseconds: 7_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: v4("10.0.0.9"), port: 6881)

    func fromN3(_ message: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: n3Epoch, to: nil, message: message))
    }

    func sent(_ actions: [NodeAction], to node: UInt32) -> [ClusterMessage] {
        actions.compactMap { if case .send(let env) = $0, env.to == NodeID(node) { return env.message } else { return nil } }
    }

    /// A slave whose ABORT was lost votes again once the vote window and an interval have
    /// passed, each interval after that, and stops once the decision arrives.
    @Test func aSlaveVotesAgainOnATransactionLeftUndecidedUntilTheDecisionComes() {
        var (n, t) = n2FollowingN3(from: t0, ids: ids)
        let tx = Transaction(ref: TxRef(epoch: n3Epoch, txid: 1), updates: [.expire(before: t0)])
        _ = n.stepEchoing(fromN3(.prepare(tx, previous: .zero, previousDigest: 0)), now: t)
        #expect(n.undecidedTransaction == tx.ref)
        let vote = ClusterMessage.vote(txid: 1, digest: tx.digest, verdict: .ok)
        var repeated: [Instant] = []
        let end = t + Milliseconds(3000)
        while t < end {
            t = t + Milliseconds(50)
            if (t - t0).value % 500 == 0 { _ = n.stepEchoing(n3Keepalive(), now: t) }
            if sent(n.stepEchoing(.tick, now: t), to: 3).contains(vote) { repeated.append(t) }
        }
        let after = n.config.voteTimeout + n.config.keepaliveInterval
        #expect(repeated.count >= 2, "votes again until decided")
        #expect(repeated.allSatisfy { $0 - (end - Milliseconds(3000)) >= after })
        #expect(zip(repeated, repeated.dropFirst()).allSatisfy { $1 - $0 >= n.config.keepaliveInterval })
        _ = n.stepEchoing(fromN3(.abort(tx.ref, digest: tx.digest)), now: t)
        #expect(n.undecidedTransaction == nil)
        for _ in 0..<40 {
            t = t + Milliseconds(50)
            if (t - t0).value % 500 == 0 { _ = n.stepEchoing(n3Keepalive(), now: t) }
            #expect(!sent(n.stepEchoing(.tick, now: t), to: 3).contains(vote))
        }
    }

    /// A master answers a vote for a transaction it aborted with that ABORT, and one for a
    /// transaction it committed with that COMMIT — once nothing was decided for an
    /// interval; a vote right after a decision is the usual straggler and gets nothing.
    @Test func aMasterAnswersALateVoteWithItsDecision() throws {
        var (n, t) = masterWithTwoSlaves()
        let aborted = try announce(1, &n, at: &t)
        _ = vote(1, aborted, .notInSync, &n, at: t)
        _ = vote(2, aborted, .notInSync, &n, at: t)
        #expect(n.undecidedTransaction == nil)
        #expect(sent(vote(1, aborted, .ok, &n, at: t + Milliseconds(10)), to: 1).isEmpty, "a straggler")
        t = t + n.config.keepaliveInterval
        #expect(sent(vote(1, aborted, .ok, &n, at: t), to: 1) == [.abort(aborted.ref, digest: aborted.digest)])

        t = t + Milliseconds(10)
        let committed = try announce(2, &n, at: &t)
        _ = vote(1, committed, .ok, &n, at: t)
        _ = vote(2, committed, .ok, &n, at: t)
        #expect(n.replica.lastCommitted == committed.ref)
        t = t + n.config.keepaliveInterval
        #expect(sent(vote(2, committed, .ok, &n, at: t), to: 2) == [.commit(committed.ref, digest: committed.digest)])
        // Another transaction under a committed id is not vouched for.
        let other = Transaction(ref: committed.ref, updates: [.expire(before: t0)])
        #expect(sent(vote(2, other, .ok, &n, at: t), to: 2).isEmpty)
    }

    /// A prepared transaction of an earlier epoch reported after recovery: proposed again
    /// while nothing of ours is committed; refused with an ABORT of its exact ref after.
    @Test func aMasterSettlesAnEarlierEpochsPreparedTransactionReportedLate() throws {
        var (n, t) = masterWithTwoSlaves()
        #expect(n.replica.lastCommitted == .zero)
        let older = Epoch(term: 0, master: NodeID(2))
        let theirs = Transaction(ref: TxRef(epoch: older, txid: 1), updates: [.expire(before: t0)])
        var actions = n.stepEchoing(env(from: 1, epoch: n.epoch, .coordinatorAck(lastCommitted: .zero, prepared: theirs)), now: t)
        t = t + Milliseconds(100)
        actions += n.stepEchoing(.tick, now: t)
        let proposed = actions.compactMap { a -> Transaction? in
            if case .broadcast(let e) = a, case .prepare(let tx, _, _) = e.message { return tx } else { return nil }
        }
        let mine = try #require(proposed.first)
        #expect(mine.ref.epoch == n.epoch && mine.updates == theirs.updates)
        _ = vote(1, mine, .ok, &n, at: t)
        #expect(n.replica.lastCommitted == mine.ref)
        // Ours committed: one of an earlier epoch on top of it is refused.
        let late = Transaction(ref: TxRef(epoch: older, txid: 2), updates: [.expire(before: t0 + Milliseconds(1))])
        actions = n.stepEchoing(env(from: 2, epoch: n.epoch, .coordinatorAck(lastCommitted: mine.ref, prepared: late)), now: t)
        #expect(sent(actions, to: 2) == [.abort(late.ref, digest: late.digest)])
    }
}
