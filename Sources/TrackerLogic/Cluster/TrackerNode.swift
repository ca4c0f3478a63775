import NIOCore

/// One tracker node of the cluster as a pure state machine: `step(event, now)` returns
/// the actions to perform. Composed of membership (keepalives), a bully election, the
/// master's two-phase commit and recovery, the slave side, and join/state transfer —
/// each in its own file as an extension. The same value runs in the runtime and in the
/// simulator.
public struct TrackerNode: Sendable {
    public internal(set) var id: NodeID
    public let incarnation: UInt64
    public let config: ClusterConfig
    public let handler: PeerRequestHandler
    /// Advertised in keepalives (the dashboard's trackers tab shows it).
    public let address: String

    /// The node's place in the cluster; each case carries only what that place needs, so
    /// "a slave with master state" or "a master running an election" cannot be written.
    var state: NodeState
    /// The highest epoch this node has accepted: its own as master, its master's as slave.
    public internal(set) var epoch: Epoch
    public internal(set) var replica: Replica
    public internal(set) var membership = Membership()
    public internal(set) var storeHealthy = true
    /// The transaction this node last PREPAREd and has not seen committed or aborted. It
    /// outlives role changes: a new master's recovery asks every node for it.
    var prepared: Transaction?
    /// What was wrong with the restored state and has been repaired (reported once by the host).
    public private(set) var restoreProblems: [String] = []

    var rng: SeededGenerator
    let startedAt: Instant
    var nextKeepalive: Instant
    /// A node of our id with another incarnation, and when it was first heard.
    var idConflict: (incarnation: UInt64, firstHeard: Instant)?
    var nextProbe: Instant?
    /// When this node expected its next step at the latest (`nextWake` after the last
    /// one): running much later means it was paused (see `discountPause`).
    var wakeDue: Instant?
    /// When the node last stepped, and when the current run of steps with no wait between
    /// them began.
    var lastStep: Instant?
    var runStart = Instant(milliseconds: .min)
    /// A master that kept its office through a pause keeps its socket's backlog until
    /// then (see `discountPause`); if it loses the office before, the backlog goes too.
    var pauseBacklogUntil: Instant?
    /// Per-source limits on what peers may ask of a serving master (table allocated on
    /// first use, so only a master pays for it).
    var limiter: SourceRateLimiter
    /// Requests received while not serving, for this node to answer if it comes to serve.
    var held: HeldRequests
    /// Held requests this node handled after it came to serve (for the dashboard).
    public var answeredHeld: UInt64 { paths[.heldRequestAnswered] }
    /// How often this node took each protocol branch (the simulator's coverage table).
    public internal(set) var paths = PathCounts()
    /// What the host was last told of the node's status (`NodeAction.standingChanged`).
    var reportedStanding: NodeStanding
    /// Whether the host was told to listen on the node's own topic (`NodeAction.subscribe`).
    var subscribed = false
    /// The catalogue changed in this step (`NodeAction.catalogueChanged` at its end).
    var catalogueChanged = false
    var out: [NodeAction] = []

    /// - Parameters:
    ///   - id: the configured id, or `.unassigned` for `--id auto`.
    ///   - restoring: what the node's disk held (nil for a fresh node).
    public init(id: NodeID, incarnation: UInt64, config: ClusterConfig, handler: PeerRequestHandler,
                seed: UInt64, now: Instant, restoring: DurableState? = nil, address: String = "") {
        self.id = id
        self.incarnation = incarnation
        self.config = config.sanitized
        self.handler = handler
        self.address = address
        var rng = SeededGenerator(seed: seed)
        self.limiter = handler.makeRateLimiter(key: SipHash24(k0: rng.next(), k1: rng.next()))
        self.rng = rng
        self.held = HeldRequests(capacity: self.config.heldRequests, window: self.config.heldRequestWindow,
                                 skew: self.config.receiveSkew, drain: self.config.backlogDrain)
        self.replica = Replica()
        self.startedAt = now
        var epoch = restoring?.epoch ?? .zero
        if !epoch.isWellFormed {
            restoreProblems.append("stored epoch \(epoch) is out of range; reset")
            epoch = .zero
        }
        if let s = restoring?.snapshot {
            if s.isWellFormed {
                replica.install(s)
                // The stored transactions name epochs too: if the epoch write was lost (a
                // failing disk), never claim one of those again.
                epoch = max(epoch, s.lastCommitted.epoch, s.history.runs.last?.epoch ?? .zero)
            } else {
                restoreProblems.append("stored repository names an impossible transaction \(s.lastCommitted); discarded (the master's state replaces it)")
                paths.count(.restoredStateDiscarded)
            }
        }
        self.epoch = epoch
        self.reportedStanding = NodeStanding(role: .starting, epoch: epoch, master: nil, serving: false)
        let startupUntil = now + self.config.startupListen
        self.state = .starting(until: startupUntil)
        self.nextKeepalive = startupUntil
        // Due from its first instant: a process stopped before its first step must still
        // find itself late when it wakes (see `discountPause`).
        self.wakeDue = nextWake(now: now)
    }

