import NIOCore
import TrackerLogic

/// The simulated network between nodes, the broker and peers: delays, loss, duplication,
/// corruption, and the faults that cut it (partitions, a one-way cut, a broker outage, a
/// peer-network partition, slow links). It draws from random streams of its own, so a
/// change in what nodes or peers draw does not move the network's delays, and the reverse.
/// It decides what happens to a datagram; the simulator's loop schedules it.
struct PacketNetwork {
    let minDelay: Int64
    let maxDelay: Int64
    let lossRate: Double
    let duplicateRate: Double
    let corruptRate: Double
    let redeliveryRate: Double
    /// Which broker messages are delivered again under a fresh frame, and when: a stream
    /// of its own, drawn only in scenarios with redelivery.
    var redelivery: SeededGenerator
    /// Delays, loss and duplication.
    var rng: SeededGenerator
    /// Which frames are corrupted, and how: a stream of its own, so scenarios without
    /// corruption run exactly as they would without the feature.
    var corruption: SeededGenerator

    /// Both channels cut between the two sides (the nodes cannot reach each other at all).
    var partitionSide: Set<Int>?
    var oneWay: (from: Int, to: Int)?
    /// No broker frame goes anywhere; the peer network still carries keepalives.
    var brokerDown = false
    /// Only the peer network is cut between the sides (the broker still connects them).
    var peerNetworkSide: Set<Int>?
    /// Nodes whose own link to the broker is cut, and which way: the rest of the broker
    /// and the peer network still work (a blocked port, a proxy gone, a broker CA the
    /// node does not trust).
    var brokerLinkCut: [Int: Scenario.LinkCut] = [:]
    /// The broker channel is cut between the sides (the link between the two brokers of
    /// a pair); every node still reaches its own broker, and the peer network is whole.
    var brokerSide: Set<Int>?
    /// Single links cut one way: true on both channels, false on the peer network alone.
    var cutLinks: [Scenario.Link: Bool] = [:]
    /// Until when each node's sends on the peer channel fail (`Scenario.Fault.peerSendsFail`).
    var peerSendsFailUntil: [Int: Instant] = [:]
    var peerSendsFailSince: [Int: Instant] = [:]
    /// Nodes cut from everything, peers included (the liveness phase's outsiders).
    var isolated: Set<Int> = []
    /// A slow node's extra delay on everything it sends and receives, in ms.
    var extraDelay: [Int: Int64] = [:]
    /// Once the faults are over, nothing is lost, duplicated or corrupted any more.
    var quiet = false
    /// When each node's broker link was last cut, and when any other cut last changed
    /// (`Simulator.checkCutOffMaster` judges only a settled topology).
    var brokerLinkCutAt: [Int: Instant] = [:]
    var topologyChangedAt = Instant(milliseconds: .min)
    /// When a broker fault (an outage, a link cut, the brokers' link) last began.
    var brokerTroubleAt = Instant(milliseconds: .min)

    /// Some node cannot reach the broker, or not every node's broker reaches the others.
    var brokerTrouble: Bool { brokerDown || !brokerLinkCut.isEmpty || brokerSide != nil || cutLinks.values.contains(true) }

    init(scenario: Scenario) {
        minDelay = scenario.minDelay
        maxDelay = scenario.maxDelay
        lossRate = scenario.lossRate
        duplicateRate = scenario.duplicateRate
        corruptRate = scenario.corruptRate
        redeliveryRate = scenario.redeliveryRate
        redelivery = SeededGenerator(seed: scenario.seed ^ 0x4147_4149_4E5F_5245)
        rng = SeededGenerator(seed: scenario.seed ^ 0x4E45_5457_4F52_4B53)
        corruption = SeededGenerator(seed: scenario.seed ^ 0x434F_5252_5550_54)
    }

