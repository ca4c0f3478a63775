import NIOCore
import Testing
import TrackerLogic

/// How a master counts votes when a follower lags one vote behind: its OK for the last
/// transaction arrived after that one committed, so the master does not count on it for
/// the next. Found on real nodes: with the other follower's disk full (it votes ERROR),
/// a whole batch of announces was refused though the lagging follower voted OK.
@Suite("Vote counting") struct VoteCountingTests {
    let t0 = Instant(milliseconds: 7_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0009), port: 6881)

    /// n3, master of a 3-node cluster (strict quorum: 2 of 3), followed by n1 and n2,
    /// both confirmed at the empty repository.
    func masterWithTwoFollowers() -> (TrackerNode, Instant) {
        var config = ClusterConfig()
        config.quorum = .strict
        config.clusterSize = 3
        var n = TrackerNode(id: NodeID(3), incarnation: 3000, config: config,
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                            seed: 7, now: t0, restoring: nil)
        var t = t0
        for _ in 0..<100 where !n.isServing {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n.step(.tick, now: t) { _ = n.step(.epochStored(e), now: t) }
        }
        for follower in [UInt32(1), 2] {
            _ = n.step(env(from: follower, epoch: n.epoch, .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero,
                                                                                  inSync: true, address: ""))), now: t)
        }
        // The followers answer the COORDINATOR (n3 took office alone, with nothing to recover).
        for follower in [UInt32(1), 2] {
            _ = n.step(env(from: follower, epoch: n.epoch, .coordinatorAck(lastCommitted: .zero, prepared: nil)), now: t)
        }
        for _ in 0..<20 where !n.isServing {
            t = t + Milliseconds(10)
            _ = n.step(.tick, now: t)
        }
        return (n, t)
    }

    func env(from: UInt32, epoch: Epoch, _ m: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: epoch, to: NodeID(3), message: m))
    }

    /// An announce from `peer`, then the tick that sends its PREPARE: the transaction.
    func announce(_ tid: UInt32, _ n: inout TrackerNode, at t: inout Instant) throws -> Transaction {
        let request = BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: peer.ip, now: t), transactionID: tid,
            infoHash: InfoHash(a: 1, b: 2, c: 3), peerID: PeerID(a: 4, b: 5, c: tid), downloaded: 0, left: 100, uploaded: 0,
            event: .started, key: 1, numWant: 10, port: peer.port)))
        var actions = n.step(.peer(request, from: peer), now: t)
        t = t + Milliseconds(5)
        actions += n.step(.tick, now: t)
        let prepared = actions.compactMap { action -> Transaction? in
            if case .broadcast(let e) = action, case .prepare(let tx, _, _) = e.message { return tx } else { return nil }
        }
        return try #require(prepared.first)
    }

    func vote(_ from: UInt32, _ tx: Transaction, _ verdict: Verdict, _ n: inout TrackerNode, at t: Instant) -> [NodeAction] {
        n.step(env(from: from, epoch: n.epoch, .vote(txid: tx.txid, digest: tx.digest, verdict: verdict)), now: t)
    }

    func answers(_ actions: [NodeAction]) -> [TrackerResponse] {
        actions.compactMap { if case .reply(let r, _) = $0 { return r } else { return nil } }
    }

    func isAnnounce(_ r: TrackerResponse) -> Bool { if case .announce = r { return true } else { return false } }
    func isError(_ r: TrackerResponse) -> Bool { if case .error = r { return true } else { return false } }

    /// The case found on real nodes, up to its turning point: n1's OK commits tx 1 and
    /// n2's comes after, so n2 is not a voter for tx 2; n1 votes ERROR on tx 2 (its disk
    /// is full). Nothing is answered yet: n2 may still vote OK.
    func secondTransactionWithItsOnlyVoterFailing() throws -> (n: TrackerNode, t: Instant, tx1: Transaction, tx2: Transaction) {
        var (n, t) = masterWithTwoFollowers()
        try #require(n.isServing)
        let tx1 = try announce(1, &n, at: &t)
        #expect(answers(vote(1, tx1, .ok, &n, at: t)).contains(where: isAnnounce))
        #expect(answers(vote(2, tx1, .ok, &n, at: t + Milliseconds(1))).isEmpty, "late, and harmless")
        t = t + Milliseconds(2)
        let tx2 = try announce(2, &n, at: &t)
        #expect(answers(vote(1, tx2, .storeFailed, &n, at: t)).isEmpty, "not given up while n2 may still vote OK")
        return (n, t, tx1, tx2)
    }

    /// n2's OK makes a majority with the master's own.
    @Test func anOKFromAFollowerOneVoteBehindCarriesTheTransaction() throws {
        var (n, t, _, tx2) = try secondTransactionWithItsOnlyVoterFailing()
        t = t + Milliseconds(1)
        let committed = answers(vote(2, tx2, .ok, &n, at: t))
        #expect(committed.count == 1 && committed.allSatisfy(isAnnounce))
        #expect(n.replica.lastCommitted == tx2.ref)
        #expect(n.paths[.candidateVoteCounted] == 1)
    }

    /// n2 stays silent: the transaction is given up once the vote timed out, and the
    /// peer gets an error.
    @Test func aSilentFollowerOneVoteBehindDelaysTheAbortOnly() throws {
        var (n, t, tx1, _) = try secondTransactionWithItsOnlyVoterFailing()
        var replies: [TrackerResponse] = []
        for _ in 0..<40 where replies.isEmpty {
            t = t + Milliseconds(50)
            replies = answers(n.step(.tick, now: t))
        }
        #expect(replies.count == 1 && replies.allSatisfy(isError))
        #expect(n.replica.lastCommitted == tx1.ref)
        #expect(n.isServing)
    }

    /// A follower one vote behind that is not in sync after all only stops being waited for.
    @Test func aNotInSyncAnswerFromAFollowerOneVoteBehindAbortsAtOnce() throws {
        let (node, t, _, tx2) = try secondTransactionWithItsOnlyVoterFailing()
        var n = node
        let aborted = answers(vote(2, tx2, .notInSync, &n, at: t + Milliseconds(1)))
        #expect(aborted.count == 1 && aborted.allSatisfy(isError))
        #expect(n.paths[.candidateVoteCounted] == 0)
    }
}
