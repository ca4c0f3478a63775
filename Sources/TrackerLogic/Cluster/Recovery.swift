/// A new master before it serves: it asks every live slave what it committed and what it
/// prepared (COORDINATOR, answered by COORDINATOR-ACK), fetches what the most advanced
/// one holds beyond its own log, proposes again whatever was prepared right after that
/// last commit (a majority may have committed it), and only then serves. No peer is
/// answered meanwhile; the requests that arrive are held (`HeldRequests`).
///
/// Invariant: a transaction a majority may have committed in an earlier epoch is either
/// in the repository this master serves from, or first in its queue.
struct Recovery: NodeRole, Sendable {
    var deadline: Instant
    var resendAt: Instant
    /// When the serving master will expire peers first (kept from the election, so the
    /// schedule does not depend on how long recovery took).
    var expiryDue: Instant
    var acks: [NodeID: (last: TxRef, prepared: Transaction?)] = [:]
    var fetching: (node: NodeID, deadline: Instant)?
    /// Our own repository when it diverged from the one we fetched: merged back once we serve.
    var ownDivergedContent: [SwarmMerge] = []
    var ownDivergedTorrents: [RegisteredTorrent] = []
    var ownDivergedRules: [AccessEntry] = []
    var ownDivergedClients: [ClientRuleEntry] = []
    var ownDivergedUsers: [User] = []
    /// Our own state, kept on disk while we serve the fetched one (`DivergedOnDisk`).
    var divergedOnDisk = DivergedOnDisk()
    /// Recovering again (`MissedCommit.swift`): the commit that sent us back, and the
    /// operator changes the master had queued.
    var recoveredAgainFor = TxRef.zero
    var carried: [QueuedUpdate] = []
    /// Fetched a branch for its majority rather than for being ahead (`MajorityBranch.swift`).
    var choseBranch = false

    var nextDeadline: Instant {
        min(expiryDue, deadline, resendAt, fetching?.deadline ?? deadline)
    }

    /// The claimed epoch is durable: tell everyone who leads, at once, and start asking.
    static func start(in ctx: inout NodeContext, _ now: Instant) -> Recovery {
        ctx.meters.paths.count(.electionWon)
        ctx.liveness.membership.forgetConfirmations()
        let recovery = Recovery(deadline: now + ctx.config.recoveryTimeout, resendAt: now + Milliseconds(500),
                                expiryDue: now + ctx.expiryPeriod)
        ctx.broadcast(.coordinator(lastCommitted: ctx.repo.replica.lastCommitted))
        ctx.liveness.nextKeepalive = now
        return recovery
    }

    mutating func restarted(_ nodes: [NodeID]) {
        // What a restarted node told us before (its state, its recovery answer) is void.
        for node in nodes { acks[node] = nil }
    }

    mutating func receive(_ env: ClusterEnvelope, in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        switch env.message {
        case .keepalive, .election:
            ctx.officeHolderHeard(env, now)
        case .coordinatorAck(let last, let prepared):
            // Only an answer to this reign's COORDINATOR: the node adopted our epoch before
            // it answered. One sent in another epoch (delayed from an earlier recovery, or
            // replayed) tells what the node held then, not now: counted, it could stand in
            // for an answer this recovery needs and hide what the node committed since.
            guard env.epoch == ctx.repo.epoch else {
                ctx.meters.paths.count(.staleRecoveryAnswerIgnored)
                return nil
            }
            ctx.liveness.membership.update(env.from) { $0.lastCommitted = last }
            acks[env.from] = (last, prepared)
            return tick(in: &ctx, now)
        case .catchUp(let after, let txs):
            guard ctx.isCurrent(catchUpAfter: after, sentIn: env.epoch) else { return nil }
            return fetched(txs, from: env.from, in: &ctx, now)
        case .snapshot(let snapshot):
            guard env.epoch == ctx.repo.epoch, let store = ctx.intactStore(of: snapshot) else { return nil }
            return fetched(snapshot, store: store, from: env.from, in: &ctx, now)
        case .answer, .coordinator, .prepare, .vote, .commit, .abort, .hello, .idAssigned, .catchUpRequest, .snapshotAck,
             .mergeRequest, .mergeOffer, .mergeDone, .leaving, .submit:
            break
        }
        return nil
    }

