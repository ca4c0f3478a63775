import Testing
import TrackerLogic

/// What queues behind a transaction in flight goes into the next ones first in, first
/// out, at most `batchMaxUpdates` a transaction, and each announce is answered once its
/// own transaction commits (`UpdateQueue`).
@Suite("Transactions from the master's queue")
struct TransactionBatchTests: MasterFixture {
    let t0 = Instant(milliseconds: 7_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0009), port: 6881)

    func prepared(_ actions: [NodeAction]) -> [Transaction] {
        actions.compactMap { action -> Transaction? in
            if case .broadcast(let e) = action, case .prepare(let tx, _, _) = e.message { return tx } else { return nil }
        }
    }

    /// The peers of a transaction's announces, by the number `announceDatagram` gave them.
    func peers(_ tx: Transaction) -> [UInt32] {
        tx.updates.compactMap { if case .announce(let a) = $0 { return a.peerID.c } else { return nil } }
    }

    func answered(_ actions: [NodeAction]) -> [UInt32] {
        answers(actions).compactMap { if case .announce(let a) = $0 { return a.transactionID } else { return nil } }
    }

    @Test func announcesQueuedBehindATransactionGoIntoTheNextInArrivalOrderABatchEach() throws {
        var (n, t) = masterWithTwoSlaves(batchMaxUpdates: 4)
        try #require(n.isServing)
        var tx = try announce(1, &n, at: &t)
        #expect(peers(tx) == [1])
        // Ten more while the first is in flight: none leaves until it commits.
        for tid in UInt32(2)...11 { #expect(prepared(n.stepEchoing(announceDatagram(tid, at: t), now: t)).isEmpty) }
        var expected: [[UInt32]] = [[1], [2, 3, 4, 5], [6, 7, 8, 9], [10, 11]]
        while !expected.isEmpty {
            let answeredNow = expected.removeFirst()
            t = t + Milliseconds(1)
            let actions = vote(1, tx, .ok, &n, at: t)
            #expect(answered(actions) == answeredNow)
            let next = prepared(actions)
            if let following = expected.first {
                tx = try #require(next.first)
                #expect(next.count == 1)
                #expect(peers(tx) == following)
            } else {
                #expect(next.isEmpty)
            }
        }
    }
}
