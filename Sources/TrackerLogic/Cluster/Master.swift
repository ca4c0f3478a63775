import NIOCore

/// Why an update is in the master's queue: who is waiting for it.
enum UpdateOrigin: Sendable, Equatable {
    case peer(PendingAnnounce)
    case expiry
    case merge(OfferKey)
    /// Recovered from a failed master's prepared transactions or our own diverged state.
    case recovered
    /// A catalogue change from an operator (on this node's dashboard or a slave's). The
    /// operator learns the outcome by watching the replica; an abort retries it.
    case `operator`
}

struct OfferKey: Hashable, Sendable, Comparable {
    var node: NodeID
    var offerID: UInt64
    static func < (l: OfferKey, r: OfferKey) -> Bool { (l.node, l.offerID) < (r.node, r.offerID) }
}

struct QueuedUpdate: Sendable, Equatable {
    var update: SwarmUpdate
    var origin: UpdateOrigin
}

/// The transaction in its voting phase.
struct InFlight: Sendable {
    var tx: Transaction
    var previous: TxRef
    var items: [QueuedUpdate]
    /// Who votes, what they said, and what wins (`VoteTally`).
    var tally: VoteTally
    var deadline: Instant
    var retries = 0
    /// When the first PREPARE left (the commit latency runs from it), and how many
    /// keepalives had left by then: committing alone takes the echo of a later one.
    var preparedAt: Instant
    var preparedAfter: UInt64
    /// How many keepalives had left when its last vote window closed with voters still
    /// silent (live quorum): counting them down takes the echo of a later one
    /// (`Master.voteTimedOut`).
    var votesClosedAfter: UInt64?
}

struct OfferProgress: Sendable {
    var parts: UInt32
    var received: Set<UInt32> = []
    var pending = 0
}

/// A master that recovered and serves: it answers peers, batches their announces into
/// transactions and runs two-phase commit over the live slaves (PREPARE, votes, COMMIT or
/// ABORT), brings joining and lagging slaves up to date, and merges diverged
/// repositories back.
///
/// Invariant: at most one transaction is in flight, and it continues the replica's log;
/// an announce is answered only once its transaction committed (or refused once it
/// aborted).
struct Master: NodeRole, Sendable {
    var queue = UpdateQueue()
    /// Set while a master that just recovered takes the requests held while nobody served
    /// (`TrackerNode.answerHeld`), so that they join the first transaction with what
    /// recovery carried. Queued behind it instead, they waited its whole vote window, and
    /// a first transaction that could not commit (28 % loss, a PREPARE in 121-byte
    /// fragments) held them past the held-request bound until the one after it aborted
    /// too (seed 14118223377148111).
    var preparesDeferred = false
    var batchDeadline: Instant?
    var retryAfter: Instant?
    var inFlight: InFlight?
    var nextExpiry: Instant
    var lastDigest: UInt64 = 0
    var offers: [OfferKey: OfferProgress] = [:]
    /// Refusals of aborted transactions, until the others can know of them (`KnownRefusals.swift`).
    var refusals = RefusalsAwaitingEcho()
    var finishedOffers: Set<OfferKey> = []
    var assignedIDs: [UInt64: NodeID] = [:]
    /// The last snapshot sent to each node: a node that asks again before that one could
    /// have arrived (it says hello every interval) does not get another.
    var snapshotsSent: [NodeID: (last: TxRef, at: Instant)] = [:]
    /// The latest commit a node reported that made us recover again (`MissedCommit.swift`).
    var recoveredAgainFor = TxRef.zero
    /// When this master last committed or aborted a transaction (`Decision.swift`).
    var decidedAt = Instant(milliseconds: .min)
    /// Digests of earlier epochs' transactions proposed again after recovery (`Decision.swift`).
    var adoptedLate: Set<UInt64> = []
    /// Our own diverged state, kept on disk until what recovery merged back commits
    /// (`DivergedOnDisk`).
    var divergedOnDisk = DivergedOnDisk()

    /// At most this many `--id auto` assignments are remembered by one master.
    static let maxAssignedIDs = 4096

