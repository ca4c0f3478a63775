import NIOCore
import TrackerLogic

extension Simulator {
    /// A master answered an announce: it is acknowledged as the transaction that carried
    /// it says (a later transaction of the same step, a merge say, may already have
    /// changed the master's record: the replicas that commit only the first must not be
    /// held to the second).
    mutating func recordAck(peer p: Int, request: RequestKey, by slot: Int) {
        guard let node = slots[slot].node else { return }
        let key = workload.peers[p].key
        let hash = workload.peers[p].infoHash
        acknowledged += 1
        let carried = checker.carrying(request, of: key, in: hash, log: node.replica.retained, through: committedSoFar)
        var holders: [Int: Int] = [:]
        if let ref = carried?.ref {
            for (s, gen) in checker.appliedBy[ref] ?? [:] { holders[s] = gen }
        }
        holders[slot] = slots[slot].generation
        if checker.prematureAck(of: request, by: key, in: hash, recent: node.replica.retained.suffix(StateChecker.recentCommits)) {
            return fail("s\(slot) answered p\(p)'s announce \(request.tid) before a transaction carrying it committed")
        }
        // Private mode: no announce is acknowledged under a key the master's committed
        // state refuses, even one it read before the commit that disabled the user. Judged
        // only while nothing committed after the announce (later in its transaction, or a
        // later commit of this step: a master without voters commits the next transaction
        // at once) changed the users or the mode.
        if let refused = node.replica.store.catalogue.access.userRefusal(key: workload.peers[p].trackerKey),
           let ref = carried?.ref, let index = carried?.index, !Self.usersOrModeChanged(after: ref, index: index, in: node.replica.retained) {
            return fail("s\(slot) acknowledged p\(p)'s announce \(request.tid) though its key is refused (\(refused))")
        }
        if let (ref, _, announce) = carried {
            checker.acknowledged(key, infoHash: hash, ref: ref, at: announce.at, stopped: announce.event == .stopped,
                                 holders: holders, request: request, now: now)
        } else if let record = node.replica.store[hash]?.peer(key) {
            // Beyond the retained log: the record is all there is to go by.
            checker.acknowledged(key, infoHash: hash, ref: nil, at: record.lastAnnounce, stopped: false, holders: holders, now: now)
        } else {
            // A stop beyond the retained log: its time is not known, so it is not judged.
            checker.acknowledged(key, infoHash: hash, ref: nil, at: nodeNow(slot), stopped: true, holders: holders, now: now)
        }
    }


    /// Whether the users or the access mode changed after the update at `index` of the
    /// transaction `ref`: later in it, or in a later transaction of `log`.
    static func usersOrModeChanged(after ref: TxRef, index: Int, in log: [Transaction]) -> Bool {
        func changesUsersOrMode(_ u: SwarmUpdate) -> Bool {
            guard case .catalogue(let change) = u else { return false }
            switch change {
            case .setAccessMode, .addUser, .editUser, .removeUser, .restore: return true
            default: return false
            }
        }
        return log.contains { tx in
            if tx.ref > ref { return tx.updates.contains(where: changesUsersOrMode) }
            guard tx.ref == ref, index < tx.updates.count else { return false }
            return tx.updates[(index + 1)...].contains(where: changesUsersOrMode)
        }
    }

    // MARK: invariants

    mutating func fail(_ message: String) {
        if violation == nil {
            violation = "at \(now.milliseconds - Scenario.start.milliseconds)ms (event \(events)): \(message)"
            note(-1, "VIOLATION \(message)")
        }
    }

