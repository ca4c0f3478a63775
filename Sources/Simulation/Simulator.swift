import NIOCore
import TrackerLogic

/// What one simulated run found.
public struct SimulationReport: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var scenario: Scenario
    public var violation: String?
    public var traceHash: UInt64
    public var events: Int
    public var commits: Int
    public var acknowledgedAnnounces: Int
    public var trace: [String]
    /// Frames the adversary injected, and frames the nodes' channels dropped (any source).
    public var hostileFrames = 0
    public var rejectedFrames: [ClusterRejection: Int] = [:]
    /// Hostile frames that reached a live node's channel, and how many of those it dropped.
    public var hostileDelivered = 0
    public var hostileRejected = 0

    public var passed: Bool { violation == nil }
    public var replayCommand: String { "swift run tracker simulate --seed \(seed) --trace" }

    public var description: String {
        if let v = violation {
            return "FAIL seed \(seed): \(v)\n  scenario: \(scenario)\n  replay: \(replayCommand)"
        }
        return "ok seed \(seed): \(events) events, \(commits) commits, \(acknowledgedAnnounces) acknowledged announces, trace \(String(traceHash, radix: 16))"
    }
}

/// Disk of a simulated node: survives crashes, fails on demand.
struct SimDisk {
    var base: Snapshot?
    var txs: [Transaction] = []
    var epoch = Epoch.zero
    var failing = false

    var lastTxid: UInt64 { txs.last?.txid ?? base?.lastCommitted.txid ?? 0 }

    func durable() -> DurableState {
        guard base != nil || !txs.isEmpty else { return DurableState(snapshot: nil, epoch: epoch) }
        var replica = Replica()
        if let b = base { replica.install(b) }
        for tx in txs { replica.commit(tx) }
        return DurableState(snapshot: replica.snapshot(), epoch: epoch)
    }
}

struct SimSlot {
    var node: TrackerNode?
    var disk = SimDisk()
    var exists = false
    var scheduledTick: Instant?
    var trackedLast = TxRef.zero
    /// Bumped when the node's memory is lost beyond what its disk kept, or wiped.
    var generation = 0
    var extraDelay: Int64 = 0
    /// Seals the node's frames and verifies what reaches it, as in the runtime.
    var channel: ClusterChannel?
    /// What the held-request check watches on this node's current process.
    var held = HeldWatch()
}

/// Per node process: requests it received that no node could answer when they were sent
/// (and only those received after it last heard a serving master count), when it last
/// heard one, and since when it serves.
struct HeldWatch {
    var receipts: [HeldReceipt] = []
    var lastHeardServing = Instant(milliseconds: .min)
    var servingSince: Instant?
}

enum SimEvent {
    case tick(Int)
    /// A sealed frame for a node: from the broker, or (`beacon`) a keepalive on the peer network.
    case cluster(Int, ByteBuffer, fromAdversary: Bool, fromServing: Bool, beacon: Bool = false)
    case peerDatagram(Int, ByteBuffer, PeerEndpoint)
    case reply(Int, ByteBuffer)
    case storeResult(Int, UInt64, Bool)
    case epochStored(Int, UInt64, Epoch)
    case peerWake(Int)
    case fault(Scenario.Fault)
    case endFaults
    case adversaryWake
    case operatorAction(Int)
    /// A node came to serve at this instant: check it answered what it held.
    case checkHeld(Int, Instant)
}

/// A peer request, by peer and transaction id.
struct RequestKey: Hashable, Comparable {
    var peer: Int
    var tid: UInt32
    static func < (l: RequestKey, r: RequestKey) -> Bool { (l.peer, l.tid) < (r.peer, r.tid) }
}

/// A node received a request that no node could answer when it was sent.
struct HeldReceipt {
    var request: RequestKey
    var at: Instant
}

struct AckedAnnounce {
    var at: Instant
    var stopped: Bool
    var holders: [Int: Int]  // slot -> generation at the time
}

/// A whole cluster, its network, disks and peers, in virtual time. One seed decides
/// everything; nothing here reads a clock, a global generator or an unordered
/// collection's iteration order.
public struct Simulator {
    public let scenario: Scenario
    var rng: SeededGenerator
    var now = Scenario.start
    var queue = EventQueue<SimEvent>()
    var slots: [SimSlot]
    var peers: [SimPeer] = []
    var peerByEndpoint: [PeerEndpoint: Int] = [:]
    /// Both channels cut between the two sides (the nodes cannot reach each other at all).
    var partitionSide: Set<Int>?
    var oneWay: (from: Int, to: Int)?
    /// The broker is down: no broker frame goes anywhere; the peer network still carries
    /// keepalives.
    var brokerDown = false
    /// Only the peer network is cut between the sides (the broker still connects them).
    var peerNetworkSide: Set<Int>?
    /// Since when two nodes serve at once during a broker outage (see the check).
    var twoServingSince: Instant?
    var faultsOver = false
    var draining = false
    var extraIDs: [NodeID] = []
    var config: ClusterConfig
    var trackerConfig: TrackerConfig
    let key: SipHash24
    /// The cluster key every node holds (an insider adversary too).
    let clusterKey: ClusterKey
    var adversary: Adversary?
    /// Frames the nodes' channels dropped, per reason.
    public private(set) var rejections: [ClusterRejection: Int] = [:]
    var hostileDelivered = 0
    var hostileRejected = 0

