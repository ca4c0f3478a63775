/// What a node holds whatever its role: who it is, the epoch it accepted, its replica and
/// membership, the transaction it prepared, its held requests and the actions of the step
/// under way. Every role (`Slave`, `Candidate`, `Recovery`, `Master`) sees the node only
/// through this value, and changes it only through `inout` during one step; what is a
/// role's own (a master's queue, a slave's master) lives in that role.
///
/// Invariant: `epoch` never decreases, and it names this node as master while a role of
/// this node leads (`TrackerNode.higherEpochSeen` steps down first).
///
/// The fields hosts read between steps are `@usableFromInline`, so `TrackerNode`'s public
/// getters inline into the host as plain field loads (a getter called across the module
/// copied the whole node, about a kilobyte and dozens of references, at every read).
@usableFromInline struct NodeContext: Sendable {
    @usableFromInline var id: NodeID
    @usableFromInline let incarnation: UInt64
    @usableFromInline let config: ClusterConfig
    @usableFromInline var handler: PeerRequestHandler
    /// Advertised in keepalives (the dashboard's trackers tab shows it).
    @usableFromInline let address: String

    /// The highest epoch this node has accepted: its own as master, its master's as slave.
    @usableFromInline var epoch: Epoch
    @usableFromInline var replica: Replica
    @usableFromInline var membership = Membership()
    /// When the broker last carried one of our own keepalives back (`BrokerLink.swift`);
    /// nil until it first does.
    @usableFromInline var brokerEcho: Instant?
    /// When a send of ours on the peer channel last failed, as the host reported.
    var peerSendFailedAt: Instant?
    @usableFromInline var storeHealthy = true
    /// The transaction this node last PREPAREd and has not seen committed or aborted. It
    /// outlives role changes: a new master's recovery asks every node for it.
    var prepared: Transaction?
    var rng: SeededGenerator
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
    /// Requests received while not serving, for this node to answer if it comes to serve.
    var held: HeldRequests
    /// Per-source limits on what peers may ask of a serving master (table allocated on
    /// first use, so only a master pays for it).
    var limiter: SourceRateLimiter
    /// How often this node took each protocol branch (the simulator's coverage table).
    @usableFromInline var paths = PathCounts()
    /// The catalogue changed in this step (`NodeAction.catalogueChanged` at its end).
    var catalogueChanged = false
    /// Peer rows persisted since the store last got a `PeerImage`.
    var loggedPeerRows = 0
    /// What the disk holds while the replica is not it: a recovering master's own diverged
    /// state, replaced in memory by the state it fetched. Written over before the merge
    /// that carries it back has committed, a crash of every node holding it loses what only
    /// it held (a registration one node committed alone in a partition). So it stays on disk until `Master` sees that merge committed; a master
    /// that leaves office first goes back to it (`returnToDurableState`), for the next
    /// master to merge.
    ///
    /// Invariant: while it is set, nothing is written to the store (commits apply in
    /// memory only), and this node leads.
    var durableDiverged: Replica?

    /// The replica the store holds (or must hold, once it heals).
    var durable: Replica { durableDiverged ?? replica }

    /// Operator data this node kept through a clean stop whose entries its replica does
    /// not hold yet (nor anything newer in their place): offered back until it does
    /// (`KeptOperatorData.swift`).
    var kept: [KeptEntry] = []
    /// A diverged repository's offer, on disk until a master merged it (`SetAside.swift`).
    var setAside: SetAside?
    var keptOffers = 0
    var nextKeptOffer = Instant(milliseconds: .min)

    /// `NodeEvent.reconfigure`: the live settings of `config` replace this node's, and
    /// its rate limits follow them (each source's tokens kept, capped at the new burst).
    mutating func reconfigure(_ config: TrackerConfig) {
        paths.count(.reconfigured)
        handler.reconfigure(config, limiter: &limiter)
    }
    /// The actions of the step under way.
    var out: [NodeAction] = []

    // MARK: sending

    func envelope(_ message: ClusterMessage, to: NodeID? = nil) -> ClusterEnvelope {
        ClusterEnvelope(from: id, incarnation: incarnation, epoch: epoch, to: to, message: message)
    }

    mutating func broadcast(_ message: ClusterMessage) { out.append(.broadcast(envelope(message))) }

    mutating func send(_ message: ClusterMessage, to node: NodeID) { out.append(.send(envelope(message, to: node))) }

    /// What this node holds, for a master to bring it up to date.
    var hello: Hello { Hello(lastCommitted: replica.lastCommitted, hasState: replica.lastCommitted.txid > 0) }

    /// A COORDINATOR is answered whatever the role: with what this node committed and
    /// what it prepared (the new master's recovery needs both).
    mutating func acknowledgeCoordinator(_ master: NodeID) {
        send(.coordinatorAck(lastCommitted: replica.lastCommitted, prepared: prepared), to: master)
    }