    /// After a step: the transactions the node applied, checked one by one (one
    /// transaction id, one content) and by the state checker.
    mutating func observeCommits(_ slot: Int, event: NodeEvent, wasSlave: Bool) {
        // Most steps commit nothing: compare before touching the rest of the node.
        let tracked = slots[slot].trackedLast, trackedApplied = slots[slot].trackedApplied
        guard let (last, applied) = slots[slot].inspect({ ($0.replica.lastCommitted, $0.replica.applied) }) else { return }
        slots[slot].trackedApplied = applied
        if last == tracked {
            if applied != trackedApplied { fail("s\(slot) applied a transaction again: it still holds \(last)") }
            return
        }
        guard let node = slots[slot].node else { return }
        slots[slot].trackedLast = last
        if last.txid == 0 { slots[slot].generation += 1; return }
        if slots[slot].rejoining {
            slots[slot].rejoining = false
            coverage.count(.diskLossRejoined)
        }
        defer {
            if violation == nil, let v = checker.reached(node.replica, slot: slot, expiredBefore: checker.maxExpireCutoff) { fail(v) }
        }
        // After a snapshot replaced the state, what the replica holds beyond it (its log
        // restarts at the snapshot) was applied in this step: those commits count too, and
        // their expiries with them. That holds whether or not the state before the step
        // was a prefix of the snapshot (an emptied replica is a prefix of every state): a
        // commit left out here leaves its expiry out of the checker's cutoff, and a peer
        // it expired then reads as an acknowledged announce lost.
        let txs: [Transaction]
        if !node.replica.isPrefix(tracked) {
            txs = node.replica.retained
        } else if let since = node.replica.transactions(after: tracked.txid, limit: Int.max) {
            txs = since
        } else if applied &- trackedApplied == UInt64(node.replica.retained.count) {
            txs = node.replica.retained  // a snapshot, then every commit since, in this step
        } else {
            return  // more than the log keeps was applied in one step
        }
        if let v = StateChecker.applied(txs, by: node, during: event, wasSlave: wasSlave) { return fail(v) }
        // One application per transaction: as many applied as the ids advanced.
        if applied &- trackedApplied != UInt64(txs.count) {
            return fail("s\(slot) applied \(applied &- trackedApplied) transactions to go from \(tracked) to \(last)")
        }
        for tx in txs {
            commits += 1
            if let v = checker.applied(tx, slot: slot, generation: slots[slot].generation,
                                       operatorGeneration: slots[slot].operatorGeneration) { return fail(v) }
        }
    }

    mutating func checkStep(_ slot: Int) {
        guard let (isServing, role, epoch, id) = slots[slot].inspect({ ($0.isServing, $0.role, $0.epoch, $0.id) }) else { return }
        if let v = slots[slot].inspect({ $0.check() }) ?? nil { return fail("s\(slot) broke an invariant: \(v)") }
        if isServing != (slots[slot].held.servingSince != nil) {
            let endedSpan = slots[slot].held.servingSince
            slots[slot].held.servingSince = isServing ? now : nil
            if isServing {
                checker.servingStarted(slot, at: now)
                // A slow master's answers wait for the slow links: an announce held commits
                // in the transaction after the one in flight, each a round trip to the
                // voters and back, and a live master counts a silent voter down only after
                // the broker echoed one of its own keepalives sent after the votes were due
                // (`BrokerLink.swift`).
                let slowness = (network.extraDelay[slot] ?? 0) + network.slowest
                slots[slot].held.owedBySpan[now] = slots[slot].held.receipts
                slots[slot].held.receipts = []
                queue.push(now + Self.heldAnswerTime + Milliseconds(4 * slowness), .checkHeld(slot, now))
            } else {
                endServingSpan(slot, began: endedSpan)
            }
        }
        if role == .master, let v = checker.leads(epoch, id: id) { return fail(v) }
        checkOneServerWithoutBroker()
        if isServing {
            checkCutOffMaster(slot, committedAlone: false)
            checkMutedMaster(slot)
        }
    }