    /// Serving from the end of its recovery: `recovered` is proposed first, at once.
    init(nextExpiry: Instant, recovered: [SwarmUpdate], now: Instant) {
        self.nextExpiry = nextExpiry
        queue = UpdateQueue(recovered.map { QueuedUpdate(update: $0, origin: .recovered) })
        if !queue.isEmpty { batchDeadline = now }
    }

    /// Asked after every step (`TrackerNode.nextWake`): no intermediate array.
    var nextDeadline: Instant? {
        let own: Instant
        if let f = inFlight { own = min(nextExpiry, f.deadline) } else if let b = batchDeadline {
            own = min(nextExpiry, max(b, retryAfter ?? b))
        } else {
            own = nextExpiry
        }
        return refusals.deadline.map { min(own, $0) } ?? own
    }

    /// Just recovered: bring each slave that answered to our state, tell everyone at once,
    /// and propose what was recovered.
    mutating func begin(syncing answers: [(node: NodeID, last: TxRef)], in ctx: inout NodeContext, _ now: Instant) {
        for answer in answers {
            if answer.last == ctx.repo.replica.lastCommitted {
                ctx.liveness.membership.update(answer.node) { $0.confirmed = answer.last }
            } else {
                syncReply(to: answer.node, last: answer.last, hasState: answer.last.txid > 0, in: &ctx, now)
            }
        }
        ctx.liveness.nextKeepalive = now
        persistMergedStateIfDone(in: &ctx)
        tick(in: &ctx, now)
    }

    /// Recovery kept our diverged state on disk (`DivergedOnDisk`) until what
    /// it recovered, our own state among it, committed: the queue is FIFO and recovered
    /// updates lead it (an abort puts them back in front), so no peer's announce, merge or
    /// operator change commits before the store holds the replica again.
    mutating func persistMergedStateIfDone(in ctx: inout NodeContext) {
        guard !divergedOnDisk.persisting, !queue.contains(where: { $0.origin == .recovered }) else { return }
        _ = divergedOnDisk.take()
        ctx.persistMergedState()
    }

    mutating func submit(_ change: CatalogueChange, in ctx: inout NodeContext, _ now: Instant) {
        catalogueChangeReceived(change, in: &ctx, now)
    }

    /// A serving master never changes role by what it hears itself: a higher epoch is
    /// the gate's to act on (it steps down before the message reaches any role).
    mutating func receive(_ env: ClusterEnvelope, in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        switch env.message {
        case .keepalive, .election:
            ctx.officeHolderHeard(env, now)
        case .coordinatorAck(let last, let prepared):
            if env.epoch == ctx.repo.epoch, missedByRecovery(last, in: ctx) { return .recoverAgain(missed: last) }
            if env.epoch == ctx.repo.epoch { latePrepared(prepared, last: last, from: env.from, in: &ctx, now) }
            // A slave confirms it holds our last commit.
            ctx.liveness.membership.update(env.from) { $0.lastCommitted = last }
            if last == ctx.repo.replica.lastCommitted { ctx.liveness.membership.update(env.from) { $0.confirmed = last } }
        case .vote(let txid, let digest, let verdict):
            voteReceived(from: env.from, txid: txid, digest: digest, verdict: verdict, in: &ctx, now)
        case .hello(let h):
            if env.epoch == ctx.repo.epoch, env.from.isAssigned, missedByRecovery(h.lastCommitted, in: ctx) {
                return .recoverAgain(missed: h.lastCommitted)
            }
            helloReceived(env, h, in: &ctx, now)
        case .catchUpRequest(let after):
            syncReply(to: env.from, last: after, hasState: true, in: &ctx, now)
        case .mergeOffer(let offer):
            mergeOfferReceived(offer, from: env.from, in: &ctx, now)
        case .submit(let change):
            catalogueChangeReceived(change, in: &ctx, now)
        case .answer, .coordinator, .prepare, .commit, .abort, .idAssigned, .catchUp, .snapshot, .snapshotAck,
             .mergeRequest, .mergeDone, .leaving:
            break
        }
        return nil
    }