    /// Bully: a lower candidate is told a higher id is here (true when it was), unless
    /// this node could not lead: it cannot record an epoch, it is cut off from the broker
    /// while another node reaches it (`BrokerLink.swift`; not merely unproven yet, as at
    /// its start, before its first echo), or its peer sends fail while another's work
    /// (`PeerSends.swift`). Such a node claims nothing, and an ANSWER from it would keep
    /// the lower candidates waiting for a COORDINATOR that never comes.
    mutating func answerElection(from candidate: NodeID, _ now: Instant) -> Bool {
        guard candidate < id, storeHealthy, !(cutFromBroker(now) && !brokerLinkUnproven(now)), !mutedOnPeerChannel(now)
        else { return false }
        send(.answer, to: candidate)
        return true
    }

    /// An operator's change while no master is known (electing, starting, recovering).
    mutating func refuseForNoMaster(_ change: CatalogueChange) {
        out.append(.submitRefused(change, reason: "no master to commit it (the cluster is electing); try again"))
    }

    // MARK: the cluster as heard

    /// Heard on either channel: who is alive, for failure detection and elections.
    func liveMembers(_ now: Instant) -> [Member] {
        membership.live(now: now, downAfter: config.downAfter).filter { $0.id != id && $0.role != .stopped }
    }

    /// An older run of this node's id was heard within `downAfter`: another live process
    /// given the same id (`TrackerNode.receive` records its keepalives and master messages
    /// under our id; a dead run's frames, stamped before this one started, never get
    /// there). That run does not yield to us, and it claims epochs by the same rule:
    /// both could claim the same one and lead it at once.
    func olderRunOfOwnIDHeard(_ now: Instant) -> Bool {
        guard let m = membership[id], m.incarnation < incarnation else { return false }
        return now - m.lastHeard <= config.downAfter
    }

    /// Heard on the broker: who can take part in a transaction (voters, recovery).
    func brokerLiveMembers(_ now: Instant) -> [Member] {
        membership.live(now: now, downAfter: config.downAfter, onBroker: true).filter { $0.id != id && $0.role != .stopped }
    }

    /// What the holder of the master's office, recovering or serving, does with a keepalive
    /// or an ELECTION: a slave of ours confirms itself as a voter; a lower candidate is
    /// answered, and everyone is reminded who leads.
    mutating func officeHolderHeard(_ env: ClusterEnvelope, _ now: Instant) {
        switch env.message {
        case .keepalive(let k): slaveSaid(k, from: env.from)
        case .election: if answerElection(from: env.from, now) { broadcast(.coordinator(lastCommitted: replica.lastCommitted)) }
        default: break
        }
    }

    /// What a slave of ours says of itself confirms it as a voter (never backwards).
    mutating func slaveSaid(_ k: Keepalive, from node: NodeID) {
        guard k.role == .slave, k.master == id else { return }
        membership.update(node) { m in
            if !k.inSync { m.confirmed = .zero } else if m.confirmed.epoch != k.lastCommitted.epoch || m.confirmed.txid < k.lastCommitted.txid {
                m.confirmed = k.lastCommitted
            }
        }
    }

    func majority(of n: Int) -> Int { VoteTally.majority(of: n) }

    /// How often a master expires silent peers.
    var expiryPeriod: Milliseconds {
        Milliseconds(max(handler.config.effectivePeerTimeout.value / 10, 1000))
    }

    /// A reply to a peer; a taken held request it answers waits no more.
    mutating func reply(_ response: TrackerResponse, to peer: PeerEndpoint) {
        out.append(.reply(response, to: peer))
        held.settle(response.transactionID, from: peer)
    }

    /// A diverged branch's swarm as a master merges it: without what an expiry at `now`
    /// removes. Expiries drop stops with records; a record from before a dropped stop must
    /// not come back through a merge (`Swarm`).
    func unexpired(_ m: SwarmMerge, _ now: Instant) -> SwarmMerge {
        m.dropping(olderThan: now - handler.config.effectivePeerTimeout)
    }

    mutating func adopt(epoch newEpoch: Epoch) {
        guard newEpoch > epoch, newEpoch.isWellFormed else { return }
        epoch = newEpoch
        out.append(.persistEpoch(newEpoch))
    }

    // MARK: the replica

