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
    /// How often each protocol branch and simulator path was taken.
    public var coverage = Coverage()

    public var passed: Bool { violation == nil }
    /// The seed replays a scenario drawn from it; any other (a shrunk one) needs its line.
    public var replayCommand: String {
        scenario.line == Scenario(seed: seed).line ? "swift run tracker simulate --seed \(seed) --trace"
            : "swift run tracker simulate --scenario '\(scenario.line)' --trace"
    }

    public var description: String {
        if let v = violation {
            return "FAIL seed \(seed): \(v)\n  scenario: \(scenario)\n  replay: \(replayCommand)"
        }
        return "ok seed \(seed): \(events) events, \(commits) commits, \(acknowledgedAnnounces) acknowledged announces, trace \(String(traceHash, radix: 16))"
    }
}


/// One node's place in the world: its process (if running), disk, channel and what the
/// checks watch. A reference: the simulator reads and steps a slot's node after every
/// event, and a slot held by value (over a kilobyte, dozens of references) was copied
/// whole at each of those reads. A `Simulator` is therefore not copied (none is).
final class SimSlot {
    var node: TrackerNode?
    var disk = SimDisk()
    var exists = false
    /// The node's one timer, armed by the runtime's rule (`NodeTimer`).
    var timer = NodeTimer()
    var trackedLast = TxRef.zero
    /// The node's `Replica.applied` after its last step.
    var trackedApplied: UInt64 = 0
    /// Bumped when the node's memory is lost beyond what its disk kept, or wiped.
    var generation = 0
    /// When its current process started (simulated time).
    var startedAt = Instant(milliseconds: .min)
    /// Seals the node's frames and verifies what reaches it, as in the runtime.
    var channel: ClusterChannel?
    /// What the held-request check watches on this node's current process.
    var held = HeldWatch()
    /// The node restarted after its disk lost writes and has not applied anything since.
    var rejoining = false
    /// The node's process is stopped until then: what reaches it waits.
    var pausedUntil: Instant?
    /// Peer datagrams queued in its socket during the last pause: read one a millisecond
    /// after it wakes (the broker's backlog at once), so a node that comes to serve fast
    /// still has some of them to read, as a real one does.
    var peerBacklog = 0
    /// Their bytes: what the socket's receive queue holds of the pause.
    var peerBacklogBytes = 0
    /// How many of them the last pause queued (the next one is read that many ms late).
    var backlogPosition = 0
    /// The node asked for its peer backlog to be dropped (`NodeAction.discardPeerBacklog`),
    /// by the runtime's rule. The simulated socket knows which datagrams the pause queued,
    /// so the discard ends when none of them is left.
    var backlogDiscard: PeerBacklogDiscard?
    /// What this process heard serving masters say, and when they said it (see `HeardServing`).
    var heardServing = HeardServing()
    /// When this process last read each request, and whether it served then.
    var readAt: [RequestKey: (at: Instant, serving: Bool)] = [:]
    /// Hashes of the frames this process's channel accepted: one accepted twice is a replay
    /// its window let through (the network duplicates frames, the adversary replays them).
    var acceptedFrames: Set<Int> = []

    /// Reads the running node in place. A plain read of `node` copies the whole value
    /// (about a kilobyte, dozens of retains), and the simulator reads it after every event.
    func inspect<R>(_ body: (inout TrackerNode) -> R) -> R? { node?.inPlace(body) }
    var isRunning: Bool { inspect { _ in true } ?? false }
    var isServing: Bool { inspect { $0.isServing } ?? false }
    /// The process is stopped at `now`: it reads nothing and answers nobody.
    func isPaused(at now: Instant) -> Bool { pausedUntil.map { $0 > now } ?? false }
    var nodeID: NodeID? { inspect { $0.id } }
}

extension TrackerNode {
    fileprivate mutating func inPlace<R>(_ body: (inout TrackerNode) -> R) -> R { body(&self) }
}

/// Per node process: requests it received that no node could answer when they were sent
/// (and only those received after it last heard a serving master count), when it last
/// heard one, and since when it serves.
struct HeldWatch {
    var receipts: [HeldReceipt] = []
    var lastHeardServing = Instant(milliseconds: .min)
    var servingSince: Instant?
    /// Until when, after a pause, what reaches the node may be its socket's backlog: a
    /// master paused out of office drops it all for a keepalive interval (see `Pause.swift`),
    /// since nothing tells a queued datagram from a fresh one. Not held, by design.
    var backlogUntil = Instant(milliseconds: .min)
}