    /// A master whose own broker link is cut, while another node reaches the broker and
    /// hears it on the peer network, commits nothing on its own vote (it could not say
    /// whom that commit left out), and leaves the office within the failure-detection
    /// bound (`BrokerLink.swift`). Judged where the nodes cannot be misled by chance: no
    /// loss or corruption, no forger, and a topology that stood still long enough for
    /// every report to arrive. Without the rules a master cut off at start led its
    /// epoch, and one cut off while serving went on committing alone; a `kill -9` of it
    /// then lost everything it acknowledged.
    mutating func checkCutOffMaster(_ s: Int, committedAlone: Bool) {
        guard let cutAt = network.brokerLinkCutAt[s], network.brokerLinkCut[s] != nil, !network.brokerDown,
              scenario.lossRate == 0, scenario.corruptRate == 0, scenario.adversary == nil else { return }
        let drain = Milliseconds(2 * (scenario.maxDelay + network.slowest) + 1)
        let bound = config.downAfter + config.keepaliveInterval * 3 + drain
        let overdue = now - cutAt > bound
        guard committedAlone ? now - cutAt > drain : overdue else { return }
        guard let n = settledWitness(of: s, drain: drain) else { return }
        let since = (now - cutAt).value
        if committedAlone {
            fail("s\(s) committed on its own vote \(since) ms after its broker link was cut, while s\(n) reached the broker")
        } else {
            fail("s\(s) still serves \(since) ms after its broker link was cut (bound \(bound.value) ms), while s\(n) reaches the broker")
        }
    }

    /// A node that reaches the broker, sends to peers, has run and been heard by `s` for
    /// long enough in a topology that stood still that long: its reports have reached `s`.
    func settledWitness(of s: Int, drain: Milliseconds) -> Int? {
        let settled = config.downAfter + config.keepaliveInterval * 2 + drain
        guard now - network.topologyChangedAt > settled else { return nil }
        return slots.indices.first { n in
            n != s && n < scenario.nodes && slots[n].isRunning && !slots[n].isPaused(at: now) && network.reachesBroker(n)
                // Awake for as long: a node just back from a pause is not heard yet.
                && now - slots[n].lastPauseEnd > settled
                && now - slots[n].startedAt > settled + config.startupListen
                && (network.brokerLinkCutAt[n].map { now - $0 > settled } ?? true)
                && !network.peerNetworkBlocked(n, s) && !network.peerNetworkBlocked(s, n)
                && network.brokerSide == nil
                && (network.peerSendsFailUntil[n].map { now - $0 > settled } ?? true)
        }
    }

    /// A master whose sends on the peer channel fail, while another node's work and it
    /// hears that node, leaves the office within the failure-detection bound
    /// (`PeerSends.swift`): until then it answers nobody. Judged as `checkCutOffMaster`.
    mutating func checkMutedMaster(_ s: Int) {
        guard let since = network.peerSendsFailSince[s], network.peerSendsFail(s, at: now), !network.brokerTrouble,
              scenario.lossRate == 0, scenario.corruptRate == 0, scenario.adversary == nil else { return }
        let drain = Milliseconds(2 * (scenario.maxDelay + network.slowest) + 1)
        // Its first failure within an interval (a keepalive on the peer network fails),
        // the step-down at its next tick.
        let bound = config.keepaliveInterval * 2 + drain
        guard now - since > bound, let n = settledWitness(of: s, drain: drain) else { return }
        fail("s\(s) still serves \((now - since).value) ms after its peer sends began to fail (bound \(bound.value) ms), "
             + "while s\(n)'s work")
    }