    var epochMasters: [Epoch: NodeID] = [:]
    var appliedDigests: [TxRef: UInt64] = [:]
    var appliedBy: [TxRef: [Int: Int]] = [:]
    var acked: [PeerKey: AckedAnnounce] = [:]
    var ackedInfoHash: [PeerKey: InfoHash] = [:]
    var maxExpireCutoff = Instant(milliseconds: Int64.min)
    /// Registrations some replica committed: info hash → slot → generation then.
    var committedTorrents: [InfoHash: [Int: Int]] = [:]
    /// Requests sent while no node served (first such send), and when each request was
    /// last answered by anyone.
    var unservedSends: [RequestKey: Instant] = [:]
    var answeredAt: [RequestKey: Instant] = [:]
    var violation: String?
    var traceDigest = Digest()
    var tracing: Bool
    var trace: [String] = []
    var events = 0
    var commits = 0
    var acknowledged = 0

    public init(scenario: Scenario, trace: Bool = false) {
        self.scenario = scenario
        self.rng = SeededGenerator(seed: scenario.seed ^ 0x5349_4D55_4C41_5445)
        self.tracing = trace
        self.slots = Array(repeating: SimSlot(), count: scenario.nodes)
        var c = ClusterConfig()
        c.quorum = scenario.quorum
        c.clusterSize = scenario.nodes
        c.keepaliveInterval = Milliseconds(1000)
        self.config = c
        var t = TrackerConfig()
        t.announceInterval = scenario.announceInterval
        t.peerTimeout = scenario.peerTimeout
        t.rateLimitTableSize = 1024
        self.trackerConfig = t
        self.key = SipHash24(k0: scenario.seed, k1: 0x4B45_59)
        var keyBytes = SeededGenerator(seed: scenario.seed ^ 0x4B45_5953)
        self.clusterKey = ClusterKey(bytes: (0..<ClusterKey.length).map { _ in UInt8(truncatingIfNeeded: keyBytes.next()) }) ?? .insecure
        if let plan = scenario.adversary {
            adversary = Adversary(plan: plan, seed: scenario.seed ^ 0x4845_5245_5449_43, key: clusterKey, now: Scenario.start)
        }
    }

    /// Far above what a healthy scenario needs (a few thousand events).
    static let eventBudget = 300_000

    public static func run(seed: UInt64, trace: Bool = false) -> SimulationReport {
        var sim = Simulator(scenario: Scenario(seed: seed), trace: trace)
        return sim.run()
    }

    public mutating func run() -> SimulationReport {
        start()
        advance(to: scenario.faultEnd + scenario.settle)
        return finish()
    }

    /// Creates peers and the initial nodes and schedules the scenario's faults.
    public mutating func start() {
        let hashes = (0..<scenario.torrents).map { _ in InfoHash(a: rng.next(), b: rng.next(), c: 0) }
        for i in 0..<scenario.peers {
            let p = SimPeer(index: i, infoHash: hashes[i % hashes.count], rng: &rng)
            peerByEndpoint[p.endpoint] = i
            peers.append(p)
            queue.push(now + Milliseconds(Int64(1500 + rng.below(3000))), .peerWake(i))
        }
        for s in 0..<scenario.initialNodes { startNode(s) }
        for f in scenario.faults { queue.push(f.at, .fault(f.fault)) }
        queue.push(scenario.faultEnd, .endFaults)
        for (i, action) in scenario.operatorActions.enumerated() { queue.push(action.at, .operatorAction(i)) }
        if var a = adversary {
            queue.push(now + Milliseconds(1000) + a.nextDelay(), .adversaryWake)
            adversary = a
        }
    }

    /// Runs every event up to `time` (virtual), checking invariants after each.
    public mutating func advance(to time: Instant) {
        runUntil(time) { _ in false }
        if violation == nil && now < time { now = time }  // time passes even when nothing happens
    }

    public mutating func advance(by span: Milliseconds) { advance(to: now + span) }

