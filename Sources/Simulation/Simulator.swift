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


enum SimEvent {
    case tick(Int)
    /// A sealed frame for a node: from the broker, or (`beacon`) a keepalive on the peer network.
    case cluster(Int, ByteBuffer, fromAdversary: Bool, servingAt: Instant?, beacon: Bool = false, corrupted: Bool = false)
    /// `backlogOf`: it waited in the socket of this stopped process (an incarnation); the
    /// socket dies with the process.
    case peerDatagram(Int, ByteBuffer, PeerEndpoint, backlogOf: UInt64? = nil)
    case reply(Int, ByteBuffer)
    /// An HTTP request reaches the node slot its peer asked (`HTTPPeers.swift`).
    case httpRequest(Int, UInt64)
    /// An HTTP answer reaches its peer; nil: its connection failed.
    case httpReply(Int, UInt64, TrackerResponse?)
    /// The host tells a node process its peer sends failed (`NodeEvent.peerSendFailed`).
    case peerSendFailed(Int, process: UInt64)
    /// The host's broker connection came up again after a fault that cut it
    /// (`NodeEvent.brokerConnected`).
    case brokerConnected(Int, process: UInt64)
    /// A broker message delivered again under a fresh frame (`Scenario.redeliveryRate`):
    /// its encoded envelope, sealed anew by its sender's process if that still runs.
    case redeliver(from: Int, process: UInt64, encoded: ByteBuffer, sender: NodeID, incarnation: UInt64, to: [Int])
    /// What a node hears back from its disk (for the incarnation that asked).
    case store(Int, UInt64, NodeEvent)
    case peerWake(Int)
    case fault(Scenario.Fault)
    case endFaults
    case adversaryWake
    case operatorAction(Int)
    /// A node came to serve at this instant: check it answered what it held.
    case checkHeld(Int, Instant)
    /// A master was lost at `lostAt`: check its heir (this process) reads peer datagrams.
    case checkHeirReads(Int, process: UInt64, master: NodeID, lostAt: Instant)
}

/// A peer request, by peer and transaction id.
public struct RequestKey: Hashable, Comparable, Sendable {
    var peer: Int
    var tid: UInt32
    public static func < (l: RequestKey, r: RequestKey) -> Bool { (l.peer, l.tid) < (r.peer, r.tid) }
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
///
/// In parts, each in its file: the packet network (`PacketNetwork`: delays, loss,
/// duplication, corruption and cuts, from streams of its own), the process model
/// (`Processes.swift`: start, crash, pause, restart, shutdown, impostors, and `SimDisk`),
/// the host that carries a node's actions and delivers what reaches it (`SimHost.swift`),
/// the workload (`Workload`: peers and the operator), the adversary, and the checker
/// (`StateChecker`, which keeps every ledger; `Invariants.swift` runs its checks). This
/// type is the loop: it pops the next event and hands it to its part (`handle`).
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
    /// The slot whose node's actions are being performed (`perform(_:from:)`).
    var actingSlot = 0
    /// The last commit the acting node reported among the actions performed so far in
    /// its step: an answer performed before a later commit of the same step answers what
    /// was committed then (a master without voters commits the next transaction at once).
    var committedSoFar: TxRef?
    /// The peers and the operator.
    var workload = Workload()
    /// Delays, loss and the faults that cut the network, from streams of their own.
    var network: PacketNetwork
    var faultsOver = false
    /// Between the end of the fault window and `healEverything` (`Scenario.Liveness`).
    var inLivenessPhase = false
    /// When a node process last started or ended (see `checkHeirReads`).
    var lineupChangedAt = Scenario.start
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