enum SimEvent {
    case tick(Int)
    /// A sealed frame for a node: from the broker, or (`beacon`) a keepalive on the peer network.
    case cluster(Int, ByteBuffer, fromAdversary: Bool, servingAt: Instant?, beacon: Bool = false, corrupted: Bool = false)
    /// `backlogOf`: it waited in the socket of this stopped process (an incarnation); the
    /// socket dies with the process.
    case peerDatagram(Int, ByteBuffer, PeerEndpoint, backlogOf: UInt64? = nil)
    case reply(Int, ByteBuffer)
    /// What a node hears back from its disk (for the incarnation that asked).
    case store(Int, UInt64, NodeEvent)
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

/// A node process that answered a peer.
struct Answerer: Equatable {
    var slot: Int
    var process: HeardServing.Process
    var at: Instant
}

/// A node received a request that no node could answer when it was sent.
struct HeldReceipt {
    var request: RequestKey
    var at: Instant
}

/// A whole cluster, its network, disks and peers, in virtual time. One seed decides
/// everything; nothing here reads a clock, a global generator or an unordered
/// collection's iteration order.
public struct Simulator {
    /// Peer datagrams a stopped process's socket holds, the rest dropped: read one a
    /// millisecond, they are drained within the node's `backlogDrain` (derived from it, so
    /// the two cannot drift apart).
    var peerSocketBacklog: Int { Int(max(config.backlogDrain.value - 2, 1)) }
    public let scenario: Scenario
    var rng: SeededGenerator
    var now = Scenario.start
    var queue = EventQueue<SimEvent>()
    var slots: [SimSlot]
    var peers: [SimPeer] = []
    var peerByEndpoint: [PeerEndpoint: Int] = [:]
    /// Delays, loss and the faults that cut the network, from streams of their own.
    var network: PacketNetwork
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
    public internal(set) var rejections: [ClusterRejection: Int] = [:]
    var hostileDelivered = 0
    var hostileRejected = 0

    var epochMasters: [Epoch: NodeID] = [:]
    var checker: StateChecker
    /// How often each protocol branch and simulator path was taken (nodes' counts are
    /// added when a node process ends).
    var coverage = Coverage()
    var appliedDigests: [TxRef: UInt64] = [:]
    var appliedBy: [TxRef: [Int: Int]] = [:]
    var maxExpireCutoff = Instant(milliseconds: Int64.min)
    /// Registrations some replica committed: info hash → slot → generation then.
    var committedTorrents: [InfoHash: [Int: Int]] = [:]
    /// Requests sent while no node served (first such send), and when each request was
    /// last answered by anyone.
    var unservedSends: [RequestKey: Instant] = [:]
    var answeredAt: [RequestKey: Instant] = [:]
    /// Which node process last answered each request (errors aside), and when.
    var answeredBy: [RequestKey: Answerer] = [:]
    /// Requests a peer sent more than once (each copy may be answered).
    var retransmitted: Set<RequestKey> = []
    /// When each node process served peers (`to` nil while it still does): a held request
    /// that some master served after is that master's to answer (see `checkHeld`).
    var servingSpans: [(slot: Int, from: Instant, to: Instant?)] = []
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
        self.slots = (0..<scenario.nodes).map { _ in SimSlot() }
        var c = ClusterConfig()
        c.quorum = scenario.quorum
        c.clusterSize = scenario.nodes
        c.keepaliveInterval = Milliseconds(1000)
        // As an operator sets it for the network: the spread of its delays (a slow link's
        // datagrams still in flight when it heals arrive after fresh ones). A socket
        // backlog is drained within `backlogDrain` (see `peerSocketBacklog`).
        let slowest = scenario.faults.map { f -> Int64 in
            if case .slow(_, let extra) = f.fault { return extra }
            return 0
        }.max() ?? 0
        c.receiveSkew = Milliseconds(scenario.maxDelay - scenario.minDelay + slowest + 2)
        self.config = c
        var t = TrackerConfig()
        t.announceInterval = scenario.announceInterval
        t.peerTimeout = scenario.peerTimeout
        t.rateLimitTableSize = 1024
        self.trackerConfig = t
        self.key = SipHash24(k0: scenario.seed, k1: 0x4B45_59)
        var keyBytes = SeededGenerator(seed: scenario.seed ^ 0x4B45_5953)
        self.clusterKey = ClusterKey(bytes: (0..<ClusterKey.length).map { _ in UInt8(truncatingIfNeeded: keyBytes.next()) }) ?? .insecure
        checker = StateChecker(quorum: scenario.quorum, clusterSize: scenario.nodes,
                               votesAreForgeable: scenario.adversary?.kind == .insider,
                               clockSpread: Milliseconds((scenario.clockDrift.max() ?? 0) - min(0, scenario.clockDrift.min() ?? 0)))
        network = PacketNetwork(scenario: scenario)
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
        for s in slots.indices { retire(s) }
        var report = SimulationReport(seed: scenario.seed, scenario: scenario, violation: violation, traceHash: traceDigest.value,
                                events: events, commits: commits, acknowledgedAnnounces: acknowledged, trace: trace,
                                hostileFrames: adversary?.injected ?? 0, rejectedFrames: rejections,
                                hostileDelivered: hostileDelivered, hostileRejected: hostileRejected)
        report.coverage = coverage
        return report
    }

