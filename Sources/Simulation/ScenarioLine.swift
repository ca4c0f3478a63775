import TrackerLogic

/// A scenario as one line of `key=value` words, and back: what `--shrink` prints and
/// `tracker simulate --scenario '…'` replays exactly. The seed still drives everything
/// the scenario does not fix (message delays and losses, the nodes' randomness).
///
/// Faults are `at:kind[:args]` joined by commas, times in milliseconds from the start:
/// `crash:N`, `restart:N`, `shutdown:N`, `join:N`, `partition:A+B`, `one-way:A>B`,
/// `broker-down`, `peer-partition:A+B`, `heal`, `store-fails:N`, `store-heals:N`,
/// `slow:N:MS`, `disk-loss:N:W` (W newest writes lost, 0 for all), `impostor:N`,
/// `pause:N:MS`, `broker-link:N:both|send|receive` (one node's own broker link cut),
/// `master-link:both|send|receive` (the serving master's, whichever it is then),
/// `broker-partition:A+B` (the broker channel cut between the sides), `links:A>B+…` and
/// `peer-links:A>B+…` (single links cut one way, on both channels or the peer network).
/// `sends-fail:N:MS` and `master-sends-fail:MS` (peer sends refused for a while).
/// `liveness=A+B+C/D` names the core healed after the fault window and the nodes left down
/// (the other outsiders stay cut off); `redelivery=R` the broker's redelivery rate. Operator actions are
/// `at:register:N:K` / `at:unregister:N:K` / `at:reload:N:INTERVAL`.
extension Scenario {
    public var line: String {
        func ms(_ t: Instant) -> String { String(t.milliseconds - Scenario.start.milliseconds) }
        var words = [
            "seed=\(seed)", "nodes=\(nodes)", "quorum=\(quorum.rawValue)", "loss=\(lossRate)", "dup=\(duplicateRate)",
            "delay=\(minDelay)-\(maxDelay)", "peers=\(peers)", "torrents=\(torrents)", "until=\(ms(faultEnd))",
            "settle=\(settle.value)", "drift=\(clockDrift.map(String.init).joined(separator: ","))",
            "interval=\(announceInterval)", "timeout=\(peerTimeout.value)", "fragments=\(fragmentBytes)", "corrupt=\(corruptRate)",
        ]
        if httpPeers > 0 { words.append("http=\(httpPeers)") }
        if let a = adversary { words.append("adversary=\(a.kind.rawValue)/\(a.every.value)") }
        if redeliveryRate > 0 { words.append("redelivery=\(redeliveryRate)") }
        if let l = liveness {
            let core = l.core.map(String.init).joined(separator: "+"), down = l.down.map(String.init).joined(separator: "+")
            words.append("liveness=\(core)" + (l.down.isEmpty ? "" : "/\(down)"))
        }
        words.append("faults=" + faults.map { "\(ms($0.at)):\(Self.word($0.fault))" }.joined(separator: ","))
        words.append("operator=" + operatorActions.map { a -> String in
            switch a.change {
            case .register(let k): return "\(ms(a.at)):register:\(a.slot):\(k)"
            case .unregister(let k): return "\(ms(a.at)):unregister:\(a.slot):\(k)"
            case .reload(let interval): return "\(ms(a.at)):reload:\(a.slot):\(interval)"
            case .accessMode(let mode): return "\(ms(a.at)):mode:\(a.slot):\(mode.rawValue)"
            case .accessRule(let k, let rule?): return "\(ms(a.at)):\(rule):\(a.slot):\(k)"
            case .accessRule(let k, nil): return "\(ms(a.at)):unrule:\(a.slot):\(k)"
            case .clientRule(let k, let rule?): return "\(ms(a.at)):client-\(rule):\(a.slot):\(k)"
            case .clientRule(let k, nil): return "\(ms(a.at)):unclient:\(a.slot):\(k)"
            case .user(let k, let op): return "\(ms(a.at)):user-\(op.rawValue):\(a.slot):\(k)"
            }
        }.joined(separator: ","))
        return words.joined(separator: " ")
    }

