import TrackerLogic

/// An operator on some node's dashboard registering or removing .torrent files while
/// the faults happen: catalogue changes travel through the same two-phase commit as
/// announces (a slave forwards them to its master), so the same checks apply — replicas
/// end equal, and a registration a node held committed is not lost while it survives.
/// Or reloading one node's configuration (SIGHUP) with another announce interval: the
/// node answers with it from then on, and nothing replicated may change. Or changing the
/// access policy, which is replicated like the catalogue.
public struct OperatorAction: Sendable, Hashable, CustomStringConvertible {
    public enum Change: Sendable, Hashable {
        case register(Int)
        case unregister(Int)
        /// The node's configuration reloaded with this announce interval (seconds).
        case reload(interval: UInt32)
        /// The cluster's access mode set.
        case accessMode(AccessMode)
        /// The scenario's swarm `k` given an access rule, or its rule removed (nil).
        case accessRule(swarm: Int, AccessRule?)
        /// The client of the scenario's peer `k` (`Workload.clientPrefix`) given a client
        /// rule, or its rule removed (nil).
        case clientRule(peer: Int, AccessRule?)
        /// The user of the scenario's peer `k` (`SimPeer.trackerKey`) changed.
        case user(peer: Int, UserOperation)
    }

    /// What the operator does to a peer's user.
    public enum UserOperation: String, Sendable, Hashable, CaseIterable {
        /// Added, with the peer's key.
        case add
        case disable, enable, remove
        /// Its key taken away: the peer's key is unknown from then on.
        case dropKey = "dropkey"
    }

    public var at: Instant
    /// The slot whose dashboard is used (nothing happens if it is down then).
    public var slot: Int
    public var change: Change

    public init(at: Instant, slot: Int, change: Change) { self.at = at; self.slot = slot; self.change = change }

    public var description: String {
        switch change {
        case .register(let k): "s\(slot) registers torrent \(k)"
        case .unregister(let k): "s\(slot) unregisters torrent \(k)"
        case .reload(let interval): "s\(slot) reloads its config (interval \(interval)s)"
        case .accessMode(let mode): "s\(slot) sets access mode \(mode)"
        case .accessRule(let k, let rule?): "s\(slot) gives swarm \(k) rule \(rule)"
        case .accessRule(let k, nil): "s\(slot) removes swarm \(k)'s rule"
        case .clientRule(let k, let rule?): "s\(slot) gives peer \(k)'s client rule \(rule)"
        case .clientRule(let k, nil): "s\(slot) removes peer \(k)'s client rule"
        case .user(let k, let op): "s\(slot) \(op.rawValue)s peer \(k)'s user"
        }
    }

    /// A small valid v1 torrent, distinct per `k`.
    public static func torrent(_ k: Int) -> RegisteredTorrent? {
        let name = Array("sim-\(k).bin".utf8)
        var file = Array("d4:infod6:lengthi\(1000 + k)e4:name\(name.count):".utf8) + name
        file += Array("12:piece lengthi16384e6:pieces20:".utf8) + (0..<20).map { UInt8(truncatingIfNeeded: k &* 31 &+ $0) }
        file += Array("ee".utf8)
        return try? RegisteredTorrent(file: file, registeredAt: Scenario.start)
    }

    /// The operator part of a scenario, each kind of change from a stream of its own
    /// (`ScenarioStream`). A
    /// reload's interval stays within `peerTimeout` (a configuration that passes its checks).
    static func draw(seed: UInt64, nodes: Int, faultEnd: Instant, interval: UInt32, peerTimeout: Milliseconds,
                     swarms: Int, peers: Int) -> [OperatorAction] {
        var reloads = ScenarioStream.named(seed, "operator.reloads")
        var out = catalogueChanges(seed: seed, nodes: nodes, faultEnd: faultEnd)
        if reloads.chance(0.25) {
            let longest = UInt32(clamping: max(1, peerTimeout.value / 1000))
            let next = interval > 1 && reloads.chance(0.5) ? interval / 2 : min(longest, interval &+ 1 &+ UInt32(reloads.below(Int(interval))))
            let at = Scenario.start + Milliseconds(Int64(2000 + reloads.below(Int(max(1, (faultEnd - Scenario.start).value)))))
            out.append(OperatorAction(at: at, slot: reloads.below(nodes), change: .reload(interval: max(1, next))))
        }
        out += accessChanges(seed: seed, nodes: nodes, faultEnd: faultEnd, swarms: swarms)
        out += clientChanges(seed: seed, nodes: nodes, faultEnd: faultEnd, peers: peers)
        out += userChanges(seed: seed, nodes: nodes, faultEnd: faultEnd, peers: peers)
        out.sort { $0.at < $1.at }
        return out
    }

