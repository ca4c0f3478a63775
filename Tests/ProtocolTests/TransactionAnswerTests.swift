import NIOCore
import Testing
import TrackerLogic

/// How the announces of one transaction are answered: from the state the transaction
/// left, with each start or refresh counting its own peer. Found by a fresh simulator seed
/// (7970914232149413): a peer's start and its stop 1 ms later went into one transaction,
/// and the start was answered "0 seeders, 0 leechers".
@Suite("Answers from a transaction") struct TransactionAnswerTests {
    let cluster = VoteCountingTests()
    let hash = InfoHash(a: 1, b: 2, c: 3)

    func announce(_ tid: UInt32, _ event: AnnounceEvent, peerID: PeerID, left: Int64 = 100, at t: Instant) -> NodeEvent {
        .peer(BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: cluster.ids.issue(for: cluster.peer.ip, now: t), transactionID: tid, infoHash: hash, peerID: peerID,
            downloaded: 0, left: left, uploaded: 0, event: event, key: 1, numWant: 10, port: cluster.peer.port))), from: cluster.peer)
    }

    /// A serial order explains every answer: the other peer's start (1 leecher), the
    /// seeder's start (the other and itself), then its stop.
    @Test func aStartIsAnsweredWithItsPeerWhenItsStopRidesInTheSameTransaction() throws {
        var (n, t) = cluster.masterWithTwoSlaves()
        try #require(n.isServing)
        let me = PeerID(a: 4, b: 5, c: 6), other = PeerID(a: 7, b: 8, c: 9)
        _ = n.stepEchoing(announce(1, .started, peerID: me, left: 0, at: t), now: t)
        _ = n.stepEchoing(announce(2, .started, peerID: other, at: t), now: t)
        _ = n.stepEchoing(announce(3, .stopped, peerID: me, left: 0, at: t), now: t)
        t = t + Milliseconds(5)
        let prepared = n.stepEchoing(.tick, now: t).compactMap { action -> Transaction? in
            if case .broadcast(let e) = action, case .prepare(let tx, _, _) = e.message { return tx } else { return nil }
        }
        let tx = try #require(prepared.first)
        #expect(tx.updates.count == 3)
        let answers = cluster.answers(cluster.vote(1, tx, .ok, &n, at: t)).compactMap { r -> AnnounceResponse? in
            if case .announce(let a) = r { return a } else { return nil }
        }
        #expect(answers.map(\.transactionID) == [1, 2, 3])
        #expect(answers.map { [$0.seeders, $0.leechers] } == [[1, 1], [0, 1], [0, 1]])
        #expect(answers[0].peers.isEmpty == false, "the seeder is given the other peer")
    }
}
