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
    var voters: [NodeID]
    /// Live slaves not confirmed at `previous` when the PREPARE left, typically one
    /// whose OK for the transaction before arrived after that one committed. A slave
    /// votes OK only when it holds `previous`, so an OK from one of them is as good as a
    /// voter's: it joins the voters. Until each has voted (or the vote timed out) the
    /// transaction is not given up, so one slave's ERROR (a full disk) does not abort
    /// what the other would have carried.
    var unconfirmed: [NodeID] = []
    var votes: [NodeID: Bool] = [:]
    var needed: Int
    var deadline: Instant
    var retries = 0
    /// When the first PREPARE left (the commit latency runs from it).
    var preparedAt: Instant
}

struct OfferProgress: Sendable {
    var parts: UInt32
    var received: Set<UInt32> = []
    var pending = 0
}

/// What only the master keeps.
struct MasterState: Sendable {
    var queue: [QueuedUpdate] = []
    var batchDeadline: Instant?
    var retryAfter: Instant?
    var inFlight: InFlight?
    var nextExpiry: Instant
    var lastDigest: UInt64 = 0
    var offers: [OfferKey: OfferProgress] = [:]
    var finishedOffers: Set<OfferKey> = []
    var assignedIDs: [UInt64: NodeID] = [:]
    /// The last snapshot sent to each node: a node that asks again before that one could
    /// have arrived (it says hello every interval) does not get another.
    var snapshotsSent: [NodeID: (last: TxRef, at: Instant)] = [:]

    /// At most this many `--id auto` assignments are remembered by one master.
    static let maxAssignedIDs = 4096

    /// Serving from the end of its recovery: `recovered` is proposed first, at once.
    init(nextExpiry: Instant, recovered: [SwarmUpdate], now: Instant) {
        self.nextExpiry = nextExpiry
        queue = recovered.map { QueuedUpdate(update: $0, origin: .recovered) }
        if !queue.isEmpty { batchDeadline = now }
    }

    var nextDeadline: Instant? {
        var candidates: [Instant] = [nextExpiry]
        if let f = inFlight { candidates.append(f.deadline) }
        if inFlight == nil, let b = batchDeadline { candidates.append(max(b, retryAfter ?? b)) }
        return candidates.min()
    }
}

extension TrackerNode {
    func majority(of n: Int) -> Int { n / 2 + 1 }

    // MARK: serving

    mutating func masterTick(_ now: Instant) {
        guard let l = masterRole else { return }
        if now >= l.nextExpiry {
            let nextExpiry = now + expiryPeriod
            masterRole?.nextExpiry = nextExpiry
            enqueue(.expire(before: now - handler.config.effectivePeerTimeout), origin: .expiry, now)
        }
        if let f = masterRole?.inFlight, now >= f.deadline { voteTimedOut(now) }
        tryPrepare(now)
    }

    /// A catalogue change, from our dashboard or forwarded by a slave. A registration
    /// the catalogue cannot take (already there, full) is dropped here, so replicas
    /// never apply a change the master would not have accepted.
    mutating func catalogueChangeReceived(_ change: CatalogueChange, _ now: Instant) {
        guard let l = masterRole else { return }
        guard change.refusal(in: replica.store.catalogue) == nil else { return }
        enqueue(.catalogue(change), origin: .operator, now)
    }

    mutating func enqueue(_ update: SwarmUpdate, origin: UpdateOrigin, _ now: Instant) {
        guard masterRole != nil else { return }
        masterRole?.queue.append(QueuedUpdate(update: update, origin: origin))
        if masterRole?.batchDeadline == nil { 
            let batchDeadline = now + config.batchDelay
            masterRole?.batchDeadline = batchDeadline
        }
        tryPrepare(now)
    }

