/// The protocol's branches a node can take, counted as it takes them.
///
/// Why: the rare branches (an abort, a vote from a node that is behind, a re-proposed
/// transaction, a refused snapshot) are where replicated systems hide their bugs, and a
/// randomized simulator can stop reaching one of them without anyone noticing. Each node
/// counts its own passages (a fixed array, no allocation per count); the simulator adds
/// them up over a sweep and fails when a listed branch was never reached, and an operator
/// reads the same counters on the node's status.
public enum ProtocolPath: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// A candidate's epoch reached the disk and it leads.
    case electionWon
    /// A candidate's epoch write did not complete in time: it runs again.
    case epochClaimLapsed
    /// A paused master found the others had declared it down and stepped down at once.
    case pausedMasterSteppedDown
    /// A master learned of a higher epoch and stepped down.
    case masterSteppedDown
    /// Recovery fetched committed transactions from a slave ahead of the new master.
    case recoveryFetched
    /// Strict quorum: recovery fetched another branch than its own, which a majority can
    /// vote on (`MajorityBranch.swift`).
    case recoveryChoseMajorityBranch
    /// Recovery proposed again a transaction some node had prepared (the old master may
    /// have committed it).
    case preparedReproposed
    /// A master with no commit of its own heard of a later commit than its recovery found,
    /// and recovered again (`MissedCommit.swift`).
    case recoveredAgain
    /// Recovery carried the new master's own diverged repository into a merge.
    case recoveryMergedOwnState
    /// The merge of the master's own diverged state committed: the store, which kept that
    /// state until then, took the replica.
    case divergedStateMerged
    /// A master left office before that merge committed and went back to the diverged
    /// state its store kept.
    case divergedStateRestored
    /// Strict quorum: recovery heard fewer than a majority of the configured cluster and
    /// serves nobody yet.
    case strictRecoveryHalted
    /// A transaction reached its quorum and was committed.
    case transactionCommitted
    /// A transaction missed its quorum and was aborted (the peers get a BEP 15 error).
    case transactionAborted
    /// A master committed a transaction and its next PREPARE, sent at once, carried the
    /// commit point: no COMMIT went alone.
    case commitCarriedByPrepare
    /// A PREPARE was sent again because votes were missing at the timeout.
    case prepareResent
    /// Voters silent past every retry were counted as down.
    case silentVotersDropped
    /// A slave voted that it is not in sync (its log does not end where the PREPARE
    /// continues).
    case voteNotInSync
    /// The master took a not-in-sync vote into account (fewer voters, new quorum).
    case notInSyncVoteCounted
    /// A slave voted ERROR because its store fails.
    case voteStoreFailed
    /// The master counted an OK from a slave it had not counted on as a voter (its
    /// previous OK came after that transaction committed).
    case unconfirmedVoteCounted
    /// A slave committed the transaction it prepared on seeing the next PREPARE: the
    /// commit point that PREPARE carried in place of a COMMIT, or a COMMIT it missed.
    case missedCommitApplied
    /// The master sent a node the tail of its log.
    case catchUpSent
    /// A slave applied a log tail.
    case catchUpApplied
    /// A catch-up answered another state than the receiver's: ignored, asked again.
    case staleCatchUpIgnored
    /// The master sent a node its whole repository.
    case snapshotSent
    /// A snapshot was installed.
    case snapshotInstalled
    /// A snapshot whose checksum or shape is wrong was refused.
    case snapshotRefused
    /// A snapshot older than a commit of its sender's reign we hold came again, ignored.
    case staleSnapshotIgnored
    /// The master asked a diverged node for its repository.
    case mergeRequested
    /// Refusals whose ABORT no echo showed reaching the broker within `downAfter` were
    /// dropped: the heir answers those requests (`KnownRefusals.swift`).
    case refusalLeftToHeir
    /// A diverged node set its repository aside for the merge and took the master's.
    case divergedStateSetAside
    /// A merge offer held swarms the master's repository already holds as merged: not committed.
    case mergeSwarmsAlreadyHeld
    /// A diverged node's repository was merged into the master's and the node dropped it.
    case mergeCompleted
    /// A node found its id used by another live node and stopped.
    case duplicateIDRefused
    /// The master gave a node started with `--id auto` an id.
    case idAssigned
    /// A store that failed accepts writes again and is rewritten whole.
    case storeRewritten
    /// A new master answered a request held while no master served.
    case heldRequestAnswered
    /// A slave that is not the heir let its host drop peer datagrams unread
    /// (`TrackerNode.needsPeers`).
    case peersLeftToHeir
    /// A restarted node found its stored state unusable and discarded it.
    case restoredStateDiscarded
    /// A master that kept its office through a pause heard another master before reading
    /// its socket's backlog, and dropped the backlog (that master may have answered it).
    case pausedMasterHeardAnother
    /// A recovering master ignored a COORDINATOR-ACK sent in another epoch than its own.
    case staleRecoveryAnswerIgnored
    /// The operator reloaded the node's configuration (SIGHUP); its live settings apply.
    case reconfigured
    /// A node offered back the operator data it kept through a clean stop.
    case keptDataOffered
    /// A frame from an older run of its sender than the run heard was refused: a
    /// straggler of a restarted node, a twin that yields, or the real node when a frame
    /// forged under its id and a higher incarnation came first.
    case olderRunRefused
    /// A candidate that heard an older run of its own id left the epoch to that run
    /// (`Candidate.claim`).
    case claimLeftToOlderRun
    /// A master cut off from the broker while another node reaches it left the office
    /// (`BrokerLink.swift`).
    case cutMasterSteppedDown
    /// A candidate cut off from the broker while another node reaches it claimed no epoch.
    case claimLeftToLinkedNode
    /// A live master did not count silent voters down: the broker had not carried its
    /// own keepalive back since its PREPARE, so its own link may be cut.
    case silentVotersAwaitedEcho
    /// A slave voted again on a transaction still undecided after the vote window.
    case undecidedVoteRepeated
    /// A master answered a vote for a transaction it had decided with that decision.
    case lateVoteAnswered
    /// A serving master proposed again what a late COORDINATOR-ACK reported prepared.
    case latePreparedReproposed
    /// A master whose peer sends failed, while another node's worked, left the office.
    case mutedMasterSteppedDown
    /// A live master counted a silent voter still linked to a broker as a no.
    case silentLinkedVoterCountedNo
    /// An OK from a node the master did not count as a voter at the PREPARE (a stale
    /// view: its last keepalive said candidate, or it was counted down) joined the voters.
    case uncountedVoteCounted
    /// A node that answered an ELECTION while starting ran when its startup ended,
    /// though it had heard of a master meanwhile (`TrackerNode.finishStartup`).
    case answeredWhileStartingRan
    /// A serving master decided an HTTP tracker request.
    case httpRequestServed
    /// A node that does not serve answered an HTTP tracker request with a refusal.
    case httpRefusedNotServing
    /// A master leaving office refused the HTTP announces it had taken and not answered.
    case httpRefusedLeavingOffice
    /// Private mode: a committed announce refused at its commit, its user disabled,
    /// removed or re-keyed by a commit since the master read it (its apply a no-op).
    case userRefusedAtCommit

    public var description: String {
        switch self {
        case .electionWon: return "election won"
        case .epochClaimLapsed: return "epoch claim lapsed"
        case .pausedMasterSteppedDown: return "paused master stepped down"
        case .masterSteppedDown: return "master stepped down"
        case .recoveryFetched: return "recovery fetched from a slave"
        case .recoveryChoseMajorityBranch: return "recovery fetched the branch a majority holds"
        case .preparedReproposed: return "prepared transaction re-proposed"
        case .recoveredAgain: return "recovered again for a missed commit"
        case .recoveryMergedOwnState: return "recovery merged own diverged state"
        case .divergedStateMerged: return "own diverged state merged, then stored"
        case .divergedStateRestored: return "own diverged state restored on leaving office"
        case .keptDataOffered: return "kept operator data offered back"
        case .strictRecoveryHalted: return "strict-mode recovery halted"
        case .transactionCommitted: return "transaction committed"
        case .transactionAborted: return "transaction aborted"
        case .commitCarriedByPrepare: return "commit carried by the next prepare"
        case .prepareResent: return "prepare resent"
        case .silentVotersDropped: return "silent voters dropped"
        case .voteNotInSync: return "vote not-in-sync sent"
        case .notInSyncVoteCounted: return "vote not-in-sync counted"
        case .voteStoreFailed: return "vote store-failed sent"
        case .unconfirmedVoteCounted: return "vote from a slave behind by one vote counted"
        case .uncountedVoteCounted: return "vote from a node not counted at the prepare counted"
        case .missedCommitApplied: return "prepared transaction committed by the next prepare"
        case .catchUpSent: return "log-tail catch-up sent"
        case .catchUpApplied: return "log-tail catch-up applied"
        case .staleCatchUpIgnored: return "stale catch-up ignored"
        case .snapshotSent: return "snapshot sent"
        case .snapshotInstalled: return "snapshot installed"
        case .snapshotRefused: return "snapshot refused (checksum)"
        case .staleSnapshotIgnored: return "stale snapshot ignored"
        case .mergeRequested: return "merge requested"
        case .refusalLeftToHeir: return "refusals left to the heir"
        case .divergedStateSetAside: return "diverged state set aside for its merge"
        case .mergeSwarmsAlreadyHeld: return "merge offer's swarms already held"
        case .mergeCompleted: return "merge of a diverged replica completed"
        case .duplicateIDRefused: return "duplicate id refused"
        case .idAssigned: return "id assigned"
        case .storeRewritten: return "store rewritten after failure"
        case .heldRequestAnswered: return "held request answered"
        case .peersLeftToHeir: return "peer datagrams left to the heir"
        case .restoredStateDiscarded: return "restored state discarded"
        case .pausedMasterHeardAnother: return "paused master heard another master"
        case .staleRecoveryAnswerIgnored: return "stale recovery answer ignored"
        case .reconfigured: return "configuration reloaded"
        case .olderRunRefused: return "frame of an older run refused"
        case .claimLeftToOlderRun: return "claim left to an older run of the own id"
        case .answeredWhileStartingRan: return "a node that answered an election while starting ran"
        case .cutMasterSteppedDown: return "master cut off from the broker stepped down"
        case .claimLeftToLinkedNode: return "claim left to a node that reaches the broker"
        case .silentVotersAwaitedEcho: return "silent voters kept until the broker echoed"
        case .undecidedVoteRepeated: return "vote repeated on an undecided transaction"
        case .lateVoteAnswered: return "late vote answered with the decision"
        case .latePreparedReproposed: return "late-reported prepared transaction proposed again"
        case .mutedMasterSteppedDown: return "master muted on the peer channel stepped down"
        case .silentLinkedVoterCountedNo: return "silent voter still linked to a broker counted as no"
        case .httpRequestServed: return "HTTP tracker request decided by the serving master"
        case .httpRefusedNotServing: return "HTTP tracker request refused by a node not serving"
        case .httpRefusedLeavingOffice: return "HTTP announces refused by a master leaving office"
        case .userRefusedAtCommit: return "announce refused at its commit: its user's key refused since"
        }
    }
}