    /// Whether a broker frame from a to b is lost to a fault.
    func blocked(_ a: Int, _ b: Int) -> Bool {
        if brokerDown || isolated.contains(a) || isolated.contains(b) { return true }
        if let side = partitionSide, side.contains(a) != side.contains(b) { return true }
        if let w = oneWay, w.from == a, w.to == b { return true }
        if brokerLinkCut[a]?.blocksSending == true || brokerLinkCut[b]?.blocksReceiving == true { return true }
        if let side = brokerSide, side.contains(a) != side.contains(b) { return true }
        if cutLinks[Scenario.Link(from: a, to: b)] == true { return true }
        return false
    }

    /// Whether a node's sends on the peer channel fail at `now`.
    func peerSendsFail(_ s: Int, at now: Instant) -> Bool { peerSendsFailUntil[s].map { now < $0 } ?? false }

    /// Whether a node's frames reach the broker and the broker's frames reach it.
    func reachesBroker(_ s: Int) -> Bool { !brokerDown && brokerLinkCut[s] == nil && !isolated.contains(s) }

    /// Whether a keepalive on the peer network from a to b is lost to a fault.
    func peerNetworkBlocked(_ a: Int, _ b: Int) -> Bool {
        if isolated.contains(a) || isolated.contains(b) { return true }
        if let side = partitionSide, side.contains(a) != side.contains(b) { return true }
        if let side = peerNetworkSide, side.contains(a) != side.contains(b) { return true }
        if let w = oneWay, w.from == a, w.to == b { return true }
        if cutLinks[Scenario.Link(from: a, to: b)] != nil { return true }
        return false
    }

    /// Only the broker is out: every node still hears every other on the peer network.
    var onlyBrokerDown: Bool {
        brokerDown && partitionSide == nil && peerNetworkSide == nil && oneWay == nil && brokerLinkCut.isEmpty && brokerSide == nil
            && cutLinks.isEmpty && isolated.isEmpty
    }

    /// The slowest link's extra delay.
    var slowest: Int64 { extraDelay.values.max() ?? 0 }

    /// A frame's delay from one node to another: the network's, plus each end's slowness.
    mutating func delay(_ from: Int, _ to: Int) -> Milliseconds { delay(from) + Milliseconds(extraDelay[to] ?? 0) }

    /// A datagram's delay to or from a node.
    mutating func delay(_ slot: Int) -> Milliseconds {
        let base = minDelay + Int64(rng.below(Int(maxDelay - minDelay) + 1))
        return Milliseconds(base + (extraDelay[slot] ?? 0))
    }

    mutating func lost() -> Bool { !quiet && rng.chance(lossRate) }
    mutating func duplicated() -> Bool { !quiet && rng.chance(duplicateRate) }

    /// How long after it was first sent the broker delivers a message again under a
    /// fresh frame, if it does (as after a reconnect: its retry waits for the link).
    mutating func redeliveredAfter() -> Milliseconds? {
        guard !quiet, redeliveryRate > 0, redelivery.chance(redeliveryRate) else { return nil }
        return Milliseconds(Int64(50 + redelivery.below(3000)))
    }

    /// Whether this frame is corrupted on its way (drawn from the corruption stream).
    mutating func corrupted() -> Bool { !quiet && corruptRate > 0 && corruption.chance(corruptRate) }

    /// The frame as it arrives damaged: one bit flipped, or cut short.
    mutating func damage(_ frame: ByteBuffer) -> ByteBuffer {
        var bytes = Array(frame.readableBytesView)
        guard !bytes.isEmpty else { return frame }
        if corruption.chance(0.25) {
            bytes.removeLast(1 + corruption.below(bytes.count))
        } else {
            bytes[corruption.below(bytes.count)] ^= UInt8(1) << UInt8(corruption.below(8))
        }
        return ByteBuffer(bytes: bytes)
    }

    /// Every cut healed and every link at speed.
    mutating func heal() {
        partitionSide = nil
        oneWay = nil
        brokerDown = false
        peerNetworkSide = nil
        brokerLinkCut = [:]
        brokerSide = nil
        cutLinks = [:]
    }
}