    /// A node process ends (or the scenario does): its path counts join the total. The
    /// node itself is left in place; the caller drops it.
    mutating func retire(_ slot: Int) {
        guard let node = slots[slot].node else { return }
        if slots[slot].held.servingSince != nil { endServingSpan(slot) }
        coverage.nodes.add(node.paths)
    }

    // MARK: observation, for named scenario tests

    public var currentTime: Instant { now }
    public var firstViolation: String? { violation }
    public func node(_ slot: Int) -> TrackerNode? { slots[slot].node }
    public var slotCount: Int { slots.count }
    /// When each peer reply was sent, and by which slot.
    public internal(set) var replies: [(at: Instant, slot: Int, isError: Bool)] = []
    /// Nodes that exited, and why.
    public internal(set) var exits: [(slot: Int, reason: ExitReason)] = []
    public var peerErrors: [String] { peers.flatMap(\.errors) }
    public var peerAnnounceReplies: Int { peers.reduce(0) { $0 + $1.announceReplies } }

    /// The serving master's slot, if exactly one node serves.
    public var servingSlot: Int? {
        let serving = slots.indices.filter { slots[$0].isServing }
        return serving.count == 1 ? serving[0] : nil
    }

    /// Applies a fault now.
    public mutating func inject(_ fault: Scenario.Fault) {
        note(-1, "FAULT \(fault) (injected)")
        apply(fault)
    }

    /// Starts one more node that claims `id` (to test duplicate ids); returns its slot.
    public mutating func startExtraNode(id: NodeID) -> Int { startExtraNode(id: id, incarnation: nil) }

    mutating func startExtraNode(id: NodeID, incarnation: UInt64?) -> Int {
        slots.append(SimSlot())
        extraIDs.append(id)
        let slot = slots.count - 1
        startNode(slot, incarnation: incarnation)
        return slot
    }

    // MARK: nodes

    func nodeID(_ slot: Int) -> NodeID {
        slot < scenario.nodes ? NodeID(UInt32(slot + 1)) : extraIDs[slot - scenario.nodes]
    }

    func drift(_ slot: Int) -> Int64 { slot < scenario.clockDrift.count ? scenario.clockDrift[slot] : 0 }

    func nodeNow(_ slot: Int) -> Instant { now + Milliseconds(drift(slot)) }

    func slot(of id: NodeID) -> Int? {
        slots.indices.first { slots[$0].nodeID == id } ?? (Int(id.rawValue) - 1 < scenario.nodes ? Int(id.rawValue) - 1 : nil)
    }

