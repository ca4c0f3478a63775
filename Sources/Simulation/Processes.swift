import NIOCore
import TrackerLogic

/// The process model: each node slot runs one process at a time, started from what its
/// disk kept (`SimDisk`), crashed (memory gone, maybe the last writes too), paused (its
/// sockets queue what arrives, in order, and the peer socket's buffer overflows as a
/// kernel's does), restarted, shut down cleanly, or copied by an impostor with its id.
///
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
    /// The same for the operator's data, which a clean stop keeps (`keepOperatorData`
    /// before its wipe): the registration and rule ledgers hold it to this one.
    var operatorGeneration = 0
    /// The node kept its operator data for the wipe that follows.
    var keptForWipe = false
    /// When its current process started (simulated time).
    var startedAt = Instant(milliseconds: .min)
    /// Seals the node's frames and verifies what reaches it, as in the runtime.
    var channel: ClusterChannel?
    /// What the held-request check watches on this node's current process.
    var held = HeldWatch()
    /// The node restarted after its disk lost writes and has not applied anything since.
    var rejoining = false
    /// The announce interval its config file says since the operator reloaded it (nil: the
    /// scenario's). A restarted process reads the file, so it outlives the process.
    var reloadedInterval: UInt32?
    /// The node's process is stopped until then: what reaches it waits.
    var pausedUntil: Instant?
    /// When its last pause ended (or ends): the others' view of who is live settles after it.
    var lastPauseEnd = Instant(milliseconds: .min)
    /// Its peer socket drops peer datagrams as they arrive (`NodeAction.readPeers(false)`):
    /// a filter on the socket, which outlives a pause and goes with the process.
    var peersFiltered = false
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
    /// When this process last read each request, and whether it served then; and when it
    /// first read it (a peer retransmits under the same transaction id).
    var readAt: [RequestKey: (at: Instant, serving: Bool, first: Instant)] = [:]
    /// The ABORTs this process sent lately, and whether its broker link carried each (not
    /// cut for sending, broker up): a refusal whose every possible ABORT was lost reached
    /// nobody (`SimHost.perform`). Bounded to the newest `abortsKept`.
    var abortsSent: [(at: Instant, carried: Bool)] = []
    static let abortsKept = 256
    /// The tags of the frames this process's channel accepted: one accepted twice is a replay
    /// its window let through (the network duplicates frames, the adversary replays them).
    var acceptedFrames: Set<UInt64> = []
    /// A failed peer send is on its way to the node (`SimEvent.peerSendFailed`).
    var sendFailureReported = false

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
    /// Receipts since the node last came to serve.
    var receipts: [HeldReceipt] = []
    /// The receipts each serving span owes answers to, by the instant it began: those
    /// read before it and after the span before. Its check takes them, whatever the order
    /// in which the checks of two spans come due.
    var owedBySpan: [Instant: [HeldReceipt]] = [:]
    var lastHeardServing = Instant(milliseconds: .min)
    var servingSince: Instant?
    /// Until when, after a pause, what reaches the node may be its socket's backlog: a
    /// master paused out of office drops it all for a keepalive interval (see `Pause.swift`),
    /// since nothing tells a queued datagram from a fresh one. Not held, by design.
    var backlogUntil = Instant(milliseconds: .min)
}

extension Simulator {
    /// What slot `slot`'s config file says: the scenario's settings, with the interval of
    /// the operator's last reload there.
    func trackerConfig(of slot: Int) -> TrackerConfig {
        var config = trackerConfig
        if let interval = slots[slot].reloadedInterval { config.announceInterval = interval }
        return config
    }

