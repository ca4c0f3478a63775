/// A node following a master: it votes on the master's transactions, applies what the
/// master commits, catches up (log, snapshot, or a merge of a diverged repository first)
/// and runs an election when its master falls silent or a lower id leads it.
///
/// Invariant: it applies only transactions that continue its own log, and only from the
/// master of the epoch it follows.
struct Slave: NodeRole, Sendable {
    /// Whom it follows; nil right after a master stepped down, until it learns the next.
    var master: NodeID?
    /// When that master was adopted: a master never heard from is given the usual grace
    /// before it counts as down.
    var since: Instant
    /// The master's last committed transaction, as last told.
    var masterLast: TxRef?
    /// When to ask the master again for state (HELLO or catch-up), while not in sync.
    var retryAt: Instant?
    var helloAnswered = false
    /// When to vote again on the transaction we prepared, if it is still undecided then
    /// (`Decision.swift`).
    var voteAgainAt: Instant?

    init(master: NodeID?, since: Instant) {
        self.master = master
        self.since = since
    }

    /// Asked after every step (`TrackerNode.nextWake`): no intermediate array.
    var nextDeadline: Instant? {
        [retryAt, voteAgainAt].compactMap { $0 }.min()
    }

    /// Whether its repository is the master's, as far as it was told.
    func inSync(_ ctx: NodeContext) -> Bool { masterLast == ctx.repo.replica.lastCommitted }

    mutating func submit(_ change: CatalogueChange, in ctx: inout NodeContext, _ now: Instant) {
        if let master { ctx.send(.submit(change), to: master) } else { ctx.refuseForNoMaster(change) }
    }

    mutating func receive(_ env: ClusterEnvelope, in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        switch env.message {
        case .keepalive(let k):
            if env.from == master {
                if k.role == .master { masterLast = k.lastCommitted } else { return .runElection }
            } else if master == nil, k.role == .master, env.epoch == ctx.repo.epoch, env.from == ctx.repo.epoch.master {
                follow(env.from, in: &ctx, now)
            }
        case .election:
            // Bully: a lower candidate is told a higher id is here, and this node runs.
            if ctx.answerElection(from: env.from, now) { return .runElection }
        case .coordinator:
            if master != env.from { follow(env.from, in: &ctx, now) }
            ctx.acknowledgeCoordinator(env.from)
        case .prepare(let tx, let previous, let previousDigest):
            prepareReceived(tx, previous: previous, previousDigest: previousDigest, in: &ctx, now)
        case .commit(let ref, let digest):
            commitReceived(ref, digest: digest, in: &ctx, now)
        case .abort(let ref, let digest):
            ctx.repo.abortReceived(ref, digest: digest)
        case .catchUpRequest(let after):
            if env.from == master { recoveringMasterFetches(after: after, in: &ctx) }
        case .catchUp(let after, let txs):
            catchUpReceived(txs, after: after, from: env.from, sentIn: env.epoch, in: &ctx, now)
        case .snapshot(let snapshot):
            snapshotReceived(snapshot, from: env.from, sentIn: env.epoch, in: &ctx, now)
        case .mergeRequest:
            mergeRequested(in: &ctx, now)
        case .mergeDone(let offerID):
            ctx.mergeDone(offerID: offerID)
        case .idAssigned:
            // The node's id was just assigned (the gate took it): now it can say hello.
            if let master { sayHello(to: master, in: &ctx, now) }
        case .leaving:
            if env.from == master { return .runElection }
        case .answer, .coordinatorAck, .vote, .hello, .snapshotAck, .mergeOffer, .submit:
            break
        }
        return nil
    }

