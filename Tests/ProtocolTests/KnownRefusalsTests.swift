import Testing
import TrackerLogic

/// A master refuses a request only once the others can know it did (`KnownRefusals.swift`):
/// the refusals of an aborted transaction wait for the echo of our own keepalive sent after
/// the ABORT, as long as the office lasts; a master that leaves it leaves them to the heir.
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
    /// announce aborted (both slaves vote not-in-sync): returns n3, the instant, the error
    /// replies of the abort's step, and a keepalive that left before the ABORT and whose
    /// echo has not come yet.
    func aborted() throws -> (TrackerNode, Instant, Int, ClusterEnvelope) {
        var (n, t) = masterWithTwoSlaves()
        _ = n.stepEchoing(ownEcho(of: n), now: t)
        var before: ClusterEnvelope?
        for _ in 0..<20 where before == nil {
            t = t + Milliseconds(100)
            before = keepalives(in: n.step(.tick, now: t)).last
        }
        // The link works now (an echo that names no keepalive: it shows the link alive, and
        // proves nothing of what left before it).
        _ = n.step(ownEcho(of: n), now: t)
        let tx = try announce(1, &n, at: &t)
        _ = vote(1, tx, .notInSync, &n, at: t)
        let actions = vote(2, tx, .notInSync, &n, at: t)
        #expect(n.undecidedTransaction == nil, "aborted")
        return (n, t, errors(actions), try #require(before))
    }

    /// The echo of a keepalive that left before the ABORT proves nothing, even when it
    /// comes after the next one left (a slow broker: told apart by arrival time it passed
    /// for the later one's, seeds 51023518095199357 and 51023518095285216); the echo of the
    /// one asked for after the ABORT releases the refusal.
    @Test func aRefusalWaitsForTheEchoOfAKeepaliveSentAfterItsAbort() throws {
        var (n, t, atAbort, before) = try aborted()
        #expect(atAbort == 0, "no refusal before the broker shows the ABORT went out")
        t = t + Milliseconds(1)
        let asked = n.step(.tick, now: t)
        let after = try #require(keepalives(in: asked).last, "a keepalive asked for at once")
        t = t + Milliseconds(5)
        #expect(errors(n.step(.cluster(before), now: t)) == 0, "the late echo of a keepalive from before the ABORT")
        #expect(errors(n.step(ownEcho(of: n), now: t)) == 0, "an echo that does not say which keepalive it carries")
        t = t + Milliseconds(5)
        #expect(errors(n.step(.cluster(after), now: t)) == 1, "its echo shows the ABORT reached the broker")
    }

    /// The slaves still reach the broker (they say so on the peer network), so this is no
    /// outage: no echo comes, the echo is asked for each vote timeout meanwhile, and the
    /// refusal waits until the master, cut off, leaves the office; it is never sent, and
    /// the heir answers.
    @Test func aRefusalNoEchoShowsIsLeftToTheHeir() throws {
        var (n, t, _, _) = try aborted()
        var refused = 0, asked = 0
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
            asked += keepalives(in: actions).count
        }
        #expect(refused == 0)
        #expect(!n.isServing, "cut off, it left the office")
        #expect(n.paths[.refusalLeftToHeir] == 1)
        #expect(asked >= 4, "asked for an echo each vote timeout, not only each interval")
    }

    /// A refusal waits as long as the office lasts, however late the echo: a master that
    /// stays in office is not cut off. Here n2 comes to serve holding an announce; n1, of a
    /// version that does not report its link and heard on the peer network only, is live
    /// and counts as reaching the broker (no outage), as a no vote (the announce aborts),
    /// and as no witness that n2 is cut off (n2 keeps the office). The echo comes four
    /// seconds late. Dropped after `downAfter` instead, the refusal left the held announce
    /// waiting for ever (seed 51023518095160413).
    @Test func aRefusalWaitsAsLongAsTheOfficeLasts() throws {
        var (n2, lastHeard) = n2FollowingN3(from: t0, ids: ids)
        let announcer = PeerEndpoint(ip: .v4(0x0A00_0003), port: 6883)
        var t = lastHeard + Milliseconds(300)
        let datagram = BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: announcer.ip, now: t), transactionID: 33, infoHash: InfoHash(a: 1, b: 2, c: 3),
            peerID: PeerID(a: 4, b: 5, c: 6), downloaded: 0, left: 100, uploaded: 0, event: .started, key: 1, numWant: 10,
            port: announcer.port)))
        #expect(n2.stepEchoing(.peer(datagram, from: announcer), now: t) == [])
        let n1 = NodeEvent.beacon(ClusterEnvelope(from: NodeID(1), incarnation: 1000, epoch: n3Epoch, to: nil, message:
            .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true, address: ""))))
        let start = t
        var actions: [NodeAction] = []
        while !n2.isServing && t < start + Milliseconds(10_000) {
            t = t + Milliseconds(50)
            actions = n2.step(n1, now: t) + n2.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in actions { actions += n2.stepEchoing(.epochStored(e), now: t) }
        }
        #expect(n2.isServing)
        var lastKeepalive: ClusterEnvelope?
        for _ in 0..<80 {
            t = t + Milliseconds(50)
            let step = n2.step(n1, now: t) + n2.step(.tick, now: t)
            lastKeepalive = keepalives(in: step).last ?? lastKeepalive
            actions += step
        }
        #expect(n2.isServing, "nobody shows n2 cut off")
        #expect(n2.paths[.transactionAborted] >= 1)
        #expect(errors(actions) == 0, "no echo showed the ABORT reaching the broker")
        #expect(n2.heldAwaitingAnswer == 1 && n2.refusalsAwaitingEcho == 1)
        let echo = try #require(lastKeepalive)
        let refused = n2.step(.cluster(echo), now: t + Milliseconds(5))
        #expect(refused.contains { if case .reply(.error(let e), let to) = $0 { e.transactionID == 33 && to == announcer } else { false } })
        #expect(n2.heldAwaitingAnswer == 0 && n2.refusalsAwaitingEcho == 0)
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
