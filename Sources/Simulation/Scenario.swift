import TrackerLogic

/// Everything random about one simulated run, drawn from its seed.
public struct Scenario: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var nodes: Int
    public var quorum: QuorumMode
    public var lossRate: Double
    public var duplicateRate: Double
    public var minDelay: Int64
    public var maxDelay: Int64
    public var peers: Int
    public var torrents: Int
    /// Faults happen in [faultStart, faultEnd); then the network heals and nodes restart.
    public var faultEnd: Instant
    public var settle: Milliseconds
    public var faults: [TimedFault]
    public var clockDrift: [Int64]
    public var announceInterval: UInt32
    public var peerTimeout: Milliseconds
    /// A hostile participant on the broker during the fault window, if any.
    public var adversary: Adversary.Plan?
    /// Catalogue changes made on some node's dashboard during the fault window.
    public var operatorActions: [OperatorAction] = []
    /// Longest message a node sends in one frame. Small in some scenarios, so that
    /// snapshots, catch-ups and prepares travel in fragments through loss, duplication
    /// and reordering; the runtime's default elsewhere.
    public var fragmentBytes = ClusterChannel.defaultFragmentBytes
    /// Share of broker and peer-network frames corrupted in transit (bit flips,
    /// truncation) during the fault window; a snapshot so hit is corrupted before it is
    /// sealed instead, where only its checksum can tell.
    public var corruptRate = 0.0
    /// Share of broker messages the broker delivers a second time under a fresh frame,
    /// during the fault window: what a broker does when it retries after a reconnect.
    /// The receiver's replay window cannot tell it from a new message, so only the
    /// protocol's own "apply once" rules keep it harmless.
    public var redeliveryRate = 0.0
    /// The liveness phase after the fault window (`Simulator.runLiveness`); nil in named
    /// scenarios, which heal everything at once.
    public var liveness: Liveness?

    /// After the fault window a majority `core` is healed (every core node up, the
    /// network among the core whole and lossless) while the others stay down (`down`) or
    /// cut from everything, peers included. The core must settle within `bound`: one
    /// serving master that every core node follows, equal replicas, no transaction left
    /// undecided and no held request left unanswered. Then everything heals.
    public struct Liveness: Sendable, Hashable {
        public var core: [Int]
        public var down: [Int]
        /// The stated bound: an election (`downAfter` 2 s, then the candidates' answer
        /// and coordinator timeouts), a recovery that may fetch state from every core
        /// node and merge a diverged branch, and snapshots in small fragments behind it.
        public static let bound = Milliseconds.seconds(15)
        public init(core: [Int], down: [Int]) { self.core = core; self.down = down }
    }

    /// Groups of faults that a seed may leave out altogether (swarm testing: a seed with
    /// fewer kinds of fault meets the rarer combinations of the kinds it keeps more often).
    public enum FaultFamily: String, CaseIterable, Sendable {
        case processes, partitions, broker, disks, slowness, noise, hostile, operatorActions, peerSends

        /// The family a fault belongs to; nil for joins and heals, which every seed keeps.
        static func of(_ f: Fault) -> FaultFamily? {
            switch f {
            case .crash, .restart, .shutdown, .diskLoss, .impostor, .pause: return .processes
            case .partition, .oneWay, .peerNetworkPartition, .links: return .partitions
            case .brokerOutage, .brokerLink, .masterBrokerLink, .brokerPartition: return .broker
            case .storeFails, .storeHeals: return .disks
            case .slow: return .slowness
            case .peerSendsFail: return .peerSends
            case .join, .heal: return nil
            }
        }
    }

    public static let start = Instant(milliseconds: 1_700_000_000_000)

    public enum Fault: Sendable, Hashable, CustomStringConvertible {
        case crash(Int)
        case restart(Int)
        case shutdown(Int)
        case join(Int)
        case partition([Int])
        case oneWay(from: Int, to: Int)
        /// The broker dies: no node hears another on it; keepalives still cross the peer
        /// network.
        case brokerOutage
        /// The peer network is cut between the sides; the broker still connects them.
        case peerNetworkPartition([Int])
        case heal
        case storeFails(Int)
        case storeHeals(Int)
        case slow(Int, extraDelay: Int64)
        /// A crash whose disk keeps all but its newest `lastWrites` transactions (0: none).
        case diskLoss(Int, lastWrites: Int)
        /// A second process starts with this node's id (a newer one: it must yield).
        case impostor(Int)
        /// The node's process is stopped (SIGSTOP, a paused VM) for this long, then runs on.
        case pause(Int, for: Int64)
        /// One node's own link to the broker is cut (`LinkCut`); the peer network and
        /// every other node's link still work.
        case brokerLink(Int, LinkCut)
        /// The same, for whichever node serves as master at that moment (none: nothing).
        case masterBrokerLink(LinkCut)
        /// The broker channel is cut between the sides (the link between two brokers of
        /// a pair); each node still reaches its own broker, and the peer network is whole.
        case brokerPartition([Int])
        /// Single links cut, each one way (`Link`): on the peer network alone, or on both
        /// channels. What no side-based cut can shape: a bridge (one node hears two that
        /// do not hear each other), a majorities ring, a link lost one way.
        case links([Link], bothChannels: Bool)
        /// A node's sends on the peer channel fail for this long (a firewall rule that
        /// rejects them, a route gone): its replies and its keepalives there are lost, and
        /// it hears of each failure. Nil: whichever node serves as master then.
        case peerSendsFail(Int?, for: Int64)

        public var description: String {
            switch self {
            case .crash(let n): return "crash s\(n)"
            case .restart(let n): return "restart s\(n)"
            case .shutdown(let n): return "clean-shutdown s\(n)"
            case .join(let n): return "join s\(n)"
            case .partition(let side): return "partition \(side.map { "s\($0)" }.joined(separator: ","))|rest"
            case .oneWay(let a, let b): return "one-way s\(a)->s\(b) blocked"
            case .brokerOutage: return "broker down"
            case .peerNetworkPartition(let side): return "peer-network partition \(side.map { "s\($0)" }.joined(separator: ","))|rest"
            case .heal: return "heal network"
            case .storeFails(let n): return "store fails s\(n)"
            case .storeHeals(let n): return "store heals s\(n)"
            case .slow(let n, let d): return "slow s\(n) +\(d)ms"
            case .diskLoss(let n, let w): return w == 0 ? "disk-lost s\(n)" : "disk-loses-\(w) s\(n)"
            case .impostor(let n): return "impostor of s\(n)"
            case .pause(let n, let d): return "pause s\(n) \(d)ms"
            case .brokerLink(let n, let cut): return "broker link of s\(n) cut (\(cut.rawValue))"
            case .masterBrokerLink(let cut): return "broker link of the master cut (\(cut.rawValue))"
            case .brokerPartition(let side): return "broker partition \(side.map { "s\($0)" }.joined(separator: ","))|rest"
            case .links(let links, let both):
                return "\(both ? "links" : "peer-network links") cut \(links.map { "s\($0.from)->s\($0.to)" }.joined(separator: ","))"
            case .peerSendsFail(let n, let span): return "peer sends of \(n.map { "s\($0)" } ?? "the master") fail \(span)ms"
            }
        }
    }

    /// One direction of the link between two nodes.
    public struct Link: Sendable, Hashable {
        public var from: Int
        public var to: Int
        public init(from: Int, to: Int) { self.from = from; self.to = to }
    }

    /// Which way a node's broker link is cut.
    public enum LinkCut: String, Sendable, Hashable, CaseIterable {
        /// Nothing goes either way (a dead proxy, a dropped route, a TLS handshake refused).
        case both
        /// What the node publishes is lost; it still hears the broker.
        case send
        /// What the broker delivers to the node is lost; its own frames still go out.
        case receive

        var blocksSending: Bool { self != .receive }
        var blocksReceiving: Bool { self != .send }
    }

    public struct TimedFault: Sendable, Hashable {
        public var at: Instant
        public var fault: Fault
    }

    /// Node slots that exist from the start; slots beyond join later.
    public var initialNodes: Int { nodes - joiningNodes }
    public var joiningNodes: Int { faults.filter { if case .join = $0.fault { return true } else { return false } }.count }

    public init(seed: UInt64, maxNodes: Int = 7) {
        var rng = SeededGenerator(seed: seed)
        self.seed = seed
        nodes = 1 + rng.below(maxNodes)
        quorum = rng.chance(0.5) ? .live : .strict
        // The neighbours of past failures (docs/simulator-findings.md), from a stream of
        // their own, so every other draw stays as it was: a strict quorum of 6-7 nodes,
        // then below a broker outage overlapping a partition and a crash, and a pause
        // right after a restart.
        var neighbours = SeededGenerator(seed: seed ^ 0x4E45_4947_4842_4F52)
        if maxNodes >= 6 && neighbours.chance(0.05) {
            nodes = 6 + neighbours.below(min(2, maxNodes - 5))
            quorum = .strict
        }
        let calm = rng.chance(0.15)
        lossRate = calm ? 0 : Double(rng.below(31)) / 100
        duplicateRate = calm ? 0 : Double(rng.below(11)) / 100
        minDelay = Int64(1 + rng.below(5))
        maxDelay = minDelay + Int64(rng.below(calm ? 10 : 120))
        peers = 2 + rng.below(6)
        torrents = 1 + rng.below(3)
        let faultSeconds = Int64(8 + rng.below(18))
        faultEnd = Scenario.start + Milliseconds.seconds(faultSeconds)
        settle = Milliseconds.seconds(25)
        clockDrift = (0..<nodes).map { _ in rng.chance(0.3) ? Int64(rng.below(801)) - 400 : 0 }
        let short = rng.chance(0.3)
        announceInterval = short ? 6 : 1800
        peerTimeout = short ? Milliseconds.seconds(12) : Milliseconds.seconds(3600)

        // Faults: a few events at random times, each node in a consistent state.
        var faults: [TimedFault] = []
        var links = SeededGenerator(seed: seed ^ 0x4C49_4E4B_5355_5421)
        let joins = nodes > 1 && rng.chance(0.3) ? 1 + rng.below(min(2, nodes - 1)) : 0
        let initial = nodes - joins
        var down = Set<Int>()
        var t = Scenario.start + Milliseconds(2000 + Int64(rng.below(3000)))
        var joined = initial
        let count = calm ? rng.below(2) : 1 + rng.below(7)
        for _ in 0..<count {
            guard t < faultEnd else { break }
            let kind = rng.below(10)
            let up = (0..<joined).filter { !down.contains($0) }
            switch kind {
            case 0, 1, 2:
                if let n = up.isEmpty ? nil : up[rng.below(up.count)] {
                    faults.append(TimedFault(at: t, fault: rng.chance(0.25) ? .shutdown(n) : .crash(n)))
                    down.insert(n)
                    let back = t + Milliseconds(Int64(500 + rng.below(8000)))
                    if back < faultEnd && rng.chance(0.7) {
                        faults.append(TimedFault(at: back, fault: .restart(n)))
                        down.remove(n)
                    }
                }
            case 3, 4:
                if joined > 1 {
                    let side = (0..<joined).filter { _ in rng.chance(0.5) }
                    if !side.isEmpty && side.count < joined {
                        // Which links the cut takes, from a stream of its own (the other
                        // draws of the scenario stay as they were).
                        let cut: Fault
                        switch links.below(4) {
                        case 0: cut = .brokerOutage
                        case 1: cut = .peerNetworkPartition(side)
                        default: cut = .partition(side)
                        }
                        faults.append(TimedFault(at: t, fault: cut))
                        faults.append(TimedFault(at: t + Milliseconds(Int64(1000 + rng.below(8000))), fault: .heal))
                    }
                }
            case 5:
                if joined > 1 {
                    let a = rng.below(joined), b = rng.below(joined)
                    if a != b {
                        faults.append(TimedFault(at: t, fault: .oneWay(from: a, to: b)))
                        faults.append(TimedFault(at: t + Milliseconds(Int64(1000 + rng.below(6000))), fault: .heal))
                    }
                }
            case 6:
                if joined < nodes {
                    faults.append(TimedFault(at: t, fault: .join(joined)))
                    joined += 1
                }
            case 7:
                let n = rng.below(joined)
                faults.append(TimedFault(at: t, fault: .storeFails(n)))
                faults.append(TimedFault(at: t + Milliseconds(Int64(500 + rng.below(5000))), fault: .storeHeals(n)))
            default:
                let n = rng.below(joined)
                faults.append(TimedFault(at: t, fault: .slow(n, extraDelay: Int64(50 + rng.below(600)))))
            }
            t = t + Milliseconds(Int64(500 + rng.below(4000)))
        }
        // Unused join slots join before the faults end, so every slot exists at the end.
        while joined < nodes {
            faults.append(TimedFault(at: min(t, faultEnd - Milliseconds(1)), fault: .join(joined)))
            joined += 1
        }
        // Disk losses, corruption: streams of their own, so every draw above stays as it was.
        var disks = SeededGenerator(seed: seed ^ 0x4449_534B_4C4F_5353)
        if initial > 0 && disks.chance(0.25) {
            let n = disks.below(initial)
            let at = Scenario.start + Milliseconds(Int64(2500 + disks.below(Int(max(1, faultSeconds * 1000 - 4000)))))
            if at < faultEnd {
                faults.append(TimedFault(at: at, fault: .diskLoss(n, lastWrites: disks.chance(0.3) ? 0 : 1 + disks.below(8))))
                let back = at + Milliseconds(Int64(300 + disks.below(4000)))
                if back < faultEnd { faults.append(TimedFault(at: back, fault: .restart(n))) }
            }
        }
        if disks.chance(0.3) { corruptRate = Double(1 + disks.below(5)) / 100 }
        // Pauses and duplicate ids, from a stream of their own too.
        var odd = SeededGenerator(seed: seed ^ 0x5041_5553_4544_4944)
        if initial > 0 && odd.chance(0.15) {
            let n = odd.below(initial)
            let at = Scenario.start + Milliseconds(Int64(2500 + odd.below(Int(max(1, faultSeconds * 1000 - 3000)))))
            if at < faultEnd { faults.append(TimedFault(at: at, fault: .pause(n, for: Int64(1500 + odd.below(3000))))) }
        }
        if let firstJoin = faults.filter({ if case .join = $0.fault { return true } else { return false } }).map(\.at).min(),
           odd.chance(0.25) {
            // Every node holding the repository is down when the newcomers arrive: they lead
            // an empty cluster, and the old nodes come back with a state nobody else has
            // (merges; votes from nodes the master wrongly counts as in sync).
            for n in 0..<initial where firstJoin > Scenario.start + Milliseconds(1000) {
                faults.append(TimedFault(at: firstJoin - Milliseconds(300), fault: .crash(n)))
                let back = firstJoin + Milliseconds(Int64(2500 + odd.below(3000)))
                if back < faultEnd { faults.append(TimedFault(at: back, fault: .restart(n))) }
            }
        }
        // Every node stops cleanly, one after another, then all start again in another
        // order: the operator's data must come back, each entry's newest version (nodes
        // that stopped later may hold newer ones). A stream of its own.
        var stops = SeededGenerator(seed: seed ^ 0x4655_4C4C_5354_4F50)
        if stops.chance(0.08) && faultSeconds >= 8 {
            let at = Scenario.start + Milliseconds(Int64(2500 + stops.below(Int(faultSeconds * 1000 - 7000))))
            let up = (0..<initial) + faults.compactMap { f -> Int? in
                if case .join(let n) = f.fault, f.at <= at { return n } else { return nil }
            }
            let restarts = up.map { _ in at + Milliseconds(Int64(1500 + stops.below(3000))) }
            if let last = restarts.max(), last < faultEnd {
                for (n, back) in zip(up, restarts) {
                    faults.append(TimedFault(at: at + Milliseconds(Int64(stops.below(1500))), fault: .shutdown(n)))
                    faults.append(TimedFault(at: back, fault: .restart(n)))
                }
            }
        }
        // Faults drawn from the wiring rather than from memory: each node's own broker
        // link (either way or both), the serving master's whichever it is then, and the
        // link between two brokers, while the peer network still joins every node. A
        // stream of its own; placed before the impostor, which keeps clear of them.
        var wiring = SeededGenerator(seed: seed ^ 0x5749_5249_4E47_5321)
        if initial > 1 && wiring.chance(0.35) {
            for _ in 0..<(1 + wiring.below(2)) {
                let at = Scenario.start + Milliseconds(Int64(2500 + wiring.below(Int(max(1, faultSeconds * 1000 - 3000)))))
                let cut: LinkCut = [.both, .both, .both, .send, .receive][wiring.below(5)]
                let fault: Fault
                switch wiring.below(8) {
                case 0, 1: fault = .masterBrokerLink(cut)
                case 2:
                    let side = (0..<initial).filter { _ in wiring.chance(0.5) }
                    fault = side.isEmpty || side.count == initial ? .masterBrokerLink(cut) : .brokerPartition(side)
                case 3, 4: fault = Self.drawLinks(initial, &wiring)
                default: fault = .brokerLink(wiring.below(initial), cut)
                }
                guard at < faultEnd else { continue }
                faults.append(TimedFault(at: at, fault: fault))
                let healAt = at + Milliseconds(Int64(1500 + wiring.below(8000)))
                if healAt < faultEnd { faults.append(TimedFault(at: healAt, fault: .heal)) }
                // The node cut off is killed while it is cut, as an operator would find it.
                if case .brokerLink(let n, _) = fault, wiring.chance(0.3) {
                    let crashAt = at + Milliseconds(Int64(2000 + wiring.below(4000)))
                    if crashAt < faultEnd { faults.append(TimedFault(at: crashAt, fault: .crash(n))) }
                }
            }
        }
        // Before the impostor: it is placed only where no partition or pause is near.
        if initial > 1 && neighbours.chance(0.06) {
            let at = Scenario.start + Milliseconds(Int64(2500 + neighbours.below(Int(max(1, faultSeconds * 1000 - 5000)))))
            let side = (0..<initial).filter { _ in neighbours.chance(0.5) }
            let n = neighbours.below(initial)
            let crashAt = at + Milliseconds(Int64(200 + neighbours.below(1500)))
            if at < faultEnd, !side.isEmpty, side.count < initial {
                faults.append(TimedFault(at: at - Milliseconds(Int64(neighbours.below(800))), fault: .brokerOutage))
                faults.append(TimedFault(at: at, fault: .partition(side)))
                faults.append(TimedFault(at: crashAt, fault: .crash(n)))
                faults.append(TimedFault(at: crashAt + Milliseconds(Int64(500 + neighbours.below(3500))), fault: .restart(n)))
                faults.append(TimedFault(at: at + Milliseconds(Int64(2000 + neighbours.below(4000))), fault: .heal))
            }
        }
        if neighbours.chance(0.08), let restart = faults.filter({ if case .restart = $0.fault { return true } else { return false } })
            .min(by: { $0.at < $1.at }), case .restart(let n) = restart.fault {
            let at = restart.at + Milliseconds(Int64(neighbours.below(400)))
            if at < faultEnd { faults.append(TimedFault(at: at, fault: .pause(n, for: Int64(500 + neighbours.below(3000))))) }
        }
        if initial > 1 && odd.chance(0.08) {
            // Only where nothing else happens to that node or the network around it: ids are
            // the operator's to keep unique, and a duplicate hidden behind a partition can
            // lead "its" epoch twice — the detection is for the visible case.
            let n = odd.below(initial)
            let at = Scenario.start + Milliseconds(Int64(2500 + odd.below(Int(max(1, faultSeconds * 1000 - 3000)))))
            let window = (at - Milliseconds(10_000))...(at + Milliseconds(8_000))
            let clear = !faults.contains { f in
                guard window.contains(f.at) else { return false }
                switch f.fault {
                case .partition, .oneWay, .brokerOutage, .peerNetworkPartition, .heal, .pause, .brokerLink, .masterBrokerLink,
                     .brokerPartition, .links: return true
                default: return f.fault.slots.contains(n)
                }
            }
            if clear && at < faultEnd { faults.append(TimedFault(at: at, fault: .impostor(n))) }
        }
        self.faults = faults.sorted { $0.at < $1.at }
        // Drawn from a stream of its own, so adding it changed no other draw.
        var hostile = SeededGenerator(seed: seed ^ 0x4144_5645_5253_4152)
        if hostile.chance(0.3) {
            adversary = Adversary.Plan(kind: hostile.chance(0.5) ? .outsider : .insider,
                                       every: Milliseconds(Int64(100 + hostile.below(500))))
        }
        operatorActions = OperatorAction.draw(seed: seed, nodes: nodes, faultEnd: faultEnd, interval: announceInterval, peerTimeout: peerTimeout,
                                             swarms: torrents, peers: peers)

        var framing = SeededGenerator(seed: seed ^ 0x4652_4147_4D45_4E54)
        if framing.chance(0.3) { fragmentBytes = 64 + framing.below(449) }
        // Streams of their own, drawn last, so every draw above stays as it was.
        var sends = SeededGenerator(seed: seed ^ 0x5345_4E44_4641_494C)
        if initial > 1 && sends.chance(0.15) {
            let at = Scenario.start + Milliseconds(Int64(2500 + sends.below(Int(max(1, faultSeconds * 1000 - 3000)))))
            let target: Int? = sends.chance(0.5) ? nil : sends.below(initial)
            if at < faultEnd {
                self.faults.append(TimedFault(at: at, fault: .peerSendsFail(target, for: Int64(2000 + sends.below(6000)))))
                self.faults.sort { $0.at < $1.at }
            }
        }
        var again = SeededGenerator(seed: seed ^ 0x5245_4445_4C49_5652)
        if again.chance(0.3) { redeliveryRate = Double(1 + again.below(10)) / 100 }
        var core = SeededGenerator(seed: seed ^ 0x4C49_5645_4E45_5353)
        liveness = Self.drawLiveness(nodes, &core)
        var mix = SeededGenerator(seed: seed ^ 0x4D49_5846_4155_4C54)
        if mix.chance(0.3) {
            var kept = Set(FaultFamily.allCases.filter { _ in mix.chance(0.5) })
            if kept.isEmpty { kept = [FaultFamily.allCases[mix.below(FaultFamily.allCases.count)]] }
            leavingOut(Set(FaultFamily.allCases).subtracting(kept))
        }
    }

    /// A random majority of the `nodes` slots as the core; each other node down or cut off.
    static func drawLiveness(_ nodes: Int, _ rng: inout SeededGenerator) -> Liveness {
        let majority = nodes / 2 + 1
        let size = majority + rng.below(nodes - majority + 1)
        var order = Array(0..<nodes)
        for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, rng.below(i + 1)) }
        let outside = order.dropFirst(size).sorted()
        return Liveness(core: order.prefix(size).sorted(), down: outside.filter { _ in rng.chance(0.5) })
    }

    /// This scenario without the given fault families.
    public mutating func leavingOut(_ families: Set<FaultFamily>) {
        faults.removeAll { FaultFamily.of($0.fault).map(families.contains) ?? false }
        if families.contains(.noise) {
            lossRate = 0
            duplicateRate = 0
            corruptRate = 0
            redeliveryRate = 0
        }
        if families.contains(.hostile) { adversary = nil }
        if families.contains(.operatorActions) { operatorActions = [] }
    }

    /// Links between pairs of the first `n` nodes cut: any of them either way on the peer
    /// network; or, on both channels, a bridge (two nodes that do not hear each other but
    /// both hear a third), or for five nodes a majorities ring (each hears only its two
    /// neighbours: every node sees a majority, no two see the same one).
    static func drawLinks(_ n: Int, _ rng: inout SeededGenerator) -> Fault {
        if n == 5 && rng.chance(0.3) {
            let ring = (0..<5).flatMap { a in [2, 3].map { Link(from: a, to: (a + $0) % 5) } }
            return .links(ring, bothChannels: true)
        }
        if n >= 3 && rng.chance(0.5) {
            let a = rng.below(n)
            let c = (a + 1 + rng.below(n - 1)) % n
            return .links([Link(from: a, to: c), Link(from: c, to: a)], bothChannels: true)
        }
        var links: [Link] = []
        for a in 0..<n {
            for b in 0..<n where a != b && rng.chance(0.3) { links.append(Link(from: a, to: b)) }
        }
        if links.isEmpty { links = [Link(from: 0, to: 1)] }
        return .links(links, bothChannels: false)
    }

    /// A fault-free network with chosen nodes and faults: for named scenario tests.
    public static func calm(seed: UInt64 = 1, nodes: Int, quorum: QuorumMode = .live, peers: Int = 4,
                            faultSeconds: Int64 = 30, faults: [(Int64, Fault)] = []) -> Scenario {
        var s = Scenario(seed: seed)
        s.nodes = nodes
        s.quorum = quorum
        s.lossRate = 0
        s.duplicateRate = 0
        s.corruptRate = 0
        s.minDelay = 1
        s.maxDelay = 5
        s.peers = peers
        s.torrents = 2
        s.clockDrift = Array(repeating: 0, count: nodes)
        s.announceInterval = 1800
        s.peerTimeout = Milliseconds.seconds(3600)
        s.faultEnd = start + Milliseconds.seconds(faultSeconds)
        s.faults = faults.map { TimedFault(at: start + Milliseconds($0.0), fault: $0.1) }.sorted { $0.at < $1.at }
        s.redeliveryRate = 0
        s.liveness = nil
        return s
    }

    public var description: String {
        let f = faults.map { "\($0.at.milliseconds - Scenario.start.milliseconds)ms \($0.fault)" }.joined(separator: "; ")
        return "nodes=\(nodes) (\(initialNodes) initial) quorum=\(quorum.rawValue) loss=\(lossRate) dup=\(duplicateRate) "
            + "delay=\(minDelay)-\(maxDelay)ms peers=\(peers) torrents=\(torrents) "
            + "faults-until=\(faultEnd.milliseconds - Scenario.start.milliseconds)ms drift=\(clockDrift) "
            + "interval=\(announceInterval)s faults=[\(f)]" + (adversary.map { " adversary=\($0)" } ?? "")
            + (operatorActions.isEmpty ? "" : " operator=[\(operatorActions.map(\.description).joined(separator: "; "))]")
            + (fragmentBytes == ClusterChannel.defaultFragmentBytes ? "" : " fragments=\(fragmentBytes)B")
            + (corruptRate == 0 ? "" : " corrupt=\(corruptRate)")
            + (redeliveryRate == 0 ? "" : " redelivery=\(redeliveryRate)")
            + (liveness.map { " liveness-core=\($0.core.map { "s\($0)" }.joined(separator: ","))"
                + ($0.down.isEmpty ? "" : " down=\($0.down.map { "s\($0)" }.joined(separator: ","))") } ?? "")
    }
}
