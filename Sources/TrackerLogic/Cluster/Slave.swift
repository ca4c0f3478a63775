/// What a slave keeps about its master and its own transfer state.
struct SlaveState: Sendable {
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
    /// A diverged repository being offered to the master; dropped once MERGE-DONE.
    var offer: PendingOffer?

    var nextDeadline: Instant? {
        [retryAt, offer?.resendAt].compactMap { $0 }.min()
    }
}

struct PendingOffer: Sendable {
    var offerID: UInt64
    var parts: [MergeOffer]
    var resendAt: Instant
}

extension TrackerNode {
    static let offerPartSwarms = 64

    mutating func follow(_ node: NodeID, _ now: Instant) {
        switch state {
        case .stopped, .modifying: return
        case .recovering, .master: stepDown(now)
        case .starting, .slave, .candidate: break
        }
        if slaveRole?.master != node {
            state = .slave(SlaveState(master: node, since: now))
        }
        if id.isAssigned { sendHello(to: node, now) } else {
            // `--id auto`: the master answers this with an id.
            broadcast(.hello(Hello(lastCommitted: replica.lastCommitted, hasState: replica.lastCommitted.txid > 0)))
            let retryAt = now + config.keepaliveInterval
            slaveRole?.retryAt = retryAt
        }
    }

    mutating func sendHello(to node: NodeID, _ now: Instant) {
        send(.hello(Hello(lastCommitted: replica.lastCommitted, hasState: replica.lastCommitted.txid > 0)), to: node)
        let retryAt = now + config.keepaliveInterval
        slaveRole?.retryAt = retryAt
    }

    mutating func slaveTick(_ now: Instant) {
        guard let f = slaveRole, let m = f.master else {
            startElection(now)
            return
        }
        let heard = membership[m].map { now - $0.lastHeard <= config.downAfter } ?? false
        if !heard && now - f.since > config.downAfter {
            startElection(now)
            return
        }
        if let offer = f.offer, now >= offer.resendAt {
            for part in offer.parts { send(.mergeOffer(part), to: m) }
            let resendAt = now + config.keepaliveInterval
            slaveRole?.offer?.resendAt = resendAt
        }
        if inSync {
            slaveRole?.retryAt = nil
            // Bully: a live, up-to-date node with a higher id than its master takes over
            // (unless its disk cannot record the epoch it would claim).
            if m < id && storeHealthy { startElection(now) }
        } else if f.offer == nil, now >= (f.retryAt ?? now) {
            if !id.isAssigned || !f.helloAnswered {
                follow(m, now)
            } else {
                send(.catchUpRequest(after: replica.lastCommitted), to: m)
                let retryAt = now + config.keepaliveInterval
                slaveRole?.retryAt = retryAt
            }
        }
    }

    mutating func keepaliveReceived(_ env: ClusterEnvelope, _ k: Keepalive, _ now: Instant) {
        switch state {
        case .slave(let f):
            if env.from == f.master {
                if k.role == .master { slaveRole?.masterLast = k.lastCommitted } else { startElection(now) }
            } else if f.master == nil, k.role == .master, env.epoch == epoch, env.from == epoch.master {
                follow(env.from, now)
            }
        case .recovering, .master:
            // What a slave says of itself confirms it as a voter (never backwards).
            if k.role == .slave, k.master == id {
                membership.update(env.from) { m in
                    if !k.inSync { m.confirmed = .zero } else if m.confirmed.epoch != k.lastCommitted.epoch || m.confirmed.txid < k.lastCommitted.txid {
                        m.confirmed = k.lastCommitted
                    }
                }
            }
        case .candidate:
            // A higher master makes our election moot; a lower one is what we are replacing.
            if k.role == .master, env.epoch == epoch, env.from == epoch.master, env.from > id { follow(env.from, now) }
        case .starting, .stopped, .modifying:
            break
        }
    }

    mutating func prepareReceived(_ tx: Transaction, previous: TxRef, previousDigest: UInt64, _ now: Instant) {
        // A candidate is replacing this (lower) master: it stays out of its transactions.
        if case .candidate = state { return }
        // Only the epoch's master gets here (`receive` checked), and it numbers its own
        // transactions: anything else is not its PREPARE.
        guard tx.ref.epoch == epoch, tx.txid == previous.txid &+ 1 else { return }
        if master != epoch.master { follow(epoch.master, now) }
        guard slaveRole != nil else { return }
        // A COMMIT we missed: the master has moved on from a transaction we prepared.
        if let p = prepared, p.ref == previous, p.digest == previousDigest, p.txid == replica.lastCommitted.txid + 1 {
            commitLocally(p)
            prepared = nil
            paths.count(.missedCommitApplied)
        }
        slaveRole?.masterLast = previous
        if replica.lastCommitted == previous {
            prepared = tx
            if !storeHealthy { paths.count(.voteStoreFailed) }
            send(.vote(txid: tx.txid, digest: tx.digest, verdict: storeHealthy ? .ok : .storeFailed), to: tx.ref.epoch.master)
        } else if tx.txid <= replica.lastCommitted.txid, replica.history.epoch(of: tx.txid) == tx.ref.epoch {
            // A retransmission of something we already committed.
            send(.vote(txid: tx.txid, digest: tx.digest, verdict: .ok), to: tx.ref.epoch.master)
        } else {
            paths.count(.voteNotInSync)
            send(.vote(txid: tx.txid, digest: tx.digest, verdict: .notInSync), to: tx.ref.epoch.master)
            if slaveRole?.retryAt == nil { slaveRole?.retryAt = now }
        }
    }