    /// Checks service, lets the cluster drain and converge, checks that nothing
    /// acknowledged was lost, and reports.
    public mutating func finish() -> SimulationReport {
        if violation == nil { checkService() }
        // Drain: peers go quiet; the cluster must converge while commits already under
        // way finish.
        draining = true
        var converged = false
        runUntil(now + Milliseconds.seconds(10)) { sim in
            converged = sim.convergenceProblem() == nil
            return converged
        }
        if violation == nil && !converged { fail(convergenceProblem() ?? "did not converge") }
        if violation == nil { checkAcknowledged() }
        if violation == nil { checkRegistrations() }
        return SimulationReport(seed: scenario.seed, scenario: scenario, violation: violation, traceHash: traceDigest.value,
                                events: events, commits: commits, acknowledgedAnnounces: acknowledged, trace: trace,
                                hostileFrames: adversary?.injected ?? 0, rejectedFrames: rejections,
                                hostileDelivered: hostileDelivered, hostileRejected: hostileRejected)
    }

    // MARK: observation, for named scenario tests

    public var currentTime: Instant { now }
    public var firstViolation: String? { violation }
    public func node(_ slot: Int) -> TrackerNode? { slots[slot].node }
    public var slotCount: Int { slots.count }
    /// When each peer reply was sent, and by which slot.
    public private(set) var replies: [(at: Instant, slot: Int, isError: Bool)] = []
    /// Nodes that exited, and why.
    public private(set) var exits: [(slot: Int, reason: String)] = []
    public var peerErrors: [String] { peers.flatMap(\.errors) }
    public var peerAnnounceReplies: Int { peers.reduce(0) { $0 + $1.announceReplies } }

    /// The serving master's slot, if exactly one node serves.
    public var servingSlot: Int? {
        let serving = slots.indices.filter { slots[$0].node?.isServing == true }
        return serving.count == 1 ? serving[0] : nil
    }

    /// Applies a fault now.
    public mutating func inject(_ fault: Scenario.Fault) {
        note(-1, "FAULT \(fault) (injected)")
        apply(fault)
    }

    /// Starts one more node that claims `id` (to test duplicate ids); returns its slot.
    public mutating func startExtraNode(id: NodeID) -> Int {
        slots.append(SimSlot())
        extraIDs.append(id)
        let slot = slots.count - 1
        startNode(slot)
        return slot
    }

    // MARK: nodes

    func nodeID(_ slot: Int) -> NodeID {
        slot < scenario.nodes ? NodeID(UInt32(slot + 1)) : extraIDs[slot - scenario.nodes]
    }

    func drift(_ slot: Int) -> Int64 { slot < scenario.clockDrift.count ? scenario.clockDrift[slot] : 0 }

    func nodeNow(_ slot: Int) -> Instant { now + Milliseconds(drift(slot)) }

    func slot(of id: NodeID) -> Int? {
        slots.indices.first { slots[$0].node?.id == id } ?? (Int(id.rawValue) - 1 < scenario.nodes ? Int(id.rawValue) - 1 : nil)
    }

    mutating func startNode(_ slot: Int) {
        slots[slot].exists = true
        let durable = slots[slot].disk.durable()
        let node = TrackerNode(id: nodeID(slot), incarnation: rng.next(), config: config,
                               handler: PeerRequestHandler(config: trackerConfig, connectionIDs: ConnectionIDPolicy(key: key)),
                               seed: rng.next(), now: nodeNow(slot), restoring: durable,
                               address: "10.9.0.\(slot + 1):6969")
        slots[slot].node = node
        slots[slot].held = HeldWatch()  // a new process holds nothing
        slots[slot].channel = ClusterChannel(keys: [clusterKey], startedAt: nodeNow(slot), fragmentBytes: scenario.fragmentBytes)
        slots[slot].trackedLast = node.replica.lastCommitted
        slots[slot].scheduledTick = nil
        note(slot, "start (restored \(node.replica.lastCommitted))")
        scheduleTick(slot)
    }

    mutating func scheduleTick(_ slot: Int) {
        guard let node = slots[slot].node else { return }
        let wake = node.nextWake(now: nodeNow(slot)) - Milliseconds(drift(slot))
        if let s = slots[slot].scheduledTick, s > now, s <= wake { return }
        slots[slot].scheduledTick = wake
        queue.push(wake, .tick(slot))
    }

    mutating func step(_ slot: Int, _ event: NodeEvent, label: @autoclosure () -> String) {
        guard var node = slots[slot].node else { return }
        slots[slot].node = nil  // the only reference while it steps: no copy-on-write of its state
        let actions = node.step(event, now: nodeNow(slot))
        slots[slot].node = node
        traceDigest.add(UInt64(bitPattern: now.milliseconds), UInt64(slot), UInt64(actions.count))
        if tracing { trace.append("\(now.milliseconds - Scenario.start.milliseconds)ms s\(slot) [\(node.role) \(node.epoch)] \(label()) -> \(actions.map(describe).joined(separator: ", "))") }
        observeCommits(slot)
        for action in actions { perform(action, from: slot) }
        if slots[slot].node != nil { checkStep(slot) }
        scheduleTick(slot)
    }

