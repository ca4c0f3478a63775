import NIOCore

/// One tracker node of the cluster as a pure state machine: `step(event, now)` returns
/// the actions to perform. The same value runs in the runtime and in the simulator.
///
/// The node is a gate over its role. `step` makes only the checks every role shares
/// (the envelope, the epoch, membership, a pause, its own id), then hands the event to
/// the role it holds — `Slave`, `Candidate`, `Recovery` (a master not serving yet) or
/// `Master` — which sees the node through a `NodeContext`, changes itself in place and
/// may ask for another role (`RoleChange`). Role changes are made here and only here.
public struct TrackerNode: Sendable {
    /// What every role shares.
    @usableFromInline var ctx: NodeContext
    /// The node's place in the cluster; each case carries only what that place needs, so
    /// "a slave with master state" or "a master running an election" cannot be written.
    var state: NodeState
    /// What was wrong with the restored state and has been repaired (reported once by the host).
    public private(set) var restoreProblems: [String] = []

    let startedAt: Instant
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
    /// What the host was last told of the node's status (`NodeAction.standingChanged`).
    @usableFromInline var reportedStanding: NodeStanding
    /// Whether the host was told to listen on the node's own topic (`NodeAction.subscribe`).
    var subscribed = false
    /// When this node, starting, last answered a lower candidate's ELECTION: it runs when
    /// its startup ends (`finishStartup`).
    var answeredWhileStarting: Instant?
    /// What the host was last told about reading peer datagrams (`NodeAction.readPeers`):
    /// a host reads them until told otherwise.
    var reportedReadsPeers = true

    @inlinable public var id: NodeID { ctx.id }
    @inlinable public var incarnation: UInt64 { ctx.incarnation }
    @inlinable public var config: ClusterConfig { ctx.config }
    @inlinable public var handler: PeerRequestHandler { ctx.handler }
    /// Advertised in keepalives (the dashboard's trackers tab shows it).
    @inlinable public var address: String { ctx.address }
    /// The highest epoch this node has accepted: its own as master, its master's as slave.
    @inlinable public var epoch: Epoch { ctx.repo.epoch }
    @inlinable public var replica: Replica { _read { yield ctx.repo.replica } }
    @inlinable public var membership: Membership { _read { yield ctx.liveness.membership } }
    @inlinable public var storeHealthy: Bool { ctx.repo.storeHealthy }
    /// When the broker last carried one of this node's keepalives back (`BrokerLink.swift`).
    @inlinable public var brokerEcho: Instant? { ctx.liveness.brokerEcho }
    /// How often this node took each protocol branch (the simulator's coverage table).
    @inlinable public var paths: PathCounts { _read { yield ctx.meters.paths } }
    /// Held requests this node handled after it came to serve (for the dashboard).
    public var answeredHeld: UInt64 { ctx.meters.paths[.heldRequestAnswered] }
    /// A transaction this node has not seen decided: one it prepared as a voter, or, as
    /// master, one out for votes. A settled cluster has none (the simulator's liveness
    /// phase waits for that).
    public var undecidedTransaction: TxRef? {
        if let p = ctx.repo.prepared { return p.ref }
        if case .master(let m) = state, let f = m.inFlight { return f.tx.ref }
        return nil
    }
    /// Whether a diverged repository of this node waits for its merge (`SetAside.swift`):
    /// a cluster is not settled while one does.
    public var holdsSetAsideOffer: Bool { ctx.repo.setAside != nil }
    /// Held requests this master took on coming to serve and has not answered yet.
    public var heldAwaitingAnswer: Int { ctx.held.taken.count }
    /// Whether this node holds a request of `source` with `transactionID` for the next
    /// master it becomes (`HeldRequests`).
    public func holdsRequest(from source: PeerEndpoint, transactionID: UInt32) -> Bool {
        ctx.held.holds(source: source, transactionID: transactionID)
    }
    /// Refusals this master holds back until the broker shows their ABORT went out
    /// (`KnownRefusals.swift`).
    public var refusalsAwaitingEcho: Int {
        if case .master(let m) = state { return m.refusals.count }
        return 0
    }

