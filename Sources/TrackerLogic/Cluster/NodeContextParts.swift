/// The parts of a `NodeContext`, each with what it guards. A role reaches a part through
/// the context (`ctx.repo.replica`, `ctx.liveness.membership`), so a reader sees at each
/// use which invariant a change must keep.

/// What this node holds and must not lose: the epoch it accepted, its replica, the
/// transaction it prepared, and the operator data it keeps through a clean stop.
///
/// Invariants (`check`): the replica's own (each transaction applied at most once); the
/// epoch never decreases (`NodeContext.adopt` is its only writer after start).
@usableFromInline struct NodeRepository: Sendable {
    /// The highest epoch this node has accepted: its own as master, its master's as slave.
    @usableFromInline var epoch: Epoch
    @usableFromInline var replica: Replica
    @usableFromInline var storeHealthy = true
    /// The transaction this node last PREPAREd and has not seen committed or aborted. It
    /// outlives role changes: a new master's recovery asks every node for it.
    var prepared: Transaction?
    /// Peer rows persisted since the store last got a `PeerImage`.
    var loggedPeerRows = 0
    /// Operator data this node kept through a clean stop whose entries its replica does
    /// not hold yet (nor anything newer in their place): offered back until it does
    /// (`KeptOperatorData.swift`).
    var kept: [KeptEntry] = []
    /// A diverged repository's offer, on disk until a master merged it (`SetAside.swift`).
    var setAside: SetAside?
    var keptOffers = 0
    var nextKeptOffer = Instant(milliseconds: .min)

    /// What this node holds, for a master to bring it up to date.
    var hello: Hello { Hello(lastCommitted: replica.lastCommitted, hasState: replica.lastCommitted.txid > 0) }

    /// The master gave up the transaction we prepared: it will not be committed.
    mutating func abortReceived(_ ref: TxRef, digest: UInt64) {
        if let p = prepared, p.ref == ref, p.digest == digest { prepared = nil }
    }

    /// Nil while the invariants hold.
    func check() -> String? {
        if let v = replica.check() { return "replica: \(v)" }
        if !epoch.isWellFormed { return "its epoch \(epoch) is out of range" }
        return nil
    }
}

/// Who this node hears and how it is heard: membership as the failure detector keeps it,
/// and the keepalives that prove our own links (`BrokerLink.swift`, `PeerSends.swift`).
///
/// Invariants (`check`): the broker never echoes a keepalive we did not send; the first
/// keepalive left no later than the last.
@usableFromInline struct Liveness: Sendable {
    @usableFromInline var membership = Membership()
    /// When the broker last carried one of our own keepalives back (`BrokerLink.swift`);
    /// nil until it first does.
    @usableFromInline var brokerEcho: Instant?
    /// When a send of ours on the peer channel last failed, as the host reported.
    var peerSendFailedAt: Instant?
    /// When the next keepalive is due (a role brings it forward to tell the cluster at once).
    var nextKeepalive: Instant
    /// When the first and the last one left.
    var firstKeepaliveSent: Instant?
    var lastKeepaliveSent = Instant(milliseconds: .min)
    /// How many keepalives left in this incarnation (each carries its number), and the
    /// highest number the broker carried back: everything we sent before that keepalive
    /// reached the broker (`BrokerLink.swift`).
    var keepalivesSent: UInt64 = 0
    var echoedKeepalive: UInt64 = 0

    /// Nil while the invariants hold.
    func check() -> String? {
        if echoedKeepalive > keepalivesSent {
            return "the broker echoed keepalive \(echoedKeepalive) but only \(keepalivesSent) left"
        }
        if let first = firstKeepaliveSent, first > lastKeepaliveSent {
            return "its first keepalive left at \(first), after its last at \(lastKeepaliveSent)"
        }
        return nil
    }
}

/// What the step under way tells its host: the actions, in order, and whether the
/// catalogue changed (`NodeAction.catalogueChanged` at the step's end). Emptied by
/// `TrackerNode.step` as it returns them.
struct Outbox: Sendable {
    var actions: [NodeAction] = []
    var catalogueChanged = false
}

/// What this node measures of itself and of its peers: branch counts and per-source
/// limits. Neither decides anything a replica holds.
@usableFromInline struct Meters: Sendable {
    /// Per-source limits on what peers may ask of a serving master (table allocated on
    /// first use, so only a master pays for it).
    var limiter: SourceRateLimiter
    /// How often this node took each protocol branch (the simulator's coverage table).
    @usableFromInline var paths = PathCounts()
}
