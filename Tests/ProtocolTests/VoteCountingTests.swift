import NIOCore
import Testing
import TrackerLogic

/// How a master counts votes when a slave lags one vote behind: its OK for the last
/// transaction arrived after that one committed, so the master does not count on it for
/// the next. Found on real nodes: with the other slave's disk full (it votes ERROR),
/// a whole batch of announces was refused though the lagging slave voted OK.
@Suite("Vote counting") struct VoteCountingTests: MasterFixture {
    let t0 = Instant(milliseconds: 7_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0009), port: 6881)

    /// The case found on real nodes, up to its turning point: n1's OK commits tx 1 and
    /// n2's comes after, so n2 is not a voter for tx 2; n1 votes ERROR on tx 2 (its disk
    /// is full). Nothing is answered yet: n2 may still vote OK.
    func secondTransactionWithItsOnlyVoterFailing() throws -> (n: TrackerNode, t: Instant, tx1: Transaction, tx2: Transaction) {
        var (n, t) = masterWithTwoSlaves()
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
    @Test func anOKFromASlaveOneVoteBehindCarriesTheTransaction() throws {
        var (n, t, _, tx2) = try secondTransactionWithItsOnlyVoterFailing()
        t = t + Milliseconds(1)
        let committed = answers(vote(2, tx2, .ok, &n, at: t))
        #expect(committed.count == 1 && committed.allSatisfy(isAnnounce))
        #expect(n.replica.lastCommitted == tx2.ref)
        #expect(n.paths[.unconfirmedVoteCounted] == 1)
    }

    /// n2 stays silent: the transaction is given up once the vote timed out, and the
    /// peer gets an error.
    @Test func aSilentSlaveOneVoteBehindDelaysTheAbortOnly() throws {
        var (n, t, tx1, _) = try secondTransactionWithItsOnlyVoterFailing()
        var replies: [TrackerResponse] = []
        for _ in 0..<40 where replies.isEmpty {
            t = t + Milliseconds(50)
            replies = answers(n.stepEchoing(.tick, now: t))
        }
        #expect(replies.count == 1 && replies.allSatisfy(isError))
        #expect(n.replica.lastCommitted == tx1.ref)
        #expect(n.isServing)
    }

    /// A slave one vote behind that is not in sync after all only stops being waited for.
    @Test func aNotInSyncAnswerFromASlaveOneVoteBehindAbortsAtOnce() throws {
        let (node, t, _, tx2) = try secondTransactionWithItsOnlyVoterFailing()
        var n = node
        var aborted = answers(vote(2, tx2, .notInSync, &n, at: t + Milliseconds(1)))
        #expect(aborted.isEmpty, "the refusal waits for an echo after the ABORT (`KnownRefusals.swift`)")
        aborted = answers(n.stepEchoing(.tick, now: t + Milliseconds(2)))
        #expect(aborted.count == 1 && aborted.allSatisfy(isError))
        #expect(n.paths[.unconfirmedVoteCounted] == 0)
    }
    /// A slave the master took for a candidate when it prepared (its last keepalive came
    /// from a brief election of its own) votes OK: it holds `previous` and prepared this
    /// transaction, so it joins the voters and its OK carries the transaction at once. The
    /// sweep found a new master ignoring such OKs for 3 s (seed 97220440088170409).
    @Test func anOKFromASlaveNotCountedAtThePrepareCarriesTheTransaction() throws {
        var (n, t) = masterWithTwoSlaves()
        try #require(n.isServing)
        _ = n.stepEchoing(env(from: 2, epoch: n.epoch, .keepalive(Keepalive(role: .candidate, master: .unassigned, lastCommitted: .zero,
                                                                          inSync: true, address: ""))), now: t)
        let tx = try announce(1, &n, at: &t)
        let committed = answers(vote(2, tx, .ok, &n, at: t + Milliseconds(1)))
        #expect(committed.count == 1 && committed.allSatisfy(isAnnounce))
        #expect(n.replica.lastCommitted == tx.ref)
        #expect(n.paths[.uncountedVoteCounted] == 1)
        #expect(n.paths[.unconfirmedVoteCounted] == 0)
    }

    /// The same node's ERROR changes nothing: it was not waited for, and n1 may still vote OK.
    @Test func anErrorFromASlaveNotCountedAtThePrepareIsNotWaitedFor() throws {
        var (n, t) = masterWithTwoSlaves()
        _ = n.stepEchoing(env(from: 2, epoch: n.epoch, .keepalive(Keepalive(role: .candidate, master: .unassigned, lastCommitted: .zero,
                                                                          inSync: true, address: ""))), now: t)
        let tx = try announce(1, &n, at: &t)
        #expect(answers(vote(2, tx, .storeFailed, &n, at: t + Milliseconds(1))).isEmpty)
        let committed = answers(vote(1, tx, .ok, &n, at: t + Milliseconds(2)))
        #expect(committed.count == 1 && committed.allSatisfy(isAnnounce))
        #expect(n.paths[.uncountedVoteCounted] == 0)
    }
}