    /// - Parameters:
    ///   - id: the configured id, or `.unassigned` for `--id auto`.
    ///   - restoring: what the node's disk held (nil for a fresh node).
    public init(id: NodeID, incarnation: UInt64, config: ClusterConfig, handler: PeerRequestHandler,
                seed: UInt64, now: Instant, restoring: DurableState? = nil, address: String = "") {
        let config = config.sanitized
        var rng = SeededGenerator(seed: seed)
        let limiter = handler.makeRateLimiter(key: SipHash24(k0: rng.next(), k1: rng.next()))
        let held = HeldRequests(capacity: config.heldRequests, window: config.heldRequestWindow,
                                skew: config.receiveSkew, drain: config.backlogDrain)
        var replica = Replica()
        var paths = PathCounts()
        var problems: [String] = []
        var epoch = restoring?.epoch ?? .zero
        if !epoch.isWellFormed {
            problems.append("stored epoch \(epoch) is out of range; reset")
            epoch = .zero
        }
        if let s = restoring?.snapshot {
            if s.isWellFormed {
                replica.install(s)
                // The stored transactions name epochs too: if the epoch write was lost (a
                // failing disk), never claim one of those again.
                epoch = max(epoch, s.lastCommitted.epoch, s.history.runs.last?.epoch ?? .zero)
            } else {
                problems.append("stored repository names an impossible transaction \(s.lastCommitted); discarded (the master's state replaces it)")
                paths.count(.restoredStateDiscarded)
            }
        }
        // Kept operator data names the epochs that changed it: every later change, a new
        // epoch's, must be newer than all of it.
        let kept = restoring?.kept.filter(\.ref.isWellFormed) ?? []
        epoch = max(epoch, kept.map(\.ref.epoch).max() ?? .zero)
        let startupUntil = now + config.startupListen
        self.ctx = NodeContext(id: id, incarnation: incarnation, config: config, handler: handler, address: address,
                               epoch: epoch, replica: replica, rng: rng, nextKeepalive: startupUntil, held: held,
                               limiter: limiter, paths: paths)
        ctx.repo.kept = kept
        let setAside = SetAside.restored(restoring?.setAside ?? [])
        if !setAside.isEmpty { ctx.repo.setAside = SetAside(parts: setAside, resendAt: now) }
        self.restoreProblems = problems
        self.startedAt = now
        self.reportedStanding = NodeStanding(role: .starting, epoch: epoch, master: nil, serving: false)
        self.state = .starting(until: startupUntil)
        // Due from its first instant: a process stopped before its first step must still
        // find itself late when it wakes (see `discountPause`).
        self.wakeDue = nextWake(now: now)
    }

    // MARK: stepping

    public mutating func step(_ event: NodeEvent, now: Instant) -> [NodeAction] {
        if case .stopped = state { return [] }
        if case .peer(let datagram, let from) = event, holdsWithoutStepping(now) {
            noteStep(now)
            ctx.held.hold(datagram, from: from, now: now, runStart: runStart)
            return []
        }
        if let due = wakeDue { discountPause(due: due, now) }
        noteStep(now)
        let wasServing = serving
        switch event {
        case .tick: tick(now)
        case .cluster(let env): receive(env, now)
        case .beacon(let env): receiveBeacon(env, now)
        case .peer(let datagram, let from): receivePeer(datagram, from: from, now)
        case .http(let request, let from, let exchange): receiveHTTP(request, from: from, exchange: exchange, now)
        case .storeResult(let ok, _): storeResult(ok: ok, now)
        case .epochStored(let e): dispatch(.epochStored(e), now)
        case .shutdown: leave(now)
        case .submit(let change): submit(change, now)
        case .reconfigure(let config): ctx.reconfigure(config)
        case .peerSendFailed: ctx.liveness.peerSendFailedAt = now
        case .brokerConnected: brokerConnected(now)
        }
        if wasServing != serving {
            if serving {
                answerHeld(now)
            } else {
                // What reached us while we served, we answered (or it is in the next
                // master's hands through its own held requests); what we hold from now
                // on, we did not, whenever in this millisecond it is read.
                ctx.held.stoppedServing(at: now, holding: ctx.repo.replica.lastCommitted)
            }
        }
        if !subscribed, ctx.id.isAssigned {
            subscribed = true
            ctx.outbox.actions.append(.subscribe(ctx.id))
        }
        if ctx.outbox.catalogueChanged {
            ctx.outbox.catalogueChanged = false
            ctx.outbox.actions.append(.catalogueChanged(ctx.repo.replica.store.catalogue))
        }
        let current = liveStanding
        if current != reportedStanding {
            ctx.outbox.actions.append(.standingChanged(StandingChange(previous: reportedStanding, current: current)))
            reportedStanding = current
        }
        let readsPeers = needsPeers(now)
        if readsPeers != reportedReadsPeers {
            if !readsPeers { ctx.meters.paths.count(.peersLeftToHeir) }
            ctx.outbox.actions.append(.readPeers(readsPeers))
            reportedReadsPeers = readsPeers
        }
        wakeDue = nextWake(now: now)
        // Handed over whole: emptying it "keeping capacity" while the caller holds the
        // same buffer allocated a fresh one at every step, even a step with no action (a
        // slave holding a peer datagram, thousands a second).
        let actions = ctx.outbox.actions
        ctx.outbox.actions = []
        return actions
    }