    // MARK: events

    mutating func handle(_ event: SimEvent) {
        switch event {
        case .tick(let s):
            guard slots[s].scheduledTick == now else { return }
            slots[s].scheduledTick = nil
            step(s, .tick, label: "tick")
        case .cluster(let s, let frame, let fromAdversary, let fromServing, let beacon):
            guard let node = slots[s].node, var channel = slots[s].channel else { return }
            let opened = channel.open(frame, ownID: node.id, now: nodeNow(s))
            slots[s].channel = channel
            if fromAdversary {
                hostileDelivered += 1
                if case .failure = opened { hostileRejected += 1 }
            }
            switch opened {
            case .success(nil):
                break
            case .success(let env?):
                if fromAdversary && adversary?.plan.kind == .outsider {
                    return fail("s\(s) accepted a frame forged without the key: \(env.message.name) from n\(env.from.rawValue)")
                }
                if fromServing { slots[s].held.lastHeardServing = now }
                step(s, beacon ? .beacon(env) : .cluster(env),
                     label: "\(fromAdversary ? "HOSTILE " : "")\(beacon ? "beacon " : "")\(env.message.name) from n\(env.from.rawValue) \(env.epoch)")
            case .failure(let reason):
                rejections[reason, default: 0] += 1
                if tracing && !fromAdversary { note(s, "dropped a frame: \(reason)") }
            }
        case .adversaryWake:
            guard var a = adversary, !faultsOver else { return }
            // A participant of the broker: while it is down, nobody publishes anything.
            if brokerDown {
                queue.push(now + a.nextDelay(), .adversaryWake)
                adversary = a
                return
            }
            let master = servingSlot.flatMap { s in slots[s].node.map { (id: $0.id, epoch: $0.epoch) } }
            let ids = slots.compactMap { $0.node?.id }
            let frame = a.forge(now: now, master: master, ids: ids)
            // Published on the topic: every live node gets it, after a delay of the
            // adversary's own drawing (the nodes' randomness is not touched).
            for s in slots.indices where slots[s].node != nil {
                queue.push(now + Milliseconds(1) + Milliseconds(Int64(a.rng.below(Int(scenario.maxDelay) + 1))),
                           .cluster(s, frame, fromAdversary: true, fromServing: false))
            }
            queue.push(now + a.nextDelay(), .adversaryWake)
            adversary = a
        case .operatorAction(let i):
            let action = scenario.operatorActions[i]
            guard action.slot < slots.count, slots[action.slot].node != nil else { return }
            switch action.change {
            case .register(let k):
                guard let t = OperatorAction.torrent(k) else { return fail("simulated torrent \(k) does not parse") }
                step(action.slot, .submit(.register(t)), label: "OPERATOR \(action)")
            case .unregister(let k):
                guard let t = OperatorAction.torrent(k) else { return }
                step(action.slot, .submit(.unregister(t.infoHash)), label: "OPERATOR \(action)")
            }
        case .peerDatagram(let s, let bytes, let from):
            if let node = slots[s].node, !node.isServing, let p = peerByEndpoint[from],
               let header = BEP15Codec.peekHeader(bytes), unservedSends[RequestKey(peer: p, tid: header.transactionID)] != nil {
                slots[s].held.receipts.append(HeldReceipt(request: RequestKey(peer: p, tid: header.transactionID), at: now))
            }
            step(s, .peer(bytes, from: from), label: "datagram from \(from)")
        case .checkHeld(let s, let start):
            checkHeld(s, servingSince: start)
        case .reply(let p, let bytes):
            let v = peers[p].receive(bytes, now: now)
            traceDigest.add(UInt64(p), UInt64(bytes.readableBytes))
            if let v { fail(v) }
            schedulePeer(p, at: now + Milliseconds(Int64(200 + rng.below(1500))))
        case .storeResult(let s, let incarnation, let ok):
            guard slots[s].node?.incarnation == incarnation else { return }
            step(s, .storeResult(ok: ok, detail: ok ? "" : "disk failure"), label: "store \(ok ? "ok" : "failed")")
        case .epochStored(let s, let incarnation, let epoch):
            guard slots[s].node?.incarnation == incarnation else { return }
            step(s, .epochStored(epoch), label: "epoch \(epoch) stored")
        case .peerWake(let p):
            guard peers[p].wakeAt == nil || peers[p].wakeAt! <= now else { return }
            peers[p].wakeAt = nil
            if draining { return }
            if let bytes = peers[p].wake(now: now, rng: &rng) { multicast(bytes, from: p) }
            schedulePeer(p, at: peers[p].nextDeadline ?? now + Milliseconds(Int64(200 + rng.below(1500))))
        case .fault(let f):
            note(-1, "FAULT \(f)")
            apply(f)
        case .endFaults:
            faultsOver = true
            partitionSide = nil
            oneWay = nil
            brokerDown = false
            peerNetworkSide = nil
            for s in slots.indices {
                slots[s].extraDelay = 0
                if slots[s].disk.failing {
                    slots[s].disk.failing = false
                }
                if slots[s].exists && slots[s].node == nil { startNode(s) }
            }
            note(-1, "FAULTS END: network healed, every node up")
        }
    }

