/// A new master before it serves: it asks every live slave what it committed and what it
/// prepared (COORDINATOR, answered by COORDINATOR-ACK), fetches what the most advanced
/// one holds beyond its own log, proposes again whatever was prepared right after that
/// last commit (a majority may have committed it), and only then serves. No peer is
/// answered meanwhile; the requests that arrive are held (`HeldRequests`).
///
/// Invariant: a transaction a majority may have committed in an earlier epoch is either
/// in the repository this master serves from, or first in its queue.
struct RecoveryState: Sendable {
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

    var nextDeadline: Instant {
        min(expiryDue, deadline, resendAt, fetching?.deadline ?? deadline)
    }
}

extension TrackerNode {
    /// A slave's answer to COORDINATOR: its state for recovery; to a serving master, a
    /// confirmation that it holds the last commit.
    mutating func coordinatorAckReceived(from node: NodeID, last: TxRef, prepared: Transaction?, _ now: Instant) {
        switch state {
        case .recovering:
            membership.update(node) { $0.lastCommitted = last }
            recovery?.acks[node] = (last, prepared)
            recoveryTick(now)
        case .master:
            membership.update(node) { $0.lastCommitted = last }
            if last == replica.lastCommitted { membership.update(node) { $0.confirmed = last } }
        case .starting, .slave, .candidate, .stopped, .modifying:
            break
        }
    }

    mutating func recoveryTick(_ now: Instant) {
        guard var r = recovery else { return }
        if let f = r.fetching {
            guard now >= f.deadline else { return }
            r.fetching = nil
        }
        let live = brokerLiveMembers(now).filter { $0.role != .starting }
        let everyoneAnswered = live.allSatisfy { r.acks[$0.id] != nil }
        guard everyoneAnswered || now >= r.deadline else {
            if now >= r.resendAt {
                // COORDINATOR may have been lost: ask again those who did not answer.
                r.resendAt = now + Milliseconds(config.keepaliveInterval.value / 2)
                for m in live where r.acks[m.id] == nil { send(.coordinator(lastCommitted: replica.lastCommitted), to: m.id) }
            }
            recovery = r
            return
        }
        let answers = r.acks.keys.sorted().filter { membership.isLive($0, now: now, downAfter: config.downAfter, onBroker: true) }
            .compactMap { node in r.acks[node].map { (node: node, last: $0.last, prepared: $0.prepared) } }
        if config.quorum == .strict && answers.count + 1 < majority(of: config.clusterSize) {
            // Not enough of the cluster to know what it committed: keep asking (once per
            // timeout, not per answer), serve nobody.
            if now >= r.deadline {
                paths.count(.strictRecoveryHalted)
                r.deadline = now + config.recoveryTimeout
                broadcast(.coordinator(lastCommitted: replica.lastCommitted))
            }
            recovery = r
            return
        }
        // Catch up from the most up-to-date slave first.
        if let best = answers.max(by: { $0.last < $1.last }), replica.lastCommitted < best.last {
            r.fetching = (best.node, now + config.recoveryTimeout)
            recovery = r
            paths.count(.recoveryFetched)
            send(.catchUpRequest(after: replica.lastCommitted), to: best.node)
            return
        }
        // Whatever anyone prepared right after our last commit may have been committed
        // by the old master: propose it again (applying an update twice is harmless).
        // Only a transaction prepared on top of that very commit: one prepared after
        // another branch's #n (a minority's own epoch) would apply that branch's older
        // records over ours and roll an acknowledged announce back. A diverged branch
        // comes back by merge, which keeps the newer record (RecoveryTests).
        var seen = Set<UInt64>()
        var recovered: [SwarmUpdate] = []
        var candidates = answers.filter { $0.last == replica.lastCommitted }.compactMap(\.prepared)
        if let mine = prepared { candidates.append(mine) }
        for tx in candidates.sorted(by: { ($0.ref, $0.digest) < ($1.ref, $1.digest) })
        where tx.txid == replica.lastCommitted.txid + 1 && seen.insert(tx.digest).inserted {
            recovered += tx.updates
            paths.count(.preparedReproposed)
        }
        if !r.ownDivergedContent.isEmpty || !r.ownDivergedTorrents.isEmpty { paths.count(.recoveryMergedOwnState) }
        recovered += r.ownDivergedContent.map { .merge($0) }
        recovered += r.ownDivergedTorrents.filter { replica.store.catalogue.torrents[$0.infoHash] == nil }.map { .catalogue(.register($0)) }
        prepared = nil
        state = .master(MasterState(nextExpiry: r.expiryDue, recovered: recovered, now: now))
        for answer in answers {
            if answer.last == replica.lastCommitted {
                membership.update(answer.node) { $0.confirmed = answer.last }
            } else {
                syncReply(to: answer.node, last: answer.last, hasState: answer.last.txid > 0, now)
            }
        }
        nextKeepalive = now
        masterTick(now)
    }

    /// The log tail a recovering master asked the most advanced slave for. A full batch
    /// (`ClusterMessage.catchUpLimit`) means more may follow: the next tick asks again.
    mutating func recoveryCatchUpReceived(_ txs: [Transaction], from node: NodeID, _ now: Instant) {
        guard var r = recovery, let f = r.fetching, f.node == node else { return }
        applyContiguous(txs)
        r.fetching = nil
        if txs.count < ClusterMessage.catchUpLimit, let ack = r.acks[node] {
            // It sent all it has: it holds no more than we do now (its state may have
            // shrunk since it answered, if it restarted from a stale disk).
            r.acks[node] = (replica.lastCommitted, ack.prepared)
        }
        recovery = r
        recoveryTick(now)
    }

    /// The repository a recovering master fetched whole (its own log did not reach). Our
    /// own state, when it is not a prefix of the fetched one, is merged back once we serve.
    mutating func recoverySnapshotReceived(_ snapshot: Snapshot, store: SwarmStore, from node: NodeID, _ now: Instant) {
        guard var r = recovery, let f = r.fetching, f.node == node else { return }
        let mine = replica.lastCommitted
        let isPrefix = mine.txid <= snapshot.lastCommitted.txid && snapshot.history.epoch(of: mine.txid) == mine.epoch
        if !isPrefix && mine.txid > 0 {
            r.ownDivergedContent += replica.store.content()
            r.ownDivergedTorrents += replica.store.catalogue.sorted
        }
        installLocally(snapshot, store: store)
        // What we prepared followed our old state, not this one.
        if !isPrefix { prepared = nil }
        r.fetching = nil
        recovery = r
        recoveryTick(now)
    }
}
