/// Every cluster message travels in an envelope that says who sent it, which run of
/// that node (its incarnation, fresh at each start), the highest epoch the sender knows,
/// and for whom it is (nil: everyone, the broker topic).
public struct ClusterEnvelope: Hashable, Sendable {
    public var from: NodeID
    public var incarnation: UInt64
    public var epoch: Epoch
    public var to: NodeID?
    public var message: ClusterMessage

    public init(from: NodeID, incarnation: UInt64, epoch: Epoch, to: NodeID?, message: ClusterMessage) {
        self.from = from; self.incarnation = incarnation; self.epoch = epoch; self.to = to; self.message = message
    }
}

public enum ClusterMessage: Hashable, Sendable {
    /// Every interval: I am alive, in this role, following this master, with this state.
    case keepalive(Keepalive)
    /// Bully: "I am running for master"; every live higher id answers and runs itself.
    case election(lastCommitted: TxRef)
    /// Bully: "I am alive and higher than you; wait for a coordinator."
    case answer
    /// Bully: "I am master of `epoch`." Everyone who accepts replies `coordinatorAck`.
    case coordinator(lastCommitted: TxRef)
    /// A slave's state for a new master's recovery: what it committed, what it prepared.
    case coordinatorAck(lastCommitted: TxRef, prepared: Transaction?)
    /// 2PC phase one. `previous` is the master's last committed transaction: only a
    /// replica that holds exactly it may vote OK. A replica that prepared `previous` and
    /// missed its COMMIT commits it on seeing this (the digest proves it is the same).
    case prepare(Transaction, previous: TxRef, previousDigest: UInt64)
    /// 2PC vote: OK, or ERROR because the store failed or the voter is not in sync.
    case vote(txid: UInt64, digest: UInt64, verdict: Verdict)
    /// 2PC phase two: apply the prepared transaction with this digest.
    case commit(TxRef, digest: UInt64)
    case abort(TxRef, digest: UInt64)
    /// A node that starts, restarts or diverged asks the master for state.
    case hello(Hello)
    /// The master's answer to `--id auto`: this incarnation may use this id.
    case idAssigned(incarnation: UInt64, id: NodeID)
    /// "Send me committed transactions after this one."
    case catchUpRequest(after: TxRef)
    /// The transactions after `after` — the requester's last commit when it asked. A
    /// replica applies them only if that is still its last commit: a reply that arrives
    /// after the replica led an epoch of its own must not land on that other history.
    case catchUp(after: TxRef, [Transaction])
    case snapshot(Snapshot)
    case snapshotAck(TxRef)
    /// The master asks a diverged node to offer its repository for merging.
    case mergeRequest
    /// A diverged node's repository (one part of it), to be merged by the master.
    case mergeOffer(MergeOffer)
    /// The offer with this id is committed; the node may now drop its old state.
    case mergeDone(offerID: UInt64)
    /// Clean shutdown: forget me now rather than after two missed keepalives.
    case leaving
    /// An operator changed the catalogue on a slave's dashboard: the slave forwards the
    /// change to the master, which commits it like any other update.
    case submit(CatalogueChange)
}

/// A participant's answer to PREPARE.
public enum Verdict: UInt8, Hashable, Sendable {
    case ok = 0
    /// ERROR: the voter cannot persist (full disk, read-only or corrupt store).
    case storeFailed = 1
    /// ERROR: the voter does not hold the master's last transaction; it catches up first.
    case notInSync = 2
}

public struct Keepalive: Hashable, Sendable {
    public var role: Role
    /// The master this node follows (itself if master), or unassigned.
    public var master: NodeID
    public var lastCommitted: TxRef
    /// True when the node's repository equals the master's history (it may vote).
    public var inSync: Bool
    /// Where operators reach the node (its peer or dashboard address), for the trackers tab.
    public var address: String
    /// When the broker last carried one of the sender's own keepalives back to it
    /// (`BrokerLink.swift`): what the peer network tells of who reaches the broker.
    public var brokerEcho: BrokerEchoReport
    /// Whether the sender's own sends on the peer channel failed lately (`PeerSends.swift`);
    /// nil from a version that does not say. Encoded only after a broker echo report.
    public var peerSendsFailing: Bool?
    /// The sender's count of keepalives sent in this incarnation, this one included: the
    /// broker's echo of it tells the sender which of its keepalives came back, and so what
    /// it sent before that one surely reached the broker (`BrokerLink.swift`). An echo
    /// told apart by arrival time alone passed for a later keepalive's when it was slow.
    /// Only the sender reads it; nil from a version that does not say. Encoded only after
    /// `peerSendsFailing`.
    public var sequence: UInt64?

