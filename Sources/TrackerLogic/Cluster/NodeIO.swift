import NIOCore

/// Everything that can happen to a node. Time comes with each event.
///
/// Layout: a peer's datagram is most events of a serving node, and an event is as large
/// as its largest case. Every case larger than `.peer` is `indirect` (boxed, one
/// allocation for each such event, a broker message at most), so that a peer's event is
/// not carried, copied and matched as 161 bytes.
public enum NodeEvent: Sendable {
    /// Time passed; the node does whatever is due.
    case tick
    /// A cluster message arrived from the broker.
    indirect case cluster(ClusterEnvelope)
    /// A keepalive arrived on the peer network (the group every node has joined), sealed
    /// like a broker frame. It proves its sender alive when the broker cannot.
    indirect case beacon(ClusterEnvelope)
    /// A datagram arrived from a peer (every node of the group receives it).
    case peer(ByteBuffer, from: PeerEndpoint)
    /// An HTTP tracker request arrived on a connection to this node (the listener on the
    /// floating or shared address, so no other node has it). Answered by
    /// `NodeAction.answerHTTP` with the same exchange, once: at once, or once its
    /// announce's transaction is decided.
    indirect case http(HTTPTrackerRequest, from: PeerEndpoint, exchange: HTTPExchangeID)
    /// The answer to a `persist…`, `wipeStore` or `probeStore` action.
    case storeResult(ok: Bool, detail: String)
    /// A `persistEpoch` reached the disk. A candidate leads only once its new epoch is
    /// durable, so no later process with its id can claim the same epoch again.
    case epochStored(Epoch)
    /// Operator asked for a clean shutdown.
    case shutdown
    /// Operator registered or removed a torrent (the dashboard).
    indirect case submit(CatalogueChange)
    /// Operator reloaded the configuration (SIGHUP): the settings that change live
    /// (`TrackerConfig.takingLiveSettings`) apply from this step on. Each node answers
    /// as master with its own settings; what it commits is replicated whatever they are.
    indirect case reconfigure(TrackerConfig)
    /// A send on the peer channel (a reply, a keepalive there) failed: a firewall rule,
    /// a route gone (`PeerSends.swift`). The host reports it once per step at most.
    case peerSendFailed
    /// The broker link came up (the first connection, or a new one after a loss). A
    /// keepalive leaves at once, so its echo proves the link within a round trip rather
    /// than an interval later: the keepalive due while the link was down was lost, and
    /// waiting for the next one left a master that failed over to the other broker of a
    /// pair without an echo for `downAfter`, cut off by the rule of `BrokerLink.swift`.
    case brokerConnected
}

/// What a node asks its environment to do. The runtime and the simulator perform them.
///
/// Layout: replies are most of a serving master's actions (a transaction's answers
/// together), and an array of actions strides by its largest case. Every case larger
/// than `.reply` is `indirect` (boxed, one allocation for each such action, a broker
/// message or a store write at most), so that a step's replies are written, copied and
/// read as about 56 bytes each, not 168.
public enum NodeAction: Hashable, Sendable {
    /// To every other node (the broker topic).
    indirect case broadcast(ClusterEnvelope)
    /// To one node.
    indirect case send(ClusterEnvelope)
    /// A keepalive to every other node over the peer network as well: losing the broker
    /// must not look like losing the other nodes (nodes that still hear the master there
    /// do not elect another one).
    indirect case beacon(ClusterEnvelope)
    /// To a peer, from the node's unicast (or shared service) address.
    case reply(TrackerResponse, to: PeerEndpoint)
    /// The answer to an HTTP tracker request (`NodeEvent.http`), written on its connection.
    case answerHTTP(TrackerResponse, exchange: HTTPExchangeID)
    /// Write the rows of one committed transaction (one SQL transaction).
    indirect case persist(CommitRows)
    /// Replace the whole stored repository (after a snapshot or a store repair).
    indirect case persistSnapshot(Snapshot)
    /// Write the stored peers afresh from this image of the replica, taken right after
    /// the commit persisted last, and drop the logged rows that led there (`PeerImage`).
    /// A store that does not hold that commit ignores it.
    indirect case persistPeerImage(PeerImage)
    /// Record the highest epoch seen, so a restarted node never reuses one.
    case persistEpoch(Epoch)
    /// Empty the stored repository (clean shutdown; a merged-away diverged state).
    case wipeStore
    /// Keep these entries through the wipe that follows (a clean stop), in place of any
    /// kept before: the operator's data, offered back at the next start.
    case keepOperatorData([KeptEntry])
    /// The replica holds everything kept (or newer): the kept entries may go.
    case dropKeptOperatorData
    /// Keep this diverged repository's merge offer beside the repository, in place of any
    /// set aside before; none drops it (`SetAside.swift`). A wipe leaves it.
    case setAside([MergeOffer])
    /// Check whether the store accepts writes again.
    case probeStore
    /// Drop the peer datagrams queued in the node's socket now, unread: they arrived while
    /// the node was stopped and another master served them (see `Pause.swift`). Only the
    /// host can tell a queued datagram from a fresh one.
    case discardPeerBacklog
    /// Read peer datagrams (true) or let them go unread (false): the node neither serves
    /// nor is the heir that holds them for the next master (`TrackerNode.needsPeers`). The
    /// host may drop them before they reach the node (a socket filter that passes only
    /// the cluster's frames, which share a group's socket); dropping none is correct too,
    /// only dearer. A host reads them until told otherwise; said once per change.
    case readPeers(Bool)
    /// The node must stop: its id is taken, or it left.
    case exit(reason: ExitReason)
    /// Listen on this node's own topic as well as the cluster's: its id is known (at the
    /// first step, or once a master assigned one). Said once; an id never changes after.
    case subscribe(NodeID)
    /// The node's role, epoch, master or service changed in this step (the dashboard's
    /// timeline, the log). Said once per change, after the actions that made it.
    indirect case standingChanged(StandingChange)
    /// This master committed a transaction it prepared: the quorum it decided on (the
    /// simulator's checker holds it against the votes actually sent) and the time from
    /// its first PREPARE to the decision (the commit latency metric).
    indirect case committed(CommitQuorum, latency: Milliseconds)
    /// This master gave a transaction up (its peers got a BEP 15 error).
    case aborted(TxRef)
    /// The replica's catalogue of registered torrents changed in this step (a commit, a
    /// snapshot, a wipe): what it holds now, so an operator waiting for a change sees it.
    indirect case catalogueChanged(Catalogue)
    /// An operator's catalogue change (`NodeEvent.submit`) goes nowhere: the catalogue
    /// cannot take it, or no master is known to commit it.
    indirect case submitRefused(CatalogueChange, reason: String)
}