    mutating func startNode(_ slot: Int, incarnation: UInt64? = nil) {
        slots[slot].exists = true
        slots[slot].startedAt = now
        let durable = slots[slot].disk.durable()
        // As the runtime draws it: from the start time, so a later run's is larger.
        let drawn = UInt64(bitPattern: nodeNow(slot).milliseconds) << 20 | rng.next() & 0xF_FFFF
        let node = TrackerNode(id: nodeID(slot), incarnation: incarnation ?? drawn, config: config,
                               handler: PeerRequestHandler(config: trackerConfig(of: slot), connectionIDs: ConnectionIDPolicy(key: key)),
                               seed: rng.next(), now: nodeNow(slot), restoring: durable,
                               address: "10.9.0.\(slot + 1):6969")
        slots[slot].node = node
        slots[slot].held = HeldWatch()  // a new process holds nothing
        slots[slot].peersFiltered = false  // and its new socket has no filter
        lineupChangedAt = now
        slots[slot].pausedUntil = nil
        slots[slot].backlogDiscard = nil
        slots[slot].heardServing = HeardServing()
        slots[slot].readAt = [:]
        slots[slot].abortsSent = []
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

    /// Starts one more node that claims `id` (to test duplicate ids); returns its slot.
    public mutating func startExtraNode(id: NodeID) -> Int { startExtraNode(id: id, incarnation: nil) }

    mutating func startExtraNode(id: NodeID, incarnation: UInt64?) -> Int {
        slots.append(SimSlot())
        extraIDs.append(id)
        let slot = slots.count - 1
        startNode(slot, incarnation: incarnation)
        return slot
    }

    /// A node process ends (or the scenario does): its path counts join the total. The
    /// node itself is left in place; the caller drops it.
    /// The process ends (crash or clean stop). A dead process is not paused: its sockets
    /// went with it, so what reaches its node until a restart is lost, not held for the
    /// end of the pause: read by the next process, long after another master answered
    /// it, such a request would be answered again.
    mutating func retire(_ slot: Int) {
        slots[slot].pausedUntil = nil
        guard let node = slots[slot].node else { return }
        if slots[slot].held.servingSince != nil {
            checkHeirReads(losing: slot)
            endServingSpan(slot, began: nil)
        }
        lineupChangedAt = now
        coverage.nodes.add(node.paths)
    }

    /// A stopped process: what is addressed to it waits in its sockets, in order; the
    /// broker's backlog is read at the wake, the peer socket's one datagram a millisecond.
    /// True when the event waits (it is queued again for the wake).
    mutating func waitsOutPause(_ event: SimEvent) -> Bool {
        // An operator's dashboard action is a request to the process too: it waits out a
        // pause like everything else (stepping a paused node hid the pause from it).
        var target = event.slot
        if case .operatorAction(let i) = event, scenario.operatorActions[i].slot < slots.count { target = scenario.operatorActions[i].slot }
        guard let s = target, let until = slots[s].pausedUntil else { return false }
        guard until > now else {
            slots[s].pausedUntil = nil
            return false
        }
        if case .tick = event {
            guard slots[s].timer.fire(at: now) else { return true }
            _ = slots[s].timer.arm(at: until)
        }
        if case .peerDatagram(_, let bytes, let from, let queued) = event,
           let process = queued ?? slots[s].inspect({ $0.incarnation }) {
            if queued == nil {
                // A full socket buffer drops what arrives (the kernel does).
                guard slots[s].peerBacklog < peerSocketBacklog else { return true }
                slots[s].peerBacklog += 1
                slots[s].peerBacklogBytes += bytes.readableBytes
            }
            slots[s].backlogPosition += 1
            queue.push(until + Milliseconds(Int64(slots[s].backlogPosition)), .peerDatagram(s, bytes, from, backlogOf: process))
            return true
        }
        queue.push(until, event)
        return true
    }

    /// The process dies: memory lost, the disk keeps what it wrote.
    mutating func crash(_ s: Int) {
        guard let node = slots[s].node else { return }
        if network.brokerDown && network.partitionSide != nil { coverage.count(.crashInBrokerOutageAndPartition) }
        if slots[s].disk.lastTxid < node.replica.lastCommitted.txid {
            slots[s].generation += 1
            slots[s].operatorGeneration += 1
        }
        retire(s)
        slots[s].node = nil
    }

    /// A second process claims a running node's id. Newer than the node it copies (the
    /// runtime draws incarnations from the start time), so it is the one that must yield.
    mutating func startImpostor(of s: Int) {
        guard let original = slots[s].node, original.role != .starting else { return }
        _ = startExtraNode(id: original.id, incarnation: original.incarnation &+ 1)
    }

    /// The process stops (SIGSTOP, a paused VM) for `span` ms; it runs on afterwards.
    /// A stopped process stopped again wakes at the later of the two ends, never the
    /// earlier: what waits in its sockets is queued for its one wake, in arrival order (a
    /// second, shorter pause must not wake it before what the first one queued).
    mutating func pause(_ s: Int, for span: Int64) {
        guard slots[s].isRunning else { return }
        let until = now + Milliseconds(span)
        if let current = slots[s].pausedUntil, current > now {
            slots[s].pausedUntil = max(current, until)
            slots[s].lastPauseEnd = max(slots[s].lastPauseEnd, until)
            slots[s].held.backlogUntil = max(slots[s].held.backlogUntil, until + config.keepaliveInterval)
            return
        }
        if now - slots[s].startedAt < Milliseconds(1000) { coverage.count(.pauseRightAfterStart) }
        if slots[s].isServing { checkHeirReads(losing: s) }
        slots[s].pausedUntil = until
        slots[s].backlogDiscard = nil
        slots[s].backlogPosition = 0
        slots[s].lastPauseEnd = max(slots[s].lastPauseEnd, until)
        slots[s].held.backlogUntil = now + Milliseconds(span) + config.keepaliveInterval
    }

    /// The operator stops the node cleanly: it tells the others and empties its store.
    mutating func shutDown(_ s: Int) {
        let wasRunning = slots[s].isRunning
        // A failing store takes neither the kept data nor the wipe: what memory held
        // beyond the disk is lost, as in a crash (a registration committed while the
        // store failed, then a clean stop).
        if slots[s].disk.failing, let node = slots[s].node, slots[s].disk.lastTxid < node.replica.lastCommitted.txid {
            slots[s].generation += 1
            slots[s].operatorGeneration += 1
        }
        step(s, .shutdown, label: "shutdown")
        retire(s)
        slots[s].node = nil
        if wasRunning && !slots.contains(where: \.isRunning) { coverage.count(.clusterStopped) }
    }
}

/// The fault plan: each fault goes to the packet network or to a node's process.
extension Simulator {
    /// A fault of the plan: to the packet network or to a node's process.
    mutating func apply(_ fault: Scenario.Fault) {
        // What the plan left after the fault window (heals) waits for the liveness
        // phase's end, which heals everything anyway.
        guard !inLivenessPhase else { return }
        countFaultRole(fault)
        switch fault {
        case .partition, .oneWay, .brokerOutage, .peerNetworkPartition, .brokerPartition, .links, .heal:
            network.topologyChangedAt = now
        default: break
        }
        switch fault {
        case .brokerOutage, .brokerLink, .masterBrokerLink, .brokerPartition: network.brokerTroubleAt = now
        default: break
        }
        switch fault {
        case .crash(let s): crash(s)
        case .diskLoss(let s, let lastWrites): crashLosingWrites(s, lastWrites: lastWrites)
        case .impostor(let s): startImpostor(of: s)
        case .pause(let s, let span): pause(s, for: span)
        case .restart(let s), .join(let s):
            if !slots[s].isRunning { startNode(s) }
        case .shutdown(let s): shutDown(s)
        case .storeFails(let s): slots[s].disk.failing = true
        case .storeHeals(let s): slots[s].disk.failing = false
        case .partition(let side):
            network.partitionSide = Set(side)
            if scenario.quorum == .strict && scenario.nodes >= 6 { coverage.count(.largeStrictClusterPartitioned) }
        case .oneWay(let a, let b): network.oneWay = (a, b)
        case .brokerOutage: network.brokerDown = true
        case .peerNetworkPartition(let side): network.peerNetworkSide = Set(side)
        case .brokerLink(let s, let cut):
            network.brokerLinkCut[s] = cut
            network.brokerLinkCutAt[s] = now
            coverage.count(slots[s].isServing ? .masterBrokerLinkCut : .otherBrokerLinkCut)
        case .masterBrokerLink(let cut):
            if let s = slots.indices.first(where: { slots[$0].isServing }) {
                network.brokerLinkCut[s] = cut
                network.brokerLinkCutAt[s] = now
                coverage.count(.masterBrokerLinkCut)
                note(s, "its broker link is cut (\(cut.rawValue))")
            }
        case .brokerPartition(let side):
            network.brokerSide = Set(side)
            coverage.count(.brokersPartitioned)
        case .links(let links, let both):
            for l in links { network.cutLinks[l] = both }
            coverage.count(both ? (links.count == 2 ? .bridgeCut : .ringCut) : .peerNetworkLinksCut)
        case .heal:
            let cut = slots.indices.filter { !network.reachesBroker($0) }
            network.heal()
            reconnectBroker(cut)
        case .slow(let s, let d): network.extraDelay[s] = d
        case .peerSendsFail(let target, let span):
            guard let s = target ?? slots.indices.first(where: { slots[$0].isServing }) else { break }
            if !network.peerSendsFail(s, at: now) { network.peerSendsFailSince[s] = now }
            network.peerSendsFailUntil[s] = now + Milliseconds(span)
            coverage.count(target == nil || slots[s].isServing ? .mutedMaster : .mutedOther)
            if target == nil { note(s, "its peer sends fail for \(span) ms") }
        }
    }