    /// A step more than a millisecond after the last one: the node waited, its sockets
    /// were empty (see `HeldRequests`).
    private mutating func noteStep(_ now: Instant) {
        if let last = lastStep, now - last <= Milliseconds(1) {} else { runStart = now }
        lastStep = now
    }

    /// Whether a peer's datagram arriving `now` only needs holding: the node does not
    /// serve, nothing it waits for is due (so no pause to discount), and no step left
    /// anything for the next. Holding touches nothing that the rest of a step reads
    /// (role, subscription, catalogue, standing) nor anything `nextWake` reads, and
    /// `nextWake` gives the same instant again while that instant is ahead. Followers
    /// behind a multicast group take every peer's datagram this way.
    private func holdsWithoutStepping(_ now: Instant) -> Bool {
        guard !serving, subscribed || !ctx.id.isAssigned, !ctx.outbox.catalogueChanged, ctx.outbox.actions.isEmpty,
              let due = wakeDue else { return false }
        return now < due
    }

    /// When the node next needs a `.tick`, at the latest: never more than a keepalive
    /// interval ahead in any role, starting included, so that a pause long enough for
    /// another master to have served always shows as lateness (`discountPause`).
    public func nextWake(now: Instant) -> Instant {
        var t = min(ctx.liveness.nextKeepalive, now + ctx.config.keepaliveInterval)
        // Deadlines already past were handled by the tick that passed them.
        func consider(_ x: Instant?) { if let x, x > now, x < t { t = x } }
        consider(ctx.liveness.membership.nextExpiry(after: now, downAfter: ctx.config.downAfter))
        consider(nextProbe)
        switch state {
        case .starting(let until): consider(until)
        case .slave(let s):
            consider(s.nextDeadline)
            if s.master != nil { consider(ctx.repo.setAside?.resendAt) }
            if s.master != nil { consider(s.since + ctx.config.downAfter + Milliseconds(1)) }
            // The heir's window without peer datagrams closes: read them from then on.
            if !reportedReadsPeers { consider(peersUnneeded(now)) }
        case .candidate(let c): consider(c.deadline)
        case .recovering(let r): consider(r.nextDeadline)
        case .master(let m): consider(m.nextDeadline)
        case .stopped, .modifying: break
        }
        return max(t, now + Milliseconds(1))
    }

    // Between steps, a host reads where the node stands from what the last step told it
    // (`reportedStanding`, a stored field: these getters inline into the host as field
    // loads). Within a step the node reads its live state (`liveRole`, `serving`, …).

    /// Role, epoch, master and service, as of the end of the last step.
    @inlinable public var standing: NodeStanding { reportedStanding }
    /// What the node is doing, as keepalives and the dashboard say it.
    @inlinable public var role: Role { reportedStanding.role }
    /// Whom it follows (itself when master).
    @inlinable public var master: NodeID? { reportedStanding.master }
    /// Serving peers: master, recovered, not in an election.
    @inlinable public var isServing: Bool { reportedStanding.serving }

    /// Role, epoch, master and service in one look at the live state: computed after
    /// every step, so it switches once and binds no master's payload (binding would copy it).
    var liveStanding: NodeStanding {
        let epoch = ctx.repo.epoch
        switch state {
        case .starting: return NodeStanding(role: .starting, epoch: epoch, master: nil, serving: false)
        case .slave(let s): return NodeStanding(role: .slave, epoch: epoch, master: s.master, serving: false)
        case .candidate: return NodeStanding(role: .candidate, epoch: epoch, master: nil, serving: false)
        case .recovering: return NodeStanding(role: .master, epoch: epoch, master: ctx.id, serving: false)
        case .master: return NodeStanding(role: .master, epoch: epoch, master: ctx.id, serving: true)
        case .stopped, .modifying: return NodeStanding(role: .stopped, epoch: epoch, master: nil, serving: false)
        }
    }

    var liveRole: Role {
        switch state {
        case .starting: return .starting
        case .slave: return .slave
        case .candidate: return .candidate
        case .recovering, .master: return .master
        case .stopped, .modifying: return .stopped
        }
    }

    var liveMaster: NodeID? {
        switch state {
        case .recovering, .master: return ctx.id
        case .slave(let s): return s.master
        case .starting, .candidate, .stopped, .modifying: return nil
        }
    }