    /// A peer's datagram: answered at once, or its announce queued for commit.
    mutating func receivePeer(_ datagram: ByteBuffer, from source: PeerEndpoint, receivedAt: Instant? = nil,
                              in ctx: inout NodeContext, _ now: Instant) {
        switch ctx.handler.decide(datagram, from: source, now: now, receivedAt: receivedAt, store: ctx.repo.replica.store,
                                  limiter: &ctx.meters.limiter) {
        case .reply(let response): ctx.reply(response, to: source)
        case .commit(let pending): enqueue(.announce(pending.update), origin: .peer(pending), in: &ctx, now)
        case .drop:
            if let tid = BEP15Codec.peekHeader(datagram)?.transactionID { ctx.held.settle(tid, from: source) }
        }
    }

    /// An HTTP tracker request: decided by the same core as a datagram, its announce
    /// committed by the same two-phase commit.
    mutating func receiveHTTP(_ request: HTTPTrackerRequest, from source: PeerEndpoint, exchange: HTTPExchangeID,
                              in ctx: inout NodeContext, _ now: Instant) {
        switch ctx.handler.decide(http: request, from: source, exchange: exchange, now: now, store: ctx.repo.replica.store,
                                  limiter: &ctx.meters.limiter) {
        case .reply(let response): ctx.outbox.actions.append(.answerHTTP(response, exchange: exchange))
        case .commit(let pending): enqueue(.announce(pending.update), origin: .peer(pending), in: &ctx, now)
        case .drop: break  // `decide(http:)` answers every request
        }
    }

    /// The announces this master took and has not answered, over HTTP: leaving office, it
    /// answers them with `reason` (no other node has them; the client retries, and an
    /// announce applied twice is one announce).
    func unansweredExchanges() -> [PendingAnnounce] {
        var out: [PendingAnnounce] = []
        for item in (inFlight?.items ?? []) + queue.all {
            if case .peer(let p) = item.origin, p.exchange != nil { out.append(p) }
        }
        return out
    }

    // MARK: serving

    @discardableResult
    mutating func tick(in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        if now >= nextExpiry {
            nextExpiry = now + ctx.expiryPeriod
            enqueue(.expire(before: now - ctx.handler.config.effectivePeerTimeout), origin: .expiry, in: &ctx, now)
        }
        mergeSetAside(in: &ctx, now)
        sendKnownRefusals(in: &ctx, now)
        if inFlight != nil { evaluateVotes(in: &ctx, now) }
        if let f = inFlight, now >= f.deadline || f.votesClosedAfter.map({ ctx.brokerEchoed(after: $0) }) == true {
            voteTimedOut(in: &ctx, now)
        }
        tryPrepare(in: &ctx, now)
        return nil
    }

    /// A catalogue change, from our dashboard or forwarded by a slave. A registration
    /// the catalogue cannot take (already there, full) is dropped here, so replicas
    /// never apply a change the master would not have accepted.
    mutating func catalogueChangeReceived(_ change: CatalogueChange, in ctx: inout NodeContext, _ now: Instant) {
        guard change.refusal(in: ctx.repo.replica.store.catalogue) == nil else { return }
        enqueue(.catalogue(change), origin: .operator, in: &ctx, now)
    }

    mutating func enqueue(_ update: SwarmUpdate, origin: UpdateOrigin, in ctx: inout NodeContext, _ now: Instant) {
        queue.append(QueuedUpdate(update: update, origin: origin), batchLimit: ctx.config.batchMaxUpdates)
        if batchDeadline == nil { batchDeadline = now + ctx.config.batchDelay }
        tryPrepare(in: &ctx, now)
    }