    mutating func tryPrepare(_ now: Instant) {
        guard var l = masterRole, l.inFlight == nil, !l.queue.isEmpty else { return }
        if let r = l.retryAfter, now < r { return }
        guard l.queue.count >= config.batchMaxUpdates || now >= (l.batchDeadline ?? now) else { return }
        let items = Array(l.queue.prefix(config.batchMaxUpdates))
        l.queue.removeFirst(items.count)
        l.batchDeadline = l.queue.isEmpty ? nil : now
        l.retryAfter = nil
        let previous = replica.lastCommitted
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: previous.txid + 1), updates: items.map(\.update))
        let live = brokerLiveMembers(now).filter { !$0.suspect && $0.role == .slave }
        let voters = live.filter { $0.confirmed == previous }.map(\.id)
        let needed = config.quorum == .strict ? majority(of: config.clusterSize) : majority(of: voters.count + 1)
        l.inFlight = InFlight(tx: tx, previous: previous, items: items, voters: voters,
                              unconfirmed: live.filter { $0.confirmed != previous }.map(\.id), needed: needed,
                              deadline: now + config.voteTimeout, preparedAt: now)
        masterRole = l
        broadcast(.prepare(tx, previous: previous, previousDigest: l.lastDigest))
        evaluateVotes(now)
    }

    mutating func voteReceived(from node: NodeID, txid: UInt64, digest: UInt64, verdict: Verdict, _ now: Instant) {
        guard let f = masterRole?.inFlight, f.tx.txid == txid, f.tx.digest == digest else { return }
        if verdict == .notInSync {
            // Not a voter after all: it catches up, and the quorum is counted without it.
            membership.update(node) { $0.confirmed = .zero }
            if config.quorum == .live, let i = f.voters.firstIndex(of: node), f.votes[node] == nil {
                paths.count(.notInSyncVoteCounted)
                masterRole?.inFlight?.voters.remove(at: i)
                let needed = majority(of: f.voters.count)
                masterRole?.inFlight?.needed = needed
                evaluateVotes(now)
                return
            }
        }
        if let i = f.unconfirmed.firstIndex(of: node) {
            masterRole?.inFlight?.unconfirmed.remove(at: i)
            if verdict == .ok {
                paths.count(.unconfirmedVoteCounted)
                membership.update(node) { $0.confirmed = f.previous }
                masterRole?.inFlight?.voters.append(node)
                masterRole?.inFlight?.votes[node] = true
                // A live quorum is a majority of the slaves in sync: one more of them
                // raises it.
                if config.quorum == .live {
                    let needed = majority(of: f.voters.count + 2)
                    masterRole?.inFlight?.needed = needed
                }
            }
            evaluateVotes(now)
            return
        }
        guard f.voters.contains(node) else {
            if verdict == .ok { membership.update(node) { $0.confirmed = f.previous } }
            return
        }
        masterRole?.inFlight?.votes[node] = verdict == .ok
        evaluateVotes(now)
    }

    mutating func evaluateVotes(_ now: Instant) {
        guard let f = masterRole?.inFlight else { return }
        let ok = f.votes.values.filter { $0 }.count + (storeHealthy ? 1 : 0)
        let pending = f.voters.count - f.votes.count + f.unconfirmed.count
        if ok >= f.needed {
            commitInFlight(now)
        } else if ok + pending < f.needed {
            let errors = f.votes.values.filter { !$0 }.count + (storeHealthy ? 0 : 1)
            abortInFlight(reason: errors > 0 ? "tracker cluster could not store the announce; retry"
                                             : "tracker cluster has no quorum; retry", now)
        }
    }

    mutating func voteTimedOut(_ now: Instant) {
        guard var f = masterRole?.inFlight, let lastDigest = masterRole?.lastDigest else { return }
        if f.retries < config.voteRetries {
            f.retries += 1
            paths.count(.prepareResent)
            f.deadline = now + config.voteTimeout
            masterRole?.inFlight = f
            broadcast(.prepare(f.tx, previous: f.previous, previousDigest: lastDigest))
            return
        }
        let silent = f.voters.filter { f.votes[$0] == nil }
        for node in silent { membership.update(node) { $0.suspect = true } }
        // Unconfirmed slaves were never counted on: a silent one is only no longer waited for.
        f.unconfirmed = []
        if !silent.isEmpty { paths.count(.silentVotersDropped) }
        if config.quorum == .live {
            // Silent voters count as down: the quorum is a majority of who is left.
            f.voters = f.voters.filter { f.votes[$0] != nil }
            f.needed = majority(of: f.voters.count + 1)
        } else {
            for node in silent { f.votes[node] = false }
        }
        f.deadline = now + config.voteTimeout
        masterRole?.inFlight = f
        evaluateVotes(now)
    }

    mutating func commitInFlight(_ now: Instant) {
        guard let f = masterRole?.inFlight else { return }
        paths.count(.transactionCommitted)
        out.append(.committed(CommitQuorum(ref: f.tx.ref, digest: f.tx.digest, voters: f.voters,
                                           okVoters: f.votes.filter(\.value).keys.sorted(), ownVote: storeHealthy),
                              latency: now - f.preparedAt))
        commitLocally(f.tx)
        // Known committed, and no news to anyone: never raises the evidence (what this
        // node holds from before it served it answers in this very step).
        held.evidence.heard(committed: f.tx.ref, at: now, holding: f.tx.ref)
        masterRole?.lastDigest = f.tx.digest
        masterRole?.inFlight = nil
        broadcast(.commit(f.tx.ref, digest: f.tx.digest))
        for (node, ok) in f.votes.sorted(by: { $0.key < $1.key }) where ok {
            membership.update(node) { $0.confirmed = f.tx.ref }
        }
        for item in f.items {
            switch item.origin {
            case .peer(let pending):
                out.append(.reply(handler.answer(pending, store: replica.store, rng: &rng), to: pending.replyTo))
            case .merge(let key):
                masterRole?.offers[key]?.pending -= 1
                finishOfferIfDone(key)
            case .expiry, .recovered, .operator:
                break
            }
        }
        if masterRole?.queue.isEmpty == false { masterRole?.batchDeadline = now }
        tryPrepare(now)
    }

    mutating func abortInFlight(reason: String, _ now: Instant) {
        guard let f = masterRole?.inFlight else { return }
        paths.count(.transactionAborted)
        out.append(.aborted(f.tx.ref))
        masterRole?.inFlight = nil
        broadcast(.abort(f.tx.ref, digest: f.tx.digest))
        var keep: [QueuedUpdate] = []
        for item in f.items {
            if case .peer(let pending) = item.origin {
                out.append(.reply(handler.refusal(pending, reason: reason), to: pending.replyTo))
            } else {
                keep.append(item)  // expiry, merges and recovered updates must not be lost
            }
        }
        masterRole?.queue.insert(contentsOf: keep, at: 0)
        let retryAfter = now + config.voteTimeout
        masterRole?.retryAfter = retryAfter
        if masterRole?.queue.isEmpty == false { masterRole?.batchDeadline = now }
    }

    /// Leaves the master role: queued and in-flight peers get no answer (they retransmit
    /// and the next master answers); a prepared transaction may still be recovered. The
    /// node is a slave of nobody until it follows or runs.
    mutating func stepDown(_ now: Instant) {
        guard isMaster else { return }
        if let until = pauseBacklogUntil, now < until {
            // Just woken from a pause and already out of office: what its socket queued
            // meanwhile was the newer master's to answer.
            out.append(.discardPeerBacklog)
            held.removeAll()
            held.ignore(until: until)
        }
        pauseBacklogUntil = nil
        if let f = masterRole?.inFlight { prepared = f.tx }
        state = .slave(SlaveState(master: nil, since: now))
    }

    // MARK: join, catch-up and merge (master side)

    mutating func helloReceived(_ env: ClusterEnvelope, _ h: Hello, _ now: Instant) {
        guard let l = masterRole else { return }
        if !env.from.isAssigned {
            let assigned: NodeID
            if let known = l.assignedIDs[env.incarnation] {
                assigned = known
            } else {
                // Bounded: a flood of made-up incarnations cannot grow the table forever.
                guard l.assignedIDs.count < MasterState.maxAssignedIDs,
                      let free = membership.nextFreeID(after: Array(l.assignedIDs.values) + [id]) else { return }
                assigned = free
                masterRole?.assignedIDs[env.incarnation] = assigned
                paths.count(.idAssigned)
            }
            broadcast(.idAssigned(incarnation: env.incarnation, id: assigned))
            return
        }
        syncReply(to: env.from, last: h.lastCommitted, hasState: h.hasState, now)
    }

    /// The cheapest way to bring a node to our state: nothing, our log, a merge of its
    /// diverged repository first, or a full snapshot.
    mutating func syncReply(to node: NodeID, last: TxRef, hasState: Bool, _ now: Instant) {
        if last == replica.lastCommitted {
            send(.catchUp(after: last, []), to: node)
            membership.update(node) { $0.confirmed = last }
        } else if replica.isPrefix(last), let txs = replica.transactions(after: last.txid, limit: ClusterMessage.catchUpLimit) {
            paths.count(.catchUpSent)
            send(.catchUp(after: last, txs), to: node)
        } else if hasState && !replica.isPrefix(last) {
            paths.count(.mergeRequested)
            send(.mergeRequest, to: node)
        } else {
            let patience = snapshotPatience, last = replica.lastCommitted
            if let sent = masterRole?.snapshotsSent[node], sent.last == last, now - sent.at < patience { return }
            let recent = masterRole?.snapshotsSent.filter { now - $0.value.at < patience } ?? [:]
            masterRole?.snapshotsSent = recent
            masterRole?.snapshotsSent[node] = (last, now)
            paths.count(.snapshotSent)
            send(.snapshot(replica.snapshot()), to: node)
        }
    }

    /// How long a snapshot may take to reach a node: two keepalive intervals, and a
    /// second per 100,000 peers (a million peers are ~62 MB through the broker).
    var snapshotPatience: Milliseconds {
        max(config.keepaliveInterval * 2, Milliseconds(Int64(replica.store.peerCount / 100)))
    }

    mutating func catchUpRequested(by node: NodeID, after: TxRef, _ now: Instant) {
        if masterRole != nil {
            syncReply(to: node, last: after, hasState: true, now)
        } else if slaveRole != nil, node == master {
            // A recovering master fetches from us.
            if replica.isPrefix(after), let txs = replica.transactions(after: after.txid, limit: ClusterMessage.catchUpLimit) {
                if !txs.isEmpty { paths.count(.catchUpSent) }
                send(.catchUp(after: after, txs), to: node)
            } else {
                paths.count(.snapshotSent)
                send(.snapshot(replica.snapshot()), to: node)
            }
        }
    }

    mutating func mergeOfferReceived(_ offer: MergeOffer, from node: NodeID, _ now: Instant) {
        guard let l = masterRole else { return }
        let key = OfferKey(node: node, offerID: offer.offerID)
        if l.finishedOffers.contains(key) {
            send(.mergeDone(offerID: offer.offerID), to: node)
            return
        }
        var progress = l.offers[key] ?? OfferProgress(parts: offer.parts)
        // A part that does not belong to this offer's shape is not counted.
        guard progress.parts == offer.parts, offer.part < offer.parts, progress.received.insert(offer.part).inserted else { return }
        // Torrents the master lacks are registered again; the rest it holds already.
        let missing = offer.torrents.filter { replica.store.catalogue.torrents[$0.infoHash] == nil }
        progress.pending += offer.swarms.count + missing.count
        masterRole?.offers[key] = progress
        for m in offer.swarms { enqueue(.merge(m), origin: .merge(key), now) }
        for t in missing { enqueue(.catalogue(.register(t)), origin: .merge(key), now) }
        finishOfferIfDone(key)
    }

    mutating func finishOfferIfDone(_ key: OfferKey) {
        guard let p = masterRole?.offers[key], p.pending == 0, p.received.count == Int(p.parts) else { return }
        masterRole?.offers[key] = nil
        masterRole?.finishedOffers.insert(key)
        send(.mergeDone(offerID: key.offerID), to: key.node)
    }
}