/// Where a node stands, as its host reports it.
public struct NodeStanding: Hashable, Sendable {
    public var role: Role
    public var epoch: Epoch
    /// Whom it follows (itself when master).
    public var master: NodeID?
    /// A master that recovered and answers peers.
    public var serving: Bool

    public init(role: Role, epoch: Epoch, master: NodeID?, serving: Bool) {
        self.role = role; self.epoch = epoch; self.master = master; self.serving = serving
    }
}

/// One change of `NodeStanding`.
public struct StandingChange: Hashable, Sendable {
    public var previous: NodeStanding
    public var current: NodeStanding

    public init(previous: NodeStanding, current: NodeStanding) { self.previous = previous; self.current = current }
}

/// Why a node stopped. Both hosts map it to the process's fate (exit status, the
/// simulator's verdict) from this one definition.
public enum ExitReason: Hashable, Sendable, CustomStringConvertible {
    /// Clean shutdown: it told the others and emptied its store.
    case leftCluster
    /// Another live node uses its id.
    case idInUse(NodeID)
    /// Started with `--id auto`, no master to assign one, and no free id left.
    case noFreeID

    /// Stopping was asked for; anything else is a failure the operator must act on.
    public var isClean: Bool { self == .leftCluster }
    public var exitCode: Int32 { isClean ? 0 : 2 }

    public var description: String {
        switch self {
        case .leftCluster: return "left the cluster"
        case .idInUse(let id): return "node id \(id) is already used by a live node; choose another id or --id auto"
        case .noFreeID: return "no free node id left to take; give one with --id"
        }
    }
}


/// What survives a crash: the stored repository and the highest epoch.
public struct DurableState: Sendable, Equatable {
    public var snapshot: Snapshot?
    public var epoch: Epoch
    /// What a clean stop kept of the operator's data (`NodeAction.keepOperatorData`).
    public var kept: [KeptEntry]
    /// A diverged repository's merge offer, set aside until merged (`NodeAction.setAside`).
    public var setAside: [MergeOffer]
    public init(snapshot: Snapshot?, epoch: Epoch, kept: [KeptEntry] = [], setAside: [MergeOffer] = []) {
        self.snapshot = snapshot; self.epoch = epoch; self.kept = kept; self.setAside = setAside
    }
}