    mutating func tryPrepare(in ctx: inout NodeContext, _ now: Instant) {
        guard inFlight == nil, !queue.isEmpty, !preparesDeferred else { return }
        if let r = retryAfter, now < r { return }
        guard queue.count >= ctx.config.batchMaxUpdates || now >= (batchDeadline ?? now) else { return }
        let items = queue.take(upTo: ctx.config.batchMaxUpdates)
        batchDeadline = queue.isEmpty ? nil : now
        retryAfter = nil
        let previous = ctx.repo.replica.lastCommitted
        let tx = Transaction(ref: TxRef(epoch: ctx.repo.epoch, txid: previous.txid + 1), updates: items.map(\.update))
        let live = ctx.brokerLiveMembers(now).filter { !$0.suspect && $0.role == .slave }
        let tally = VoteTally(quorum: ctx.config.quorum, clusterSize: ctx.config.clusterSize,
                              voters: live.filter { $0.confirmed == previous }.map(\.id),
                              unconfirmed: live.filter { $0.confirmed != previous }.map(\.id),
                              unreachable: ctx.config.quorum == .live ? ctx.unreachableOnBroker(now) : 0)
        inFlight = InFlight(tx: tx, previous: previous, items: items, tally: tally,
                            deadline: now + ctx.config.voteTimeout, preparedAt: now,
                            preparedAfter: ctx.liveness.keepalivesSent)
        ctx.broadcast(.prepare(tx, previous: previous, previousDigest: lastDigest))
        evaluateVotes(in: &ctx, now)
    }

    mutating func voteReceived(from node: NodeID, txid: UInt64, digest: UInt64, verdict: Verdict,
                               in ctx: inout NodeContext, _ now: Instant) {
        guard let f = inFlight, f.tx.txid == txid, f.tx.digest == digest else {
            return answerLateVote(from: node, txid: txid, digest: digest, in: &ctx, now)
        }
        if verdict == .notInSync {
            // Not a voter after all: it catches up, and the quorum is counted without it.
            ctx.liveness.membership.update(node) { $0.confirmed = .zero }
            if inFlight?.tally.withdraw(node) == true {
                ctx.meters.paths.count(.notInSyncVoteCounted)
                evaluateVotes(in: &ctx, now)
                return
            }
        }
        // An OK from outside the voters joins them (`VoteTally`): a new master whose only
        // slave last spoke as a candidate ignored that slave's OKs and waited seconds for
        // its own broker echo (fresh seed 97220440088170409).
        switch inFlight?.tally.record(node, ok: verdict == .ok) {
        case .joined(let unconfirmed)?:
            ctx.meters.paths.count(unconfirmed ? .unconfirmedVoteCounted : .uncountedVoteCounted)
            ctx.liveness.membership.update(node) { $0.confirmed = f.previous }
            evaluateVotes(in: &ctx, now)
        case .counted?, .noLongerAwaited?:
            evaluateVotes(in: &ctx, now)
        case .ignored?, nil:
            break
        }
    }

    mutating func evaluateVotes(in ctx: inout NodeContext, _ now: Instant) {
        guard let f = inFlight else { return }
        switch f.tally.outcome(ownVote: ctx.repo.storeHealthy) {
        case .won:
            if ctx.config.quorum == .live, !f.tally.hasOK, !ctx.liveMembers(now).isEmpty,
               !awaitedBrokerEcho(after: f.preparedAfter, in: &ctx, now) {
                return
            }
            commitInFlight(in: &ctx, now)
        case .lost:
            let reason = f.tally.errors(ownVote: ctx.repo.storeHealthy) > 0 ? AbortRefusal.storeFailed : AbortRefusal.noQuorum
            abortInFlight(reason: reason, in: &ctx, now)
        case .pending:
            break
        }
    }

    /// Whether a live master may commit on its own vote alone, or count silent voters
    /// down: only once the broker carried back one of its keepalives sent after keepalive
    /// number `sent` (the last before the PREPARE, or before the last vote window closed:
    /// its link worked both ways after the votes were due, so the silence is theirs), or in
    /// a true outage
    /// (`BrokerLink.swift`). Until then it asks for that echo: its next keepalive goes
    /// now (again after each vote timeout), and the echo steps the master again
    /// (`TrackerNode.receive`).
    mutating func awaitedBrokerEcho(after sent: UInt64, in ctx: inout NodeContext, _ now: Instant) -> Bool {
        if ctx.brokerEchoed(after: sent) || ctx.brokerOutage(now) { return true }
        ctx.meters.paths.count(.silentVotersAwaitedEcho)
        // Asked again each vote timeout: an echo may be lost like any frame.
        ctx.askForBrokerEcho(after: sent, orEvery: ctx.config.voteTimeout, now)
        return false
    }