    mutating func startNode(_ slot: Int, incarnation: UInt64? = nil) {
        slots[slot].exists = true
        slots[slot].startedAt = now
        let durable = slots[slot].disk.durable()
        // As the runtime draws it: from the start time, so a later run's is larger.
        let drawn = UInt64(bitPattern: nodeNow(slot).milliseconds) << 20 | rng.next() & 0xF_FFFF
        let node = TrackerNode(id: nodeID(slot), incarnation: incarnation ?? drawn, config: config,
                               handler: PeerRequestHandler(config: trackerConfig, connectionIDs: ConnectionIDPolicy(key: key)),
                               seed: rng.next(), now: nodeNow(slot), restoring: durable,
                               address: "10.9.0.\(slot + 1):6969")
        slots[slot].node = node
        slots[slot].held = HeldWatch()  // a new process holds nothing
        slots[slot].pausedUntil = nil
        slots[slot].backlogDiscard = nil
        slots[slot].heardServing = HeardServing()
        slots[slot].readAt = [:]
        slots[slot].acceptedFrames = []
        slots[slot].channel = ClusterChannel(keys: [clusterKey], startedAt: nodeNow(slot), fragmentBytes: scenario.fragmentBytes)
        slots[slot].trackedLast = node.replica.lastCommitted
        slots[slot].trackedApplied = node.replica.applied
        slots[slot].timer.disarm()
        note(slot, "start (restored \(node.replica.lastCommitted))")
        scheduleTick(slot)
    }

    mutating func scheduleTick(_ slot: Int) {
        let nodeTime = nodeNow(slot)
        guard let nodeWake = slots[slot].inspect({ $0.nextWake(now: nodeTime) }) else { return }
        let wake = nodeWake - Milliseconds(drift(slot))
        guard slots[slot].timer.arm(at: wake) else { return }
        queue.push(wake, .tick(slot))
    }

    mutating func step(_ slot: Int, _ event: NodeEvent, label: @autoclosure () -> String) {
        let nodeTime = nodeNow(slot)
        guard let wasSlave = slots[slot].inspect({ $0.role == .slave }),
              // Stepped in place: a node is about a kilobyte of state with dozens of
              // references, and this runs for every event of every scenario.
              let actions = slots[slot].node?.step(event, now: nodeTime),
              slots[slot].nodeID != nil else { return }
        traceDigest.add(UInt64(bitPattern: now.milliseconds), UInt64(slot), UInt64(actions.count))
        if tracing, let node = slots[slot].node {
            trace.append("\(now.milliseconds - Scenario.start.milliseconds)ms s\(slot) [\(node.role) \(node.epoch)] \(label()) -> \(actions.map(describe).joined(separator: ", "))")
        }
        observeCommits(slot, event: event, wasSlave: wasSlave)
        for action in actions { perform(action, from: slot) }
        if slots[slot].isRunning { checkStep(slot) }
        scheduleTick(slot)
    }

    // MARK: events