    /// The runtime's STOMP session reconnects once a cut heals, at its next attempt, and
    /// the node hears of the new connection (`NodeEvent.brokerConnected`).
    mutating func reconnectBroker(_ slots: [Int]) {
        for s in slots where network.reachesBroker(s) {
            guard let process = self.slots[s].inspect({ $0.incarnation }) else { continue }
            queue.push(now + Self.brokerReconnectDelay, .brokerConnected(s, process: process))
        }
    }

    /// About the STOMP session's first reconnect backoff.
    static let brokerReconnectDelay = Milliseconds(100)

    /// Counts what the fault hits (`Coverage`'s fault × role rows), before it applies.
    mutating func countFaultRole(_ fault: Scenario.Fault) {
        func role(_ s: Int) -> RoleHit {
            guard s < slots.count, let (serving, role) = slots[s].inspect({ ($0.isServing, $0.role) }) else { return .down }
            if serving { return .servingMaster }
            switch role {
            case .master: return .recoveringMaster
            case .slave: return .slave
            case .starting, .candidate: return .candidate
            case .stopped: return .down
            }
        }
        let master = slots.indices.first { slots[$0].isServing }
        func sides(_ kind: FaultKind, _ named: [Int]) {
            coverage.count(kind, hit: master.map { named.contains($0) ? .withMaster : .withoutMaster } ?? .noMaster)
        }
        switch fault {
        case .crash(let s): coverage.count(.crash, hit: role(s))
        case .shutdown(let s): coverage.count(.shutdown, hit: role(s))
        case .diskLoss(let s, _): coverage.count(.diskLoss, hit: role(s))
        case .pause(let s, _): coverage.count(.pause, hit: role(s))
        case .slow(let s, _): coverage.count(.slow, hit: role(s))
        case .storeFails(let s): coverage.count(.storeFails, hit: role(s))
        case .impostor(let s): coverage.count(.impostor, hit: role(s))
        case .brokerLink(let s, _): coverage.count(.brokerLink, hit: role(s))
        case .masterBrokerLink: if let m = master { coverage.count(.brokerLink, hit: role(m)) }
        case .partition(let side): sides(.partition, side)
        case .peerNetworkPartition(let side): sides(.peerNetworkPartition, side)
        case .brokerPartition(let side): sides(.brokerPartition, side)
        case .oneWay(let a, let b): sides(.oneWay, [a, b])
        case .links(let links, _): sides(.links, links.flatMap { [$0.from, $0.to] })
        case .peerSendsFail(let s?, _): coverage.count(.peerSendsFail, hit: role(s))
        case .peerSendsFail(nil, _): if let m = master { coverage.count(.peerSendsFail, hit: role(m)) }
        case .restart, .join, .brokerOutage, .heal, .storeHeals: break
        }
    }