    mutating func schedulePeer(_ p: Int, at t: Instant) {
        if let w = peers[p].wakeAt, w > now, w <= t { return }
        peers[p].wakeAt = t
        queue.push(t, .peerWake(p))
    }

    mutating func apply(_ fault: Scenario.Fault) {
        switch fault {
        case .crash(let s):
            guard let node = slots[s].node else { return }
            if slots[s].disk.lastTxid < node.replica.lastCommitted.txid { slots[s].generation += 1 }
            slots[s].node = nil
        case .restart(let s), .join(let s):
            if slots[s].node == nil { startNode(s) }
        case .shutdown(let s):
            step(s, .shutdown, label: "shutdown")
            slots[s].node = nil
        case .partition(let side): partitionSide = Set(side)
        case .oneWay(let a, let b): oneWay = (a, b)
        case .brokerOutage: brokerDown = true
        case .peerNetworkPartition(let side): peerNetworkSide = Set(side)
        case .heal:
            partitionSide = nil
            oneWay = nil
            brokerDown = false
            peerNetworkSide = nil
        case .storeFails(let s): slots[s].disk.failing = true
        case .storeHeals(let s): slots[s].disk.failing = false
        case .slow(let s, let d): slots[s].extraDelay = d
        }
    }

    // MARK: network

    /// Whether a broker frame from a to b is lost to a fault.
    func blocked(_ a: Int, _ b: Int) -> Bool {
        if brokerDown { return true }
        if let side = partitionSide, side.contains(a) != side.contains(b) { return true }
        if let w = oneWay, w.from == a, w.to == b { return true }
        return false
    }

    /// Whether a keepalive on the peer network from a to b is lost to a fault.
    func peerNetworkBlocked(_ a: Int, _ b: Int) -> Bool {
        if let side = partitionSide, side.contains(a) != side.contains(b) { return true }
        if let side = peerNetworkSide, side.contains(a) != side.contains(b) { return true }
        if let w = oneWay, w.from == a, w.to == b { return true }
        return false
    }

    mutating func delay(_ slots: Int...) -> Milliseconds {
        let base = scenario.minDelay + Int64(rng.below(Int(scenario.maxDelay - scenario.minDelay) + 1))
        return Milliseconds(base + slots.reduce(0) { $0 + self.slots[$1].extraDelay })
    }

    mutating func lost() -> Bool { !faultsOver && rng.chance(scenario.lossRate) }
    mutating func duplicated() -> Bool { !faultsOver && rng.chance(scenario.duplicateRate) }

    mutating func deliverCluster(_ frame: ByteBuffer, from: Int, to: Int, beacon: Bool = false) {
        guard slots[to].node != nil, !(beacon ? peerNetworkBlocked(from, to) : blocked(from, to)) else { return }
        if lost() { return }
        let serving = slots[from].node?.isServing == true
        queue.push(now + delay(from, to), .cluster(to, frame, fromAdversary: false, fromServing: serving, beacon: beacon))
        // A duplicate is dropped by the receiver's replay window.
        if duplicated() { queue.push(now + delay(from, to), .cluster(to, frame, fromAdversary: false, fromServing: serving, beacon: beacon)) }
    }

    mutating func multicast(_ bytes: ByteBuffer, from peer: Int) {
        // Connects and announces (scrapes are not held: they are cheap to resend).
        if !slots.contains(where: { $0.node?.isServing == true }), let header = BEP15Codec.peekHeader(bytes),
           header.action == .connect || header.action == .announce {
            let key = RequestKey(peer: peer, tid: header.transactionID)
            if unservedSends[key] == nil { unservedSends[key] = now }
        }
        for s in slots.indices where slots[s].node != nil {
            if lost() { continue }
            queue.push(now + delay(s), .peerDatagram(s, bytes, peers[peer].endpoint))
        }
    }