    static func word(_ f: Fault) -> String {
        func side(_ s: [Int]) -> String { s.map(String.init).joined(separator: "+") }
        switch f {
        case .crash(let n): return "crash:\(n)"
        case .restart(let n): return "restart:\(n)"
        case .shutdown(let n): return "shutdown:\(n)"
        case .join(let n): return "join:\(n)"
        case .partition(let s): return "partition:\(side(s))"
        case .oneWay(let a, let b): return "one-way:\(a)>\(b)"
        case .brokerOutage: return "broker-down"
        case .peerNetworkPartition(let s): return "peer-partition:\(side(s))"
        case .heal: return "heal"
        case .storeFails(let n): return "store-fails:\(n)"
        case .storeHeals(let n): return "store-heals:\(n)"
        case .slow(let n, let d): return "slow:\(n):\(d)"
        case .diskLoss(let n, let w): return "disk-loss:\(n):\(w)"
        case .impostor(let n): return "impostor:\(n)"
        case .pause(let n, let d): return "pause:\(n):\(d)"
        case .brokerLink(let n, let cut): return "broker-link:\(n):\(cut.rawValue)"
        case .masterBrokerLink(let cut): return "master-link:\(cut.rawValue)"
        case .brokerPartition(let s): return "broker-partition:\(side(s))"
        case .links(let links, let both):
            return "\(both ? "links" : "peer-links"):" + links.map { "\($0.from)>\($0.to)" }.joined(separator: "+")
        case .peerSendsFail(let n?, let span): return "sends-fail:\(n):\(span)"
        case .peerSendsFail(nil, let span): return "master-sends-fail:\(span)"
        }
    }

