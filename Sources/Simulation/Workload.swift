import NIOCore
import TrackerLogic

/// What drives the cluster from outside: BEP 15 peers that connect, announce, scrape and
/// retransmit on their own clocks, and the operator's dashboard actions. It decides what a
/// peer sends and when; the host carries it (`multicast`) and the checker judges the
/// answers. Peers draw from the world's stream, so a seed's scenario is what it was.
struct Workload {
    var peers: [SimPeer] = []
    /// The scenario's swarms, by index (the operator's access rules name them so).
    var swarmHashes: [InfoHash] = []
    var peerByEndpoint: [PeerEndpoint: Int] = [:]
    /// Set at the end of a scenario: peers go quiet while the cluster converges.
    var draining = false

    /// What a peer sent on its turn.
    struct Sent {
        var datagram: ByteBuffer
        /// The request again (each copy may be answered).
        var retransmits: RequestKey?
        /// A stop: the peer's acknowledged announce may go once it commits.
        var stops: PeerKey?
    }

    /// The client prefix the operator's client rules name for peer `k`: its peer id's
    /// first nine bytes, the client (`-SI0001-`) and one byte of its own, so a rule names
    /// about one peer in 256 besides it.
    func clientPrefix(peer k: Int) -> ClientPrefix? {
        guard peers.indices.contains(k) else { return nil }
        return ClientPrefix(bytes: Array(peers[k].peerID.bytes.prefix(9)))
    }

    /// Creates the peers over the scenario's torrents and schedules their first turns.

    mutating func start(_ scenario: Scenario, rng: inout SeededGenerator, queue: inout EventQueue<SimEvent>, now: Instant) {
        let hashes = (0..<scenario.torrents).map { _ in InfoHash(a: rng.next(), b: rng.next(), c: 0) }
        swarmHashes = hashes
        for i in 0..<scenario.peers {
            var p = SimPeer(index: i, infoHash: hashes[i % hashes.count], rng: &rng)
            // The last ones speak HTTP, each first asking a node of its own.
            if i >= scenario.peers - scenario.httpPeers {
                p.http = true
                p.httpTarget = i % max(scenario.initialNodes, 1)
            }
            peerByEndpoint[p.endpoint] = i
            peers.append(p)
            queue.push(now + Milliseconds(Int64(1500 + rng.below(3000))), .peerWake(i))
        }
    }

    /// Schedules the operator's actions on the nodes' dashboards.
    static func scheduleOperator(_ scenario: Scenario, queue: inout EventQueue<SimEvent>) {
        for (i, action) in scenario.operatorActions.enumerated() { queue.push(action.at, .operatorAction(i)) }
    }

    /// Peer `p`'s turn, if this wake is its current one: what it sends now, if anything.
    /// The caller schedules its next turn (`schedule`).
    mutating func turn(_ p: Int, now: Instant, rng: inout SeededGenerator) -> (due: Bool, sent: Sent?) {
        guard peers[p].wakeAt == nil || peers[p].wakeAt.map({ $0 <= now }) == true else { return (false, nil) }
        peers[p].wakeAt = nil
        if draining { return (false, nil) }
        guard let bytes = peers[p].wake(now: now, rng: &rng) else { return (true, nil) }
        var sent = Sent(datagram: bytes)
        if let o = peers[p].outstanding, o.attempt > 0 { sent.retransmits = RequestKey(peer: p, tid: o.request.transactionID) }
        // A stop may remove the peer once committed, acknowledged or not — and it may
        // overtake an announce sent before it (see `StateChecker.stopSent`).
        if BEP15Codec.peekHeader(bytes)?.action == .announce, bytes.readableBytes >= 84,
           bytes.getInteger(at: bytes.readerIndex + 80, as: UInt32.self) == AnnounceEvent.stopped.rawValue {
            sent.stops = peers[p].key
        }
        return (true, sent)
    }

    /// Peer `p` next wakes at `t`, unless it already wakes earlier.
    mutating func schedule(_ p: Int, at t: Instant, now: Instant, queue: inout EventQueue<SimEvent>) {
        if let w = peers[p].wakeAt, w > now, w <= t { return }
        peers[p].wakeAt = t
        queue.push(t, .peerWake(p))
    }