    public init(role: Role, master: NodeID, lastCommitted: TxRef, inSync: Bool, address: String = "",
                brokerEcho: BrokerEchoReport = .unknown, peerSendsFailing: Bool? = nil, sequence: UInt64? = nil) {
        self.role = role; self.master = master; self.lastCommitted = lastCommitted; self.inSync = inSync
        self.address = address
        self.brokerEcho = brokerEcho
        self.peerSendsFailing = brokerEcho == .unknown ? nil : peerSendsFailing
        self.sequence = self.peerSendsFailing == nil ? nil : sequence
    }
}

/// What a keepalive says of its sender's broker link.
public enum BrokerEchoReport: Hashable, Sendable {
    /// A keepalive of a version that does not say (encoded as nothing at all).
    case unknown
    /// The broker has not carried one of its keepalives back since the sender started.
    case never
    /// It last did this long before the keepalive was sent (at most `maxAge`).
    case age(Milliseconds)

    /// Longest age a keepalive carries; anything older reads as this.
    public static let maxAge = Milliseconds(Int64(UInt32.max - 1))
    static let neverCode = UInt32.max
}

public struct Hello: Hashable, Sendable {
    public var lastCommitted: TxRef
    /// The sender holds committed data (as opposed to an empty or wiped repository).
    public var hasState: Bool

    public init(lastCommitted: TxRef, hasState: Bool) { self.lastCommitted = lastCommitted; self.hasState = hasState }
}

public struct MergeOffer: Hashable, Sendable {
    public var offerID: UInt64
    public var part: UInt32
    public var parts: UInt32
    public var swarms: [SwarmMerge]
    /// The diverged node's registered torrents, access rules, client rules and users (in part 0): what a
    /// partitioned minority's operator committed is kept like its announces.
    public var torrents: [RegisteredTorrent]
    public var access: [AccessEntry]
    public var clients: [ClientRuleEntry]
    public var users: [User]

    public init(offerID: UInt64, part: UInt32, parts: UInt32, swarms: [SwarmMerge], torrents: [RegisteredTorrent] = [],
                access: [AccessEntry] = [], clients: [ClientRuleEntry] = [], users: [User] = []) {
        self.offerID = offerID; self.part = part; self.parts = parts; self.swarms = swarms; self.torrents = torrents
        self.access = access; self.clients = clients; self.users = users
    }
}

extension ClusterMessage {
    /// Most transactions one CATCHUP carries. A reply that carries fewer is all the sender
    /// had after the requester's last commit; a full one may be followed by more, which
    /// the requester asks for next.
    public static let catchUpLimit = 256

    /// Short name for traces and logs.
    public var name: String {
        switch self {
        case .keepalive: return "KEEPALIVE"
        case .election: return "ELECTION"
        case .answer: return "ANSWER"
        case .coordinator: return "COORDINATOR"
        case .coordinatorAck: return "COORDINATOR-ACK"
        case .prepare: return "PREPARE"
        case .vote: return "VOTE"
        case .commit: return "COMMIT"
        case .abort: return "ABORT"
        case .hello: return "HELLO"
        case .idAssigned: return "ID-ASSIGNED"
        case .catchUpRequest: return "CATCHUP-REQUEST"
        case .catchUp: return "CATCHUP"
        case .snapshot: return "SNAPSHOT"
        case .snapshotAck: return "SNAPSHOT-ACK"
        case .mergeRequest: return "MERGE-REQUEST"
        case .mergeOffer: return "MERGE-OFFER"
        case .mergeDone: return "MERGE-DONE"
        case .leaving: return "LEAVING"
        case .submit: return "SUBMIT"
        }
    }

    /// Messages only a master sends; from a lower epoch than ours they are ignored.
    /// (CATCHUP and SNAPSHOT also flow to a recovering master from a slave, so their
    /// handlers check the sender themselves.)
    public var isMasterMessage: Bool {
        switch self {
        case .coordinator, .prepare, .commit, .abort, .mergeRequest, .mergeDone, .idAssigned: return true
        default: return false
        }
    }
}