    /// Applies the next transaction in order; anything else is refused (the simulator's
    /// checker would flag a gap — a node never traps on one).
    mutating func commitLocally(_ tx: Transaction) {
        guard replica.commit(tx) else { return }
        // While the store fails, writes are skipped; it is rewritten whole once it heals.
        if storeHealthy && durableDiverged == nil {
            let rows = CommitRows(tx, replica: replica)
            out.append(.persist(rows))
            loggedPeerRows &+= rows.peerRows
            if PeerImage.isDue(loggedRows: loggedPeerRows, peerCount: replica.store.peerCount, minimumRows: config.peerImageMinimumRows) {
                out.append(.persistPeerImage(PeerImage(lastCommitted: replica.lastCommitted, store: replica.store)))
                loggedPeerRows = 0
            }
        }
        if !catalogueChanged { catalogueChanged = tx.updates.contains { if case .catalogue = $0 { true } else { false } } }
    }

    /// Applies a run of transactions that continues our log; the rest is ignored.
    mutating func applyContiguous(_ txs: [Transaction]) {
        let before = replica.lastCommitted
        for tx in txs where tx.txid == replica.lastCommitted.txid + 1 {
            commitLocally(tx)
        }
        if replica.lastCommitted != before { paths.count(.catchUpApplied) }
        if let p = prepared, p.txid <= replica.lastCommitted.txid { prepared = nil }
    }

    /// Replaces the replica with a fetched state. `keepingDiverged`: the replica is not a
    /// prefix of it and still holds what nobody else may (see `durableDiverged`), so the
    /// disk keeps it.
    mutating func installLocally(_ snapshot: Snapshot, store: SwarmStore, keepingDiverged: Bool = false) {
        paths.count(.snapshotInstalled)
        if keepingDiverged && durableDiverged == nil { durableDiverged = replica }
        replica.install(snapshot, store: store)
        if durableDiverged == nil { out.append(.persistSnapshot(snapshot)) }
        catalogueChanged = true
    }

    /// The merge carrying the diverged state back committed: the store takes the replica.
    mutating func persistMergedState() {
        guard durableDiverged != nil else { return }
        durableDiverged = nil
        paths.count(.divergedStateMerged)
        if storeHealthy { out.append(.persistSnapshot(replica.snapshot())) }
    }

    /// Leaving office before that merge committed: back to the state the disk holds. What
    /// this node committed since in memory is on the slaves that voted; its own diverged
    /// state is merged by the next master, as a slave's is. Installed like a snapshot (its
    /// log restarts), since the transactions it held are no news to anyone.
    mutating func returnToDurableState() {
        guard let diverged = durableDiverged else { return }
        durableDiverged = nil
        paths.count(.divergedStateRestored)
        replica.install(diverged.snapshot(), store: diverged.store)
        prepared = nil
        catalogueChanged = true
    }

    /// The invariants of what every role shares (nil: they hold): the replica's own
    /// (`Replica.check`, each transaction applied at most once), the diverged state's, and
    /// the held requests' bounds. `leads`: a role of this node holds the master's office.
    func check(leads: Bool) -> String? {
        if let v = replica.check() { return "replica: \(v)" }
        if let d = durableDiverged {
            guard leads else { return "it keeps a diverged state on disk but does not lead" }
            if let v = d.check() { return "diverged replica: \(v)" }
        }
        if held.count > held.capacity || held.taken.count > held.capacity {
            return "it holds \(held.count) requests and took \(held.taken.count), beyond \(held.capacity)"
        }
        if !held.taken.isEmpty && !leads { return "it took \(held.taken.count) held requests to answer but does not lead" }
        return nil
    }

    /// Empties the replica and the store (a clean shutdown, a diverged state given up).
    mutating func wipeLocally() {
        durableDiverged = nil
        replica.wipe()
        out.append(.wipeStore)
        catalogueChanged = true
    }

    /// The master gave up the transaction we prepared: it will not be committed.
    mutating func abortReceived(_ ref: TxRef, digest: UInt64) {
        if let p = prepared, p.ref == ref, p.digest == digest { prepared = nil }
    }

    // MARK: state transfer, whoever receives it

    /// Only a reply to our current state is applied: one asked for in an earlier epoch and
    /// delayed past an election would stack that epoch's transactions on another branch's.
    /// And only a reply sent in the epoch we follow: the same master's log in an earlier
    /// reign need not be this one's (CatchUpTests). Anything else is stale, and asking
    /// again sorts it out.
    mutating func isCurrent(catchUpAfter after: TxRef, sentIn sent: Epoch) -> Bool {
        guard after == replica.lastCommitted, sent == epoch else {
            paths.count(.staleCatchUpIgnored)
            return false
        }
        return true
    }

    /// The store a snapshot holds when it is intact; a corrupted or impossible one is
    /// refused (the receiver asks again later).
    mutating func intactStore(of snapshot: Snapshot) -> SwarmStore? {
        guard snapshot.isWellFormed, let store = snapshot.intactStore() else {
            paths.count(.snapshotRefused)
            return nil
        }
        return store
    }
}