    mutating func perform(_ action: NodeAction, from slot: Int) {
        switch action {
        case .broadcast(let env), .send(let env), .beacon(let env):
            // Every message crosses the wire format, so the codec is exercised all the time.
            let bytes = ClusterCodec.encode(env)
            traceDigest.add(UInt64(bytes.readableBytes), UInt64(env.message.name.utf8.count))
            guard case .success(let decoded) = ClusterCodec.decode(bytes), decoded == env else {
                return fail("cluster codec does not round-trip \(env.message.name)")
            }
            guard var channel = slots[slot].channel else { return }
            let beacon: Bool
            if case .beacon = action { beacon = true } else { beacon = false }
            // A keepalive on the peer network is one datagram; the broker carries fragments.
            let frames = beacon ? [channel.seal(env, now: nodeNow(slot))]
                : channel.sealFragments(encoded: bytes, from: env.from, incarnation: env.incarnation, now: nodeNow(slot))
            slots[slot].channel = channel
            for frame in frames {
                adversary?.capture(frame)
                if beacon {
                    for s in slots.indices where s != slot { deliverCluster(frame, from: slot, to: s, beacon: true) }
                } else if case .send = action, let to = env.to {
                    // Unicast reaches every live node holding that id (an impostor too).
                    for s in slots.indices where s != slot && slots[s].node?.id == to { deliverCluster(frame, from: slot, to: s) }
                } else {
                    for s in slots.indices where s != slot { deliverCluster(frame, from: slot, to: s) }
                }
            }
        case .reply(let response, let to):
            guard let node = slots[slot].node, node.isServing else {
                return fail("s\(slot) answered a peer while not a serving master")
            }
            guard let p = peerByEndpoint[to] else { return }
            answeredAt[RequestKey(peer: p, tid: response.transactionID)] = now
            if case .error = response { replies.append((now, slot, true)) } else { replies.append((now, slot, false)) }
            if case .announce = response { recordAck(peer: p, by: slot) }
            let bytes = BEP15Codec.encode(response)
            if lost() { return }
            queue.push(now + delay(slot), .reply(p, bytes))
        case .persist(let tx):
            if slots[slot].disk.failing { return storeResult(slot, ok: false) }
            guard tx.txid == slots[slot].disk.lastTxid + 1 else {
                return fail("s\(slot) persisted \(tx.ref) after \(slots[slot].disk.lastTxid): a gap on disk")
            }
            slots[slot].disk.txs.append(tx)
            if slots[slot].disk.txs.count > 512 {
                slots[slot].disk.base = slots[slot].disk.durable().snapshot
                slots[slot].disk.txs = []
            }
        case .persistSnapshot(let s):
            if slots[slot].disk.failing { return storeResult(slot, ok: false) }
            slots[slot].disk.base = s
            slots[slot].disk.txs = []
        case .persistEpoch(let e):
            // As in the runtime, a failing disk loses the epoch write too.
            if slots[slot].disk.failing { return storeResult(slot, ok: false) }
            slots[slot].disk.epoch = max(slots[slot].disk.epoch, e)
            if let inc = slots[slot].node?.incarnation { queue.push(now, .epochStored(slot, inc, e)) }
        case .wipeStore:
            slots[slot].generation += 1
            slots[slot].disk.base = nil
            slots[slot].disk.txs = []
        case .probeStore:
            storeResult(slot, ok: !slots[slot].disk.failing)
        case .exit(let reason):
            exits.append((slot, reason))
            if reason != "left the cluster" && slot < scenario.nodes { fail("s\(slot) exited: \(reason)") }
            slots[slot].node = nil
        }
    }

    /// Only failures and probes are reported back: a successful write needs no event.
    mutating func storeResult(_ slot: Int, ok: Bool) {
        guard let inc = slots[slot].node?.incarnation else { return }
        queue.push(now, .storeResult(slot, inc, ok))
    }

    mutating func recordAck(peer p: Int, by slot: Int) {
        guard let node = slots[slot].node else { return }
        let key = peers[p].key
        let hash = peers[p].infoHash
        acknowledged += 1
        var holders: [Int: Int] = [:]
        if let ref = node.replica.lastTransaction(announcing: key, in: hash) {
            for (s, gen) in appliedBy[ref] ?? [:] { holders[s] = gen }
        }
        holders[slot] = slots[slot].generation
        if let record = node.replica.store[hash]?.peer(key) {
            acked[key] = AckedAnnounce(at: record.lastAnnounce, stopped: false, holders: holders)
        } else {
            acked[key] = AckedAnnounce(at: nodeNow(slot), stopped: true, holders: holders)
        }
        ackedInfoHash[key] = hash
    }

    // MARK: invariants