    /// The node's invariants between steps (nil: they hold), for the simulator to check
    /// after every step: a broken one fails the seed where it broke, not where it shows.
    package func check() -> String? {
        if case .stopped = state { return nil }
        return ctx.check(leads: isMaster, diverged: divergedOnDisk)
    }

    /// The state a leading role keeps on disk while its replica is not it (`DivergedOnDisk`).
    var divergedOnDisk: Replica? {
        switch state {
        case .recovering(let r): r.divergedOnDisk.state
        case .master(let m): m.divergedOnDisk.state
        default: nil
        }
    }

    /// Whether this node needs the peers' datagrams now (`NodeAction.readPeers`).
    func needsPeers(_ now: Instant) -> Bool {
        peersUnneeded(now).map { now >= $0 } ?? true
    }

    /// Until when this node may leave peer datagrams unread (nil: it must read them).
    ///
    /// Bully elects the highest live id, so when the master fails the node that succeeds
    /// it is the highest live id but the master's; only that node, the heir, must hold
    /// what arrives meanwhile (`HeldRequests`). Any other slave neither serves nor is
    /// needed to hold: its host may drop peer datagrams before they are read, for as long
    /// as it stays so (`Instant.max`). Behind a group each follower read every request
    /// only to hold it, the largest cost of a follower that was not replication.
    ///
    /// The heir itself needs only what a new master would answer: a request it reads
    /// within `skew` of the last decision it heard a serving master make counts as
    /// answered (`HeldRequests.takeUnanswered`), so until then it may leave them unread
    /// too. Under load a PREPARE carries each commit point a few milliseconds after the
    /// last, and the heir reads almost nothing; a master that falls silent is the heir's
    /// cue to read, `skew` later, long before anyone counts it down.
    ///
    /// The price: a request that arrives as the heir's window closes, before its host
    /// took the filter off (a late timer), is dropped where it would have been held; a
    /// master that fails together with its heir (or before this node heard the heir is
    /// gone, up to `downAfter` later) leaves held requests to no one. Their clients
    /// retransmit. A node that stands for election, starts, recovers or serves reads
    /// everything, and so does a slave with no master.
    func peersUnneeded(_ now: Instant) -> Instant? {
        guard case .slave(let s) = state, let master = s.master else { return nil }
        let me = ctx.id, downAfter = ctx.config.downAfter
        let belowHeir = ctx.liveness.membership.members.values.contains { m in
            m.id > me && m.id != master && m.role != .stopped && now - m.lastHeard <= downAfter && ctx.couldLead(m, now)
        }
        return ctx.held.peersUnneeded(isHeir: !belowHeir)
    }

    /// Holding the master's office: recovering or serving.
    var isMaster: Bool { liveRole == .master }

    /// Serving peers now.
    var serving: Bool {
        if case .master = state { return true } else { return false }
    }

    /// The keepalive view of whether this node's repository is the master's.
    public var inSync: Bool {
        switch state {
        case .master: return true
        case .slave(let s): return s.inSync(ctx)
        case .starting, .candidate, .recovering, .stopped, .modifying: return false
        }
    }

    // MARK: the role, in place

    /// Hands `input` to the role the node holds, changed in place (the enum holds a
    /// placeholder meanwhile, so the role's arrays and dictionaries are not copied), then
    /// makes the role change it asked for.
    mutating func dispatch(_ input: RoleInput, _ now: Instant) {
        let change: RoleChange?
        switch state {
        case .slave(var role):
            state = .modifying
            change = role.handle(input, in: &ctx, now)
            state = .slave(role)
        case .candidate(var role):
            state = .modifying
            change = role.handle(input, in: &ctx, now)
            state = .candidate(role)
        case .recovering(var role):
            state = .modifying
            change = role.handle(input, in: &ctx, now)
            state = .recovering(role)
        case .master(var role):
            state = .modifying
            change = role.handle(input, in: &ctx, now)
            state = .master(role)
        case .starting, .stopped, .modifying:
            return
        }
        if let change { apply(change, now) }
    }

