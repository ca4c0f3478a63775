import NIOCore
import TrackerLogic

/// A hostile participant on the broker. It hears every frame the nodes publish and, during
/// the fault window, injects its own:
///
/// - an *outsider* (no key) forges frames under a wrong key, flips bits in and truncates
///   captured frames, and sends garbage. Every one must be rejected by the channel: an
///   outsider changes nothing at all.
/// - an *insider* (holds the key, as a compromised host would) sends well-formed but
///   malicious messages — terms at the top of the range, COORDINATORs from the master's
///   own id, votes for transactions that do not exist, keepalives from ids that are not
///   in the cluster (some claiming a higher epoch as master) — and replays captured
///   frames. Safety must hold through all of it; the cluster recovers once it stops.
///
/// Its randomness is its own stream, so a scenario with an outsider makes exactly the
/// node-visible moves of the same scenario without one.
public struct Adversary: Sendable {
    public enum Kind: String, Sendable, Hashable {
        case outsider
        case insider
    }

    public struct Plan: Sendable, Hashable, CustomStringConvertible {
        public var kind: Kind
        /// Mean time between injections.
        public var every: Milliseconds

        public var description: String { "\(kind.rawValue)/\(every.value)ms" }

        /// The adversary part of a scenario, from a stream of its own: none, or an
        /// outsider or an insider injecting every so often.
        static func draw(seed: UInt64) -> Plan? {
            var rng = ScenarioStream.named(seed, "adversary")
            guard rng.chance(0.3) else { return nil }
            return Plan(kind: rng.chance(0.5) ? .outsider : .insider, every: Milliseconds(Int64(100 + rng.below(500))))
        }
    }

    public let plan: Plan
    var rng: SeededGenerator
    /// The most recent frames the nodes published, for replays and bit flips.
    var captured: [ByteBuffer] = []
    var forger: ClusterChannel
    let incarnation: UInt64
    var injected = 0

    init(plan: Plan, seed: UInt64, key: ClusterKey, now: Instant) {
        self.plan = plan
        self.rng = SeededGenerator(seed: seed)
        let wrongKey = ClusterKey(bytes: (0..<ClusterKey.length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }) ?? .insecure
        self.forger = ClusterChannel(keys: [plan.kind == .insider ? key : wrongKey], startedAt: now)
        self.incarnation = Self.incarnation(seed: seed)
    }

    /// The run it forges frames under. The nodes draw theirs from their start time in
    /// milliseconds shifted left by 20 bits, and membership takes a higher incarnation of
    /// an id for that node's newer run, refusing the real run's frames for `downAfter`.
    /// Half of the scenarios forge a later run than the nodes', half an earlier one
    /// (refused outright), whatever the range of seeds a sweep draws. A stream of its own,
    /// so the frames forged are the same either way.
    static func incarnation(seed: UInt64) -> UInt64 {
        var draw = SeededGenerator(seed: seed ^ 0x494E_4341_524E)
        let nodes = UInt64(bitPattern: Scenario.start.milliseconds) << 20
        let x = draw.next()
        return x & 1 == 0 ? nodes + (1 << 40) + (x >> 24) : (x >> 4) % nodes | 1
    }

    mutating func capture(_ frame: ByteBuffer) {
        if captured.count >= 64 { captured.removeFirst(captured.count - 63) }
        captured.append(frame)
    }

    mutating func nextDelay() -> Milliseconds {
        Milliseconds(1 + Int64(rng.below(Int(2 * plan.every.value))))
    }

    /// One hostile frame, given what the adversary can see of the cluster: the epoch and
    /// id of the current master (nil between masters) and the ids of live nodes.
    mutating func forge(now: Instant, master: (id: NodeID, epoch: Epoch)?, ids: [NodeID]) -> ByteBuffer {
        injected += 1
        switch plan.kind {
        case .outsider: return forgeOutsider(now: now, master: master, ids: ids)
        case .insider: return forgeInsider(now: now, master: master, ids: ids)
        }
    }