    /// The faults are over: the network heals, disks work, every node is up — or, with a
    /// liveness phase, every node of its core, while the others stay down or cut off
    /// (`healEverything` ends that phase).
    mutating func endFaults() {
        faultsOver = true
        inLivenessPhase = scenario.liveness != nil
        network.quiet = true
        let cut = slots.indices.filter { !network.reachesBroker($0) }
        network.heal()
        network.topologyChangedAt = now
        network.extraDelay = [:]
        network.peerSendsFailUntil = [:]
        // An impostor (a slot beyond the cluster's own) is a second process given a
        // node's id by mistake: the operator who heals the cluster stops it for good, or
        // the core would hold two nodes of one id, one of them outside it.
        if scenario.liveness != nil {
            for s in scenario.nodes..<slots.count where slots[s].exists {
                if slots[s].isRunning { crash(s) }
                slots[s].exists = false
            }
        }
        let outside = scenario.liveness.map { l in (0..<scenario.nodes).filter { !l.core.contains($0) } } ?? []
        let down = Set(scenario.liveness?.down ?? [])
        for s in slots.indices {
            if slots[s].disk.failing {
                slots[s].disk.failing = false
            }
            if outside.contains(s) {
                if down.contains(s) {
                    if slots[s].isRunning { crash(s) }
                } else {
                    network.isolated.insert(s)
                }
            } else if slots[s].exists && !slots[s].isRunning {
                startNode(s)
            }
        }
        if let l = scenario.liveness {
            let line = "FAULTS END: core \(l.core.map { "s\($0)" }.joined(separator: ",")) healed and up; "
                + "down: \(down.sorted().map { "s\($0)" }.joined(separator: ",")); "
                + "cut off: \(network.isolated.sorted().map { "s\($0)" }.joined(separator: ","))"
            note(-1, line)
        } else {
            note(-1, "FAULTS END: network healed, every node up")
        }
        reconnectBroker(cut)
    }

    /// The liveness phase is over: the outsiders are back on the network, or started.
    mutating func healEverything() {
        inLivenessPhase = false
        let cut = slots.indices.filter { !network.reachesBroker($0) }
        network.heal()
        network.isolated = []
        reconnectBroker(cut)
        network.topologyChangedAt = now
        for s in slots.indices where slots[s].exists && !slots[s].isRunning { startNode(s) }
        note(-1, "EVERYTHING HEALED: network whole, every node up")
    }
}
