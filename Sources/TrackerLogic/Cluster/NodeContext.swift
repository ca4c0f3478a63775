/// What a node holds whatever its role, in parts by what each guards
/// (`NodeContextParts.swift`):
/// - `repo`: the epoch it accepted, its replica, the transaction it prepared, the
///   operator data it keeps;
/// - `liveness`: membership and the keepalives that prove its own links;
/// - `outbox`: the actions of the step under way;
/// - `meters`: branch counts and per-source limits;
///
/// and beside them who it is, its configuration, its held requests (`HeldRequests`) and
/// its random stream. Every role (`Slave`, `Candidate`, `Recovery`, `Master`) sees the
/// node only through this value, and changes it only through `inout` during one step;
/// what is a role's own (a master's queue, a slave's master, a leading role's diverged
/// state on disk) lives in that role.
///
/// Invariant: `repo.epoch` never decreases, and it names this node as master while a
/// role of this node leads (`TrackerNode.higherEpochSeen` steps down first).
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

    @usableFromInline var repo: NodeRepository
    @usableFromInline var liveness: Liveness
    var outbox = Outbox()
    @usableFromInline var meters: Meters

    var rng: SeededGenerator
    /// Requests received while not serving, for this node to answer if it comes to serve.
    var held: HeldRequests

    init(id: NodeID, incarnation: UInt64, config: ClusterConfig, handler: PeerRequestHandler, address: String,
         epoch: Epoch, replica: Replica, rng: SeededGenerator, nextKeepalive: Instant, held: HeldRequests,
         limiter: SourceRateLimiter, paths: PathCounts) {
        self.id = id
        self.incarnation = incarnation
        self.config = config
        self.handler = handler
        self.address = address
        self.repo = NodeRepository(epoch: epoch, replica: replica)
        self.liveness = Liveness(nextKeepalive: nextKeepalive)
        self.meters = Meters(limiter: limiter, paths: paths)
        self.rng = rng
        self.held = held
    }

    /// `NodeEvent.reconfigure`: the live settings of `config` replace this node's, and
    /// its rate limits follow them (each source's tokens kept, capped at the new burst).
    mutating func reconfigure(_ config: TrackerConfig) {
        meters.paths.count(.reconfigured)
        handler.reconfigure(config, limiter: &meters.limiter)
    }


    // MARK: sending

    func envelope(_ message: ClusterMessage, to: NodeID? = nil) -> ClusterEnvelope {
        ClusterEnvelope(from: id, incarnation: incarnation, epoch: repo.epoch, to: to, message: message)
    }

    mutating func broadcast(_ message: ClusterMessage) { outbox.actions.append(.broadcast(envelope(message))) }

    mutating func send(_ message: ClusterMessage, to node: NodeID) { outbox.actions.append(.send(envelope(message, to: node))) }

    /// A COORDINATOR is answered whatever the role: with what this node committed and
    /// what it prepared (the new master's recovery needs both).
    mutating func acknowledgeCoordinator(_ master: NodeID) {
        send(.coordinatorAck(lastCommitted: repo.replica.lastCommitted, prepared: repo.prepared), to: master)
    }

    /// Bully: a lower candidate is told a higher id is here (true when it was), unless
    /// this node could not lead: it cannot record an epoch, it is cut off from the broker
    /// while another node reaches it (`BrokerLink.swift`; not merely unproven yet, as at
    /// its start, before its first echo), or its peer sends fail while another's work
    /// (`PeerSends.swift`). Such a node claims nothing, and an ANSWER from it would keep
    /// the lower candidates waiting for a COORDINATOR that never comes.
    mutating func answerElection(from candidate: NodeID, _ now: Instant) -> Bool {
        guard candidate < id, repo.storeHealthy, !(cutFromBroker(now) && !brokerLinkUnproven(now)), !mutedOnPeerChannel(now)
        else { return false }
        send(.answer, to: candidate)
        return true
    }

    /// An operator's change while no master is known (electing, starting, recovering).
    mutating func refuseForNoMaster(_ change: CatalogueChange) {
        outbox.actions.append(.submitRefused(change, reason: "no master to commit it (the cluster is electing); try again"))
    }

    // MARK: the cluster as heard

    /// Heard on either channel: who is alive, for failure detection and elections.
    func liveMembers(_ now: Instant) -> [Member] {
        liveness.membership.live(now: now, downAfter: config.downAfter).filter { $0.id != id && $0.role != .stopped }
    }

    /// An older run of this node's id was heard within `downAfter`: another live process
    /// given the same id (`TrackerNode.receive` records its keepalives and master messages
    /// under our id; a dead run's frames, stamped before this one started, never get
    /// there). That run does not yield to us, and it claims epochs by the same rule:
    /// both could claim the same one and lead it at once.
    func olderRunOfOwnIDHeard(_ now: Instant) -> Bool {
        guard let m = liveness.membership[id], m.incarnation < incarnation else { return false }
        return now - m.lastHeard <= config.downAfter
    }

    /// Heard on the broker: who can take part in a transaction (voters, recovery).
    func brokerLiveMembers(_ now: Instant) -> [Member] {
        liveness.membership.live(now: now, downAfter: config.downAfter, onBroker: true).filter { $0.id != id && $0.role != .stopped }
    }

    /// What the holder of the master's office, recovering or serving, does with a keepalive
    /// or an ELECTION: a slave of ours confirms itself as a voter; a lower candidate is
    /// answered, and everyone is reminded who leads.
    mutating func officeHolderHeard(_ env: ClusterEnvelope, _ now: Instant) {
        switch env.message {
        case .keepalive(let k): slaveSaid(k, from: env.from)
        case .election: if answerElection(from: env.from, now) { broadcast(.coordinator(lastCommitted: repo.replica.lastCommitted)) }
        default: break
        }
    }

    /// What a slave of ours says of itself confirms it as a voter (never backwards).
    mutating func slaveSaid(_ k: Keepalive, from node: NodeID) {
        guard k.role == .slave, k.master == id else { return }
        liveness.membership.update(node) { m in
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
        outbox.actions.append(.reply(response, to: peer))
        held.settle(response.transactionID, from: peer)
    }

    /// The answer to an announce: to its HTTP exchange, or as a datagram to its source.
    mutating func answer(_ pending: PendingAnnounce, with response: TrackerResponse) {
        if let exchange = pending.exchange {
            outbox.actions.append(.answerHTTP(response, exchange: exchange))
        } else {
            reply(response, to: pending.replyTo)
        }
    }

    /// A diverged branch's swarm as a master merges it: without what an expiry at `now`
    /// removes. Expiries drop stops with records; a record from before a dropped stop must
    /// not come back through a merge (`Swarm`).
    func unexpired(_ m: SwarmMerge, _ now: Instant) -> SwarmMerge {
        m.dropping(olderThan: now - handler.config.effectivePeerTimeout)
    }

    mutating func adopt(epoch newEpoch: Epoch) {
        guard newEpoch > repo.epoch, newEpoch.isWellFormed else { return }
        repo.epoch = newEpoch
        outbox.actions.append(.persistEpoch(newEpoch))
    }

    // MARK: the replica

    /// Applies the next transaction in order; anything else is refused (the simulator's
    /// checker would flag a gap — a node never traps on one). `persisting` is false while
    /// the disk keeps a leading role's diverged state (`DivergedOnDisk`): commits then
    /// apply in memory only.
    mutating func commitLocally(_ tx: Transaction, persisting: Bool = true) {
        guard repo.replica.commit(tx) else { return }
        // While the store fails, writes are skipped; it is rewritten whole once it heals.
        if repo.storeHealthy && persisting {
            let rows = CommitRows(tx, replica: repo.replica)
            outbox.actions.append(.persist(rows))
            repo.loggedPeerRows &+= rows.peerRows
            if PeerImage.isDue(loggedRows: repo.loggedPeerRows, peerCount: repo.replica.store.peerCount, minimumRows: config.peerImageMinimumRows) {
                outbox.actions.append(.persistPeerImage(PeerImage(lastCommitted: repo.replica.lastCommitted, store: repo.replica.store)))
                repo.loggedPeerRows = 0
            }
        }
        if !outbox.catalogueChanged { outbox.catalogueChanged = tx.updates.contains { if case .catalogue = $0 { true } else { false } } }
    }

    /// Applies a run of transactions that continues our log; the rest is ignored.
    mutating func applyContiguous(_ txs: [Transaction], persisting: Bool = true) {
        let before = repo.replica.lastCommitted
        for tx in txs where tx.txid == repo.replica.lastCommitted.txid + 1 {
            commitLocally(tx, persisting: persisting)
        }
        if repo.replica.lastCommitted != before { meters.paths.count(.catchUpApplied) }
        if let p = repo.prepared, p.txid <= repo.replica.lastCommitted.txid { repo.prepared = nil }
    }

    /// Replaces the replica with a fetched state; written to the store unless the disk
    /// keeps a leading role's diverged state (`persisting` false, `DivergedOnDisk`).
    mutating func installLocally(_ snapshot: Snapshot, store: SwarmStore, persisting: Bool = true) {
        meters.paths.count(.snapshotInstalled)
        repo.replica.install(snapshot, store: store)
        if persisting { outbox.actions.append(.persistSnapshot(snapshot)) }
        outbox.catalogueChanged = true
    }

    /// The merge carrying a diverged state back committed: the store takes the replica.
    mutating func persistMergedState() {
        meters.paths.count(.divergedStateMerged)
        if repo.storeHealthy { outbox.actions.append(.persistSnapshot(repo.replica.snapshot())) }
    }

    /// Leaving office before that merge committed: back to the state the disk holds. What
    /// this node committed since in memory is on the slaves that voted; its own diverged
    /// state is merged by the next master, as a slave's is. Installed like a snapshot (its
    /// log restarts), since the transactions it held are no news to anyone.
    mutating func returnToDurableState(_ diverged: Replica) {
        meters.paths.count(.divergedStateRestored)
        repo.replica.install(diverged.snapshot(), store: diverged.store)
        repo.prepared = nil
        outbox.catalogueChanged = true
    }

    /// The invariants of what every role shares (nil: they hold): the replica's own
    /// (`Replica.check`, each transaction applied at most once), the diverged state's, and
    /// the held requests' bounds. `leads`: a role of this node holds the master's office;
    /// `diverged`: the state its disk keeps meanwhile (`DivergedOnDisk`).
    func check(leads: Bool, diverged: Replica?) -> String? {
        if let v = repo.check() { return v }
        if let v = liveness.check() { return "liveness: \(v)" }
        if let v = diverged?.check() { return "diverged replica: \(v)" }
        if held.count > held.capacity || held.taken.count > held.capacity {
            return "it holds \(held.count) requests and took \(held.taken.count), beyond \(held.capacity)"
        }
        if !held.taken.isEmpty && !leads { return "it took \(held.taken.count) held requests to answer but does not lead" }
        return nil
    }

    /// Empties the replica and the store (a clean shutdown, a diverged state given up).
    mutating func wipeLocally() {
        repo.replica.wipe()
        outbox.actions.append(.wipeStore)
        outbox.catalogueChanged = true
    }

    // MARK: state transfer, whoever receives it

    /// Only a reply to our current state is applied: one asked for in an earlier epoch and
    /// delayed past an election would stack that epoch's transactions on another branch's.
    /// And only a reply sent in the epoch we follow: the same master's log in an earlier
    /// reign need not be this one's (CatchUpTests). Anything else is stale, and asking
    /// again sorts it out.
    mutating func isCurrent(catchUpAfter after: TxRef, sentIn sent: Epoch) -> Bool {
        guard after == repo.replica.lastCommitted, sent == repo.epoch else {
            meters.paths.count(.staleCatchUpIgnored)
            return false
        }
        return true
    }

    /// The store a snapshot holds when it is intact; a corrupted or impossible one is
    /// refused (the receiver asks again later).
    mutating func intactStore(of snapshot: Snapshot) -> SwarmStore? {
        guard snapshot.isWellFormed, let store = snapshot.intactStore() else {
            meters.paths.count(.snapshotRefused)
            return nil
        }
        return store
    }
}