    mutating func apply(_ change: RoleChange, _ now: Instant) {
        switch change {
        case .follow(let node):
            follow(node, now)
        case .acknowledgeCoordinator(let node):
            follow(node, now)
            ctx.acknowledgeCoordinator(node)
        case .runElection:
            startElection(now)
        case .lead:
            // Only the epoch it claimed, and only once durable (`Candidate`).
            guard ctx.repo.epoch.master == ctx.id else { return }
            state = .recovering(Recovery.start(in: &ctx, now))
            dispatch(.tick, now)
        case .serve(var master, let syncing):
            // What arrived while nobody served goes into the first transaction, beside
            // what recovery carried (`Master.preparesDeferred`), rather than behind it.
            master.preparesDeferred = true
            state = .master(master)
            answerHeld(now)
            guard case .master(var serving) = state else { return }
            state = .modifying
            serving.preparesDeferred = false
            serving.begin(syncing: syncing, in: &ctx, now)
            state = .master(serving)
        case .recoverAgain(let missed):
            guard case .master(var master) = state else { return }
            state = .modifying
            let carried = master.standAside(in: &ctx)
            state = .recovering(Recovery.again(missed: missed, expiryDue: master.nextExpiry, carrying: carried,
                                               divergedOnDisk: master.divergedOnDisk, in: &ctx, now))
            dispatch(.tick, now)
        }
    }

    /// Becomes (or stays) the slave of `node` and says hello; a master steps down first.
    mutating func follow(_ node: NodeID, _ now: Instant) {
        var slave: Slave
        switch state {
        case .stopped, .modifying: return
        case .slave(let s): slave = s
        case .recovering, .master:
            stepDown(now)
            slave = Slave(master: nil, since: now)
        case .starting, .candidate: slave = Slave(master: nil, since: now)
        }
        state = .modifying
        slave.follow(node, in: &ctx, now)
        state = .slave(slave)
    }

    /// Runs a bully election (again); a master steps down first.
    mutating func startElection(_ now: Instant) {
        guard ctx.id.isAssigned else { return }
        var knowsMembers = false
        switch state {
        case .starting, .stopped, .modifying: return
        case .recovering, .master: stepDown(now)
        case .slave(let s): knowsMembers = s.master != nil
        case .candidate: break
        }
        state = .candidate(Candidate.start(knowsMembers: knowsMembers, in: &ctx, now))
    }

    /// Leaves the master's office: queued and in-flight peers get no answer (they
    /// retransmit and the next master answers), but the held requests it took and did not
    /// answer are held again, as they arrived (`HeldRequests.taken`); a prepared
    /// transaction may still be recovered. The node is a slave of nobody until it follows
    /// or runs.
    mutating func stepDown(_ now: Instant) {
        guard isMaster else { return }
        // Refusals still waiting are never sent: the heir answers their requests.
        if case .master(let m) = state, !m.refusals.isEmpty { ctx.meters.paths.count(.refusalLeftToHeir) }
        // Just woken from a pause and already out of office, what its socket queued
        // meanwhile was the newer master's to answer.
        if ctx.held.officeEnded(now: now, pauseBacklogUntil: pauseBacklogUntil) { ctx.outbox.actions.append(.discardPeerBacklog) }
        pauseBacklogUntil = nil
        if case .master(let m) = state {
            let unanswered = m.unansweredExchanges()
            if !unanswered.isEmpty { ctx.meters.paths.count(.httpRefusedLeavingOffice) }
            for pending in unanswered {
                ctx.answer(pending, with: ctx.handler.refusal(pending, reason: PeerRequestHandler.notServingMessage))
            }
        }
        if case .master(let m) = state, let f = m.inFlight { ctx.repo.prepared = f.tx }
        if let diverged = divergedOnDisk { ctx.returnToDurableState(diverged) }
        state = .slave(Slave(master: nil, since: now))
    }

    /// A new broker connection: the next keepalive leaves now (`NodeEvent.brokerConnected`);
    /// a starting node's at the end of startup, as ever (`tick`).
    mutating func brokerConnected(_ now: Instant) {
        ctx.liveness.nextKeepalive = min(ctx.liveness.nextKeepalive, now)
        tick(now)
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
        if now >= ctx.liveness.nextKeepalive {
            // A node still without an id (`--id auto`) has nothing to announce yet.
            if ctx.id.isAssigned {
                ctx.liveness.keepalivesSent &+= 1
                let keepalive = ctx.envelope(.keepalive(Keepalive(role: liveRole, master: liveMaster ?? .unassigned,
                                                                  lastCommitted: ctx.repo.replica.lastCommitted, inSync: inSync,
                                                                  address: ctx.address, brokerEcho: ctx.brokerEchoReport(now),
                                                                  peerSendsFailing: ctx.peerSendsFailing(now),
                                                                  sequence: ctx.liveness.keepalivesSent)))
                ctx.outbox.actions.append(.broadcast(keepalive))
                ctx.outbox.actions.append(.beacon(keepalive))
                ctx.liveness.lastKeepaliveSent = now
                if ctx.liveness.firstKeepaliveSent == nil { ctx.liveness.firstKeepaliveSent = now }
            }
            ctx.liveness.nextKeepalive = now + ctx.config.keepaliveInterval
        }
        ctx.liveness.membership.forget(before: now - ctx.config.downAfter * 30)
        checkIDConflict(now)
        if case .stopped = state { return }
        if isMaster && ctx.cutFromBroker(now) {
            // Commits travel on the broker: a master that cannot reach it while another
            // node can leaves the office to one that can (`BrokerLink.swift`).
            ctx.meters.paths.count(.cutMasterSteppedDown)
            startElection(now)
        } else if isMaster && ctx.mutedOnPeerChannel(now) {
            // Nor can a master whose replies cannot leave, while another node's can
            // (`PeerSends.swift`).
            ctx.meters.paths.count(.mutedMasterSteppedDown)
            startElection(now)
        }
        if let probeAt = nextProbe, now >= probeAt {
            nextProbe = now + ctx.config.keepaliveInterval
            ctx.outbox.actions.append(.probeStore)
        }
        dispatch(.tick, now)
        offerKeptData(now)
    }