    /// The peer of a node's reply, if it is one of ours.
    func peer(at endpoint: PeerEndpoint) -> Int? { peerByEndpoint[endpoint] }

    /// Some peer got an announce answered after `t`.
    func anyAnnounceAnswered(since t: Instant) -> Bool {
        peers.contains { ($0.lastAnnounceReply ?? .zero) > t }
    }
}

/// How the world runs the workload.
extension Simulator {
    /// A peer's turn: it sends what it must (the host multicasts it) and sleeps again.
    mutating func peerTurn(_ p: Int) {
        if workload.peers[p].http {
            guard workload.peers[p].wakeAt.map({ $0 <= now }) != false else { return }
            workload.peers[p].wakeAt = nil
            if !workload.draining { httpTurn(p) }
            return
        }
        let (due, sent) = workload.turn(p, now: now, rng: &rng)
        guard due else { return }
        if let sent {
            if let request = sent.retransmits { checker.retransmitted.insert(request) }
            if let key = sent.stops { checker.stopSent(by: key, at: now) }
            if case .success(.announce(let r)) = BEP15Codec.decodeRequest(sent.datagram) {
                checker.announceSent(by: workload.peers[p].key,
                                     values: .init(uploaded: r.uploaded, downloaded: r.downloaded, left: r.left, port: r.port),
                                     request: RequestKey(peer: p, tid: r.transactionID), at: now)
            }
            multicast(sent.datagram, from: p)
        }
        workload.schedule(p, at: workload.peers[p].nextDeadline ?? now + Milliseconds(Int64(200 + rng.below(1500))), now: now, queue: &queue)
    }

    /// A node's reply reaches its peer, which checks it.
    mutating func peerReceives(_ bytes: ByteBuffer, peer p: Int) {
        let v = workload.peers[p].receive(bytes, now: now)
        traceDigest.add(UInt64(p), UInt64(bytes.readableBytes))
        if let v { fail(v) }
        workload.schedule(p, at: now + Milliseconds(Int64(200 + rng.below(1500))), now: now, queue: &queue)
    }

    /// The operator registers or removes a torrent on a node's dashboard.
    mutating func operatorActs(_ i: Int) {
        let action = scenario.operatorActions[i]
        guard action.slot < slots.count else { return }
        // The file changed whether or not the node runs: its next start reads it.
        if case .reload(let interval) = action.change { slots[action.slot].reloadedInterval = interval }
        guard slots[action.slot].isRunning else { return }
        switch action.change {
        case .register(let k):
            guard let t = OperatorAction.torrent(k) else { return fail("simulated torrent \(k) does not parse") }
            step(action.slot, .submit(.register(t)), label: "OPERATOR \(action)")
        case .unregister(let k):
            guard let t = OperatorAction.torrent(k) else { return }
            step(action.slot, .submit(.unregister(t.infoHash)), label: "OPERATOR \(action)")
        case .reload:
            let config = trackerConfig(of: action.slot)
            guard config.problems.isEmpty else { return fail("simulated reload is not a valid configuration: \(config.problems)") }
            step(action.slot, .reconfigure(config), label: "OPERATOR \(action)")
        case .accessMode(let mode):
            step(action.slot, .submit(.setAccessMode(mode)), label: "OPERATOR \(action)")
        case .accessRule(let k, let rule):
            guard k < workload.swarmHashes.count else { return }
            let hashes = [workload.swarmHashes[k]]
            step(action.slot, .submit(rule.map { .setAccessRule($0, hashes) } ?? .removeAccessRules(hashes)), label: "OPERATOR \(action)")
        case .clientRule(let k, let rule):
            guard let prefix = workload.clientPrefix(peer: k) else { return }
            step(action.slot, .submit(rule.map { .setClientRule($0, [prefix]) } ?? .removeClientRules([prefix])), label: "OPERATOR \(action)")
        case .user(let k, let op):
            guard let name = UserName("p\(k)") else { return }
            let change: CatalogueChange = switch op {
            case .add: .addUser(User(name: name, role: .peer, key: SimPeer.trackerKey(k)))
            case .disable: .editUser(name, .enabled(false))
            case .enable: .editUser(name, .enabled(true))
            case .remove: .removeUser(name)
            case .dropKey: .editUser(name, .key(nil))
            }
            step(action.slot, .submit(change), label: "OPERATOR \(action)")

        }
    }
}
