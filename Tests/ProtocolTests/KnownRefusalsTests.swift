import Testing
import TrackerLogic

/// A master refuses a request only once the others can know it did (`KnownRefusals.swift`):
/// the refusals of an aborted transaction wait for an echo of our own keepalive sent after
/// the ABORT; without one within `downAfter` they are dropped and the heir answers.
@Suite("Refusals the others can know of") struct KnownRefusalsTests: MasterFixture {
    let t0 = Instant(milliseconds: 8_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: IPAddress("10.0.0.9")!, port: 6881)

    func ownEcho(of node: TrackerNode) -> NodeEvent {
        .cluster(ClusterEnvelope(from: node.id, incarnation: node.incarnation, epoch: node.epoch, to: nil,
                                 message: .keepalive(Keepalive(role: node.role, master: node.master ?? .unassigned,
                                                               lastCommitted: node.replica.lastCommitted, inSync: true))))
    }

    func errors(_ actions: [NodeAction]) -> Int {
        actions.filter { if case .reply(.error, _) = $0 { true } else { false } }.count
    }

    /// n3 serving, its slaves reaching the broker (they say so on the peer network), an
    /// announce aborted (both slaves vote not-in-sync): returns n3, the instant, and the
    /// error replies of the abort's step.
    func aborted() throws -> (TrackerNode, Instant, Int) {
        var (n, t) = masterWithTwoSlaves()
        _ = n.stepEchoing(ownEcho(of: n), now: t)
        let tx = try announce(1, &n, at: &t)
        _ = vote(1, tx, .notInSync, &n, at: t)
        let actions = vote(2, tx, .notInSync, &n, at: t)
        #expect(n.undecidedTransaction == nil, "aborted")
        return (n, t, errors(actions))
    }

    /// The echo of a keepalive that left before the ABORT proves nothing; the echo of the
    /// one asked for after it releases the refusal.
    @Test func aRefusalWaitsForAnEchoAfterItsAbort() throws {
        var (n, t, atAbort) = try aborted()
        #expect(atAbort == 0, "no refusal before the broker shows the ABORT went out")
        t = t + Milliseconds(1)
        #expect(errors(n.step(ownEcho(of: n), now: t)) == 0, "an echo of a keepalive from before the ABORT")
        t = t + Milliseconds(1)
        let asked = n.step(.tick, now: t)
        #expect(asked.contains { if case .broadcast(let e) = $0, case .keepalive = e.message { true } else { false } },
                "a keepalive asked for at once")
        t = t + Milliseconds(5)
        #expect(errors(n.step(ownEcho(of: n), now: t)) == 1, "its echo shows the ABORT reached the broker")
    }

    /// The slaves still reach the broker (they say so on the peer network), so this is no
    /// outage: no echo within `downAfter`, and the refusal is dropped, the echo asked for
    /// each vote timeout meanwhile.
    @Test func aRefusalNoEchoShowsIsDroppedForTheHeir() throws {
        var (n, t, _) = try aborted()
        var refused = 0, keepalives = 0
        for step in 1...30 {
            t = t + Milliseconds(100)
            if step % 5 == 0 {
                for s in UInt32(1)...2 {
                    _ = n.step(.beacon(ClusterEnvelope(from: NodeID(s), incarnation: UInt64(s) * 1000, epoch: n.epoch, to: nil, message:
                        .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: n.replica.lastCommitted, inSync: true,
                                             address: "", brokerEcho: .age(Milliseconds(10)))))), now: t)
                }
            }
            let actions = n.step(.tick, now: t)
            refused += errors(actions)
            keepalives += actions.filter { if case .broadcast(let e) = $0, case .keepalive = e.message { true } else { false } }.count
        }
        #expect(refused == 0)
        #expect(n.paths[.refusalLeftToHeir] == 1)
        #expect(keepalives >= 4, "asked for an echo each vote timeout, not only each interval")
    }

    /// In a broker outage nobody else can lead: the refusal goes at once. Every node's
    /// report says its echoes stopped, and ours stopped too (a strict master of three).
    @Test func inABrokerOutageARefusalGoesAtOnce() throws {
        var (n, t) = masterWithTwoSlaves()
        func slavesSayNever() {
            for s in UInt32(1)...2 {
                _ = n.step(.beacon(ClusterEnvelope(from: NodeID(s), incarnation: UInt64(s) * 1000, epoch: n.epoch, to: nil, message:
                    .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "",
                                         brokerEcho: .never)))), now: t)
            }
        }
        for _ in 0..<30 {
            t = t + Milliseconds(100)
            slavesSayNever()
            _ = n.step(.tick, now: t)
        }
        var actions = n.step(announceDatagram(1, at: t), now: t)
        for _ in 0..<20 {
            t = t + Milliseconds(100)
            slavesSayNever()
            actions += n.step(.tick, now: t)
        }
        #expect(errors(actions) == 1)
    }
}