    /// Every ledger the checks read: votes, acknowledged announces, applied transactions,
    /// answers and serving spans.
    var checker: StateChecker
    /// How often each protocol branch and simulator path was taken (nodes' counts are
    /// added when a node process ends).
    var coverage = Coverage()
    var violation: String?
    var traceDigest = Digest()
    var tracing: Bool
    var trace: [String] = []
    var events = 0
    var commits = 0
    var acknowledged = 0
    /// HTTP exchanges by number (`HTTPPeers.swift`), and the last number given.
    var httpExchanges: [UInt64: HTTPExchange] = [:]
    var nextExchange: UInt64 = 0

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
        // Images as often as a scenario's few peers allow, so each one is checked
        // (`SimDisk.holds`); a real node logs 65,536 rows first.
        c.peerImageMinimumRows = 4
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
        advance(to: scenario.faultEnd)
        if violation == nil, let l = scenario.liveness {
            runLiveness(l)
            if violation == nil { healEverything() }
        }
        advance(by: scenario.settle)
        return finish()
    }

    /// The liveness phase (as TigerBeetle's VOPR runs one after every seed's faults):
    /// the core healed at the end of the fault window must settle within
    /// `Scenario.Liveness.bound` (`livenessProblem`), or the seed fails saying why not.
    ///
    /// The peers are quiet meanwhile, as in the final drain: under their load a follower
    /// is always a commit behind (the next PREPARE carries each COMMIT), so "equal" and
    /// "nothing undecided" would be luck. What they sent before is still to be answered
    /// (held requests), and `checkService` asks for answers once they resume.
    mutating func runLiveness(_ l: Scenario.Liveness) {
        let healedAt = now
        // Settled already: ends now, not at whatever event comes next (an adversary's
        // wake would move the rest of the run).
        var settled = livenessProblem(l.core) == nil
        workload.draining = true
        defer {
            workload.draining = false
            for p in workload.peers.indices {
                workload.schedule(p, at: now + Milliseconds(Int64(200 + rng.below(1500))), now: now, queue: &queue)
            }
        }
        if !settled {
            runUntil(healedAt + Scenario.Liveness.bound) { sim in
                settled = sim.livenessProblem(l.core) == nil
                return settled
            }
        }
        guard violation == nil else { return }
        if settled {
            let took = (now - healedAt).value
            coverage.count(took < 3000 ? .livenessUnder3s : took < 6000 ? .liveness3To6s : took < 10_000 ? .liveness6To10s : .liveness10To15s)
            let line = "LIVENESS: the core settled \((now - healedAt).value) ms after it healed"
            note(-1, line)
            return
        }
        fail("liveness: the core \(l.core.map { "s\($0)" }.joined(separator: ",")) did not settle within "
             + "\(Scenario.Liveness.bound.value) ms of healing: \(livenessProblem(l.core) ?? "?")")
    }

    /// Creates peers and the initial nodes and schedules the scenario's faults.
    public mutating func start() {
        workload.start(scenario, rng: &rng, queue: &queue, now: now)
        for s in 0..<scenario.initialNodes { startNode(s) }
        for f in scenario.faults { queue.push(f.at, .fault(f.fault)) }
        queue.push(scenario.faultEnd, .endFaults)
        Workload.scheduleOperator(scenario, queue: &queue)
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
        workload.draining = true
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

    // MARK: observation, for named scenario tests

    public var currentTime: Instant { now }
    public var firstViolation: String? { violation }
    public func node(_ slot: Int) -> TrackerNode? { slots[slot].node }
    public var slotCount: Int { slots.count }
    /// When each peer reply was sent, and by which slot.
    public internal(set) var replies: [(at: Instant, slot: Int, isError: Bool)] = []
    /// Nodes that exited, and why.
    public internal(set) var exits: [(slot: Int, reason: ExitReason)] = []
    public var peerErrors: [String] { workload.peers.flatMap(\.errors) }
    public var peerAnnounceReplies: Int { workload.peers.reduce(0) { $0 + $1.announceReplies } }

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

    // MARK: nodes

    func nodeID(_ slot: Int) -> NodeID {
        slot < scenario.nodes ? NodeID(UInt32(slot + 1)) : extraIDs[slot - scenario.nodes]
    }

    func drift(_ slot: Int) -> Int64 { slot < scenario.clockDrift.count ? scenario.clockDrift[slot] : 0 }

    func nodeNow(_ slot: Int) -> Instant { now + Milliseconds(drift(slot)) }

    func slot(of id: NodeID) -> Int? {
        slots.indices.first { slots[$0].nodeID == id } ?? (Int(id.rawValue) - 1 < scenario.nodes ? Int(id.rawValue) - 1 : nil)
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
        committedSoFar = nil
        for action in actions { perform(action, from: slot) }
        committedSoFar = nil
        if slots[slot].isRunning { checkStep(slot) }
        scheduleTick(slot)
    }

    // MARK: the loop

    /// One event, handed to the part it belongs to: a node process (which waits out a
    /// pause first), the packet network's deliveries, the workload, the fault plan.
    mutating func handle(_ event: SimEvent) {
        // A filtered socket drops a peer datagram as it arrives, paused process or not;
        // what it queued before the filter is still read.
        if case .peerDatagram(let s, _, _, nil) = event, slots[s].peersFiltered {
            coverage.count(.peerDatagramFiltered)
            return
        }
        if waitsOutPause(event) { return }
        switch event {
        case .tick(let s):
            guard slots[s].timer.fire(at: now) else { return }
            step(s, .tick, label: "tick")
        case .cluster(let s, let frame, let fromAdversary, let servingAt, let beacon, let corrupted):
            deliver(frame, to: s, fromAdversary: fromAdversary, servingAt: servingAt, beacon: beacon, corrupted: corrupted)
        case .peerDatagram(let s, let bytes, let from, let backlogOf):
            deliver(bytes, from: from, to: s, backlogOf: backlogOf)
        case .store(let s, let incarnation, let outcome):
            guard slots[s].inspect({ $0.incarnation }) == incarnation else { return }
            step(s, outcome, label: "store: \(outcome)")
        case .reply(let p, let bytes):
            peerReceives(bytes, peer: p)
        case .httpRequest(let s, let exchange):
            deliverHTTP(exchange, to: s)
        case .httpReply(let p, let exchange, let response):
            httpReplyReaches(p, exchange: exchange, response)
        case .peerSendFailed(let s, let process):
            slots[s].sendFailureReported = false
            guard slots[s].inspect({ $0.incarnation }) == process else { return }
            step(s, .peerSendFailed, label: "peer sends failed")
        case .brokerConnected(let s, let process):
            guard slots[s].inspect({ $0.incarnation }) == process, network.reachesBroker(s) else { return }
            step(s, .brokerConnected, label: "broker connected")
        case .redeliver(let from, let process, let encoded, let sender, let incarnation, let to):
            redeliver(encoded, from: from, process: process, sender: sender, incarnation: incarnation, to: to)
        case .peerWake(let p):
            peerTurn(p)
        case .operatorAction(let i):
            operatorActs(i)
        case .adversaryWake:
            adversaryActs()
        case .checkHeld(let s, let start):
            checkHeld(s, servingSince: start)
        case .checkHeirReads(let s, let process, let master, let lostAt):
            checkHeirReads(s, process: process, master: master, lostAt: lostAt)
        case .fault(let f):
            note(-1, "FAULT \(f)")
            apply(f)
        case .endFaults:
            endFaults()
        }
    }

    /// `stop` gets the simulator in place: passed by value, the whole world (every slot,
    /// peer and queued event) was copied after every event.
    mutating func runUntil(_ end: Instant, stop: (inout Simulator) -> Bool) {
        while violation == nil, let next = queue.nextTime, next <= end, let (time, event) = queue.pop() {
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
        case .tick(let s), .cluster(let s, _, _, _, _, _), .peerDatagram(let s, _, _, _), .store(let s, _, _),
             .peerSendFailed(let s, _), .brokerConnected(let s, _), .httpRequest(let s, _): return s
        case .reply, .httpReply, .redeliver, .peerWake, .fault, .endFaults, .adversaryWake, .operatorAction, .checkHeld, .checkHeirReads: return nil
        }
    }
}