    /// Parses `line`; the error names the word that is wrong. Every slot a fault or an
    /// action names must exist.
    public init(line: String) throws(ScenarioLineError) {
        var s = Scenario.calm(nodes: 1)
        s.faults = []
        s.operatorActions = []
        s.adversary = nil
        var seen = Set<String>()
        for word in line.split(separator: " ", omittingEmptySubsequences: true) {
            let kv = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2 else { throw ScenarioLineError("'\(word)' is not key=value") }
            let key = String(kv[0]), value = String(kv[1])
            guard seen.insert(key).inserted else { throw ScenarioLineError("\(key) given twice") }
            func bad() -> ScenarioLineError { ScenarioLineError("bad \(key)=\(value)") }
            func int(_ t: Substring) throws(ScenarioLineError) -> Int {
                guard let v = Int(t), v >= 0 else { throw bad() }
                return v
            }
            func rate(_ t: String) throws(ScenarioLineError) -> Double {
                guard let v = Double(t), v >= 0, v <= 1 else { throw bad() }
                return v
            }
            switch key {
            case "seed": guard let v = UInt64(value) else { throw bad() }; s.seed = v
            case "nodes": s.nodes = try int(Substring(value)); guard (1...64).contains(s.nodes) else { throw bad() }
            case "quorum": guard let q = QuorumMode(rawValue: value) else { throw bad() }; s.quorum = q
            case "loss": s.lossRate = try rate(value)
            case "dup": s.duplicateRate = try rate(value)
            case "corrupt": s.corruptRate = try rate(value)
            case "redelivery": s.redeliveryRate = try rate(value)
            case "liveness":
                let p = value.split(separator: "/", omittingEmptySubsequences: false)
                func slots(_ t: Substring) throws(ScenarioLineError) -> [Int] {
                    try t.split(separator: "+").map { (n: Substring) throws(ScenarioLineError) -> Int in try int(n) }
                }
                guard p.count == 1 || p.count == 2 else { throw bad() }
                let core = try slots(p[0]), down = p.count == 2 ? try slots(p[1]) : []
                guard !core.isEmpty, Set(core).count == core.count, Set(down).count == down.count,
                      Set(core).isDisjoint(with: down) else { throw bad() }
                s.liveness = Liveness(core: core.sorted(), down: down.sorted())
            case "delay":
                let p = value.split(separator: "-")
                guard p.count == 2 else { throw bad() }
                s.minDelay = Int64(try int(p[0])); s.maxDelay = Int64(try int(p[1]))
                guard s.minDelay >= 1, s.maxDelay >= s.minDelay else { throw bad() }
            case "peers": s.peers = try int(Substring(value))
            case "http": s.httpPeers = try int(Substring(value))
            case "torrents": s.torrents = try int(Substring(value)); guard s.torrents >= 1 else { throw bad() }
            case "until": s.faultEnd = Scenario.start + Milliseconds(Int64(try int(Substring(value))))
            case "settle": s.settle = Milliseconds(Int64(try int(Substring(value))))
            case "drift":
                s.clockDrift = try value.split(separator: ",").map { (t: Substring) throws(ScenarioLineError) -> Int64 in
                    guard let v = Int64(t), abs(v) <= 60_000 else { throw bad() }
                    return v
                }
            case "interval": guard let v = UInt32(value), v > 0 else { throw bad() }; s.announceInterval = v
            case "timeout": s.peerTimeout = Milliseconds(Int64(try int(Substring(value))))
            case "fragments": s.fragmentBytes = try int(Substring(value)); guard s.fragmentBytes >= 64 else { throw bad() }
            case "adversary":
                let p = value.split(separator: "/")
                guard p.count == 2, let kind = Adversary.Kind(rawValue: String(p[0])) else { throw bad() }
                s.adversary = Adversary.Plan(kind: kind, every: Milliseconds(Int64(max(1, try int(p[1])))))
            case "faults":
                s.faults = try value.split(separator: ",").map { (t: Substring) throws(ScenarioLineError) -> TimedFault in
                    let p = t.split(separator: ":", maxSplits: 1)
                    guard p.count == 2, let f = Self.fault(p[1]) else { throw ScenarioLineError("bad fault '\(t)'") }
                    return TimedFault(at: Scenario.start + Milliseconds(Int64(try int(p[0]))), fault: f)
                }
            case "operator":
                s.operatorActions = try value.split(separator: ",").map { (t: Substring) throws(ScenarioLineError) -> OperatorAction in
                    let p = t.split(separator: ":")
                    guard p.count == 4 else { throw ScenarioLineError("bad operator action '\(t)'") }
                    let at = Scenario.start + Milliseconds(Int64(try int(p[0])))
                    let slot = try int(p[2]), k = try int(p[3])
                    switch p[1] {
                    case "register": return OperatorAction(at: at, slot: slot, change: .register(k))
                    case "unregister": return OperatorAction(at: at, slot: slot, change: .unregister(k))
                    case "reload":
                        guard let interval = UInt32(exactly: k), interval > 0 else { throw ScenarioLineError("bad operator action '\(t)'") }
                        return OperatorAction(at: at, slot: slot, change: .reload(interval: interval))
                    case "mode":
                        guard let mode = UInt8(exactly: k).flatMap(AccessMode.init(rawValue:)) else {
                            throw ScenarioLineError("bad operator action '\(t)'")
                        }
                        return OperatorAction(at: at, slot: slot, change: .accessMode(mode))
                    case "allow": return OperatorAction(at: at, slot: slot, change: .accessRule(swarm: k, .allow))
                    case "deny": return OperatorAction(at: at, slot: slot, change: .accessRule(swarm: k, .deny))
                    case "unrule": return OperatorAction(at: at, slot: slot, change: .accessRule(swarm: k, nil))
                    case "client-allow": return OperatorAction(at: at, slot: slot, change: .clientRule(peer: k, .allow))
                    case "client-deny": return OperatorAction(at: at, slot: slot, change: .clientRule(peer: k, .deny))
                    case "unclient": return OperatorAction(at: at, slot: slot, change: .clientRule(peer: k, nil))
                    case let word where word.hasPrefix("user-"):
                        guard let op = OperatorAction.UserOperation(rawValue: String(word.dropFirst(5))) else {
                            throw ScenarioLineError("bad operator action '\(t)'")
                        }
                        return OperatorAction(at: at, slot: slot, change: .user(peer: k, op))

                    default: throw ScenarioLineError("bad operator action '\(t)'")
                    }
                }
            default:
                throw ScenarioLineError("unknown key \(key)")
            }
        }
        s.faults.sort { $0.at < $1.at }
        if s.clockDrift.count < s.nodes { s.clockDrift += Array(repeating: 0, count: s.nodes - s.clockDrift.count) }
        s.clockDrift = Array(s.clockDrift.prefix(s.nodes))
        for f in s.faults where !f.fault.slots.allSatisfy({ $0 < s.nodes }) {
            throw ScenarioLineError("fault '\(Self.word(f.fault))' names a slot beyond nodes=\(s.nodes)")
        }
        for a in s.operatorActions where a.slot >= s.nodes {
            throw ScenarioLineError("operator action names slot \(a.slot) beyond nodes=\(s.nodes)")
        }
        guard s.httpPeers <= s.peers else { throw ScenarioLineError("http=\(s.httpPeers) is more than peers=\(s.peers)") }
        guard s.joiningNodes < s.nodes else { throw ScenarioLineError("every node joins later: none starts the cluster") }
        if let l = s.liveness {
            guard (l.core + l.down).allSatisfy({ $0 < s.nodes }) else {
                throw ScenarioLineError("liveness names a slot beyond nodes=\(s.nodes)")
            }
            guard l.core.count > s.nodes / 2 else { throw ScenarioLineError("the liveness core is not a majority of nodes=\(s.nodes)") }
        }
        self = s
    }