/// Timing and quorum of the cluster protocol.
public struct ClusterConfig: Sendable, Hashable {
    public var keepaliveInterval = Milliseconds(1000)
    /// A node missing this many intervals is down (the spec: 2).
    public var missedKeepalives: Int64 = 2
    public var quorum: QuorumMode = .live
    /// Configured cluster size, for strict quorum.
    public var clusterSize = 1
    /// Group commit: at most this many updates per transaction…
    ///
    /// The cap binds only under a load that keeps more queued than it while a transaction
    /// is in flight; below it a transaction carries what arrived during the last round.
    /// There, each transaction's fixed cost (a PREPARE through the broker to every slave,
    /// their votes back, each node's wake for them) is spread over more announces
    /// (docs/benchmarks.md, "Design choices"). A PREPARE at the cap is one broker frame,
    /// and applying it holds a node's loop far less than a keepalive interval.
    public var batchMaxUpdates = 1024
    /// …and at most this long waiting for more.
    public var batchDelay = Milliseconds(2)
    /// How long a master waits for votes before asking again.
    public var voteTimeout = Milliseconds(250)
    /// Re-sends of a PREPARE before silent voters count as down.
    public var voteRetries = 2
    /// A node hands its store an image of its peers (`PeerImage`) once it has logged
    /// this many peer rows since the last one (and `PeerImage.logRatio` times its peers).
    public var peerImageMinimumRows = 65_536
    /// Peer requests a non-serving node holds for a new master to answer (see
    /// `HeldRequests`): at most this many…
    public var heldRequests = 4096
    /// …received at most this long ago when the master starts serving. BEP 15 clients
    /// wait 15 s before they retransmit; an answer later than that is wasted.
    public var heldRequestWindow = Milliseconds(15_000)
    /// A held request read up to this long after a serving master's message may have
    /// arrived before it (a slower peer path: the spread of the network's delays), so
    /// that message counts as its answer (see `HeldRequests`). The heir leaves peer
    /// datagrams unread for as long after each decision it hears (`TrackerNode.peersUnneeded`).
    public var receiveSkew = Milliseconds(10)
    /// The same, within one run of steps with no wait between them: a socket backlog read
    /// after a pause too short to notice.
    public var backlogDrain = Milliseconds(50)

    public init() {}

    public var downAfter: Milliseconds { keepaliveInterval * missedKeepalives }
    /// Running this much later than expected means the process was paused (`Pause.swift`).
    public var pauseThreshold: Milliseconds { Milliseconds(keepaliveInterval.value / 2) }
    /// A starting node listens this long before it takes part.
    public var startupListen: Milliseconds { downAfter + Milliseconds(keepaliveInterval.value / 4) }
    /// A candidate waits this long for an ANSWER from a higher id.
    public var answerTimeout: Milliseconds { keepaliveInterval }
    /// After an ANSWER, how long to wait for a COORDINATOR before running again.
    public var coordinatorTimeout: Milliseconds { keepaliveInterval * 3 }
    /// How long a new master waits for slaves' state before it recovers with what it has.
    public var recoveryTimeout: Milliseconds { downAfter }

    /// The same settings with every value clamped into its usable range, so a node built
    /// from a bad configuration misbehaves visibly rather than trapping or spinning.
    public var sanitized: ClusterConfig {
        var c = self
        c.keepaliveInterval = Milliseconds(min(max(keepaliveInterval.value, 10), 3_600_000))
        c.missedKeepalives = min(max(missedKeepalives, 1), 1000)
        c.clusterSize = min(max(clusterSize, 1), 1 << 16)
        c.batchMaxUpdates = min(max(batchMaxUpdates, 1), 1 << 16)
        c.batchDelay = Milliseconds(min(max(batchDelay.value, 0), 60_000))
        c.voteTimeout = Milliseconds(min(max(voteTimeout.value, 1), 60_000))
        c.voteRetries = min(max(voteRetries, 0), 100)
        c.peerImageMinimumRows = min(max(peerImageMinimumRows, 1), 1 << 40)
        c.heldRequests = min(max(heldRequests, 0), 1 << 20)
        c.heldRequestWindow = Milliseconds(min(max(heldRequestWindow.value, 0), 600_000))
        c.receiveSkew = Milliseconds(min(max(receiveSkew.value, 0), 60_000))
        c.backlogDrain = Milliseconds(min(max(backlogDrain.value, 0), 60_000))
        return c
    }

    public var problems: [String] {
        var out: [String] = []
        if keepaliveInterval.value < 10 { out.append("keepalive interval must be at least 10 ms") }
        if missedKeepalives < 1 { out.append("missed keepalives must be at least 1") }
        if clusterSize < 1 { out.append("cluster size must be at least 1") }
        if batchMaxUpdates < 1 { out.append("batch size must be at least 1") }
        if voteTimeout.value < 1 { out.append("vote timeout must be positive") }
        if heldRequests < 0 || heldRequests > 1 << 20 { out.append("--held-requests must be between 0 and 1048576") }
        if heldRequestWindow.value < 0 || heldRequestWindow.value > 600_000 { out.append("--held-window must be at most 600 s") }
        if receiveSkew.value < 0 || receiveSkew.value > 60_000 { out.append("--receive-skew must be at most 60 s") }
        return out
    }
}