    mutating func voteTimedOut(in ctx: inout NodeContext, _ now: Instant) {
        guard var f = inFlight else { return }
        if f.retries < ctx.config.voteRetries {
            f.retries += 1
            ctx.meters.paths.count(.prepareResent)
            f.deadline = now + ctx.config.voteTimeout
            inFlight = f
            ctx.broadcast(.prepare(f.tx, previous: f.previous, previousDigest: lastDigest))
            return
        }
        let silent = f.tally.silent
        if ctx.config.quorum == .live, !silent.isEmpty {
            // Silent voters, or our own link cut? Only the echo of a keepalive sent after
            // the last window closed tells: one from before it shows the link worked then, not
            // that the votes could still reach us (a link cut between that echo and the
            // votes let a slow master commit alone after the cut). Until it comes nobody
            // is counted down, and a master cut off leaves office meanwhile; when it
            // comes, it steps the master and this runs again (`tick`).
            let closed = f.votesClosedAfter ?? ctx.liveness.keepalivesSent
            f.votesClosedAfter = closed
            inFlight?.votesClosedAfter = closed
            guard awaitedBrokerEcho(after: closed, in: &ctx, now) else {
                // Still asking meanwhile: a voter every one of whose PREPAREs was lost
                // answers the next, and the transaction commits instead of waiting for
                // the echo to abort it (a lossy link stalled a held request past its
                // bound so).
                inFlight?.deadline = now + ctx.config.voteTimeout
                ctx.meters.paths.count(.prepareResent)
                ctx.broadcast(.prepare(f.tx, previous: f.previous, previousDigest: lastDigest))
                return
            }
        }
        for node in silent { ctx.liveness.membership.update(node) { $0.suspect = true } }
        if !silent.isEmpty { ctx.meters.paths.count(.silentVotersDropped) }
        // Live: silent voters the failure detector calls down count as down; one still
        // live and reaching the broker (dead or cut from us, nobody can tell yet) says no
        // (`BrokerLink.unreachableOnBroker`). Strict: every silent voter says no.
        var linked = Set<NodeID>()
        if ctx.config.quorum == .live {
            let live = Set(ctx.liveMembers(now).filter { ctx.reachesBroker($0, now) }.map(\.id))
            linked = Set(silent.filter(live.contains))
            if !linked.isEmpty { ctx.meters.paths.count(.silentLinkedVoterCountedNo) }
        }
        f.tally.closeWindow(linked: linked)
        f.deadline = now + ctx.config.voteTimeout
        inFlight = f
        evaluateVotes(in: &ctx, now)
    }