    mutating func forgeOutsider(now: Instant, master: (id: NodeID, epoch: Epoch)?, ids: [NodeID]) -> ByteBuffer {
        if !captured.isEmpty && rng.chance(0.5) {
            let original = Array(buffer: captured[rng.below(captured.count)])
            var bytes = original
            if rng.chance(0.5) || bytes.count < 2 {
                // Flips that cancel out would make an exact replay, which is not this attack.
                while bytes == original && !bytes.isEmpty {
                    for _ in 0..<(1 + rng.below(4)) { bytes[rng.below(bytes.count)] ^= UInt8(1 << rng.below(8)) }
                }
            } else {
                bytes = Array(bytes.prefix(rng.below(bytes.count)))
            }
            return ByteBuffer(bytes: bytes)
        }
        if rng.chance(0.15) {
            return ByteBuffer(bytes: (0..<rng.below(200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        }
        // Well-formed, but under a key the cluster does not hold.
        return forger.seal(hostileEnvelope(master: master, ids: ids), now: now)
    }

    mutating func forgeInsider(now: Instant, master: (id: NodeID, epoch: Epoch)?, ids: [NodeID]) -> ByteBuffer {
        if !captured.isEmpty && rng.chance(0.3) {
            return captured[rng.below(captured.count)]
        }
        return forger.seal(hostileEnvelope(master: master, ids: ids), now: now)
    }

    /// The messages the attacks on real nodes used.
    mutating func hostileEnvelope(master: (id: NodeID, epoch: Epoch)?, ids: [NodeID]) -> ClusterEnvelope {
        let epoch = master?.epoch ?? .zero
        let stranger = NodeID(UInt32.max - UInt32(rng.below(3)))
        switch rng.below(6) {
        case 0:
            // The top of the term space: refused where it is decoded.
            let top = Epoch(term: rng.chance(0.5) ? UInt32.max : Epoch.maxTerm + 1, master: stranger)
            return ClusterEnvelope(from: stranger, incarnation: incarnation, epoch: top, to: nil,
                                   message: .keepalive(Keepalive(role: .master, master: stranger, lastCommitted: .zero, inSync: true)))
        case 1:
            // The master's own id, in its own epoch.
            let id = master?.id ?? NodeID(1)
            return ClusterEnvelope(from: id, incarnation: incarnation, epoch: epoch, to: nil,
                                   message: .coordinator(lastCommitted: .zero))
        case 2:
            // A vote for a transaction that does not exist.
            let id = ids.isEmpty ? NodeID(1) : ids[rng.below(ids.count)]
            return ClusterEnvelope(from: id, incarnation: incarnation, epoch: epoch, to: master?.id,
                                   message: .vote(txid: rng.next() % 1_000_000, digest: rng.next(), verdict: .ok))
        case 3:
            // A stranger claiming to be a master one term ahead.
            let ahead = Epoch(term: min(epoch.term + 1, Epoch.maxTerm - 1), master: stranger)
            return ClusterEnvelope(from: stranger, incarnation: incarnation, epoch: ahead, to: nil,
                                   message: .keepalive(Keepalive(role: .master, master: stranger, lastCommitted: .zero, inSync: true)))
        case 4:
            // A stranger claiming to be an in-sync slave of the master.
            return ClusterEnvelope(from: stranger, incarnation: incarnation, epoch: epoch, to: nil,
                                   message: .keepalive(Keepalive(role: .slave, master: master?.id ?? .unassigned, lastCommitted: .zero, inSync: true)))
        default:
            // An ELECTION from a stranger with a made-up history.
            return ClusterEnvelope(from: stranger, incarnation: incarnation, epoch: epoch, to: nil,
                                   message: .election(lastCommitted: .zero))
        }
    }
}

extension Simulator {
    /// The adversary publishes one frame of its making on the topic.
    mutating func adversaryActs() {
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
    }
}