    /// A live master counts a silent voter down only once the failure detector calls it
    /// down: one still live and reaching the broker is dead or cut from it, nobody can
    /// tell which yet, and its vote is a no (`BrokerLink.unreachableOnBroker`). Judged
    /// where a node cannot be misled by chance (no loss, corruption or forger): a voter it
    /// counted down while it was running and unpaused for `downAfter`, reached the broker
    /// and the peer network joined the two. Without the rule a cut of the link between two
    /// brokers let a master commit alone for `downAfter` (`broker_pair.py`).
    mutating func checkDroppedVoters(_ s: Int, _ quorum: CommitQuorum) {
        guard !quorum.droppedVoters.isEmpty, scenario.quorum == .live, scenario.lossRate == 0, scenario.corruptRate == 0,
              scenario.adversary == nil, !network.brokerDown, network.reachesBroker(s) else { return }
        let settled = config.downAfter + config.keepaliveInterval
        for id in quorum.droppedVoters {
            guard let n = slots.indices.first(where: { $0 < scenario.nodes && slots[$0].nodeID == id }),
                  slots[n].isRunning, !slots[n].isPaused(at: now), now - slots[n].lastPauseEnd > settled,
                  now - slots[n].startedAt > settled, network.reachesBroker(n),
                  (network.brokerLinkCutAt[n].map { now - $0 > settled } ?? true),
                  !network.peerNetworkBlocked(n, s), !network.peerNetworkBlocked(s, n),
                  now - network.topologyChangedAt > settled || network.blocked(n, s) || network.blocked(s, n)
            else { continue }
            return fail("s\(s) committed \(quorum.ref) after counting s\(n) down as dead while it ran, reached the broker "
                        + "and was heard on the peer network")
        }
    }

    /// With the broker down and the peer network whole, the nodes still hear each other's
    /// keepalives there: two of them may serve at once only for the moment it takes the
    /// lower epoch's master to hear the higher one (after a false suspicion under loss),
    /// never for the outage. Without the peer network's keepalives every node was alone
    /// and each served for the whole outage.
    ///
    /// A paused process answers nobody and cannot step down until it wakes: it counts from
    /// its wake (it then has the same bound to hear the other master), not from the moment
    /// it froze holding an office another node took meanwhile. A serving node whose peer
    /// sends fail is heard by nobody, so the network is not whole for it: it counts from
    /// when they work again (under the live quorum, each side of that one-way cut serves).
    /// How many keepalive intervals two masters may serve side by side there: the lower
    /// one steps down on the first beacon of the higher one it receives intact, and each is
    /// lost or damaged with probability `p`. Four, or as many as make losing every one of
    /// them a 1-in-100,000 event: at high loss a fixed four fails, now and then, a run where
    /// the protocol did what it says.
    public static func beaconIntervals(failing p: Double) -> Int64 {
        var intervals: Int64 = 4, allLost = p * p * p * p
        while allLost >= 1e-5 && intervals < 60 {
            allLost *= p
            intervals += 1
        }
        return intervals
    }

    mutating func checkOneServerWithoutBroker() {
        // The cheap conditions first: this runs after every step.
        guard network.onlyBrokerDown else {
            checker.twoServingSince = nil
            return
        }
        let serving = slots.indices.filter { slots[$0].isServing && !slots[$0].isPaused(at: now) }
        guard serving.count > 1, !serving.contains(where: { network.peerSendsFail($0, at: now) }) else {
            checker.twoServingSince = nil
            return
        }
        let since = checker.twoServingSince ?? now
        checker.twoServingSince = since
        let failing = 1 - (1 - network.lossRate) * (1 - network.corruptRate)
        let bound = config.keepaliveInterval * Self.beaconIntervals(failing: failing) + Milliseconds(2 * (scenario.maxDelay + network.slowest))
        if now - since > bound {
            fail("\(serving.map { "s\($0)" }.joined(separator: " and ")) served together for \((now - since).value) ms "
                 + "while the broker was down and the peer network whole (bound \(bound.value) ms)")
        }
    }


    /// Why the live nodes are not (yet) one master and identical replicas, or nil.
    /// Why the liveness phase's core has not settled yet, or nil: every core node runs,
    /// one of them serves and the others follow it with its replica, nobody holds an
    /// undecided transaction, and the master has answered every held request it took.
    func livenessProblem(_ core: [Int]) -> String? {
        if let s = core.first(where: { !slots[$0].isRunning }) { return "s\(s) is not running" }
        if let problem = convergenceProblem(among: core) { return problem }
        for s in core {
            guard let n = slots[s].node else { continue }
            if let u = n.undecidedTransaction {
                return "s\(s) (\(n.role) of \(n.master.map { "\($0)" } ?? "nobody") in \(n.epoch), last commit \(n.replica.lastCommitted)) "
                    + "holds \(u) undecided"
            }
            if n.heldAwaitingAnswer > 0 { return "s\(s) has \(n.heldAwaitingAnswer) held requests to answer" }
        }
        return nil
    }