    mutating func commitInFlight(in ctx: inout NodeContext, _ now: Instant) {
        guard let f = inFlight else { return }
        ctx.meters.paths.count(.transactionCommitted)
        ctx.outbox.actions.append(.committed(CommitQuorum(ref: f.tx.ref, digest: f.tx.digest, voters: f.tally.voters,
                                               okVoters: f.tally.okVoters, ownVote: ctx.repo.storeHealthy,
                                               droppedVoters: f.tally.dropped),
                                  latency: now - f.preparedAt))
        ctx.commitLocally(f.tx, persisting: divergedOnDisk.persisting)
        persistMergedStateIfDone(in: &ctx)
        // Known committed, and no news to anyone: never raises the evidence (what this
        // node holds from before it served it answers in this very step).
        ctx.held.committedAsMaster(f.tx.ref, at: now)
        lastDigest = f.tx.digest
        inFlight = nil
        decidedAt = now
        // The commit point rides on the PREPARE that follows at once when the queue holds
        // more (its `previous` and `previousDigest` commit this transaction at every
        // replica that prepared it, as raft's leader carries its commit index; held
        // requests count it as a decision, `HeldRequests.Evidence.heard`): a COMMIT goes
        // alone only when the master has nothing more to propose now. Either leaves in the
        // step that answers the transaction's announces.
        let carried = !queue.isEmpty && retryAfter.map { now >= $0 } != false
        if !carried { ctx.broadcast(.commit(f.tx.ref, digest: f.tx.digest)) }
        for node in f.tally.okVoters {
            ctx.liveness.membership.update(node) { $0.confirmed = f.tx.ref }
        }
        // Room for the replies at once, rather than the actions growing (and moving) by
        // doubling as they come.
        ctx.outbox.actions.reserveCapacity(ctx.outbox.actions.count + f.items.count + 4)
        for (i, item) in f.items.enumerated() {
            switch item.origin {
            case .peer(let pending):
                // Private mode: a user disabled or removed while the announce waited, or the
                // mode switched to private; its apply was a no-op (`SwarmStore.apply`, which
                // judged it where it stands in the transaction).
                if let refused = ctx.repo.replica.refusal(ofUpdate: i, in: f.tx.ref) {
                    ctx.meters.paths.count(.userRefusedAtCommit)
                    ctx.answer(pending, with: ctx.handler.refusal(pending, reason: refused))
                    continue
                }
                let swarm = ctx.repo.replica.answer(for: pending.update, wanting: ctx.handler.peersToPick(for: pending), rng: &ctx.rng)
                ctx.answer(pending, with: ctx.handler.answer(pending, swarm: swarm))
            case .merge(let key):
                offers[key]?.pending -= 1
                finishOfferIfDone(key, in: &ctx)
            case .expiry, .recovered, .operator:
                break
            }
        }
        if !queue.isEmpty { batchDeadline = now }
        tryPrepare(in: &ctx, now)
        if carried {
            if inFlight?.previous == f.tx.ref { ctx.meters.paths.count(.commitCarriedByPrepare) } else { ctx.broadcast(.commit(f.tx.ref, digest: f.tx.digest)) }
        }
    }

    mutating func abortInFlight(reason: String, in ctx: inout NodeContext, _ now: Instant) {
        guard let f = inFlight else { return }
        ctx.meters.paths.count(.transactionAborted)
        ctx.outbox.actions.append(.aborted(f.tx.ref))
        inFlight = nil
        decidedAt = now
        ctx.broadcast(.abort(f.tx.ref, digest: f.tx.digest))
        var keep: [QueuedUpdate] = []
        for item in f.items {
            if case .peer(let pending) = item.origin {
                refuse(pending, reason: reason, in: &ctx, now)
            } else {
                keep.append(item)  // expiry, merges and recovered updates must not be lost
            }
        }
        queue.prepend(keep)
        retryAfter = now + ctx.config.voteTimeout
        if !queue.isEmpty { batchDeadline = now }
    }

    // MARK: join, catch-up and merge

    mutating func helloReceived(_ env: ClusterEnvelope, _ h: Hello, in ctx: inout NodeContext, _ now: Instant) {
        guard env.from.isAssigned else {
            let assigned: NodeID
            if let known = assignedIDs[env.incarnation] {
                assigned = known
            } else {
                // Bounded: a flood of made-up incarnations cannot grow the table forever.
                guard assignedIDs.count < Master.maxAssignedIDs,
                      let free = ctx.liveness.membership.nextFreeID(after: Array(assignedIDs.values) + [ctx.id]) else { return }
                assigned = free
                assignedIDs[env.incarnation] = assigned
                ctx.meters.paths.count(.idAssigned)
            }
            ctx.broadcast(.idAssigned(incarnation: env.incarnation, id: assigned))
            return
        }
        syncReply(to: env.from, last: h.lastCommitted, hasState: h.hasState, in: &ctx, now)
    }