    // MARK: stepping

    public mutating func step(_ event: NodeEvent, now: Instant) -> [NodeAction] {
        if case .stopped = state { return [] }
        if let due = wakeDue { discountPause(due: due, now) }
        // A step more than a millisecond after the last one: the node waited, its
        // sockets were empty (see `HeldRequests`).
        if let last = lastStep, now - last <= Milliseconds(1) {} else { runStart = now }
        lastStep = now
        let wasServing = isServing
        switch event {
        case .tick: tick(now)
        case .cluster(let env): receive(env, now)
        case .beacon(let env): receiveBeacon(env, now)
        case .peer(let datagram, let from): receivePeer(datagram, from: from, now)
        case .storeResult(let ok, _): storeResult(ok: ok, now)
        case .epochStored(let e): epochStored(e, now)
        case .shutdown: leave(now)
        case .submit(let change): submit(change, now)
        }
        if wasServing != isServing {
            if isServing {
                answerHeld(now)
            } else {
                // What reached us while we served, we answered (or it is in the next
                // master's hands through its own held requests).
                held.evidence.servedUntil = now
                held.evidence.heard(committed: replica.lastCommitted, at: now, holding: replica.lastCommitted)
            }
        }
        if !subscribed, id.isAssigned {
            subscribed = true
            out.append(.subscribe(id))
        }
        if catalogueChanged {
            catalogueChanged = false
            out.append(.catalogueChanged(replica.store.catalogue))
        }
        let current = standing
        if current != reportedStanding {
            out.append(.standingChanged(StandingChange(previous: reportedStanding, current: current)))
            reportedStanding = current
        }
        wakeDue = nextWake(now: now)
        // Handed over whole: emptying it "keeping capacity" while the caller holds the
        // same buffer allocated a fresh one at every step, even a step with no action (a
        // slave holding a peer datagram, thousands a second).
        let actions = out
        out = []
        return actions
    }

    /// When the node next needs a `.tick`, at the latest: never more than a keepalive
    /// interval ahead in any role, starting included, so that a pause long enough for
    /// another master to have served always shows as lateness (`discountPause`).
    public func nextWake(now: Instant) -> Instant {
        var t = min(nextKeepalive, now + config.keepaliveInterval)
        // Deadlines already past were handled by the tick that passed them.
        func consider(_ x: Instant?) { if let x, x > now, x < t { t = x } }
        consider(membership.nextExpiry(after: now, downAfter: config.downAfter))
        consider(nextProbe)
        switch state {
        case .starting(let until): consider(until)
        case .slave(let f):
            consider(f.nextDeadline)
            if f.master != nil { consider(f.since + config.downAfter + Milliseconds(1)) }
        case .candidate(let phase): consider(phase.deadline)
        case .recovering(let r): consider(r.nextDeadline)
        case .master(let l): consider(l.nextDeadline)
        case .stopped, .modifying: break
        }
        return max(t, now + Milliseconds(1))
    }

    /// What the node is doing, as keepalives and the dashboard say it.
    public var role: Role {
        switch state {
        case .starting: return .starting
        case .slave: return .slave
        case .candidate: return .candidate
        case .recovering, .master: return .master
        case .stopped, .modifying: return .stopped
        }
    }

    /// Whom it follows (itself when master).
    public var master: NodeID? {
        switch state {
        case .recovering, .master: return id
        case .slave(let f): return f.master
        case .starting, .candidate, .stopped, .modifying: return nil
        }
    }