    /// Follows `node` (a fresh slave state if it is another master than the one it
    /// follows) and says hello, or asks for an id first (`--id auto`).
    mutating func follow(_ node: NodeID, in ctx: inout NodeContext, _ now: Instant) {
        if master != node { self = Slave(master: node, since: now) }
        if ctx.id.isAssigned { sayHello(to: node, in: &ctx, now) } else {
            // `--id auto`: the master answers this with an id.
            ctx.broadcast(.hello(ctx.repo.hello))
            retryAt = now + ctx.config.keepaliveInterval
        }
    }

    mutating func sayHello(to node: NodeID, in ctx: inout NodeContext, _ now: Instant) {
        ctx.send(.hello(ctx.repo.hello), to: node)
        retryAt = now + ctx.config.keepaliveInterval
    }

    mutating func tick(in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        guard let m = master else { return .runElection }
        let heard = ctx.liveness.membership[m].map { now - $0.lastHeard <= ctx.config.downAfter } ?? false
        if !heard && now - since > ctx.config.downAfter { return .runElection }
        voteAgainIfUndecided(in: &ctx, now)
        ctx.offerSetAside(to: m, now)
        if inSync(ctx) {
            retryAt = nil
            // Bully: a live, up-to-date node with a higher id than its master takes over
            // (unless its disk cannot record the epoch it would claim, or it cannot
            // reach the broker or send to peers while others can).
            if m < ctx.id && ctx.repo.storeHealthy && !ctx.cutFromBroker(now) && !ctx.mutedOnPeerChannel(now) { return .runElection }
        } else if now >= (retryAt ?? now) {
            if !ctx.id.isAssigned || !helloAnswered {
                follow(m, in: &ctx, now)
            } else {
                ctx.send(.catchUpRequest(after: ctx.repo.replica.lastCommitted), to: m)
                retryAt = now + ctx.config.keepaliveInterval
            }
        }
        return nil
    }

    // MARK: two-phase commit

    mutating func prepareReceived(_ tx: Transaction, previous: TxRef, previousDigest: UInt64,
                                  in ctx: inout NodeContext, _ now: Instant) {
        // Only the epoch's master gets here (the gate checked), and it numbers its own
        // transactions: anything else is not its PREPARE.
        guard tx.ref.epoch == ctx.repo.epoch, tx.txid == previous.txid &+ 1 else { return }
        if master != ctx.repo.epoch.master { follow(ctx.repo.epoch.master, in: &ctx, now) }
        // A COMMIT we missed: the master has moved on from a transaction we prepared.
        if let p = ctx.repo.prepared, p.ref == previous, p.digest == previousDigest, p.txid == ctx.repo.replica.lastCommitted.txid + 1 {
            ctx.commitLocally(p)
            ctx.repo.prepared = nil
            ctx.meters.paths.count(.missedCommitApplied)
        }
        masterLast = previous
        let master = tx.ref.epoch.master
        if ctx.repo.replica.lastCommitted == previous {
            ctx.repo.prepared = tx
            if !ctx.repo.storeHealthy { ctx.meters.paths.count(.voteStoreFailed) }
            ctx.send(.vote(txid: tx.txid, digest: tx.digest, verdict: ctx.repo.storeHealthy ? .ok : .storeFailed), to: master)
            voteAgainAt = now + Self.undecidedAfter(ctx)
        } else if tx.txid <= ctx.repo.replica.lastCommitted.txid, ctx.repo.replica.history.epoch(of: tx.txid) == tx.ref.epoch,
                  ctx.repo.replica.digest(ofCommitted: tx.txid) == tx.digest {
            // A retransmission of what we committed: the same transaction, digest and all.
            // An OK vouches for that exact transaction. Another one under a committed ref
            // is a second leader's of that epoch (two processes given one id, both past
            // the twin check), and an OK would let it
            // commit a second transaction under that ref; it gets not-in-sync below.
            ctx.send(.vote(txid: tx.txid, digest: tx.digest, verdict: .ok), to: master)
        } else {
            ctx.meters.paths.count(.voteNotInSync)
            ctx.send(.vote(txid: tx.txid, digest: tx.digest, verdict: .notInSync), to: master)
            if retryAt == nil { retryAt = now }
        }
    }

