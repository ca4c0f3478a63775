/// A voter learns the outcome of every transaction it prepared, even when the COMMIT or
/// ABORT that told it was lost and nothing follows.
///
/// Why: a slave that prepared a transaction holds it until it hears the decision (or a
/// later PREPARE, which carries the previous commit). When the decision is lost and the
/// master proposes nothing more (no peer announces: a quiet swarm, the small hours), the
/// slave holds an undecided transaction for as long as the quiet lasts; the simulator's
/// liveness phase found it in one seed of two hundred, an ABORT lost at 21 % loss. If that
/// slave then leads, its recovery proposes the aborted updates again: announces the
/// cluster refused come back.
///
/// The rule: a slave still holding, `undecidedAfter` after its vote, a transaction of
/// the epoch it follows votes again, and again each keepalive interval until decided (one
/// of an earlier epoch it reports as it would to a recovering master, in a
/// COORDINATOR-ACK). A
/// master that gets a vote for a transaction it no longer has in flight answers it with
/// the decision, once nothing was decided for an interval: COMMIT if it committed that exact transaction (same id, same digest),
/// ABORT if the id is beyond its last commit in its own epoch (it was aborted: a master
/// decides its transactions in order, and only the one in flight is open). A vote for
/// any other transaction gets nothing: the keepalive's last commit leads that voter to
/// catch up.
///
/// A transaction of an earlier epoch that a node reports prepared only after our recovery
/// ended (its COORDINATOR-ACK came late) is settled the way recovery settles one: while
/// nothing of our epoch is committed and it continues our last commit, its updates are
/// proposed again (`Recovery`'s rule; applying an update twice is harmless, and the order
/// rule keeps an older announce from winning). Our commit of the same id then clears it
/// on the node. Without this a quiet cluster left it undecided there for good.
///
/// Invariant: the answer names the voter's transaction exactly (epoch, id and digest),
/// so it can only settle that transaction: a slave clears what it prepared only on a
/// decision for the same ref and digest.
extension Slave {
    /// How long after its vote a slave takes a transaction as possibly undecided: the
    /// master's vote window plus an interval (a master resends its PREPARE within it while
    /// still collecting votes).
    static func undecidedAfter(_ ctx: NodeContext) -> Milliseconds {
        ctx.config.voteTimeout + ctx.config.keepaliveInterval
    }

    /// A slave taking over a prepared transaction from an earlier role (a new `Slave`
    /// after a COORDINATOR) starts its wait at its first tick.
    mutating func voteAgainIfUndecided(in ctx: inout NodeContext, _ now: Instant) {
        guard let p = ctx.repo.prepared, let m = master, ctx.repo.epoch.master == m, p.ref.epoch <= ctx.repo.epoch,
              p.txid == ctx.repo.replica.lastCommitted.txid &+ 1 else {
            voteAgainAt = nil
            return
        }
        guard let due = voteAgainAt else {
            voteAgainAt = now + Self.undecidedAfter(ctx)
            return
        }
        guard now >= due else { return }
        ctx.meters.paths.count(.undecidedVoteRepeated)
        if p.ref.epoch == ctx.repo.epoch {
            ctx.send(.vote(txid: p.txid, digest: p.digest, verdict: ctx.repo.storeHealthy ? .ok : .storeFailed), to: m)
        } else {
            // An earlier epoch's: only the master's recovery could settle it, and it may
            // not have heard of it (we followed after it ended).
            ctx.send(.coordinatorAck(lastCommitted: ctx.repo.replica.lastCommitted, prepared: p), to: m)
        }
        voteAgainAt = now + ctx.config.keepaliveInterval
    }
}

extension Master {
    /// A vote for a transaction no longer in flight: the voter still waits on it.
    /// Only once nothing was decided for an interval: a vote that arrives sooner is one
    /// the decision just made did not wait for (every commit leaves the slowest votes to
    /// arrive after it), or the next PREPARE, which settles it, is about to follow.
    func answerLateVote(from node: NodeID, txid: UInt64, digest: UInt64, in ctx: inout NodeContext, _ now: Instant) {
        guard now - decidedAt >= ctx.config.keepaliveInterval else { return }
        let last = ctx.repo.replica.lastCommitted
        if txid <= last.txid {
            guard let epoch = ctx.repo.replica.history.epoch(of: txid), ctx.repo.replica.digest(ofCommitted: txid) == digest else { return }
            ctx.meters.paths.count(.lateVoteAnswered)
            ctx.send(.commit(TxRef(epoch: epoch, txid: txid), digest: digest), to: node)
        } else {
            // Beyond our last commit and not in flight: aborted (or never proposed by
            // us, in which case the ABORT names nothing the voter holds).
            ctx.meters.paths.count(.lateVoteAnswered)
            ctx.send(.abort(TxRef(epoch: ctx.repo.epoch, txid: txid), digest: digest), to: node)
        }
    }
}

extension Master {
    /// A COORDINATOR-ACK that reached us serving, with what its node prepared.
    /// Once we have committed in our epoch, recovery is over for good: such a transaction
    /// was not adopted and never will be, and the node is told so (ABORT of its exact ref).
    mutating func latePrepared(_ tx: Transaction?, last: TxRef, from node: NodeID, in ctx: inout NodeContext, _ now: Instant) {
        guard let tx, last == ctx.repo.replica.lastCommitted, tx.ref.epoch < ctx.repo.epoch, tx.txid == last.txid &+ 1 else { return }
        if last.epoch == ctx.repo.epoch {
            ctx.meters.paths.count(.lateVoteAnswered)
            ctx.send(.abort(tx.ref, digest: tx.digest), to: node)
            return
        }
        guard adoptedLate.insert(tx.digest).inserted else { return }
        ctx.meters.paths.count(.latePreparedReproposed)
        for update in tx.updates { enqueue(update, origin: .recovered, in: &ctx, now) }
    }
}
