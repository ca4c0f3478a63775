import NIOCore
import Testing
import TrackerLogic

/// Keepalives on the peer network, event by event.
@Suite("Peer-network keepalives")
struct PeerNetworkKeepaliveTests {
    let t0 = Instant(milliseconds: 1_000_000)
    let e3 = Epoch(term: 1, master: NodeID(3))

    func node(_ id: UInt32, epoch: Epoch) -> TrackerNode {
        TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))),
                    seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: epoch))
    }

    func masterKeepalive() -> ClusterEnvelope {
        ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                        message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "")))
    }

    /// n2 follows n3 on the broker; then the broker dies and n3's keepalives arrive on the
    /// peer network only: n2 does not elect, for as long as they keep coming.
    @Test func aSlaveThatHearsItsMasterOnThePeerNetworkDoesNotElect() {
        var n2 = node(2, epoch: e3)
        var t = t0
        while t < t0 + ClusterConfig().startupListen + Milliseconds(1000) {
            _ = n2.stepEchoing(.cluster(masterKeepalive()), now: t)
            _ = n2.stepEchoing(.tick, now: t)
            t = t + Milliseconds(500)
        }
        #expect(n2.role == .slave && n2.master == NodeID(3))
        for _ in 0..<40 {
            t = t + Milliseconds(250)
            if t.milliseconds % 1000 == 0 { _ = n2.stepEchoing(.beacon(masterKeepalive()), now: t) }
            let actions = n2.stepEchoing(.tick, now: t)
            #expect(!actions.contains { if case .broadcast(let e) = $0, case .election = e.message { return true } else { return false } })
        }
        #expect(n2.role == .slave && n2.master == NodeID(3))
        // Silent on both channels: now it elects.
        for _ in 0..<12 { t = t + Milliseconds(250); _ = n2.stepEchoing(.tick, now: t) }
        #expect(n2.role != .slave)
    }

    /// Every keepalive goes out twice: on the broker and on the peer network, the same
    /// envelope (the runtime seals each with its own sequence number).
    @Test func everyKeepaliveAlsoGoesOnThePeerNetwork() {
        var n2 = node(2, epoch: e3)
        let actions = n2.stepEchoing(.tick, now: t0 + ClusterConfig().startupListen + Milliseconds(1000))
        let broker = actions.compactMap { a -> ClusterEnvelope? in if case .broadcast(let e) = a, case .keepalive = e.message { return e } else { return nil } }
        let peer = actions.compactMap { a -> ClusterEnvelope? in if case .beacon(let e) = a { return e } else { return nil } }
        #expect(broker.count == 1 && peer == broker)
    }

    /// Only keepalives travel on the peer network: anything else arriving there is ignored.
    @Test func aBeaconThatIsNotAKeepaliveIsIgnored() {
        var n2 = node(2, epoch: .zero)
        let t = t0 + ClusterConfig().startupListen + Milliseconds(10)
        _ = n2.stepEchoing(.tick, now: t)
        #expect(n2.role == .candidate)
        let coordinator = ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil, message: .coordinator(lastCommitted: .zero))
        #expect(n2.stepEchoing(.beacon(coordinator), now: t + Milliseconds(5)).isEmpty)
        #expect(n2.role == .candidate && n2.epoch == .zero && n2.membership[NodeID(3)] == nil)
    }

    /// A node heard on the peer network only is alive but not a voter.
    @Test func membershipTracksTheBrokerSeparately() {
        var m = Membership()
        m.heard(masterKeepalive(), now: t0, onBroker: false)
        let down = ClusterConfig().downAfter
        #expect(m.isLive(NodeID(3), now: t0 + Milliseconds(10), downAfter: down))
        #expect(!m.isLive(NodeID(3), now: t0 + Milliseconds(10), downAfter: down, onBroker: true))
        m.heard(masterKeepalive(), now: t0 + Milliseconds(20))
        #expect(m.isLive(NodeID(3), now: t0 + Milliseconds(30), downAfter: down, onBroker: true))
    }

    /// The first three bytes of a sealed frame mark it; a BEP 15 connect does not have them.
    @Test func aClusterFrameIsToldFromAPeerRequest() {
        var channel = ClusterChannel(keys: [.insecure], startedAt: t0)
        let frame = channel.seal(masterKeepalive(), now: t0)
        #expect(Array(frame.readableBytesView.prefix(3)) == [0x54, 0x53, 0x01])
        #expect(ClusterChannel.isFrame(frame))
        var connect = ByteBuffer()
        connect.writeInteger(bep15ProtocolID); connect.writeInteger(UInt32(0)); connect.writeInteger(UInt32(7))
        #expect(!ClusterChannel.isFrame(connect))
        #expect(!ClusterChannel.isFrame(ByteBuffer(bytes: [0x54, 0x53])))
    }
}