    mutating func commitReceived(_ ref: TxRef, digest: UInt64, in ctx: inout NodeContext, _ now: Instant) {
        if let p = ctx.repo.prepared, p.ref == ref, p.digest == digest, ref.txid == ctx.repo.replica.lastCommitted.txid + 1 {
            ctx.commitLocally(p)
            ctx.repo.prepared = nil
        }
        if masterLast.map({ $0 < ref }) ?? true { masterLast = ref }
        if !inSync(ctx) && retryAt == nil { retryAt = now }
    }

    // MARK: state transfer

    /// A recovering master fetches what we hold beyond its log: our log, or our snapshot.
    func recoveringMasterFetches(after: TxRef, in ctx: inout NodeContext) {
        guard let master else { return }
        if ctx.repo.replica.isPrefix(after), let txs = ctx.repo.replica.transactions(after: after.txid, limit: ClusterMessage.catchUpLimit) {
            if !txs.isEmpty { ctx.meters.paths.count(.catchUpSent) }
            ctx.send(.catchUp(after: after, txs), to: master)
        } else {
            ctx.meters.paths.count(.snapshotSent)
            ctx.send(.snapshot(ctx.repo.replica.snapshot()), to: master)
        }
    }

    mutating func catchUpReceived(_ txs: [Transaction], after: TxRef, from node: NodeID, sentIn sent: Epoch,
                                  in ctx: inout NodeContext, _ now: Instant) {
        guard ctx.isCurrent(catchUpAfter: after, sentIn: sent) else {
            if node == master { retryAt = now }
            return
        }
        guard node == master, node == ctx.repo.epoch.master else { return }
        helloAnswered = true
        let before = ctx.repo.replica.lastCommitted
        ctx.applyContiguous(txs)
        if txs.isEmpty || (txs.count < ClusterMessage.catchUpLimit && ctx.repo.replica.lastCommitted != before) {
            // The master sent all it had: we now hold its last transaction.
            masterLast = ctx.repo.replica.lastCommitted
            retryAt = nil
            ctx.liveness.nextKeepalive = now  // tell the master we are in sync
        } else {
            retryAt = now
        }
    }

    mutating func snapshotReceived(_ snapshot: Snapshot, from node: NodeID, sentIn sent: Epoch,
                                   in ctx: inout NodeContext, _ now: Instant) {
        // Sent in another reign than the one we follow: stale, as for a catch-up.
        guard sent == ctx.repo.epoch else {
            if node == master { retryAt = now }
            return
        }
        guard let store = ctx.intactStore(of: snapshot), node == master, node == ctx.repo.epoch.master else { return }
        // A master's log only grows within its reign: a snapshot older than a commit of
        // that reign we already hold was taken before it, and came again (a broker
        // redelivers). Installing it would undo commits we acknowledged and let us vote
        // OK for another transaction under a ref we applied.
        let held = ctx.repo.replica.lastCommitted
        guard !(held.epoch == sent && snapshot.lastCommitted < held) else {
            ctx.meters.paths.count(.staleSnapshotIgnored)
            return
        }
        helloAnswered = true
        ctx.installLocally(snapshot, store: store)
        ctx.repo.prepared = nil
        masterLast = snapshot.lastCommitted
        retryAt = nil
        ctx.send(.snapshotAck(snapshot.lastCommitted), to: node)
        ctx.liveness.nextKeepalive = now
    }

    /// The master holds a repository ours is not a prefix of: set ours aside for merging
    /// and take the master's (`SetAside.swift`).
    mutating func mergeRequested(in ctx: inout NodeContext, _ now: Instant) {
        guard let m = master else { return }
        helloAnswered = true
        ctx.setAsideDivergedReplica(now)
        ctx.offerSetAside(to: m, now)
        sayHello(to: m, in: &ctx, now)
    }
}
