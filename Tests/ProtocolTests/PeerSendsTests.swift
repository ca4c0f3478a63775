import NIOCore
import Testing
import TrackerLogic

/// The rules of `PeerSends.swift`, driven event by event: a master whose peer sends fail
/// leaves the office while another node's work, and keeps it when every node's fail; a
/// candidate so muted claims no epoch. The report travels at the keepalive's end.
@Suite("Peer sends") struct PeerSendsTests: MasterFixture {
    let t0 = Instant(milliseconds: 2_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: IPAddress("10.0.0.7")!, port: 6881)

    /// Node `from`'s keepalive on the broker, following n3, saying whether its sends fail.
    func keepalive(from: UInt32, epoch: Epoch, failing: Bool) -> NodeEvent {
        env(from: from, epoch: epoch, .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true,
                                                          address: "", brokerEcho: .age(Milliseconds(20)),
                                                          peerSendsFailing: failing)))
    }

    /// n3 serving with n1 and n2; its sends fail from `t` on (one failure each 500 ms, as
    /// its keepalives on the peer network fail), while n1 and n2 say `othersFailing`.
    /// Whether it still serves 3 s later.
    func servesWhileMuted(othersFailing: Bool) -> (serving: Bool, node: TrackerNode) {
        var (n, t) = masterWithTwoSlaves()
        #expect(n.isServing)
        let end = t + Milliseconds(3000)
        while t < end {
            t = t + Milliseconds(100)
            if (t - t0).value % 500 == 0 { _ = n.stepEchoing(.peerSendFailed, now: t) }
            for other in [UInt32(1), 2] { _ = n.stepEchoing(keepalive(from: other, epoch: n.epoch, failing: othersFailing), now: t) }
            _ = n.stepEchoing(.tick, now: t)
        }
        return (n.isServing, n)
    }

    @Test func aMasterWhosePeerSendsFailLeavesTheOfficeToANodeWhoseWork() {
        let (serving, n) = servesWhileMuted(othersFailing: false)
        #expect(!serving, "its replies cannot leave while n1's and n2's can")
        #expect(n.paths[.mutedMasterSteppedDown] >= 1)
    }

    @Test func whenEveryNodesPeerSendsFailTheMasterStays() {
        let (serving, n) = servesWhileMuted(othersFailing: true)
        #expect(serving, "no other node could answer peers either: an election would serve nobody better")
        #expect(n.paths[.mutedMasterSteppedDown] == 0)
    }

    /// Its own keepalive says so: `peerSendsFailing` follows the failures, for two intervals.
    @Test func theKeepaliveSaysWhetherTheSendersPeerSendsFail() {
        var (n, t) = masterWithTwoSlaves()
        func reported(_ actions: [NodeAction]) -> Bool? {
            actions.compactMap { a -> Bool? in
                if case .broadcast(let e) = a, case .keepalive(let k) = e.message { return k.peerSendsFailing } else { return nil }
            }.last
        }
        var says: [Bool] = []
        _ = n.step(.peerSendFailed, now: t)
        for _ in 0..<40 {
            t = t + Milliseconds(100)
            if let r = reported(n.step(.tick, now: t)) { says.append(r) }
        }
        #expect(says.first == true && says.last == false, "\(says)")
    }

    /// A byte after the broker echo report: 1 failing, 0 not; absent from an older node.
    @Test func theReportIsEncodedAfterTheBrokerEchoReport() throws {
        func encoded(_ failing: Bool?) -> [UInt8] {
            ClusterCodec.encode(ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: .zero, to: nil,
                                                message: .keepalive(Keepalive(role: .slave, master: NodeID(2), lastCommitted: .zero,
                                                                              inSync: true, address: "", brokerEcho: .never,
                                                                              peerSendsFailing: failing)))).allBytes
        }
        let old = encoded(nil)
        #expect(Array(old.suffix(4)) == [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(encoded(true) == old + [0x01])
        #expect(encoded(false) == old + [0x00])
        for failing in [nil, true, false] as [Bool?] {
            let decoded = try ClusterCodec.decode(ByteBuffer(bytes: encoded(failing))).get()
            guard case .keepalive(let k) = decoded.message else { Issue.record("not a keepalive"); continue }
            #expect(k.peerSendsFailing == failing)
        }
        #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: old + [0x02])).get() }
        #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: old + [0x00, 0x00])).get() }
    }
}