    /// Role, epoch, master and service in one look at the state: computed after every
    /// step, so it switches once and binds no master's payload (binding would copy it).
    public var standing: NodeStanding {
        switch state {
        case .starting: return NodeStanding(role: .starting, epoch: epoch, master: nil, serving: false)
        case .slave(let f): return NodeStanding(role: .slave, epoch: epoch, master: f.master, serving: false)
        case .candidate: return NodeStanding(role: .candidate, epoch: epoch, master: nil, serving: false)
        case .recovering: return NodeStanding(role: .master, epoch: epoch, master: id, serving: false)
        case .master: return NodeStanding(role: .master, epoch: epoch, master: id, serving: true)
        case .stopped, .modifying: return NodeStanding(role: .stopped, epoch: epoch, master: nil, serving: false)
        }
    }

    /// Holding the master's office: recovering or serving.
    var isMaster: Bool { role == .master }

    /// Serving peers: master, recovered, not in an election.
    public var isServing: Bool {
        if case .master = state { return true } else { return false }
    }

    /// The keepalive view of whether this node's repository is the master's.
    public var inSync: Bool {
        switch state {
        case .master: return true
        case .slave(let f): return f.masterLast == replica.lastCommitted
        case .starting, .candidate, .recovering, .stopped, .modifying: return false
        }
    }

    // MARK: role payloads, mutated in place

    /// The master's state, when master. Writes go to the payload in place (the enum holds
    /// a placeholder meanwhile, so the payload's arrays are not copied).
    var masterRole: MasterState? {
        get { if case .master(let l) = state { return l } else { return nil } }
        _modify {
            guard case .master(let current) = state else {
                var none: MasterState?
                yield &none
                return
            }
            state = .modifying
            var l: MasterState? = current
            yield &l
            state = l.map { .master($0) } ?? .stopped
        }
    }

    /// The slave's state, when slave.
    var slaveRole: SlaveState? {
        get { if case .slave(let f) = state { return f } else { return nil } }
        _modify {
            guard case .slave(let current) = state else {
                var none: SlaveState?
                yield &none
                return
            }
            state = .modifying
            var f: SlaveState? = current
            yield &f
            state = f.map { .slave($0) } ?? .stopped
        }
    }

    /// The recovering master's state, when recovering.
    var recovery: RecoveryState? {
        get { if case .recovering(let r) = state { return r } else { return nil } }
        _modify {
            guard case .recovering(let current) = state else {
                var none: RecoveryState?
                yield &none
                return
            }
            state = .modifying
            var r: RecoveryState? = current
            yield &r
            state = r.map { .recovering($0) } ?? .stopped
        }
    }

    /// The candidate's election, when candidate.
    var election: ElectionPhase? {
        if case .candidate(let phase) = state { return phase } else { return nil }
    }

    // MARK: helpers used by every part

    func envelope(_ message: ClusterMessage, to: NodeID? = nil) -> ClusterEnvelope {
        ClusterEnvelope(from: id, incarnation: incarnation, epoch: epoch, to: to, message: message)
    }

    mutating func broadcast(_ message: ClusterMessage) { out.append(.broadcast(envelope(message))) }

    mutating func send(_ message: ClusterMessage, to node: NodeID) { out.append(.send(envelope(message, to: node))) }

    /// Heard on either channel: who is alive, for failure detection and elections.
    func liveMembers(_ now: Instant) -> [Member] {
        membership.live(now: now, downAfter: config.downAfter).filter { $0.id != id && $0.role != .stopped }
    }

    /// Heard on the broker: who can take part in a transaction (voters, recovery).
    func brokerLiveMembers(_ now: Instant) -> [Member] {
        membership.live(now: now, downAfter: config.downAfter, onBroker: true).filter { $0.id != id && $0.role != .stopped }
    }

    mutating func adopt(epoch newEpoch: Epoch) {
        guard newEpoch > epoch, newEpoch.isWellFormed else { return }
        epoch = newEpoch
        out.append(.persistEpoch(newEpoch))
    }

    /// Applies the next transaction in order; anything else is refused (the simulator's
    /// checker would flag a gap — a node never traps on one).
    mutating func commitLocally(_ tx: Transaction) {
        guard replica.commit(tx) else { return }
        // While the store fails, writes are skipped; it is rewritten whole once it heals.
        if storeHealthy { out.append(.persist(CommitRows(tx, replica: replica))) }
        if !catalogueChanged { catalogueChanged = tx.updates.contains { if case .catalogue = $0 { true } else { false } } }
    }

    mutating func installLocally(_ snapshot: Snapshot, store: SwarmStore) {
        paths.count(.snapshotInstalled)
        replica.install(snapshot, store: store)
        out.append(.persistSnapshot(snapshot))
        catalogueChanged = true
    }