    func convergenceProblem(among nodes: [Int]? = nil) -> String? {
        let live = (nodes ?? Array(slots.indices)).filter { slots[$0].isRunning }
        let masters = live.filter { slots[$0].node!.isServing }
        guard masters.count == 1 else {
            let roles = live.map { "s\($0)=\(slots[$0].node!.role)/\(slots[$0].node!.epoch)" }.joined(separator: " ")
            return "after healing, \(masters.count) serving masters (\(roles))"
        }
        let m = slots[masters[0]].node!
        // The digest every status page and snapshot check reads is kept change by change:
        // it must equal a pass over the whole content.
        for s in live where Digest.of(slots[s].node!.replica.store) != Digest.recomputed(slots[s].node!.replica.store) {
            return "after healing, s\(s)'s kept digest differs from its content's"
        }
        // Equal replicas are not settled while a diverged state waits for its merge.
        if let s = live.first(where: { slots[$0].node!.holdsSetAsideOffer }) {
            return "after healing, s\(s) holds a diverged state set aside, not merged yet"
        }
        for s in live where s != masters[0] {
            let n = slots[s].node!
            guard n.role == .slave, n.master == m.id else {
                return "after healing, s\(s) is \(n.role) following \(n.master.map { "\($0)" } ?? "nobody"), not master \(m.id)"
            }
            guard n.replica == m.replica, n.replica.digest == m.replica.digest else {
                return "after healing, s\(s) holds \(n.replica.lastCommitted) digest \(n.replica.digest), master holds \(m.replica.lastCommitted) digest \(m.replica.digest)"
            }
        }
        return nil
    }

    /// Once faults are over, peers must be getting answers: some announce was answered
    /// in the last half of the settling time.
    mutating func checkService() {
        let window = Milliseconds(scenario.settle.value / 2)
        guard !workload.peers.isEmpty, now - Scenario.start > window + Milliseconds.seconds(5) else { return }
        if !workload.anyAnnounceAnswered(since: now - window) {
            fail("no peer got an announce answered in the last \(window.value) ms")
        }
    }

    mutating func checkAcknowledged() {
        guard let ms = slots.indices.first(where: { slots[$0].isServing }), let m = slots[ms].node else { return }
        if let v = checker.lostAcknowledged(master: m.replica, expiredBefore: checker.maxExpireCutoff,
                                            generations: slots.map(\.generation)) { fail(v) }
    }

    /// A registration a surviving replica committed is in the final master's catalogue,
    /// unless the operator removed that torrent at some point (a union merge may then
    /// legitimately keep or drop it); likewise an access rule.
    mutating func checkRegistrations() {
        guard let ms = slots.indices.first(where: { slots[$0].isServing }), let m = slots[ms].node else { return }
        let removed = Set(scenario.operatorActions.compactMap { a -> InfoHash? in
            if case .unregister(let k) = a.change { return OperatorAction.torrent(k)?.infoHash }
            return nil
        })
        if let v = checker.lostRegistration(catalogue: m.replica.store.catalogue, removed: removed,
                                            generations: slots.map(\.operatorGeneration)) { return fail(v) }
        // Swarms the operator gave one rule only (never removed, never the other rule).
        var given: [Int: Set<AccessRule?>] = [:]
        for case .accessRule(let k, let rule) in scenario.operatorActions.map(\.change) { given[k, default: []].insert(rule) }
        var rules: [InfoHash: AccessRule] = [:]
        for (k, kinds) in given where k < workload.swarmHashes.count && kinds.count == 1 {
            if let rule = kinds.first ?? nil { rules[workload.swarmHashes[k]] = rule }
        }
        if let v = checker.lostAccessRule(access: m.replica.store.catalogue.access, rules: rules,
                                          generations: slots.map(\.operatorGeneration)) { return fail(v) }
        var givenClients: [ClientPrefix: Set<AccessRule?>] = [:]
        for case .clientRule(let k, let rule) in scenario.operatorActions.map(\.change) {
            if let prefix = workload.clientPrefix(peer: k) { givenClients[prefix, default: []].insert(rule) }
        }
        var clientRules: [ClientPrefix: AccessRule] = [:]
        for (prefix, kinds) in givenClients where kinds.count == 1 {
            if let rule = kinds.first ?? nil { clientRules[prefix] = rule }
        }
        if let v = checker.lostClientRule(clients: m.replica.store.catalogue.access.clients, rules: clientRules,
                                          generations: slots.map(\.operatorGeneration)) { fail(v) }

    }

