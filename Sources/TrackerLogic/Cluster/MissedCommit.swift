/// A serving master that has committed nothing of its own, told by a node of a commit
/// later than its own last one, recovers again before it commits anything.
///
/// Why: recovery asks the nodes it can reach, and a strict master may serve with only a
/// majority of them. A node that was cut off may hold a commit of the old epoch that
/// recovery never saw: the old master committed it with a majority that the new one's
/// recovery met only in a node that had merely prepared it. The new master proposes that
/// node's prepared updates again under its own epoch, so the nodes that committed the
/// original now hold a transaction it lacks and vote "not in sync". Merged as a diverged
/// repository, they stay out of every quorum until their merge commits, and the merge
/// needs a quorum: with two of five in sync, a strict cluster answered no announce again
/// (fresh seeds 57029967662539837 and 57029967662419115).
///
/// The rule: the commit a node reports beyond ours, in the order recovery picks the most
/// advanced node by, means recovery missed it. While nothing of our epoch is committed,
/// nothing depends on the state we serve from, so we go back and recover again, in the
/// same epoch, and fetch it. Once we have committed, a majority holds our state and the
/// node's is merged as before.
///
/// Invariant: one re-recovery per reported commit (`recoveredAgainFor`), so a node we can
/// hear but not reach never keeps the master from serving for longer than one recovery.
extension Master {
    /// Whether `last`, reported in our epoch by a node that follows us, is a commit our
    /// recovery missed and we may still fetch.
    func missedByRecovery(_ last: TxRef, in ctx: NodeContext) -> Bool {
        last > ctx.repo.replica.lastCommitted && last > recoveredAgainFor && ctx.repo.replica.lastCommitted.epoch != ctx.repo.epoch
    }

    /// Leaves serving to recover again: the transaction in flight aborts (none of ours
    /// ever committed), and what recovery found last time becomes our prepared
    /// transaction, which the next recovery proposes again only if nothing was fetched
    /// past it. Operator changes are carried to the next reign. Peers waiting on an answer
    /// get none, as when a master steps down, and retransmit: nothing is answered while we
    /// recover, and some of them were held requests that the master whose commits we are
    /// about to fetch may have answered (carried, they were answered twice).
    /// The held requests it took go unanswered with them (`HeldRequests.forgetTaken`:
    /// they are not held again when the office ends either).
    mutating func standAside(in ctx: inout NodeContext) -> [QueuedUpdate] {
        ctx.held.forgetTaken()
        var items = queue.removeAll()
        if let f = inFlight {
            ctx.meters.paths.count(.transactionAborted)
            ctx.outbox.actions.append(.aborted(f.tx.ref))
            ctx.broadcast(.abort(f.tx.ref, digest: f.tx.digest))
            items = f.items + items
            inFlight = nil
        }
        var recovered: [SwarmUpdate] = []
        var carried: [QueuedUpdate] = []
        for item in items {
            switch item.origin {
            case .operator: carried.append(item)
            case .recovered: recovered.append(item.update)
            // Expiry is due again on the next reign's schedule; a merging node offers
            // again until MERGE-DONE.
            case .peer, .expiry, .merge: break
            }
        }
        let last = ctx.repo.replica.lastCommitted
        ctx.repo.prepared = recovered.isEmpty ? nil
            : Transaction(ref: TxRef(epoch: ctx.repo.epoch, txid: last.txid &+ 1), updates: recovered)
        return carried
    }
}

extension Recovery {
    /// Recovers again in our epoch (`Master.missedByRecovery`), from what the master held.
    /// Our own diverged state, kept on disk (`DivergedOnDisk`), is merged back
    /// again whatever the new recovery fetches.
    static func again(missed: TxRef, expiryDue: Instant, carrying carried: [QueuedUpdate], divergedOnDisk: DivergedOnDisk,
                      in ctx: inout NodeContext, _ now: Instant) -> Recovery {
        ctx.meters.paths.count(.recoveredAgain)
        ctx.liveness.membership.forgetConfirmations()
        var recovery = Recovery(deadline: now + ctx.config.recoveryTimeout, resendAt: now + Milliseconds(500), expiryDue: expiryDue)
        recovery.recoveredAgainFor = missed
        recovery.carried = carried
        recovery.divergedOnDisk = divergedOnDisk
        if let diverged = divergedOnDisk.state {
            recovery.ownDivergedContent = diverged.store.content()
            recovery.ownDivergedTorrents = diverged.store.catalogue.sorted
            recovery.ownDivergedRules = diverged.store.catalogue.access.sortedRules
            recovery.ownDivergedClients = diverged.store.catalogue.access.clients.sortedRules
            recovery.ownDivergedUsers = diverged.store.catalogue.access.users.sorted
        }
        ctx.broadcast(.coordinator(lastCommitted: ctx.repo.replica.lastCommitted))
        ctx.liveness.nextKeepalive = now
        return recovery
    }
}