    /// Empties the replica and the store (a clean shutdown, a diverged state given up).
    mutating func wipeLocally() {
        replica.wipe()
        out.append(.wipeStore)
        catalogueChanged = true
    }

    // MARK: tick

    mutating func tick(_ now: Instant) {
        if case .starting(let until) = state {
            checkIDConflict(now)
            // A node that heard its own id from another process does not leave startup
            // before it knows whether that process is live (it then yields) or was a dead
            // run's last words: two processes of one id both past startup can both lead
            // one epoch, and nothing either sends tells them apart.
            guard case .starting = state, now >= until, idConflict == nil else { return }
            finishStartup(now)
        }
        if now >= nextKeepalive {
            // A node still without an id (`--id auto`) has nothing to announce yet.
            if id.isAssigned {
                let keepalive = envelope(.keepalive(Keepalive(role: role, master: master ?? .unassigned,
                                                              lastCommitted: replica.lastCommitted, inSync: inSync, address: address)))
                out.append(.broadcast(keepalive))
                out.append(.beacon(keepalive))
            }
            nextKeepalive = now + config.keepaliveInterval
        }
        membership.forget(before: now - config.downAfter * 30)
        checkIDConflict(now)
        if case .stopped = state { return }
        if let probeAt = nextProbe, now >= probeAt {
            nextProbe = now + config.keepaliveInterval
            out.append(.probeStore)
        }
        switch state {
        case .candidate: electionTick(now)
        case .recovering: recoveryTick(now)
        case .master: masterTick(now)
        case .slave: slaveTick(now)
        case .starting, .stopped, .modifying: break
        }
    }

    mutating func finishStartup(_ now: Instant) {
        state = .slave(SlaveState(master: nil, since: now))
        if !id.isAssigned {
            if let m = knownMaster(now) {
                follow(m, now)
                return
            }
            // No master to assign an id: take the next free one ourselves.
            guard let free = membership.nextFreeID(after: [id]) else {
                return stop(reason: .noFreeID)
            }
            id = free
        }
        if let m = knownMaster(now) {
            follow(m, now)
        } else {
            startElection(now)
        }
    }

    func knownMaster(_ now: Instant) -> NodeID? {
        let masters = liveMembers(now).filter { $0.role == .master && $0.master == $0.id }
        if epoch.master.isAssigned, epoch.master != id, masters.contains(where: { $0.id == epoch.master }) { return epoch.master }
        return masters.max { $0.id < $1.id }?.id
    }

    // MARK: receiving

    /// The peer network carries keepalives only; anything else there is not ours to act on.
    mutating func receiveBeacon(_ env: ClusterEnvelope, _ now: Instant) {
        guard case .keepalive = env.message else { return }
        receive(env, now, onBroker: false)
    }