    /// Recovers once every live slave answered (or the deadline passed): fetches from the
    /// most advanced one first, then serves with what may have been committed first in
    /// the queue (`RoleChange.serve`).
    mutating func tick(in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        if let f = fetching {
            guard now >= f.deadline else { return nil }
            fetching = nil
        }
        let live = ctx.brokerLiveMembers(now).filter { $0.role != .starting }
        let everyoneAnswered = live.allSatisfy { acks[$0.id] != nil }
        guard everyoneAnswered || now >= deadline else {
            if now >= resendAt {
                // COORDINATOR may have been lost: ask again those who did not answer.
                resendAt = now + Milliseconds(ctx.config.keepaliveInterval.value / 2)
                for m in live where acks[m.id] == nil { ctx.send(.coordinator(lastCommitted: ctx.repo.replica.lastCommitted), to: m.id) }
            }
            return nil
        }
        let answers = acks.keys.sorted().filter { ctx.liveness.membership.isLive($0, now: now, downAfter: ctx.config.downAfter, onBroker: true) }
            .compactMap { node in acks[node].map { (node: node, last: $0.last, prepared: $0.prepared) } }
        if ctx.config.quorum == .strict && answers.count + 1 < ctx.majority(of: ctx.config.clusterSize) {
            // Not enough of the cluster to know what it committed: keep asking (once per
            // timeout, not per answer), serve nobody.
            if now >= deadline {
                ctx.meters.paths.count(.strictRecoveryHalted)
                deadline = now + ctx.config.recoveryTimeout
                ctx.broadcast(.coordinator(lastCommitted: ctx.repo.replica.lastCommitted))
            }
            return nil
        }
        // Catch up from the most up-to-date slave first (not once we chose another branch
        // for its majority: what that branch lacks comes back by merge).
        if !choseBranch, let best = answers.max(by: { $0.last < $1.last }), ctx.repo.replica.lastCommitted < best.last {
            fetching = (best.node, now + ctx.config.recoveryTimeout)
            ctx.meters.paths.count(.recoveryFetched)
            ctx.send(.catchUpRequest(after: ctx.repo.replica.lastCommitted), to: best.node)
            return nil
        }
        if let branch = majorityBranch(answers, in: ctx) {
            choseBranch = true
            fetching = (branch.node, now + ctx.config.recoveryTimeout)
            ctx.meters.paths.count(.recoveryChoseMajorityBranch)
            ctx.send(.catchUpRequest(after: ctx.repo.replica.lastCommitted), to: branch.node)
            return nil
        }
        // Whatever anyone prepared right after our last commit may have been committed
        // by the old master: propose it again (applying an update twice is harmless).
        // Only a transaction prepared on top of that very commit: one prepared after
        // another branch's #n (a minority's own epoch) would apply that branch's older
        // records over ours and roll an acknowledged announce back. A diverged branch
        // comes back by merge, which keeps the newer record (RecoveryTests).
        var seen = Set<UInt64>()
        var recovered: [SwarmUpdate] = []
        var candidates = answers.filter { $0.last == ctx.repo.replica.lastCommitted }.compactMap(\.prepared)
        if let mine = ctx.repo.prepared { candidates.append(mine) }
        for tx in candidates.sorted(by: { ($0.ref, $0.digest) < ($1.ref, $1.digest) })
        where tx.txid == ctx.repo.replica.lastCommitted.txid + 1 && seen.insert(tx.digest).inserted {
            recovered += tx.updates
            ctx.meters.paths.count(.preparedReproposed)
        }
        if !ownDivergedContent.isEmpty || !ownDivergedTorrents.isEmpty || !ownDivergedRules.isEmpty || !ownDivergedClients.isEmpty
            || !ownDivergedUsers.isEmpty {
            ctx.meters.paths.count(.recoveryMergedOwnState)
        }
        recovered += ownDivergedContent.map { .merge(ctx.unexpired($0, now)) }
        recovered += ownDivergedTorrents.filter { ctx.repo.replica.store.catalogue.torrents[$0.infoHash] == nil }.map { .catalogue(.register($0)) }
        recovered += ctx.repo.replica.store.catalogue.access.missing(ownDivergedRules).map { .catalogue($0) }
        recovered += ctx.repo.replica.store.catalogue.access.clients.missing(ownDivergedClients).map { .catalogue($0) }
        recovered += ctx.repo.replica.store.catalogue.access.users.missing(ownDivergedUsers).map { .catalogue($0) }
        // What we kept through a clean stop, first of all that we answer peers by.
        let catalogue = ctx.repo.replica.store.catalogue
        recovered += Catalogue.restoring(ctx.repo.kept.filter { !catalogue.dominates($0) }).map { .catalogue($0) }
        ctx.repo.prepared = nil
        var master = Master(nextExpiry: expiryDue, recovered: recovered, now: now)
        master.divergedOnDisk = divergedOnDisk
        // A commit an answer reported is not one recovery missed (`MissedCommit.swift`),
        // even where we serve another branch than its (`MajorityBranch.swift`).
        master.recoveredAgainFor = max(recoveredAgainFor, answers.map(\.last).max() ?? .zero)
        master.queue.append(contentsOf: carried)
        if !master.queue.isEmpty, master.batchDeadline == nil { master.batchDeadline = now }
        return .serve(master, syncing: answers.map { (node: $0.node, last: $0.last) })
    }

