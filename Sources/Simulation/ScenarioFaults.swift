import TrackerLogic

/// The faults part of a scenario: what can go wrong (`Fault`), how faults group for swarm
/// testing (`FaultFamily`), and how a seed draws them (`drawFaults`). A new fault is a
/// case here, a draw here, and a word in the scenario line (`ScenarioLine.swift`); the
/// simulator applies it (`Processes.swift`).
extension Scenario {
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


    /// The faults of a seed, each kind drawn from a stream of its own
    /// (`ScenarioStream`): a kind added here moves no other kind's draws. `calm` (the
    /// network part's) keeps the mixed faults few; `joins` of the `nodes` slots join later.
    static func drawFaults(seed: UInt64, nodes: Int, joins: Int, calm: Bool, faultEnd: Instant) -> [TimedFault] {
        let initial = nodes - joins
        let windowMs = Int((faultEnd - Scenario.start).value)
        /// An instant in the fault window after the first `from` ms, clear of its last `margin` ms.
        func within(_ rng: inout SeededGenerator, from: Int = 2500, margin: Int) -> Instant {
            Scenario.start + Milliseconds(Int64(from + rng.below(max(1, windowMs - margin))))
        }
        var faults: [TimedFault] = []

        // Crashes and restarts, partitions, one-way cuts, joins, failing stores and slow
        // nodes, at random times, each node in a consistent state.
        var mixed = ScenarioStream.named(seed, "faults.mixed")
        var cuts = ScenarioStream.named(seed, "faults.mixed.cuts")
        var down = Set<Int>()
        var t = Scenario.start + Milliseconds(2000 + Int64(mixed.below(3000)))
        var joined = initial
        let count = calm ? mixed.below(2) : 1 + mixed.below(7)
        for _ in 0..<count {
            guard t < faultEnd else { break }
            let kind = mixed.below(10)
            let up = (0..<joined).filter { !down.contains($0) }
            switch kind {
            case 0, 1, 2:
                if let n = up.isEmpty ? nil : up[mixed.below(up.count)] {
                    faults.append(TimedFault(at: t, fault: mixed.chance(0.25) ? .shutdown(n) : .crash(n)))
                    down.insert(n)
                    let back = t + Milliseconds(Int64(500 + mixed.below(8000)))
                    if back < faultEnd && mixed.chance(0.7) {
                        faults.append(TimedFault(at: back, fault: .restart(n)))
                        down.remove(n)
                    }
                }
            case 3, 4:
                if joined > 1 {
                    let side = (0..<joined).filter { _ in mixed.chance(0.5) }
                    if !side.isEmpty && side.count < joined {
                        let cut: Fault
                        switch cuts.below(4) {
                        case 0: cut = .brokerOutage
                        case 1: cut = .peerNetworkPartition(side)
                        default: cut = .partition(side)
                        }
                        faults.append(TimedFault(at: t, fault: cut))
                        faults.append(TimedFault(at: t + Milliseconds(Int64(1000 + mixed.below(8000))), fault: .heal))
                    }
                }
            case 5:
                if joined > 1 {
                    let a = mixed.below(joined), b = mixed.below(joined)
                    if a != b {
                        faults.append(TimedFault(at: t, fault: .oneWay(from: a, to: b)))
                        faults.append(TimedFault(at: t + Milliseconds(Int64(1000 + mixed.below(6000))), fault: .heal))
                    }
                }
            case 6:
                if joined < nodes {
                    faults.append(TimedFault(at: t, fault: .join(joined)))
                    joined += 1
                }
            case 7:
                let n = mixed.below(joined)
                faults.append(TimedFault(at: t, fault: .storeFails(n)))
                faults.append(TimedFault(at: t + Milliseconds(Int64(500 + mixed.below(5000))), fault: .storeHeals(n)))
            default:
                let n = mixed.below(joined)
                faults.append(TimedFault(at: t, fault: .slow(n, extraDelay: Int64(50 + mixed.below(600)))))
            }
            t = t + Milliseconds(Int64(500 + mixed.below(4000)))
        }
        // Unused join slots join before the faults end, so every slot exists at the end.
        while joined < nodes {
            faults.append(TimedFault(at: min(t, faultEnd - Milliseconds(1)), fault: .join(joined)))
            joined += 1
        }

        // A crash whose disk loses its newest writes, or all of them.
        var disks = ScenarioStream.named(seed, "faults.disk-loss")
        if initial > 0 && disks.chance(0.25) {
            let n = disks.below(initial)
            let at = within(&disks, margin: 4000)
            if at < faultEnd {
                faults.append(TimedFault(at: at, fault: .diskLoss(n, lastWrites: disks.chance(0.3) ? 0 : 1 + disks.below(8))))
                let back = at + Milliseconds(Int64(300 + disks.below(4000)))
                if back < faultEnd { faults.append(TimedFault(at: back, fault: .restart(n))) }
            }
        }

        // A process paused (SIGSTOP) and woken.
        var pauses = ScenarioStream.named(seed, "faults.pause")
        if initial > 0 && pauses.chance(0.15) {
            let n = pauses.below(initial)
            let at = within(&pauses, margin: 3000)
            if at < faultEnd { faults.append(TimedFault(at: at, fault: .pause(n, for: Int64(1500 + pauses.below(3000))))) }
        }

        // Every node holding the repository is down when the newcomers arrive: they lead
        // an empty cluster, and the old nodes come back with a state nobody else has
        // (merges; votes from nodes the master wrongly counts as in sync).
        var newcomers = ScenarioStream.named(seed, "faults.newcomers-alone")
        if let firstJoin = faults.filter({ if case .join = $0.fault { return true } else { return false } }).map(\.at).min(),
           newcomers.chance(0.25) {
            for n in 0..<initial where firstJoin > Scenario.start + Milliseconds(1000) {
                faults.append(TimedFault(at: firstJoin - Milliseconds(300), fault: .crash(n)))
                let back = firstJoin + Milliseconds(Int64(2500 + newcomers.below(3000)))
                if back < faultEnd { faults.append(TimedFault(at: back, fault: .restart(n))) }
            }
        }

        // Every node stops cleanly, one after another, then all start again in another
        // order: the operator's data must come back, each entry's newest version (nodes
        // that stopped later may hold newer ones).
        var stops = ScenarioStream.named(seed, "faults.full-stop")
        if stops.chance(0.08) && windowMs >= 8000 {
            let at = within(&stops, margin: 7000)
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
        // link (either way or both), the serving master's whichever it is then, the link
        // between two brokers, and single links, while the peer network still joins every
        // node.
        var wiring = ScenarioStream.named(seed, "faults.wiring")
        if initial > 1 && wiring.chance(0.35) {
            for _ in 0..<(1 + wiring.below(2)) {
                let at = within(&wiring, margin: 3000)
                let cut: LinkCut = [.both, .both, .both, .send, .receive][wiring.below(5)]
                let fault: Fault
                switch wiring.below(8) {
                case 0, 1: fault = .masterBrokerLink(cut)
                case 2:
                    let side = (0..<initial).filter { _ in wiring.chance(0.5) }
                    fault = side.isEmpty || side.count == initial ? .masterBrokerLink(cut) : .brokerPartition(side)
                case 3, 4: fault = drawLinks(initial, &wiring)
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

        // The neighbours of past failures (docs/simulator-findings.md): a broker outage
        // overlapping a partition and a crash, and a pause right after a restart.
        var outage = ScenarioStream.named(seed, "faults.outage-partition-crash")
        if initial > 1 && outage.chance(0.06) {
            let at = within(&outage, margin: 5000)
            let side = (0..<initial).filter { _ in outage.chance(0.5) }
            let n = outage.below(initial)
            let crashAt = at + Milliseconds(Int64(200 + outage.below(1500)))
            if at < faultEnd, !side.isEmpty, side.count < initial {
                faults.append(TimedFault(at: at - Milliseconds(Int64(outage.below(800))), fault: .brokerOutage))
                faults.append(TimedFault(at: at, fault: .partition(side)))
                faults.append(TimedFault(at: crashAt, fault: .crash(n)))
                faults.append(TimedFault(at: crashAt + Milliseconds(Int64(500 + outage.below(3500))), fault: .restart(n)))
                faults.append(TimedFault(at: at + Milliseconds(Int64(2000 + outage.below(4000))), fault: .heal))
            }
        }
        var restartPause = ScenarioStream.named(seed, "faults.pause-after-restart")
        if restartPause.chance(0.08), let restart = faults.filter({ if case .restart = $0.fault { return true } else { return false } })
            .min(by: { $0.at < $1.at }), case .restart(let n) = restart.fault {
            let at = restart.at + Milliseconds(Int64(restartPause.below(400)))
            if at < faultEnd { faults.append(TimedFault(at: at, fault: .pause(n, for: Int64(500 + restartPause.below(3000))))) }
        }

        // A second process with a node's id. Only where nothing else happens to that node
        // or the network around it: ids are the operator's to keep unique, and a duplicate
        // hidden behind a partition can lead "its" epoch twice — the detection is for the
        // visible case. So it is drawn after every fault it must keep clear of.
        var impostor = ScenarioStream.named(seed, "faults.impostor")
        if initial > 1 && impostor.chance(0.08) {
            let n = impostor.below(initial)
            let at = within(&impostor, margin: 3000)
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

        // A node's sends on the peer channel fail for a while (the master's, or one node's).
        var sends = ScenarioStream.named(seed, "faults.peer-sends")
        if initial > 1 && sends.chance(0.15) {
            let at = within(&sends, margin: 3000)
            let target: Int? = sends.chance(0.5) ? nil : sends.below(initial)
            if at < faultEnd { faults.append(TimedFault(at: at, fault: .peerSendsFail(target, for: Int64(2000 + sends.below(6000))))) }
        }
        return faults.sorted { $0.at < $1.at }
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

}