    mutating func commitReceived(_ ref: TxRef, digest: UInt64, _ now: Instant) {
        guard let f = slaveRole else { return }
        if let p = prepared, p.ref == ref, p.digest == digest, ref.txid == replica.lastCommitted.txid + 1 {
            commitLocally(p)
            prepared = nil
        }
        if f.masterLast.map({ $0 < ref }) ?? true { slaveRole?.masterLast = ref }
        if !inSync && slaveRole?.retryAt == nil { slaveRole?.retryAt = now }
    }

    mutating func abortReceived(_ ref: TxRef, digest: UInt64) {
        if let p = prepared, p.ref == ref, p.digest == digest { prepared = nil }
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

    mutating func catchUpReceived(_ txs: [Transaction], after: TxRef, from node: NodeID, sentIn sent: Epoch, _ now: Instant) {
        // Only a reply to our current state is applied: one asked for in an earlier
        // epoch and delayed past an election would stack that epoch's transactions on
        // another branch's. And only a reply sent in the epoch we follow: the same master's
        // log in an earlier reign need not be this one's (CatchUpTests). Anything else is
        // stale, and asking again sorts it out.
        guard after == replica.lastCommitted, sent == epoch else {
            paths.count(.staleCatchUpIgnored)
            if slaveRole != nil, node == master { slaveRole?.retryAt = now }
            return
        }
        if case .recovering = state { return recoveryCatchUpReceived(txs, from: node, now) }
        guard slaveRole != nil, node == master, node == epoch.master else { return }
        slaveRole?.helloAnswered = true
        let before = replica.lastCommitted
        applyContiguous(txs)
        if txs.isEmpty || (txs.count < ClusterMessage.catchUpLimit && replica.lastCommitted != before) {
            // The master sent all it had: we now hold its last transaction.
            let masterLast = replica.lastCommitted
            slaveRole?.masterLast = masterLast
            slaveRole?.retryAt = nil
            nextKeepalive = now  // tell the master we are in sync
        } else {
            slaveRole?.retryAt = now
        }
    }

    mutating func snapshotReceived(_ snapshot: Snapshot, from node: NodeID, sentIn sent: Epoch, _ now: Instant) {
        // Sent in another reign than the one we follow: stale, as for a catch-up.
        guard sent == epoch else {
            if slaveRole != nil, node == master { slaveRole?.retryAt = now }
            return
        }
        // Corrupted in transit, or impossible: ask again later.
        guard snapshot.isWellFormed, let store = snapshot.intactStore() else {
            paths.count(.snapshotRefused)
            return
        }
        if case .recovering = state { return recoverySnapshotReceived(snapshot, store: store, from: node, now) }
        guard slaveRole != nil, node == master, node == epoch.master else { return }
        slaveRole?.helloAnswered = true
        installLocally(snapshot, store: store)
        prepared = nil
        slaveRole?.masterLast = snapshot.lastCommitted
        slaveRole?.retryAt = nil
        send(.snapshotAck(snapshot.lastCommitted), to: node)
        nextKeepalive = now
    }

    mutating func mergeRequested(_ now: Instant) {
        guard let f = slaveRole, let m = f.master else { return }
        slaveRole?.helloAnswered = true
        guard f.offer == nil else { return }
        let content = replica.store.content()
        let torrents = replica.store.catalogue.sorted
        if content.isEmpty && torrents.isEmpty {
            dropDivergedState(now)
            return
        }
        let offerID = rng.next()
        var chunks = stride(from: 0, to: content.count, by: Self.offerPartSwarms).map {
            Array(content[$0..<min($0 + Self.offerPartSwarms, content.count)])
        }
        if chunks.isEmpty { chunks = [[]] }
        let parts = chunks.enumerated().map {
            MergeOffer(offerID: offerID, part: UInt32(truncatingIfNeeded: $0.offset), parts: UInt32(truncatingIfNeeded: chunks.count),
                       swarms: $0.element, torrents: $0.offset == 0 ? torrents : [])
        }
        let offer = PendingOffer(offerID: offerID, parts: parts, resendAt: now + config.keepaliveInterval)
        slaveRole?.offer = offer
        for part in parts { send(.mergeOffer(part), to: m) }
    }

    mutating func mergeDoneReceived(_ offerID: UInt64, _ now: Instant) {
        guard slaveRole?.offer?.offerID == offerID else { return }
        paths.count(.mergeCompleted)
        dropDivergedState(now)
    }

    /// Our diverged repository is safe in the master's: drop it and take a snapshot.
    mutating func dropDivergedState(_ now: Instant) {
        slaveRole?.offer = nil
        prepared = nil
        wipeLocally()
        if let m = master { sendHello(to: m, now) }
    }
}