    mutating func fail(_ message: String) {
        if violation == nil {
            violation = "at \(now.milliseconds - Scenario.start.milliseconds)ms: \(message)"
            note(-1, "VIOLATION \(message)")
        }
    }

    mutating func observeCommits(_ slot: Int) {
        guard let node = slots[slot].node else { return }
        let last = node.replica.lastCommitted
        let tracked = slots[slot].trackedLast
        guard last != tracked else { return }
        slots[slot].trackedLast = last
        if last.txid == 0 { slots[slot].generation += 1; return }
        guard node.replica.isPrefix(tracked), let txs = node.replica.transactions(after: tracked.txid, limit: Int.max) else {
            return  // a snapshot replaced the state
        }
        for tx in txs {
            commits += 1
            let digest = tx.digest
            if let known = appliedDigests[tx.ref], known != digest {
                return fail("two different transactions committed as \(tx.ref)")
            }
            appliedDigests[tx.ref] = digest
            appliedBy[tx.ref, default: [:]][slot] = slots[slot].generation
            for case .expire(let before) in tx.updates where before > maxExpireCutoff { maxExpireCutoff = before }
            for case .catalogue(.register(let t)) in tx.updates { committedTorrents[t.infoHash, default: [:]][slot] = slots[slot].generation }
        }
    }

    mutating func checkStep(_ slot: Int) {
        guard let node = slots[slot].node else { return }
        if node.isServing != (slots[slot].held.servingSince != nil) {
            slots[slot].held.servingSince = node.isServing ? now : nil
            if node.isServing { queue.push(now + Self.heldAnswerTime, .checkHeld(slot, now)) }
        }
        if node.role == .master {
            if let other = epochMasters[node.epoch], other != node.id {
                return fail("two masters in epoch \(node.epoch): n\(other.rawValue) and n\(node.id.rawValue)")
            }
            epochMasters[node.epoch] = node.id
        }
        checkOneServerWithoutBroker()
    }

    /// With the broker down and the peer network whole, the nodes still hear each other's
    /// keepalives there: two of them may serve at once only for the moment it takes the
    /// lower epoch's master to hear the higher one (after a false suspicion under loss),
    /// never for the outage. Without the peer network's keepalives every node was alone
    /// and each served for the whole outage.
    mutating func checkOneServerWithoutBroker() {
        // The cheap conditions first: this runs after every step.
        guard brokerDown, partitionSide == nil, peerNetworkSide == nil, oneWay == nil else {
            twoServingSince = nil
            return
        }
        let serving = slots.indices.filter { slots[$0].node?.isServing == true }
        guard serving.count > 1 else {
            twoServingSince = nil
            return
        }
        let since = twoServingSince ?? now
        twoServingSince = since
        let slowest = slots.map(\.extraDelay).max() ?? 0
        let bound = config.keepaliveInterval * 4 + Milliseconds(2 * (scenario.maxDelay + slowest))
        if now - since > bound {
            fail("\(serving.map { "s\($0)" }.joined(separator: " and ")) served together for \((now - since).value) ms "
                 + "while the broker was down and the peer network whole (bound \(bound.value) ms)")
        }
    }

    mutating func runUntil(_ end: Instant, stop: (Simulator) -> Bool) {
        while violation == nil, let (time, event) = queue.pop() {
            if time > end {
                queue.push(time, event)
                break
            }
            now = time
            events += 1
            if events > Self.eventBudget {
                return fail("more than \(Self.eventBudget) events: a livelock or a message storm")
            }
            handle(event)
            if stop(self) { break }
        }
    }

    /// Why the live nodes are not (yet) one master and identical replicas, or nil.
    func convergenceProblem() -> String? {
        let live = slots.indices.filter { slots[$0].node != nil }
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
        guard !peers.isEmpty, now - Scenario.start > window + Milliseconds.seconds(5) else { return }
        if !peers.contains(where: { ($0.lastAnnounceReply ?? .zero) > now - window }) {
            fail("no peer got an announce answered in the last \(window.value) ms")
        }
    }

    mutating func checkAcknowledged() {
        guard let ms = slots.indices.first(where: { slots[$0].node?.isServing == true }) else { return }
        let m = slots[ms].node!
        for key in acked.keys.sorted() {
            let a = acked[key]!
            guard !a.stopped, a.at >= maxExpireCutoff else { continue }
            let survivors = a.holders.filter { slots[$0.key].generation == $0.value }
            guard !survivors.isEmpty else { continue }
            let record = m.replica.store[ackedInfoHash[key]!]?.peer(key)
            guard let r = record, r.lastAnnounce >= a.at else {
                return fail("acknowledged announce of \(key.ip) at \(a.at.milliseconds - Scenario.start.milliseconds)ms was lost (holders \(survivors.keys.sorted()))")
            }
        }
    }