    static func fault(_ t: Substring) -> Fault? {
        let p = t.split(separator: ":")
        func n(_ i: Int) -> Int? { i < p.count ? Int(p[i]).flatMap { $0 >= 0 ? $0 : nil } : nil }
        func side(_ i: Int) -> [Int]? {
            guard i < p.count else { return nil }
            let v = p[i].split(separator: "+").compactMap { Int($0) }
            return v.isEmpty || v.count != p[i].split(separator: "+").count ? nil : v
        }
        switch p.first {
        case "crash": return n(1).map { .crash($0) }
        case "restart": return n(1).map { .restart($0) }
        case "shutdown": return n(1).map { .shutdown($0) }
        case "join": return n(1).map { .join($0) }
        case "partition": return side(1).map { .partition($0) }
        case "peer-partition": return side(1).map { .peerNetworkPartition($0) }
        case "one-way":
            guard p.count == 2 else { return nil }
            let ab = p[1].split(separator: ">").compactMap { Int($0) }
            return ab.count == 2 ? .oneWay(from: ab[0], to: ab[1]) : nil
        case "broker-down": return p.count == 1 ? .brokerOutage : nil
        case "heal": return p.count == 1 ? .heal : nil
        case "store-fails": return n(1).map { .storeFails($0) }
        case "store-heals": return n(1).map { .storeHeals($0) }
        case "slow": return n(1).flatMap { s in n(2).map { .slow(s, extraDelay: Int64($0)) } }
        case "disk-loss": return n(1).flatMap { s in n(2).map { .diskLoss(s, lastWrites: $0) } }
        case "impostor": return n(1).map { .impostor($0) }
        case "pause": return n(1).flatMap { s in n(2).map { .pause(s, for: Int64($0)) } }
        case "broker-link": return n(1).flatMap { s in p.count == 3 ? Scenario.LinkCut(rawValue: String(p[2])).map { .brokerLink(s, $0) } : nil }
        case "master-link": return p.count == 2 ? Scenario.LinkCut(rawValue: String(p[1])).map { .masterBrokerLink($0) } : nil
        case "broker-partition": return side(1).map { .brokerPartition($0) }
        case "sends-fail": return n(1).flatMap { s in n(2).map { .peerSendsFail(s, for: Int64($0)) } }
        case "master-sends-fail": return p.count == 2 ? n(1).map { .peerSendsFail(nil, for: Int64($0)) } : nil
        case "links", "peer-links":
            guard p.count == 2 else { return nil }
            let links = p[1].split(separator: "+").map { $0.split(separator: ">").compactMap { Int($0) } }
            guard !links.isEmpty, links.allSatisfy({ $0.count == 2 && $0[0] >= 0 && $0[1] >= 0 && $0[0] != $0[1] }) else { return nil }
            return .links(links.map { Scenario.Link(from: $0[0], to: $0[1]) }, bothChannels: p[0] == "links")
        default: return nil
        }
    }
}

extension Scenario.Fault {
    /// The node slots this fault names.
    public var slots: [Int] {
        switch self {
        case .crash(let n), .restart(let n), .shutdown(let n), .join(let n), .storeFails(let n), .storeHeals(let n),
             .slow(let n, _), .diskLoss(let n, _), .impostor(let n), .pause(let n, _), .brokerLink(let n, _),
             .peerSendsFail(let n?, _): return [n]
        case .partition(let s), .peerNetworkPartition(let s), .brokerPartition(let s): return s
        case .oneWay(let a, let b): return [a, b]
        case .links(let links, _): return Array(Set(links.flatMap { [$0.from, $0.to] })).sorted()
        case .brokerOutage, .heal, .masterBrokerLink, .peerSendsFail(nil, _): return []
        }
    }
}

public struct ScenarioLineError: Error, CustomStringConvertible {
    public var description: String
    init(_ d: String) { description = d }
}