    mutating func finishStartup(_ now: Instant) {
        state = .slave(Slave(master: nil, since: now))
        if !ctx.id.isAssigned {
            if let m = knownMaster(now) {
                follow(m, now)
                return
            }
            // No master to assign an id: take the next free one ourselves.
            guard let free = ctx.liveness.membership.nextFreeID(after: [ctx.id]) else {
                return stop(reason: .noFreeID)
            }
            ctx.id = free
        }
        // Bully: an ANSWER promises that this node runs. One given while starting is kept
        // here, whatever master it has heard of since: the candidate it answered stays out
        // of that master's transactions until our COORDINATOR or its timeout, and a live
        // master that counts it as a voter commits nothing meanwhile.
        let promisedToRun = answeredWhileStarting.map { now - $0 <= ctx.config.coordinatorTimeout } ?? false
        answeredWhileStarting = nil
        let master = knownMaster(now)
        if !promisedToRun, let master {
            follow(master, now)
        } else {
            if master != nil { ctx.meters.paths.count(.answeredWhileStartingRan) }
            startElection(now)
        }
    }

    func knownMaster(_ now: Instant) -> NodeID? {
        let masters = ctx.liveMembers(now).filter { $0.role == .master && $0.master == $0.id }
        let epoch = ctx.repo.epoch
        if epoch.master.isAssigned, epoch.master != ctx.id, masters.contains(where: { $0.id == epoch.master }) { return epoch.master }
        return masters.max { $0.id < $1.id }?.id
    }

    // MARK: receiving

    /// The peer network carries keepalives only; anything else there is not ours to act on.
    mutating func receiveBeacon(_ env: ClusterEnvelope, _ now: Instant) {
        guard case .keepalive = env.message else { return }
        receive(env, now, onBroker: false)
    }