    /// The access policy changed while the faults happen: its mode, and rules for the
    /// scenario's swarms (whose peers then get refusals, or are served again).
    static func accessChanges(seed: UInt64, nodes: Int, faultEnd: Instant, swarms: Int) -> [OperatorAction] {
        var rng = ScenarioStream.named(seed, "operator.access")
        guard rng.chance(0.2), swarms > 0 else { return [] }
        var out: [OperatorAction] = []
        var t = Scenario.start + Milliseconds(Int64(2500 + rng.below(4000)))
        for _ in 0..<(1 + rng.below(4)) where t < faultEnd {
            let change: Change = switch rng.below(4) {
            case 0: .accessMode(AccessMode.allCases[rng.below(3)])
            case 1: .accessRule(swarm: rng.below(swarms), .allow)
            case 2: .accessRule(swarm: rng.below(swarms), .deny)
            default: .accessRule(swarm: rng.below(swarms), nil)
            }
            out.append(OperatorAction(at: t, slot: rng.below(nodes), change: change))
            t = t + Milliseconds(Int64(300 + rng.below(5000)))
        }
        return out
    }

    /// The client filter changed while the faults happen: a peer's client denied (its
    /// announces then get refusals), allowed (every other client's then do), or its rule
    /// removed.
    static func clientChanges(seed: UInt64, nodes: Int, faultEnd: Instant, peers: Int) -> [OperatorAction] {
        var rng = ScenarioStream.named(seed, "operator.clients")
        guard rng.chance(0.1), peers > 0 else { return [] }
        var out: [OperatorAction] = []
        var t = Scenario.start + Milliseconds(Int64(2500 + rng.below(4000)))
        for _ in 0..<(1 + rng.below(3)) where t < faultEnd {
            let rule: AccessRule? = switch rng.below(4) {
            case 0: .allow
            case 1, 2: .deny
            default: nil
            }
            out.append(OperatorAction(at: t, slot: rng.below(nodes), change: .clientRule(peer: rng.below(peers), rule)))
            t = t + Milliseconds(Int64(300 + rng.below(5000)))
        }
        return out
    }

    /// Users changed while the faults happen, and (mostly) private mode set: the peers
    /// whose users are added are served, the others refused (`unknown key`), a disabled
    /// or removed user's peer refused from the commit on, whichever node it reaches.
    static func userChanges(seed: UInt64, nodes: Int, faultEnd: Instant, peers: Int) -> [OperatorAction] {
        var rng = ScenarioStream.named(seed, "operator.users")
        guard rng.chance(0.15), peers > 0 else { return [] }
        var out: [OperatorAction] = []
        var t = Scenario.start + Milliseconds(Int64(1500 + rng.below(3000)))
        var added: [Int] = []
        for _ in 0..<(2 + rng.below(6)) where t < faultEnd {
            let slot = rng.below(nodes)
            if added.isEmpty || rng.chance(0.5) {
                let k = rng.below(peers)
                out.append(OperatorAction(at: t, slot: slot, change: .user(peer: k, .add)))
                added.append(k)
            } else {
                let op: UserOperation = [.disable, .disable, .enable, .remove, .dropKey][rng.below(5)]
                out.append(OperatorAction(at: t, slot: slot, change: .user(peer: added[rng.below(added.count)], op)))
            }
            t = t + Milliseconds(Int64(200 + rng.below(3000)))
        }
        if rng.chance(0.8) {
            let at = Scenario.start + Milliseconds(Int64(2000 + rng.below(Int(max(1, (faultEnd - Scenario.start).value)))))
            out.append(OperatorAction(at: at, slot: rng.below(nodes), change: .accessMode(.private)))
        }
        return out
    }

    static func catalogueChanges(
seed: UInt64, nodes: Int, faultEnd: Instant) -> [OperatorAction] {
        var rng = ScenarioStream.named(seed, "operator.catalogue")
        guard rng.chance(0.4) else { return [] }
        var out: [OperatorAction] = []
        var registered: [Int] = []
        var t = Scenario.start + Milliseconds(Int64(3000 + rng.below(3000)))
        for k in 0..<(1 + rng.below(4)) where t < faultEnd {
            let slot = rng.below(nodes)
            if !registered.isEmpty && rng.chance(0.2) {
                out.append(OperatorAction(at: t, slot: slot, change: .unregister(registered[rng.below(registered.count)])))
            } else {
                out.append(OperatorAction(at: t, slot: slot, change: .register(k)))
                registered.append(k)
            }
            t = t + Milliseconds(Int64(300 + rng.below(4000)))
        }
        return out
    }
}