    /// A registration a surviving replica committed is in the final master's catalogue,
    /// unless the operator removed that torrent at some point (a union merge may then
    /// legitimately keep or drop it).
    mutating func checkRegistrations() {
        guard let ms = slots.indices.first(where: { slots[$0].node?.isServing == true }), let m = slots[ms].node else { return }
        let removed = Set(scenario.operatorActions.compactMap { a -> InfoHash? in
            if case .unregister(let k) = a.change { return OperatorAction.torrent(k)?.infoHash }
            return nil
        })
        for (hash, holders) in committedTorrents.sorted(by: { $0.key < $1.key }) where !removed.contains(hash) {
            let survivors = holders.filter { slots[$0.key].generation == $0.value }
            guard !survivors.isEmpty else { continue }
            if m.replica.store.catalogue.torrents[hash] == nil {
                return fail("registered torrent \(hash.hex) committed on \(survivors.keys.sorted().map { "s\($0)" }) was lost")
            }
        }
    }

    /// How long a new master may take to answer what it held (an announce commits first).
    static let heldAnswerTime = Milliseconds(3000)

    /// A request sent while no node served, received by a node after it last heard a
    /// serving master and young enough when that node came to serve, is answered after
    /// the node serves (by anyone: a retransmission answered counts too) — unless the node
    /// stopped serving meanwhile. An insider with the key can fake a serving master; those
    /// scenarios only check that nothing crashes or forks.
    mutating func checkHeld(_ slot: Int, servingSince start: Instant) {
        let receipts = slots[slot].held.receipts
        slots[slot].held.receipts = []
        guard slots[slot].held.servingSince == start, slots[slot].node?.isServing == true, adversary?.plan.kind != .insider else { return }
        let cutoff = slots[slot].held.lastHeardServing
        for r in receipts where r.at > cutoff && r.at <= start && start - r.at < config.heldRequestWindow {
            guard let sent = unservedSends[r.request], (answeredAt[r.request] ?? .zero) >= sent else {
                return fail("request of p\(r.request.peer) (transaction \(r.request.tid)) received by s\(slot) at "
                    + "\(r.at.milliseconds - Scenario.start.milliseconds)ms while no master served was not answered within "
                    + "\(Self.heldAnswerTime.value) ms of s\(slot) serving at \(start.milliseconds - Scenario.start.milliseconds)ms")
            }
        }
    }

    mutating func note(_ slot: Int, _ text: @autoclosure () -> String) {
        if tracing { trace.append("\(now.milliseconds - Scenario.start.milliseconds)ms \(slot >= 0 ? "s\(slot)" : "--") \(text())") }
    }

    func describe(_ action: NodeAction) -> String {
        switch action {
        case .broadcast(let e): return "broadcast \(describe(e.message))"
        case .send(let e): return "send \(describe(e.message)) to n\(e.to?.rawValue ?? 0)"
        case .beacon(let e): return "beacon \(describe(e.message))"
        case .reply(let r, let to):
            switch r {
            case .connect: return "reply connect to \(to)"
            case .announce(let a): return "reply announce(\(a.seeders)s/\(a.leechers)l, \(a.peers.count) peers) to \(to)"
            case .scrape: return "reply scrape to \(to)"
            case .error(let e): return "reply error '\(e.message)' to \(to)"
            }
        case .persist(let tx): return "persist \(tx.ref)"
        case .persistSnapshot(let s): return "persist snapshot \(s.lastCommitted)"
        case .persistEpoch(let e): return "persist epoch \(e)"
        case .wipeStore: return "wipe store"
        case .probeStore: return "probe store"
        case .exit(let r): return "exit (\(r))"
        }
    }

    func describe(_ m: ClusterMessage) -> String {
        switch m {
        case .keepalive(let k): return "KEEPALIVE(\(k.role), last \(k.lastCommitted)\(k.inSync ? "" : ", behind"))"
        case .prepare(let tx, let prev, _): return "PREPARE(\(tx.ref), \(tx.updates.count) updates, after \(prev))"
        case .vote(let txid, _, let verdict): return "VOTE(#\(txid) \(verdict))"
        case .commit(let ref, _): return "COMMIT(\(ref))"
        case .abort(let ref, _): return "ABORT(\(ref))"
        case .coordinatorAck(let last, let p): return "COORDINATOR-ACK(last \(last)\(p.map { ", prepared \($0.ref)" } ?? ""))"
        case .catchUp(let after, let txs): return "CATCHUP(\(txs.count) txs after \(after))"
        case .snapshot(let s): return "SNAPSHOT(\(s.lastCommitted), \(s.content.count) swarms)"
        case .hello(let h): return "HELLO(last \(h.lastCommitted))"
        default: return m.name
        }
    }
}