    /// The cheapest way to bring a node to our state: nothing, our log, a merge of its
    /// diverged repository first, or a full snapshot.
    mutating func syncReply(to node: NodeID, last: TxRef, hasState: Bool, in ctx: inout NodeContext, _ now: Instant) {
        if last == ctx.repo.replica.lastCommitted {
            ctx.send(.catchUp(after: last, []), to: node)
            ctx.liveness.membership.update(node) { $0.confirmed = last }
        } else if ctx.repo.replica.isPrefix(last), let txs = ctx.repo.replica.transactions(after: last.txid, limit: ClusterMessage.catchUpLimit) {
            ctx.meters.paths.count(.catchUpSent)
            ctx.send(.catchUp(after: last, txs), to: node)
        } else if hasState && !ctx.repo.replica.isPrefix(last) {
            ctx.meters.paths.count(.mergeRequested)
            ctx.send(.mergeRequest, to: node)
        } else {
            let patience = snapshotPatience(ctx), ours = ctx.repo.replica.lastCommitted
            if let sent = snapshotsSent[node], sent.last == ours, now - sent.at < patience { return }
            snapshotsSent = snapshotsSent.filter { now - $0.value.at < patience }
            snapshotsSent[node] = (ours, now)
            ctx.meters.paths.count(.snapshotSent)
            ctx.send(.snapshot(ctx.repo.replica.snapshot()), to: node)
        }
    }

    /// How long a snapshot may take to reach a node: two keepalive intervals, and a
    /// second per 100,000 peers (a million peers are ~62 MB through the broker).
    func snapshotPatience(_ ctx: NodeContext) -> Milliseconds {
        max(ctx.config.keepaliveInterval * 2, Milliseconds(Int64(ctx.repo.replica.store.peerCount / 100)))
    }

    mutating func mergeOfferReceived(_ offer: MergeOffer, from node: NodeID, in ctx: inout NodeContext, _ now: Instant) {
        let key = OfferKey(node: node, offerID: offer.offerID)
        if finishedOffers.contains(key) {
            mergeDone(key, in: &ctx)
            return
        }
        var progress = offers[key] ?? OfferProgress(parts: offer.parts)
        // A part that does not belong to this offer's shape is not counted.
        guard progress.parts == offer.parts, offer.part < offer.parts, progress.received.insert(offer.part).inserted else { return }
        // Torrents and access rules the master lacks are committed again; where it holds
        // its own, they stay.
        let missing = offer.torrents.filter { ctx.repo.replica.store.catalogue.torrents[$0.infoHash] == nil }
        let rules = ctx.repo.replica.store.catalogue.access.missing(offer.access)
            + ctx.repo.replica.store.catalogue.access.clients.missing(offer.clients)
            + ctx.repo.replica.store.catalogue.access.users.missing(offer.users)
        // Swarms that would change nothing are not committed: the offer is done sooner,
        // and a diverged node whose state we already hold is in sync without a commit it
        // cannot vote for (in `strict`, the quorum may need its vote).
        let swarms = offer.swarms.map { ctx.unexpired($0, now) }.filter { ctx.repo.replica.store.changes(by: $0) }
        if swarms.count < offer.swarms.count { ctx.meters.paths.count(.mergeSwarmsAlreadyHeld) }
        progress.pending += swarms.count + missing.count + rules.count
        offers[key] = progress
        for m in swarms { enqueue(.merge(m), origin: .merge(key), in: &ctx, now) }
        for t in missing { enqueue(.catalogue(.register(t)), origin: .merge(key), in: &ctx, now) }
        for change in rules { enqueue(.catalogue(change), origin: .merge(key), in: &ctx, now) }
        finishOfferIfDone(key, in: &ctx)
    }

    mutating func finishOfferIfDone(_ key: OfferKey, in ctx: inout NodeContext) {
        guard let p = offers[key], p.pending == 0, p.received.count == Int(p.parts) else { return }
        offers[key] = nil
        finishedOffers.insert(key)
        mergeDone(key, in: &ctx)
    }

    /// Tells the offer's node its offer is merged; our own set-aside offer goes at once.
    func mergeDone(_ key: OfferKey, in ctx: inout NodeContext) {
        if key.node == ctx.id { ctx.mergeDone(offerID: key.offerID) } else { ctx.send(.mergeDone(offerID: key.offerID), to: key.node) }
    }
}