    mutating func receive(_ env: ClusterEnvelope, _ now: Instant, onBroker: Bool = true) {
        if env.from == id && env.incarnation == incarnation { return }  // our own topic message
        if let to = env.to, to != id { return }
        // Nothing a message says may break what we hold: an impossible epoch is dropped.
        guard env.epoch.isWellFormed else { return }
        if env.from == id && id.isAssigned {
            // Another process with our id (or someone claiming to be us). What it sends
            // unprompted shows it is live: its keepalives, and as a master its PREPAREs,
            // COMMITs and ABORTs (the keepalives can all be lost while those get through,
            // and a starting node that waited for keepalives alone could lead the epoch
            // its twin leads). Answers and election messages are not counted: they follow
            // what others sent. The epoch any of them names is never claimed again here.
            // Nothing else is acted upon: a node never follows, votes for or answers
            // "itself".
            if role != .master { adopt(epoch: env.epoch) }
            switch env.message {
            case .keepalive, .prepare, .commit, .abort:
                noteIDConflict(env.incarnation, now)
                membership.heard(env, now: now, onBroker: onBroker)
                checkIDConflict(now)
            default: break
            }
            return
        }
        // A farewell from a run we never heard is a replay (or too late to matter): a node
        // that restarted would otherwise drop the live run of that node on its word.
        if case .leaving = env.message, membership[env.from]?.incarnation != env.incarnation { return }
        guard membership.heard(env, now: now, onBroker: onBroker, downAfter: config.downAfter) else { return }
        noteServingMaster(env, now)
        if !membership.restarted.isEmpty {
            // What a restarted node told us before (its state, its recovery answer) is void.
            for node in membership.restarted { recovery?.acks[node] = nil }
            membership.restarted.removeAll()
        }
        if env.epoch > epoch && env.epoch.master.isAssigned {
            higherEpochSeen(env.epoch, now)
        }
        if case .idAssigned = env.message { return handleIDAssigned(env, now) }
        if env.message.isMasterMessage {
            // Only the master of the epoch we follow may drive us; stale masters are ignored.
            guard env.epoch == epoch, env.from == epoch.master else { return }
        }
        if case .starting = state {
            // Listening only: learn, do not act (id assignment is handled above) — except
            // that a lower candidate is told a higher id is here, so nodes started
            // together do not crown the lowest and then hand over again.
            if case .election = env.message, env.from < id, id.isAssigned, storeHealthy { send(.answer, to: env.from) }
            return
        }
        switch env.message {
        case .keepalive(let k): keepaliveReceived(env, k, now)
        case .election: electionReceived(from: env.from, now)
        case .answer: answerReceived(now)
        case .coordinator: coordinatorReceived(env, now)
        case .coordinatorAck(let last, let prepared): coordinatorAckReceived(from: env.from, last: last, prepared: prepared, now)
        case .prepare(let tx, let previous, let previousDigest): prepareReceived(tx, previous: previous, previousDigest: previousDigest, now)
        case .vote(let txid, let digest, let verdict): voteReceived(from: env.from, txid: txid, digest: digest, verdict: verdict, now)
        case .commit(let ref, let digest): commitReceived(ref, digest: digest, now)
        case .abort(let ref, let digest): abortReceived(ref, digest: digest)
        case .hello(let h): helloReceived(env, h, now)
        case .idAssigned: break
        case .catchUpRequest(let after): catchUpRequested(by: env.from, after: after, now)
        case .catchUp(let after, let txs): catchUpReceived(txs, after: after, from: env.from, sentIn: env.epoch, now)
        case .snapshot(let s): snapshotReceived(s, from: env.from, sentIn: env.epoch, now)
        case .snapshotAck(let ref): membership.update(env.from) { $0.confirmed = ref; $0.lastCommitted = ref }
        case .mergeRequest: mergeRequested(now)
        case .mergeOffer(let offer): mergeOfferReceived(offer, from: env.from, now)
        case .mergeDone(let offerID): mergeDoneReceived(offerID, now)
        case .leaving: leavingReceived(from: env.from, now)
        case .submit(let change): catalogueChangeReceived(change, now)
        }
    }

    /// An operator's catalogue change on this node: the master commits it, a slave
    /// forwards it to its master; one the catalogue cannot take, or that no master would
    /// get (electing, starting), is refused at once.
    mutating func submit(_ change: CatalogueChange, _ now: Instant) {
        if let refusal = change.refusal(in: replica.store.catalogue) {
            return out.append(.submitRefused(change, reason: refusal))
        }
        switch state {
        case .master: return catalogueChangeReceived(change, now)
        case .slave(let f): if let master = f.master { return send(.submit(change), to: master) }
        case .starting, .candidate, .recovering, .stopped, .modifying: break
        }
        out.append(.submitRefused(change, reason: "no master to commit it (the cluster is electing); try again"))
    }

    mutating func higherEpochSeen(_ newEpoch: Epoch, _ now: Instant) {
        adopt(epoch: newEpoch)
        switch state {
        case .starting, .stopped, .modifying: return
        case .recovering, .master:
            paths.count(.masterSteppedDown)
            stepDown(now)
        case .slave, .candidate: break
        }
        if newEpoch.master != id {
            follow(newEpoch.master, now)
        } else {
            // "Our" epoch, yet we do not lead it: an earlier process with our id did (its
            // disk was not ours, or our epoch write was lost). That reign is over; having
            // adopted its number, run again so the next reign claims a higher one.
            startElection(now)
        }
    }

    mutating func leavingReceived(from node: NodeID, _ now: Instant) {
        membership.remove(node)
        if case .slave(let f) = state, f.master == node { startElection(now) }
    }

    // MARK: unique ids

    mutating func noteIDConflict(_ otherIncarnation: UInt64, _ now: Instant) {
        if let c = idConflict, c.incarnation == otherIncarnation { return }
        idConflict = (otherIncarnation, now)
    }