    /// Only the heir holds (`TrackerNode.peersUnneeded`), and only from `receiveSkew`
    /// after the last decision it heard. So a lone master failure must find it reading
    /// soon: when a serving master crashes, stops or pauses, the node that would succeed
    /// it (the highest id of the running, unpaused others) is checked once every frame
    /// the master sent is in (`heirCheckDelay`), if it follows that master and nothing
    /// changed who runs for long enough that every node heard of it (a node that died is
    /// believed live for `downAfter` after its last message; a node that woke from a
    /// pause discounts it from its silences). Without this a master's failure could leave
    /// the requests sent until the election to no one and nothing else would fail, since
    /// a node that read nothing holds nothing for `checkHeld`.
    mutating func checkHeirReads(losing master: Int) {
        guard adversary?.plan.kind != .insider, let masterID = slots[master].nodeID else { return }
        let settle = config.downAfter + config.keepaliveInterval + Milliseconds(2 * (scenario.maxDelay + network.slowest))
        let lastPauseEnd = slots.map(\.lastPauseEnd).max() ?? .zero
        guard now - max(lineupChangedAt, lastPauseEnd) > settle else { return }
        let others = slots.indices.filter { $0 != master && slots[$0].isRunning && !slots[$0].isPaused(at: now) }
        guard let heir = others.max(by: { (slots[$0].nodeID ?? .unassigned) < (slots[$1].nodeID ?? .unassigned) }),
              slots[heir].inspect({ $0.master }) == masterID, let process = slots[heir].inspect({ $0.incarnation }) else { return }
        coverage.count(.settledMasterLost)
        queue.push(now + heirCheckDelay, .checkHeirReads(heir, process: process, master: masterID, lostAt: now))
    }

    /// Every frame the lost master sent has arrived by then, and the heir's window
    /// after the last of them (`receiveSkew`) has closed.
    var heirCheckDelay: Milliseconds {
        Milliseconds(scenario.maxDelay + network.slowest) + config.receiveSkew + Milliseconds(2)
    }

    /// The heir of a master lost at `lostAt` reads peer datagrams once `receiveSkew` has
    /// passed since it last heard a serving master — unless it is gone, was paused since
    /// (it cannot take its filter off while stopped: a double failure), was shown a
    /// forged master (an insider), follows another master by now (one elected apart, a
    /// partition or the broker down, which serves: seeds 1811 and 9477, where the heir
    /// took the higher epoch of a lower master while the lost one, above it, still counted
    /// as live, and left peer datagrams to it), or a node started or ended since the loss
    /// (a higher node that joined is the heir now, and reads everything as it starts: seed
    /// 2256372192600608115), the start of the same instant as the loss included: a node
    /// that started just before the loss kept the check from being scheduled at all.
    mutating func checkHeirReads(_ heir: Int, process: UInt64, master: NodeID, lostAt: Instant) {
        guard lineupChangedAt <= lostAt, !slots.contains(where: { $0.isRunning && $0.startedAt >= lostAt }),
              slots[heir].inspect({ $0.incarnation }) == process, slots[heir].inspect({ $0.master }) == master,
              !slots[heir].isPaused(at: now),
              slots[heir].lastPauseEnd <= lostAt, slots[heir].peersFiltered,
              now - slots[heir].held.lastHeardServing > config.receiveSkew + Milliseconds(1) else { return }
        fail("s\(heir), the heir of the master lost at \(lostAt.milliseconds - Scenario.start.milliseconds)ms, still left peer "
             + "datagrams unread \((now - slots[heir].held.lastHeardServing).value) ms after it last heard a serving master "
             + "(window \(config.receiveSkew.value) ms): no node held what arrives until the election")
    }

