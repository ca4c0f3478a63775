import Testing
import TrackerLogic

/// The whole rule of a transaction's quorum, as a value: who votes, what they said, and
/// whether that wins, loses or waits, in both quorum modes.
@Suite("Vote tally") struct VoteTallyTests {
    let n1 = NodeID(1), n2 = NodeID(2), n3 = NodeID(3)

    func tally(_ quorum: QuorumMode, size: Int = 3, voters: [UInt32], unconfirmed: [UInt32] = [], unreachable: Int = 0) -> VoteTally {
        VoteTally(quorum: quorum, clusterSize: size, voters: voters.map { NodeID($0) }, unconfirmed: unconfirmed.map { NodeID($0) },
                  unreachable: unreachable)
    }

    /// Two voters, every combination of their votes (nil: not yet) and the master's own.
    /// Strict 3 and live with both voters need 2 OKs: the two modes agree here.
    @Test(arguments: [QuorumMode.strict, .live])
    func twoVotersEveryCombination(quorum: QuorumMode) {
        let cases: [(Bool?, Bool?, Bool, VoteTally.Outcome)] = [
            (nil, nil, true, .pending), (true, nil, true, .won), (false, nil, true, .pending), (false, false, true, .lost),
            (true, false, true, .won), (nil, nil, false, .pending), (true, nil, false, .pending), (true, true, false, .won),
            (true, false, false, .lost), (false, nil, false, .lost),
        ]
        for (v1, v2, own, expected) in cases {
            var t = tally(quorum, voters: [1, 2])
            if let v1 { let taken = t.record(n1, ok: v1); #expect(taken == .counted) }
            if let v2 { let taken = t.record(n2, ok: v2); #expect(taken == .counted) }
            #expect(t.outcome(ownVote: own) == expected, "\(quorum) votes \(String(describing: v1)) \(String(describing: v2)) own \(own)")
        }
    }

    /// Strict counts the configured size, not who is live: one voter of five cannot win.
    @Test func strictNeedsAMajorityOfTheConfiguredSize() {
        var taken: VoteTally.Taken
        var t = tally(.strict, size: 5, voters: [1])
        #expect(t.needed == 3)
        taken = t.record(n1, ok: true)
        #expect(taken == .counted)
        #expect(t.outcome(ownVote: true) == .lost)
        #expect(t.errors(ownVote: true) == 0, "lost for want of voters, not for an error")
    }

    /// Live: a node reaching the broker but not us counts as a voter that says no.
    @Test func liveCountsUnreachableNodesAsNo() {
        var taken: VoteTally.Taken
        var t = tally(.live, voters: [1, 2], unreachable: 1)
        #expect(t.needed == 3)
        taken = t.record(n1, ok: true)
        #expect(taken == .counted)
        #expect(t.outcome(ownVote: true) == .pending)
        taken = t.record(n2, ok: true)
        #expect(taken == .counted)
        #expect(t.outcome(ownVote: true) == .won)
    }

    /// An unconfirmed slave is waited for but not needed; its OK joins (and raises a live
    /// quorum), its refusal is waited for no more.
    @Test(arguments: [QuorumMode.strict, .live])
    func anUnconfirmedSlaveIsWaitedForAndJoinsWithItsOK(quorum: QuorumMode) {
        var taken: VoteTally.Taken
        var t = tally(quorum, voters: [1], unconfirmed: [2])
        taken = t.record(n1, ok: false)
        #expect(taken == .counted)
        #expect(t.outcome(ownVote: true) == .pending, "n2 may still vote OK")
        var joined = t
        taken = joined.record(n2, ok: true)
        #expect(taken == .joined(unconfirmed: true))
        #expect(joined.voters == [n1, n2] && joined.unconfirmed.isEmpty)
        #expect(joined.needed == 2)
        #expect(joined.outcome(ownVote: true) == .won)
        taken = t.record(n2, ok: false)
        #expect(taken == .noLongerAwaited)
        #expect(t.outcome(ownVote: true) == .lost)
        #expect(t.errors(ownVote: true) == 1)
    }

    /// An OK from a node the master did not count at the PREPARE (its view was stale)
    /// joins; a refusal from it changes nothing.
    @Test(arguments: [QuorumMode.strict, .live])
    func anOKFromOutsideJoins(quorum: QuorumMode) {
        var taken: VoteTally.Taken
        var t = tally(quorum, voters: [1])
        taken = t.record(n2, ok: false)
        #expect(taken == .ignored)
        #expect(t.voters == [n1] && t.votes.isEmpty)
        taken = t.record(n2, ok: true)
        #expect(taken == .joined(unconfirmed: false))
        #expect(t.voters == [n1, n2])
        #expect(t.outcome(ownVote: true) == .won)
        #expect(t.okVoters == [n2] && t.hasOK)
    }

    /// A voter that has not voted and is not in sync withdraws under a live quorum (the
    /// quorum shrinks with it); under a strict one, or once it voted, its answer is a no.
    @Test func aNotInSyncVoterWithdrawsOnlyUnderALiveQuorumAndBeforeVoting() {
        var taken: VoteTally.Taken
        var withdrew: Bool
        var live = tally(.live, voters: [1, 2])
        withdrew = live.withdraw(n2)
        #expect(withdrew)
        #expect(live.voters == [n1] && live.needed == 2)
        #expect(live.outcome(ownVote: true) == .pending)
        withdrew = live.withdraw(n3)
        #expect(!withdrew, "not a voter")
        var voted = tally(.live, voters: [1, 2])
        taken = voted.record(n2, ok: true)
        #expect(taken == .counted)
        withdrew = voted.withdraw(n2)
        #expect(!withdrew)
        var strict = tally(.strict, voters: [1, 2])
        withdrew = strict.withdraw(n2)
        #expect(!withdrew)
        #expect(strict.voters == [n1, n2])
    }

    /// The window closes. Strict: silent voters say no. Live: a silent voter still linked
    /// to the broker says no, the others are counted down and the quorum shrinks; the
    /// unconfirmed are waited for no more in both.
    @Test func closingTheWindow() {
        var taken: VoteTally.Taken
        var live = tally(.live, voters: [1, 2, 3], unconfirmed: [4])
        #expect(live.needed == 3)
        taken = live.record(n1, ok: true)
        #expect(taken == .counted)
        #expect(live.silent == [n2, n3])
        live.closeWindow(linked: [n2, NodeID(9)])
        #expect(live.voters == [n1, n2] && live.dropped == [n3] && live.unconfirmed.isEmpty)
        #expect(live.votes[n2] == false && live.needed == 2)
        #expect(live.outcome(ownVote: true) == .won)
        var strict = tally(.strict, voters: [1, 2], unconfirmed: [3])
        taken = strict.record(n1, ok: false)
        #expect(taken == .counted)
        strict.closeWindow(linked: [])
        #expect(strict.voters == [n1, n2] && strict.dropped.isEmpty && strict.votes[n2] == false)
        #expect(strict.outcome(ownVote: true) == .lost)
        #expect(strict.errors(ownVote: false) == 3)
    }

    /// A later vote of the same voter replaces its first; a lone live master needs only
    /// its own vote (the broker echo it may need first is `Master`'s rule).
    @Test func aLaterVoteReplacesAndALoneLiveMasterWinsAlone() {
        var taken: VoteTally.Taken
        var t = tally(.live, voters: [1, 2])
        taken = t.record(n1, ok: false)
        #expect(taken == .counted)
        taken = t.record(n1, ok: true)
        #expect(taken == .counted)
        #expect(t.okVoters == [n1])
        #expect(t.outcome(ownVote: true) == .won)
        let alone = tally(.live, voters: [])
        #expect(alone.needed == 1)
        #expect(alone.outcome(ownVote: true) == .won)
        #expect(alone.outcome(ownVote: false) == .lost)
        #expect(!alone.hasOK)
    }
}