extension ProtocolPath {
    /// The branches by which a master leaves its office: what the log names when a
    /// master's standing changes, so an operator reads why without debug logs.
    public static let leavingOffice: [ProtocolPath] = [.masterSteppedDown, .pausedMasterSteppedDown,
                                                       .cutMasterSteppedDown, .mutedMasterSteppedDown]
}

/// How often a node took each `ProtocolPath`.
public struct PathCounts: Sendable, Equatable {
    var counts = [UInt64](repeating: 0, count: ProtocolPath.allCases.count)

    public init() {}

    public subscript(_ path: ProtocolPath) -> UInt64 {
        get { counts[path.rawValue] }
        set { counts[path.rawValue] = newValue }
    }

    mutating func count(_ path: ProtocolPath) { counts[path.rawValue] &+= 1 }

    /// Which of `paths` were taken since `earlier` (the same node's counts then).
    public func taken(_ paths: [ProtocolPath], since earlier: PathCounts) -> [ProtocolPath] {
        paths.filter { self[$0] != earlier[$0] }
    }

    /// Adds another node's counts (a sweep's total).
    public mutating func add(_ other: PathCounts) {
        for i in counts.indices { counts[i] &+= other.counts[i] }
    }
}

/// What a master decided a commit on: the voters it asked, those whose OK it counted, and
/// whether it counted itself. The simulator's checker holds it against the votes that
/// were actually sent.
public struct CommitQuorum: Sendable, Hashable {
    public var ref: TxRef
    public var digest: UInt64
    public var voters: [NodeID]
    public var okVoters: [NodeID]
    public var ownVote: Bool
    /// Voters a live master counted down as dead after they stayed silent (the simulator
    /// checks none was live and reaching the broker).
    public var droppedVoters: [NodeID]

    public init(ref: TxRef, digest: UInt64, voters: [NodeID], okVoters: [NodeID], ownVote: Bool, droppedVoters: [NodeID] = []) {
        self.ref = ref; self.digest = digest; self.voters = voters; self.okVoters = okVoters; self.ownVote = ownVote
        self.droppedVoters = droppedVoters
    }
}