    /// The checks every role shares, then the role.
    mutating func receive(_ env: ClusterEnvelope, _ now: Instant, onBroker: Bool = true) {
        let id = ctx.id
        if env.from == id && env.incarnation == ctx.incarnation {
            // Our own topic message: a keepalive the broker carried back proves our link.
            if onBroker, case .keepalive(let k) = env.message {
                // The first echo after a silence: what the broker carried meanwhile may
                // have passed us by (`HeldRequests.Evidence.deafUntil`).
                if ctx.liveness.brokerEcho.map({ now - $0 > ctx.config.downAfter }) ?? true { ctx.held.brokerHeardAgain(at: now) }
                ctx.liveness.brokerEcho = max(ctx.liveness.brokerEcho ?? now, now)
                // Numbered beyond what we sent: not ours to trust as proof of anything.
                if let sequence = k.sequence, sequence <= ctx.liveness.keepalivesSent {
                    ctx.liveness.echoedKeepalive = max(ctx.liveness.echoedKeepalive, sequence)
                }
                // A master may be waiting for it to commit (`Master.awaitedBrokerEcho`).
                if serving { dispatch(.tick, now) }
            }
            return
        }
        if let to = env.to, to != id { return }
        // Nothing a message says may break what we hold: an impossible epoch is dropped.
        guard env.epoch.isWellFormed else { return }
        // Evidence that a master served counts from every frame but our own echo, before
        // anything judges its sender: a twin with our id (below), whose every other word
        // is ignored, and a run membership refuses (one older than a run it heard, as a
        // forged frame of an insider under a higher incarnation makes the real run look)
        // both show a master alive to answer. Without it the next master would answer
        // again what that master answered. Evidence only ever holds a request back.
        ctx.held.heard(servingMaster: env, at: now, holding: ctx.repo.replica.lastCommitted)
        if env.from == id && id.isAssigned {
            // Another process with our id (or someone claiming to be us). What it sends
            // unprompted shows it is live: its keepalives, and as a master its PREPAREs,
            // COMMITs and ABORTs (the keepalives can all be lost while those get through,
            // and a starting node that waited for keepalives alone could lead the epoch
            // its twin leads). Answers and election messages are not counted: they follow
            // what others sent. The epoch any of them names is never claimed again here.
            // Nothing else is acted upon: a node never follows, votes for or answers
            // "itself".
            if liveRole != .master { ctx.adopt(epoch: env.epoch) }
            switch env.message {
            case .keepalive, .prepare, .commit, .abort:
                noteIDConflict(env.incarnation, now)
                ctx.liveness.membership.heard(env, now: now, onBroker: onBroker)
                checkIDConflict(now)
            default: break
            }
            return
        }
        // A farewell from a run we never heard is a replay (or too late to matter): a node
        // that restarted would otherwise drop the live run of that node on its word.
        if case .leaving = env.message, ctx.liveness.membership[env.from]?.incarnation != env.incarnation { return }
        guard ctx.liveness.membership.heard(env, now: now, onBroker: onBroker, downAfter: ctx.config.downAfter) else {
            ctx.meters.paths.count(.olderRunRefused)
            return
        }
        otherMasterHeard(env, now)
        if !ctx.liveness.membership.restarted.isEmpty {
            let restarted = ctx.liveness.membership.restarted
            ctx.liveness.membership.restarted.removeAll()
            dispatch(.restarted(restarted), now)
        }
        if env.epoch > ctx.repo.epoch && env.epoch.master.isAssigned {
            higherEpochSeen(env.epoch, now)
        }
        switch env.message {
        case .idAssigned(let incarnation, let assigned):
            // Ours only while we have no id; the role then says hello.
            guard incarnation == ctx.incarnation, !ctx.id.isAssigned, assigned.isAssigned else { return }
            ctx.id = assigned
            return dispatch(.message(env), now)
        case .snapshotAck(let ref):
            // Whatever our role: what that node holds now.
            if case .starting = state { return }
            ctx.liveness.membership.update(env.from) { $0.confirmed = ref; $0.lastCommitted = ref }
            return
        case .leaving:
            if case .starting = state { return }
            ctx.liveness.membership.remove(env.from)
        default:
            break
        }
        if env.message.isMasterMessage {
            // Only the master of the epoch we follow may drive us; stale masters are ignored.
            guard env.epoch == ctx.repo.epoch, env.from == ctx.repo.epoch.master else { return }
        }
        if case .starting = state {
            // Listening only: learn, do not act (id assignment is handled above) — except
            // that a lower candidate is told a higher id is here, so nodes started
            // together do not crown the lowest and then hand over again. The ANSWER is a
            // promise to run, which `finishStartup` keeps.
            if case .election = env.message, ctx.id.isAssigned, ctx.answerElection(from: env.from, now) {
                answeredWhileStarting = now
            }
            return
        }
        dispatch(.message(env), now)
    }

    /// An operator's catalogue change on this node: the master commits it, a slave
    /// forwards it to its master; one the catalogue cannot take, or that no master would
    /// get (electing, starting), is refused at once.
    mutating func submit(_ change: CatalogueChange, _ now: Instant) {
        if let refusal = change.refusal(in: ctx.repo.replica.store.catalogue) {
            return ctx.outbox.actions.append(.submitRefused(change, reason: refusal))
        }
        if case .starting = state { return ctx.refuseForNoMaster(change) }
        dispatch(.submit(change), now)
    }

    mutating func higherEpochSeen(_ newEpoch: Epoch, _ now: Instant) {
        ctx.adopt(epoch: newEpoch)
        switch state {
        case .starting, .stopped, .modifying: return
        case .recovering, .master:
            ctx.meters.paths.count(.masterSteppedDown)
            stepDown(now)
        case .slave, .candidate: break
        }
        if newEpoch.master != ctx.id {
            follow(newEpoch.master, now)
        } else {
            // "Our" epoch, yet we do not lead it: an earlier process with our id did (its
            // disk was not ours, or our epoch write was lost). That reign is over; having
            // adopted its number, run again so the next reign claims a higher one.
            startElection(now)
        }
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
        let config = ctx.config
        guard let m = ctx.liveness.membership[ctx.id], m.incarnation == c.incarnation, now - m.lastHeard <= config.downAfter else {
            if now - c.firstHeard > config.downAfter { idConflict = nil }
            return
        }
        guard m.lastHeard - c.firstHeard >= Milliseconds(config.keepaliveInterval.value * 9 / 10) else { return }
        if case .starting = state {
            stop(reason: .idInUse(ctx.id))
        } else if ctx.incarnation > c.incarnation {
            stop(reason: .idInUse(ctx.id))
        }
    }