    /// A node of our id is live when its keepalives keep coming for a whole interval
    /// (a dead incarnation's last messages in flight do not count). While starting we
    /// yield; once running (two nodes that could not hear each other at start), the
    /// higher incarnation yields: the runtime draws incarnations from the start time, so
    /// that is the newer process.
    mutating func checkIDConflict(_ now: Instant) {
        guard let c = idConflict else { return }
        guard let m = membership[id], m.incarnation == c.incarnation, now - m.lastHeard <= config.downAfter else {
            if now - c.firstHeard > config.downAfter { idConflict = nil }
            return
        }
        guard m.lastHeard - c.firstHeard >= Milliseconds(config.keepaliveInterval.value * 9 / 10) else { return }
        if case .starting = state {
            stop(reason: .idInUse(id))
        } else if incarnation > c.incarnation {
            stop(reason: .idInUse(id))
        }
    }

    mutating func handleIDAssigned(_ env: ClusterEnvelope, _ now: Instant) {
        guard case .idAssigned(let inc, let assigned) = env.message, inc == incarnation, !id.isAssigned, assigned.isAssigned
        else { return }
        id = assigned
        if case .slave(let f) = state, let m = f.master { sendHello(to: m, now) }
    }

    mutating func stop(reason: ExitReason) {
        if case .idInUse = reason { paths.count(.duplicateIDRefused) }
        state = .stopped
        out.append(.exit(reason: reason))
    }

    // MARK: store results

    mutating func storeResult(ok: Bool, _ now: Instant) {
        if ok {
            if !storeHealthy {
                storeHealthy = true
                nextProbe = nil
                paths.count(.storeRewritten)
                // Writes were skipped while the store failed: rewrite it whole, epoch too.
                out.append(.persistSnapshot(replica.snapshot()))
                out.append(.persistEpoch(epoch))
            }
        } else {
            storeHealthy = false
            if nextProbe == nil { nextProbe = now + config.keepaliveInterval }
        }
    }

    // MARK: clean shutdown

    mutating func leave(_ now: Instant) {
        broadcast(.leaving)
        wipeLocally()
        stop(reason: .leftCluster)
    }

    // MARK: peers

    mutating func receivePeer(_ datagram: ByteBuffer, from source: PeerEndpoint, _ now: Instant) {
        guard isServing else {
            // Slaves, candidates and recovering masters stay silent, but keep the request
            // in case the master that should answer it is gone.
            held.hold(datagram, from: source, now: now, runStart: runStart)
            return
        }
        switch handler.decide(datagram, from: source, now: now, store: replica.store, limiter: &limiter) {
        case .reply(let response): out.append(.reply(response, to: source))
        case .commit(let pending): enqueue(.announce(pending.update), origin: .peer(pending), now)
        case .drop: break
        }
    }
}

extension TrackerNode {
    /// What a serving master says shows which held requests it was alive to answer.
    mutating func noteServingMaster(_ env: ClusterEnvelope, _ now: Instant) {
        guard env.from == env.epoch.master else { return }
        switch env.message {
        case .keepalive(let k) where k.role == .master && k.inSync:
            held.evidence.raise(alive: now)
            held.evidence.heard(committed: k.lastCommitted, at: now, holding: replica.lastCommitted)
        case .prepare(_, let previous, _):
            held.evidence.raise(alive: now)
            held.evidence.heard(committed: previous, at: now, holding: replica.lastCommitted)
        case .commit(let ref, _):
            held.evidence.raise(alive: now, decided: now)
            held.evidence.heard(committed: ref, at: now, holding: replica.lastCommitted)
        case .abort:
            held.evidence.raise(alive: now, decided: now)
        default: break
        }
    }

    /// Just came to serve: answer what arrived while nobody did, through the normal path.
    mutating func answerHeld(_ now: Instant) {
        for r in held.takeUnanswered(now: now) {
            paths.count(.heldRequestAnswered)
            receivePeer(r.datagram, from: r.source, now)
        }
    }
}

/// The node's place in the cluster with the state only that place has.
enum NodeState: Sendable {
    /// Listening until the instant before taking part: learns the master, epochs and
    /// whether its id is taken.
    case starting(until: Instant)
    /// Following a master (maybe still catching up).
    case slave(SlaveState)
    /// Running a bully election.
    case candidate(ElectionPhase)
    /// Leading its own epoch, not serving yet: recovering what a majority may have
    /// committed (`Recovery.swift`).
    case recovering(RecoveryState)
    /// Leading its own epoch and serving peers.
    case master(MasterState)
    /// Left cleanly or refused; does nothing more.
    case stopped
    /// Only while a payload is being changed in place (see `TrackerNode.masterRole`); never
    /// observable between steps.
    case modifying
}
