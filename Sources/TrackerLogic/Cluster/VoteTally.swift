/// The votes on one transaction in flight, and the rule that decides it: won, lost or
/// still pending. `Master` keeps one per transaction and asks it after every vote and
/// every closed vote window; it decides nothing else about quorums.
///
/// Who counts:
/// - the voters: live slaves confirmed at the transaction's `previous` when it was
///   prepared. A voter that has not voted yet is pending.
/// - the unconfirmed: live slaves not confirmed at `previous` then (typically one whose
///   OK for the transaction before came after that one committed). One is not needed to
///   win, but the transaction is not given up while it may still vote OK.
/// - anyone else whose OK arrives: a slave votes OK only holding `previous` and having
///   prepared this very transaction, so an OK from an unconfirmed node, or from one the
///   master's view left out (its last keepalive came from an election of its own, or it
///   was counted down), joins the voters.
///
/// The quorum, counting the master's own vote (OK while its store is healthy):
/// - `strict`: a majority of the configured cluster size, whatever happens.
/// - `live`: a majority of the master and its voters. At the PREPARE, nodes that reach
///   the broker but not the master through it count as voters that will say no
///   (`BrokerLink.unreachableOnBroker`). Every later change of the voters (one joins,
///   one withdraws as not in sync, silent ones are counted down) counts it again as a
///   majority of the master and the voters left.
///
/// Invariants: only voters have votes; a node is never both a voter and unconfirmed;
/// `needed` is at least 1.
package struct VoteTally: Sendable, Equatable {
    package enum Outcome: Sendable, Equatable {
        /// Enough OKs: commit (a live master alone may first need its broker echo).
        case won
        /// Not enough OKs even if every pending node says OK: abort.
        case lost
        case pending
    }

    /// What a vote did to the tally.
    package enum Taken: Sendable, Equatable {
        /// A voter's vote, recorded (a later one from the same voter replaces it).
        case counted
        /// An OK from outside the voters: its node joined them (`unconfirmed`: it was an
        /// unconfirmed node).
        case joined(unconfirmed: Bool)
        /// An unconfirmed node refused: it is no longer waited for.
        case noLongerAwaited
        /// A refusal from a node nobody waited for: nothing changes.
        case ignored
    }

    package let quorum: QuorumMode
    package private(set) var voters: [NodeID]
    package private(set) var unconfirmed: [NodeID]
    package private(set) var votes: [NodeID: Bool] = [:]
    /// OKs (the master's own included) that win.
    package private(set) var needed: Int
    /// Silent voters counted down as dead (live quorum), for the commit's record.
    package private(set) var dropped: [NodeID] = []

    package static func majority(of n: Int) -> Int { n / 2 + 1 }

    package init(quorum: QuorumMode, clusterSize: Int, voters: [NodeID], unconfirmed: [NodeID], unreachable: Int) {
        self.quorum = quorum
        self.voters = voters
        self.unconfirmed = unconfirmed.filter { !voters.contains($0) }
        needed = quorum == .strict ? Self.majority(of: clusterSize) : Self.majority(of: voters.count + 1 + max(unreachable, 0))
    }

    /// A majority of the master and the voters (live quorum).
    private mutating func recount() {
        if quorum == .live { needed = Self.majority(of: voters.count + 1) }
    }

    /// Takes `node`'s vote (`ok`: it voted OK).
    package mutating func record(_ node: NodeID, ok: Bool) -> Taken {
        let wasUnconfirmed = unconfirmed.firstIndex(of: node).map { unconfirmed.remove(at: $0); return true } ?? false
        if !wasUnconfirmed, voters.contains(node) {
            votes[node] = ok
            return .counted
        }
        guard ok else { return wasUnconfirmed ? .noLongerAwaited : .ignored }
        voters.append(node)
        votes[node] = true
        recount()
        return .joined(unconfirmed: wasUnconfirmed)
    }

    /// A voter that has not voted yet says it is not in sync (live quorum): it is a voter
    /// no more, and the quorum is counted without it. False (nothing changes) otherwise:
    /// its answer is then a refusal like any other.
    package mutating func withdraw(_ node: NodeID) -> Bool {
        guard quorum == .live, votes[node] == nil, let i = voters.firstIndex(of: node) else { return false }
        voters.remove(at: i)
        recount()
        return true
    }

    /// The voters that have not voted.
    package var silent: [NodeID] { voters.filter { votes[$0] == nil } }

    /// The last vote window closed: the unconfirmed are waited for no more. `strict`: every
    /// silent voter says no. `live`: a silent voter still `linked` (live and reaching the
    /// broker: dead or cut from us, nobody can tell yet) says no; the others are counted
    /// down, and the quorum is counted without them.
    package mutating func closeWindow(linked: Set<NodeID>) {
        let silent = self.silent
        unconfirmed = []
        switch quorum {
        case .strict:
            for node in silent { votes[node] = false }
        case .live:
            dropped += silent.filter { !linked.contains($0) }
            voters = voters.filter { votes[$0] != nil || linked.contains($0) }
            for node in silent where linked.contains(node) { votes[node] = false }
            recount()
        }
    }

    /// The voters that said OK, in id order.
    package var okVoters: [NodeID] { votes.filter(\.value).keys.sorted() }

    /// Whether any voter said OK (else a live master would commit on its own vote alone).
    package var hasOK: Bool { votes.values.contains(true) }

    /// The master's own vote counts OK when `ownVote` (its store is healthy).
    package func outcome(ownVote: Bool) -> Outcome {
        let ok = votes.values.filter { $0 }.count + (ownVote ? 1 : 0)
        let pending = voters.count - votes.count + unconfirmed.count
        if ok >= needed { return .won }
        return ok + pending < needed ? .lost : .pending
    }

    /// The refusals, the master's own included (a lost transaction with any is a store
    /// failure somewhere, else a lack of quorum).
    package func errors(ownVote: Bool) -> Int {
        votes.values.filter { !$0 }.count + (ownVote ? 0 : 1)
    }
}