    /// The log tail a recovering master asked the most advanced slave for. A full batch
    /// (`ClusterMessage.catchUpLimit`) means more may follow: the next tick asks again.
    mutating func fetched(_ txs: [Transaction], from node: NodeID, in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        guard let f = fetching, f.node == node else { return nil }
        ctx.applyContiguous(txs, persisting: divergedOnDisk.persisting)
        fetching = nil
        if txs.count < ClusterMessage.catchUpLimit, let ack = acks[node] {
            // It sent all it has: it holds no more than we do now (its state may have
            // shrunk since it answered, if it restarted from a stale disk).
            acks[node] = (ctx.repo.replica.lastCommitted, ack.prepared)
        }
        return tick(in: &ctx, now)
    }

    /// The repository a recovering master fetched whole (its own log did not reach). Our
    /// own state, when it is not a prefix of the fetched one, is merged back once we serve.
    mutating func fetched(_ snapshot: Snapshot, store: SwarmStore, from node: NodeID,
                          in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        guard let f = fetching, f.node == node else { return nil }
        let mine = ctx.repo.replica.lastCommitted
        let isPrefix = mine.txid <= snapshot.lastCommitted.txid && snapshot.history.epoch(of: mine.txid) == mine.epoch
        let diverged = !isPrefix && mine.txid > 0
        if diverged {
            ownDivergedContent += ctx.repo.replica.store.content()
            ownDivergedTorrents += ctx.repo.replica.store.catalogue.sorted
            ownDivergedRules += ctx.repo.replica.store.catalogue.access.sortedRules
            ownDivergedClients += ctx.repo.replica.store.catalogue.access.clients.sortedRules
            ownDivergedUsers += ctx.repo.replica.store.catalogue.access.users.sorted
        }
        // Our diverged state stays on disk until its merge commits.
        if diverged { divergedOnDisk.keep(ctx.repo.replica) }
        ctx.installLocally(snapshot, store: store, persisting: divergedOnDisk.persisting)
        // What we prepared followed our old state, not this one.
        if !isPrefix { ctx.repo.prepared = nil }
        fetching = nil
        return tick(in: &ctx, now)
    }
}