    mutating func stop(reason: ExitReason) {
        if case .idInUse = reason { ctx.meters.paths.count(.duplicateIDRefused) }
        state = .stopped
        ctx.outbox.actions.append(.exit(reason: reason))
    }

    // MARK: store results

    mutating func storeResult(ok: Bool, _ now: Instant) {
        if ok {
            if !ctx.repo.storeHealthy {
                ctx.repo.storeHealthy = true
                nextProbe = nil
                ctx.meters.paths.count(.storeRewritten)
                // Writes were skipped while the store failed: rewrite it whole, epoch too.
                ctx.outbox.actions.append(.persistSnapshot((divergedOnDisk ?? ctx.repo.replica).snapshot()))
                ctx.outbox.actions.append(.persistEpoch(ctx.repo.epoch))
                if let s = ctx.repo.setAside { ctx.outbox.actions.append(.setAside(s.parts)) }
            }
        } else {
            ctx.repo.storeHealthy = false
            if nextProbe == nil { nextProbe = now + ctx.config.keepaliveInterval }
        }
    }

    // MARK: clean shutdown

    mutating func leave(_ now: Instant) {
        ctx.broadcast(.leaving)
        ctx.outbox.actions.append(.keepOperatorData(keptAtStop()))
        ctx.wipeLocally()
        stop(reason: .leftCluster)
    }

    // MARK: peers

    mutating func receivePeer(_ datagram: ByteBuffer, from source: PeerEndpoint, receivedAt: Instant? = nil, _ now: Instant) {
        guard case .master(var master) = state else {
            // Slaves, candidates and recovering masters stay silent, but keep the request
            // in case the master that should answer it is gone.
            ctx.held.hold(datagram, from: source, now: now, runStart: runStart)
            return
        }
        state = .modifying
        master.receivePeer(datagram, from: source, receivedAt: receivedAt, in: &ctx, now)
        state = .master(master)
    }
}

extension TrackerNode {
    /// An HTTP tracker request reached this node. Only a serving master decides it; any
    /// other node says so at once rather than hold it: no other node has the request, and
    /// the client retries on its own schedule (the floating address moves to the next
    /// master). It never answers from its own replica, which may be behind.
    mutating func receiveHTTP(_ request: HTTPTrackerRequest, from source: PeerEndpoint, exchange: HTTPExchangeID, _ now: Instant) {
        guard serving, case .master(var master) = state else {
            ctx.meters.paths.count(.httpRefusedNotServing)
            let refusal = ErrorResponse(transactionID: UInt32(truncatingIfNeeded: exchange.value), message: PeerRequestHandler.notServingMessage)
            ctx.outbox.actions.append(.answerHTTP(.error(refusal), exchange: exchange))
            return
        }
        ctx.meters.paths.count(.httpRequestServed)
        state = .modifying
        master.receiveHTTP(request, from: source, exchange: exchange, in: &ctx, now)
        state = .master(master)
    }

    /// Just came to serve: answer what arrived while nobody did, through the normal path.
    mutating func answerHeld(_ now: Instant) {
        let (handler, store) = (ctx.handler, ctx.repo.replica.store)
        let held = ctx.held.takeToAnswer(now: now, brokerLinked: ctx.brokerLinked(now)) {
            handler.answersAtOnce($0.datagram, from: $0.source, now: now, store: store)
        }
        for r in held {
            ctx.meters.paths.count(.heldRequestAnswered)
            // Stamped with when it arrived: a later request of the same peer that another
            // master committed meanwhile must stay the later one (`Swarm`).
            receivePeer(r.datagram, from: r.source, receivedAt: r.receivedAt, now)
        }
    }
}

/// The node's place in the cluster with the state only that place has.
enum NodeState: Sendable {
    /// Listening until the instant before taking part: learns the master, epochs and
    /// whether its id is taken.
    case starting(until: Instant)
    /// Following a master (maybe still catching up).
    case slave(Slave)
    /// Running a bully election.
    case candidate(Candidate)
    /// Leading its own epoch, not serving yet: recovering what a majority may have
    /// committed.
    case recovering(Recovery)
    /// Leading its own epoch and serving peers.
    case master(Master)
    /// Left cleanly or refused; does nothing more.
    case stopped
    /// Only while a role is being changed in place (`TrackerNode.dispatch`); never
    /// observable between steps.
    case modifying
}
