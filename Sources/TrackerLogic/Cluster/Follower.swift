/// What a slave keeps about its master and its own transfer state.
struct FollowerState: Sendable {
    /// PREPAREd, not yet committed or aborted.
    var prepared: Transaction?
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
        if role == .master { stepDown(now) }
        role = .slave
        election = nil
        if master != node {
            master = node
            masterSince = now
            follower = FollowerState(prepared: follower.prepared)
        }
        if id.isAssigned { sendHello(to: node, now) } else {
            // `--id auto`: the master answers this with an id.
            broadcast(.hello(Hello(lastCommitted: replica.lastCommitted, hasState: replica.lastCommitted.txid > 0)))
            follower.retryAt = now + config.keepaliveInterval
        }
    }

    mutating func sendHello(to node: NodeID, _ now: Instant) {
        send(.hello(Hello(lastCommitted: replica.lastCommitted, hasState: replica.lastCommitted.txid > 0)), to: node)
        follower.retryAt = now + config.keepaliveInterval
    }

    mutating func followerTick(_ now: Instant) {
        guard let m = master else {
            startElection(now)
            return
        }
        let heard = membership[m].map { now - $0.lastHeard <= config.downAfter } ?? false
        if !heard && now - masterSince > config.downAfter {
            startElection(now)
            return
        }
        if let offer = follower.offer, now >= offer.resendAt {
            for part in offer.parts { send(.mergeOffer(part), to: m) }
            follower.offer!.resendAt = now + config.keepaliveInterval
        }
        if inSync {
            follower.retryAt = nil
            // Bully: a live, up-to-date node with a higher id than its master takes over
            // (unless its disk cannot record the epoch it would claim).
            if m < id && storeHealthy { startElection(now) }
        } else if follower.offer == nil, now >= (follower.retryAt ?? now) {
            if !id.isAssigned || !follower.helloAnswered {
                follow(m, now)
            } else {
                send(.catchUpRequest(after: replica.lastCommitted), to: m)
                follower.retryAt = now + config.keepaliveInterval
            }
        }
    }

    mutating func keepaliveReceived(_ env: ClusterEnvelope, _ k: Keepalive, _ now: Instant) {
        switch role {
        case .slave:
            if env.from == master {
                if k.role == .master { follower.masterLast = k.lastCommitted } else { startElection(now) }
            } else if master == nil, k.role == .master, env.epoch == epoch {
                follow(env.from, now)
            }
        case .master:
            // What a follower says of itself confirms it as a voter (never backwards).
            if k.role == .slave, k.master == id {
                membership.update(env.from) { m in
                    if !k.inSync { m.confirmed = .zero } else if m.confirmed.epoch != k.lastCommitted.epoch || m.confirmed.txid < k.lastCommitted.txid {
                        m.confirmed = k.lastCommitted
                    }
                }
            } else if master == nil, k.role == .master, env.epoch == epoch {
                follow(env.from, now)
            }
        case .candidate:
            // A higher master makes our election moot; a lower one is what we are replacing.
            if k.role == .master, env.epoch == epoch, env.from == epoch.master, env.from > id { follow(env.from, now) }
        case .starting, .stopped:
            break
        }
    }

    mutating func prepareReceived(_ tx: Transaction, previous: TxRef, previousDigest: UInt64, _ now: Instant) {
        // A candidate is replacing this (lower) master: it stays out of its transactions.
        if role == .candidate { return }
        if role != .slave || master != epoch.master { follow(epoch.master, now) }
        // A COMMIT we missed: the master has moved on from a transaction we prepared.
        if let p = follower.prepared, p.ref == previous, p.digest == previousDigest, p.txid == replica.lastCommitted.txid + 1 {
            commitLocally(p)
            follower.prepared = nil
        }
        follower.masterLast = previous
        if replica.lastCommitted == previous {
            follower.prepared = tx
            send(.vote(txid: tx.txid, digest: tx.digest, verdict: storeHealthy ? .ok : .storeFailed), to: tx.ref.epoch.master)
        } else if tx.txid <= replica.lastCommitted.txid, replica.history.epoch(of: tx.txid) == tx.ref.epoch {
            // A retransmission of something we already committed.
            send(.vote(txid: tx.txid, digest: tx.digest, verdict: .ok), to: tx.ref.epoch.master)
        } else {
            send(.vote(txid: tx.txid, digest: tx.digest, verdict: .notInSync), to: tx.ref.epoch.master)
            if follower.retryAt == nil { follower.retryAt = now }
        }
    }

    mutating func commitReceived(_ ref: TxRef, digest: UInt64, _ now: Instant) {
        guard role == .slave else { return }
        if let p = follower.prepared, p.ref == ref, p.digest == digest, ref.txid == replica.lastCommitted.txid + 1 {
            commitLocally(p)
            follower.prepared = nil
        }
        if follower.masterLast.map({ $0 < ref }) ?? true { follower.masterLast = ref }
        if !inSync && follower.retryAt == nil { follower.retryAt = now }
    }

    mutating func abortReceived(_ ref: TxRef, digest: UInt64) {
        if let p = follower.prepared, p.ref == ref, p.digest == digest { follower.prepared = nil }
    }

    /// Applies a run of transactions that continues our log; the rest is ignored.
    mutating func applyContiguous(_ txs: [Transaction]) {
        for tx in txs where tx.txid == replica.lastCommitted.txid + 1 {
            commitLocally(tx)
        }
        if let p = follower.prepared, p.txid <= replica.lastCommitted.txid { follower.prepared = nil }
    }

    mutating func catchUpReceived(_ txs: [Transaction], from node: NodeID, _ now: Instant) {
        if role == .master, let f = leader?.recovery?.fetching, f.node == node {
            applyContiguous(txs)
            leader!.recovery!.fetching = nil
            if txs.count < 256, let ack = leader!.recovery!.acks[node] {
                // It sent all it has: it holds no more than we do now (its state may have
                // shrunk since it answered, if it restarted from a stale disk).
                leader!.recovery!.acks[node] = (replica.lastCommitted, ack.prepared)
            }
            leaderTick(now)
            return
        }
        guard role == .slave, node == master, node == epoch.master else { return }
        follower.helloAnswered = true
        let before = replica.lastCommitted
        applyContiguous(txs)
        if txs.isEmpty || (txs.count < 256 && replica.lastCommitted != before) {
            // The master sent all it had: we now hold its last transaction.
            follower.masterLast = replica.lastCommitted
            follower.retryAt = nil
            nextKeepalive = now  // tell the master we are in sync
        } else {
            follower.retryAt = now
        }
    }

    mutating func snapshotReceived(_ snapshot: Snapshot, from node: NodeID, _ now: Instant) {
        guard snapshot.isIntact else { return }  // corrupted in transit: ask again later
        if role == .master, let f = leader?.recovery?.fetching, f.node == node {
            let mine = replica.lastCommitted
            let isPrefix = mine.txid <= snapshot.lastCommitted.txid && snapshot.history.epoch(of: mine.txid) == mine.epoch
            if !isPrefix && mine.txid > 0 { leader!.recovery!.ownDivergedContent += replica.store.content() }
            installLocally(snapshot)
            leader!.recovery!.fetching = nil
            leaderTick(now)
            return
        }
        guard role == .slave, node == master, node == epoch.master else { return }
        follower.helloAnswered = true
        installLocally(snapshot)
        follower.prepared = nil
        follower.masterLast = snapshot.lastCommitted
        follower.retryAt = nil
        send(.snapshotAck(snapshot.lastCommitted), to: node)
        nextKeepalive = now
    }

    mutating func mergeRequested(_ now: Instant) {
        guard role == .slave, let m = master else { return }
        follower.helloAnswered = true
        guard follower.offer == nil else { return }
        let content = replica.store.content()
        if content.isEmpty {
            dropDivergedState(now)
            return
        }
        let offerID = rng.next()
        var parts: [MergeOffer] = []
        var i = 0
        while i < content.count {
            let chunk = Array(content[i..<min(i + Self.offerPartSwarms, content.count)])
            parts.append(MergeOffer(offerID: offerID, part: UInt32(parts.count), parts: 0, swarms: chunk))
            i += Self.offerPartSwarms
        }
        for j in parts.indices { parts[j].parts = UInt32(parts.count) }
        follower.offer = PendingOffer(offerID: offerID, parts: parts, resendAt: now + config.keepaliveInterval)
        for part in parts { send(.mergeOffer(part), to: m) }
    }

    mutating func mergeDoneReceived(_ offerID: UInt64, _ now: Instant) {
        guard role == .slave, follower.offer?.offerID == offerID else { return }
        dropDivergedState(now)
    }

    /// Our diverged repository is safe in the master's: drop it and take a snapshot.
    mutating func dropDivergedState(_ now: Instant) {
        follower.offer = nil
        follower.prepared = nil
        replica.wipe()
        out.append(.wipeStore)
        if let m = master { sendHello(to: m, now) }
    }
}