    /// A span that ends owes nothing more; what it owed and the node holds again (the
    /// requests it took and did not answer, `TrackerNode.stepDown`) the next span owes.
    mutating func endServingSpan(_ slot: Int, began: Instant?) {
        checker.servingEnded(slot, at: now)
        guard let began, let owed = slots[slot].held.owedBySpan.removeValue(forKey: began) else { return }
        let heldAgain = owed.filter { r in
            slots[slot].inspect { $0.holdsRequest(from: workload.peers[r.request.peer].endpoint, transactionID: r.request.tid) } ?? false
        }
        slots[slot].held.receipts = heldAgain + slots[slot].held.receipts
    }

    /// How long a new master may take to answer what it held (an announce commits first).
    static let heldAnswerTime = Milliseconds(3000)

    /// A request sent while no node served, received by a node after it last heard a
    /// serving master and young enough when that node came to serve, is answered after
    /// the node serves (by anyone: a retransmission answered counts too) — unless the node
    /// stopped serving meanwhile, or another master served between the request's arrival
    /// and then (it was that master's to answer; the node learns of it from its
    /// slaves' evidence and must not answer it again). An insider with the key can fake a serving master; those
    /// scenarios only check that nothing crashes or forks.
    ///
    /// A refusal waits for the broker to show its ABORT went out, as long as the office
    /// lasts (`KnownRefusals.swift`): while the master holds refusals back, the check waits
    /// with it (the liveness phase fails a master that holds one for ever).
    mutating func checkHeld(_ slot: Int, servingSince start: Instant) {
        let receipts = slots[slot].held.owedBySpan.removeValue(forKey: start) ?? []
        guard slots[slot].held.servingSince == start, slots[slot].isServing, adversary?.plan.kind != .insider else { return }
        if (slots[slot].inspect { $0.refusalsAwaitingEcho } ?? 0) > 0 {
            slots[slot].held.owedBySpan[start] = receipts
            queue.push(now + config.voteTimeout + Milliseconds(4 * (network.extraDelay[slot] ?? 0)), .checkHeld(slot, start))
            return
        }
        // A master that cannot commit through the broker answers announces when it can,
        // or leaves office (`BrokerLink.swift`): a broker fault since it began to serve,
        // or one under way, takes it out of the bound.
        guard !network.brokerTrouble, network.brokerTroubleAt < start - config.downAfter else { return }
        // A master the liveness phase cut off or stopped meanwhile answers nobody.
        if let l = scenario.liveness, faultsOver, !l.core.contains(slot) { return }
        // What a node read within its skew (or a backlog's drain) of a serving master's
        // message may count as answered.
        let cutoff = slots[slot].held.lastHeardServing + max(config.receiveSkew, config.backlogDrain)
        for r in receipts where r.at > cutoff && r.at > slots[slot].held.backlogUntil && r.at <= start
            && start - r.at < config.heldRequestWindow && !checker.anotherServed(than: slot, after: r.at, before: start, now: now) {
            guard let sent = checker.unservedSends[r.request], (checker.answeredAt[r.request] ?? .zero) >= sent else {
                return fail("request of p\(r.request.peer) (transaction \(r.request.tid)) received by s\(slot) at "
                    + "\(r.at.milliseconds - Scenario.start.milliseconds)ms while no master served was not answered within "
                    + "\((now - start).value) ms of s\(slot) serving at \(start.milliseconds - Scenario.start.milliseconds)ms")
            }
        }
    }
}