    mutating func handle(_ event: SimEvent) {
        // An operator's dashboard action is a request to the process too: it waits out a
        // pause like everything else (stepping a paused node hid the pause from it).
        var target = event.slot
        if case .operatorAction(let i) = event, scenario.operatorActions[i].slot < slots.count { target = scenario.operatorActions[i].slot }
        if let s = target, let until = slots[s].pausedUntil {
            if until > now {
                // A stopped process: everything waits in its sockets, in order; the broker's
                // backlog is read at the wake, the peer socket's one datagram a millisecond.
                if case .tick = event {
                    guard slots[s].timer.fire(at: now) else { return }
                    _ = slots[s].timer.arm(at: until)
                }
                if case .peerDatagram(_, let bytes, let from, let queued) = event,
                   let process = queued ?? slots[s].inspect({ $0.incarnation }) {
                    if queued == nil {
                        // A full socket buffer drops what arrives (the kernel does).
                        guard slots[s].peerBacklog < peerSocketBacklog else { return }
                        slots[s].peerBacklog += 1
                        slots[s].peerBacklogBytes += bytes.readableBytes
                    }
                    slots[s].backlogPosition += 1
                    queue.push(until + Milliseconds(Int64(slots[s].backlogPosition)), .peerDatagram(s, bytes, from, backlogOf: process))
                    return
                }
                queue.push(until, event)
                return
            }
            slots[s].pausedUntil = nil
        }
        switch event {
        case .tick(let s):
            guard slots[s].timer.fire(at: now) else { return }
            step(s, .tick, label: "tick")
        case .cluster(let s, let frame, let fromAdversary, let servingAt, let beacon, let corrupted):
            let nodeTime = nodeNow(s)
            // Opened in place: a copy would share the replay windows and copy them on write.
            guard let ownID = slots[s].nodeID,
                  let opened = slots[s].channel?.open(frame, ownID: ownID, now: nodeTime) else { return }
            if fromAdversary {
                hostileDelivered += 1
                if case .failure = opened { hostileRejected += 1 }
            }
            if case .success = opened {
                var h = Hasher()
                frame.withUnsafeReadableBytes { h.combine(bytes: $0) }
                // Only membership is asked of the set: its per-process hashing seed cannot
                // change a run.
                if !slots[s].acceptedFrames.insert(h.finalize()).inserted {
                    return fail("s\(s) accepted a frame it had accepted before: its replay window let a replay through")
                }
            }
            switch opened {
            case .success(nil):
                break
            case .success(let env?):
                if corrupted { return fail("s\(s) accepted a frame corrupted in transit: \(env.message.name) from n\(env.from.rawValue)") }
                if fromAdversary && adversary?.plan.kind == .outsider {
                    return fail("s\(s) accepted a frame forged without the key: \(env.message.name) from n\(env.from.rawValue)")
                }
                if servingAt != nil || (!fromAdversary && HeardServing.isMasterWord(env)) { slots[s].held.lastHeardServing = now }
                if let sent = servingAt { slots[s].heardServing.note(env, sentAt: sent, heardAt: now) }
                step(s, beacon ? .beacon(env) : .cluster(env),
                     label: "\(fromAdversary ? "HOSTILE " : "")\(beacon ? "beacon " : "")\(env.message.name) from n\(env.from.rawValue) \(env.epoch)")
            case .failure(let reason):
                rejections[reason, default: 0] += 1
                if corrupted { coverage.count(.corruptedFrameDropped) }
                if fromAdversary { coverage.count(.hostileFrameRejected) }
                if tracing && !fromAdversary { note(s, "dropped a frame: \(reason)") }
            }
        case .adversaryWake:
            guard var a = adversary, !faultsOver else { return }
            // A participant of the broker: while it is down, nobody publishes anything.
            if network.brokerDown {
                queue.push(now + a.nextDelay(), .adversaryWake)
                adversary = a
                return
            }
            let master = servingSlot.flatMap { s in slots[s].inspect { (id: $0.id, epoch: $0.epoch) } }
            let ids = slots.compactMap { $0.nodeID }
            let frame = a.forge(now: now, master: master, ids: ids)
            // Published on the topic: every live node gets it, after a delay of the
            // adversary's own drawing (the nodes' randomness is not touched).
            for s in slots.indices where slots[s].isRunning {
                queue.push(now + Milliseconds(1) + Milliseconds(Int64(a.rng.below(Int(scenario.maxDelay) + 1))),
                           .cluster(s, frame, fromAdversary: true, servingAt: nil))
            }
            queue.push(now + a.nextDelay(), .adversaryWake)
            adversary = a
        case .operatorAction(let i):
            let action = scenario.operatorActions[i]
            guard action.slot < slots.count, slots[action.slot].isRunning else { return }
            switch action.change {
            case .register(let k):
                guard let t = OperatorAction.torrent(k) else { return fail("simulated torrent \(k) does not parse") }
                step(action.slot, .submit(.register(t)), label: "OPERATOR \(action)")
            case .unregister(let k):
                guard let t = OperatorAction.torrent(k) else { return }
                step(action.slot, .submit(.unregister(t.infoHash)), label: "OPERATOR \(action)")
            }
        case .peerDatagram(let s, let bytes, let from, let backlogOf):
            if let process = backlogOf {
                slots[s].peerBacklog -= 1
                slots[s].peerBacklogBytes -= bytes.readableBytes
                guard slots[s].inspect({ $0.incarnation }) == process else { return }
                if var discard = slots[s].backlogDiscard {
                    if discard.drops(at: nodeNow(s)) {
                        slots[s].backlogDiscard = discard.isDrained(queuedBytes: slots[s].peerBacklogBytes) ? nil : discard
                        coverage.count(.pauseBacklogDiscarded)
                        return note(s, "backlog datagram from \(from) discarded")
                    }
                    slots[s].backlogDiscard = nil
                }
            }
            if let p = peerByEndpoint[from], let header = BEP15Codec.peekHeader(bytes), let serving = slots[s].inspect({ $0.isServing }) {
                slots[s].readAt[RequestKey(peer: p, tid: header.transactionID)] = (now, serving)
            }
            if slots[s].inspect({ $0.isServing }) == false, let p = peerByEndpoint[from],
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
        case .store(let s, let incarnation, let outcome):
            guard slots[s].inspect({ $0.incarnation }) == incarnation else { return }
            step(s, outcome, label: "store: \(outcome)")
        case .peerWake(let p):
            guard peers[p].wakeAt == nil || peers[p].wakeAt! <= now else { return }
            peers[p].wakeAt = nil
            if draining { return }
            if let bytes = peers[p].wake(now: now, rng: &rng) {
                if let o = peers[p].outstanding, o.attempt > 0 {
                    retransmitted.insert(RequestKey(peer: p, tid: o.request.transactionID))
                }
                // A stop may remove the peer once committed, acknowledged or not — and it
                // may overtake an announce sent before it (see `StateChecker.stopSent`).
                if BEP15Codec.peekHeader(bytes)?.action == .announce, bytes.readableBytes >= 84,
                   bytes.getInteger(at: bytes.readerIndex + 80, as: UInt32.self) == AnnounceEvent.stopped.rawValue {
                    checker.stopSent(by: peers[p].key, at: now)
                }
                multicast(bytes, from: p)
            }
            schedulePeer(p, at: peers[p].nextDeadline ?? now + Milliseconds(Int64(200 + rng.below(1500))))
        case .fault(let f):
            note(-1, "FAULT \(f)")
            apply(f)
        case .endFaults:
            faultsOver = true
            network.quiet = true
            network.heal()
            network.extraDelay = [:]
            for s in slots.indices {
                if slots[s].disk.failing {
                    slots[s].disk.failing = false
                }
                if slots[s].exists && !slots[s].isRunning { startNode(s) }
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
            if network.brokerDown && network.partitionSide != nil { coverage.count(.crashInBrokerOutageAndPartition) }
            if slots[s].disk.lastTxid < node.replica.lastCommitted.txid { slots[s].generation += 1 }
            retire(s)
            slots[s].node = nil
        case .diskLoss(let s, let lastWrites):
            crashLosingWrites(s, lastWrites: lastWrites)
        case .impostor(let s):
            // Newer than the node it copies (the runtime draws incarnations from the start
            // time), so it is the one that must yield.
            guard let original = slots[s].node, original.role != .starting else { return }
            _ = startExtraNode(id: original.id, incarnation: original.incarnation &+ 1)
        case .pause(let s, let span):
            guard slots[s].isRunning else { return }
            if now - slots[s].startedAt < Milliseconds(1000) { coverage.count(.pauseRightAfterStart) }
            slots[s].pausedUntil = now + Milliseconds(span)
            slots[s].backlogDiscard = nil
            slots[s].backlogPosition = 0
            slots[s].held.backlogUntil = now + Milliseconds(span) + config.keepaliveInterval
        case .restart(let s), .join(let s):
            if !slots[s].isRunning { startNode(s) }
        case .shutdown(let s):
            step(s, .shutdown, label: "shutdown")
            retire(s)
            slots[s].node = nil
        case .partition(let side):
            network.partitionSide = Set(side)
            if scenario.quorum == .strict && scenario.nodes >= 6 { coverage.count(.largeStrictClusterPartitioned) }
        case .oneWay(let a, let b): network.oneWay = (a, b)
        case .brokerOutage: network.brokerDown = true
        case .peerNetworkPartition(let side): network.peerNetworkSide = Set(side)
        case .heal: network.heal()
        case .storeFails(let s): slots[s].disk.failing = true
        case .storeHeals(let s): slots[s].disk.failing = false
        case .slow(let s, let d): network.extraDelay[s] = d
        }
    }

    /// `stop` gets the simulator in place: passed by value, the whole world (every slot,
    /// peer and queued event) was copied after every event.
    mutating func runUntil(_ end: Instant, stop: (inout Simulator) -> Bool) {
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
            if stop(&self) { break }
        }
    }

}

extension SimEvent {
    /// The node slot whose process handles this event, if one does.
    var slot: Int? {
        switch self {
        case .tick(let s), .cluster(let s, _, _, _, _, _), .peerDatagram(let s, _, _, _), .store(let s, _, _): return s
        case .reply, .peerWake, .fault, .endFaults, .adversaryWake, .operatorAction, .checkHeld: return nil
        }
    }
}
