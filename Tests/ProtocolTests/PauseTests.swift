import NIOCore
import Testing
import TrackerLogic

/// Time a node did not run (SIGSTOP, a paused VM, a blocked loop) is not silence of the
/// others; a master paused long enough for an election elsewhere does not answer its backlog.
@Suite("Paused node") struct PauseTests {
    let t0 = Instant(milliseconds: 7_000_000)
    let e3 = Epoch(term: 1, master: NodeID(3))
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0009), port: 6881)

    func node(_ id: UInt32, epoch: Epoch) -> TrackerNode {
        TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                    seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: epoch))
    }

    func masterKeepalive() -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                                 message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: true, address: ""))))
    }

    func startsElection(_ actions: [NodeAction]) -> Bool {
        actions.contains { if case .broadcast(let e) = $0, case .election = e.message { return true } else { return false } }
    }

    /// n2 follows n3, hearing it every 500 ms, until `t0 + 4 s`; returns n2 and its last step.
    func settledSlave() -> (TrackerNode, Instant) {
        var n2 = node(2, epoch: e3)
        let last = follow(&n2, hearing: masterKeepalive(), from: t0, until: t0 + Milliseconds(4000))
        return (n2, last)
    }

    /// Found by the soak: a slave stopped for 3 s woke, saw every keepalive "missed" and
    /// claimed at once next to the live master.
    @Test func aSlavePausedForSecondsDoesNotElectOnWaking() {
        var (n2, last) = settledSlave()
        #expect(n2.role == .slave)
        let woke = last + Milliseconds(3000)
        #expect(!startsElection(n2.stepEchoing(.tick, now: woke)))
        #expect(n2.role == .slave)
        // The master's keepalives, queued while it slept, arrive: all is well.
        _ = n2.stepEchoing(masterKeepalive(), now: woke + Milliseconds(5))
        #expect(!startsElection(n2.stepEchoing(.tick, now: woke + Milliseconds(500))))
        #expect(n2.role == .slave)
    }

    /// The discount is the pause, not a blindfold: a master that stays silent after the
    /// slave wakes is still declared down, about `downAfter` after its last keepalive
    /// counted in the slave's waking time.
    @Test func aMasterSilentAfterTheWakeIsStillLost() {
        var (n2, last) = settledSlave()
        let woke = last + Milliseconds(3000)
        _ = n2.stepEchoing(.tick, now: woke)
        var electedAt: Instant?
        var t = woke
        while electedAt == nil && t < woke + Milliseconds(5000) {
            t = t + Milliseconds(100)
            if startsElection(n2.stepEchoing(.tick, now: t)) { electedAt = t }
        }
        #expect(electedAt != nil)
        if let electedAt { #expect(electedAt - woke <= ClusterConfig().downAfter + Milliseconds(200)) }
    }

    /// A lone node leads; each step 100 ms apart until it serves.
    func servingMaster(restoring epoch: Epoch = .zero) -> (TrackerNode, Instant) {
        var n1 = node(1, epoch: epoch)
        var t = t0
        while !n1.isServing && t < t0 + Milliseconds(10_000) {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n1.stepEchoing(.tick, now: t) { _ = n1.stepEchoing(.epochStored(e), now: t) }
        }
        return (n1, t)
    }

    func replies(_ actions: [NodeAction]) -> Int {
        actions.filter { if case .reply = $0 { return true } else { return false } }.count
    }

    @Test func aServingMasterAnswersAConnect() {
        var (n1, t) = servingMaster()
        let serving = n1.isServing
        #expect(serving)
        let connect = BEP15Codec.encode(.connect(ConnectRequest(transactionID: 5)))
        #expect(replies(n1.stepEchoing(.peer(connect, from: peer), now: t + Milliseconds(300))) == 1)
    }

    /// The datagrams queued in its socket while it was stopped were the next master's to
    /// answer: a master paused past `downAfter` steps down before reading them, and does
    /// not answer them later either when it leads again.
    @Test func aMasterPausedForSecondsDoesNotAnswerItsBacklog() {
        var (n1, t) = servingMaster()
        let woke = t + Milliseconds(3000)
        let connect = BEP15Codec.encode(.connect(ConnectRequest(transactionID: 6)))
        let first = n1.stepEchoing(.peer(connect, from: peer), now: woke)
        #expect(replies(first) == 0)
        #expect(startsElection(first))
        #expect(first.first == .discardPeerBacklog, "the rest of the backlog is dropped unread")
        let servingOnWake = n1.isServing
        #expect(!servingOnWake)
        var later: [NodeAction] = []
        t = woke
        while !n1.isServing && t < woke + Milliseconds(10_000) {
            t = t + Milliseconds(100)
            let actions = n1.stepEchoing(.tick, now: t)
            later += actions
            for case .persistEpoch(let e) in actions { later += n1.stepEchoing(.epochStored(e), now: t) }
        }
        let servingAgain = n1.isServing
        #expect(servingAgain, "alone, it leads again")
        #expect(replies(later) == 0, "the backlog is not answered when it serves again")
    }

    /// A slave's backlog was the master's to answer; read later, nothing would tell it
    /// from fresh requests (a slave that comes to lead holds what it reads), so the host
    /// drops it.
    @Test func aPausedSlaveDropsItsBacklog() {
        var (n2, last) = settledSlave()
        #expect(n2.stepEchoing(.tick, now: last + Milliseconds(3000)).contains(.discardPeerBacklog))
    }

    /// Between its wakes a slave only holds what peers send (`TrackerNode.step`'s short
    /// path): no action, and its next wake stays where it was. The first datagram read
    /// after a pause is a whole step, and the pause is seen as from a tick.
    @Test func aSlaveHoldsDatagramsBetweenWakesAndSeesAPauseInOne() {
        var (n2, last) = settledSlave()
        let datagram = BEP15Codec.encode(.connect(ConnectRequest(transactionID: 5)))
        let wake = n2.nextWake(now: last)
        for i: Int64 in 1...20 {
            let at = last + Milliseconds(i * 10)
            #expect(n2.stepEchoing(.peer(datagram, from: peer), now: at) == [])
            #expect(n2.nextWake(now: at) == wake)
        }
        #expect(n2.stepEchoing(.peer(datagram, from: peer), now: last + Milliseconds(3000)).contains(.discardPeerBacklog))
    }

    /// A master paused too briefly for anyone to replace it still owns its backlog: nobody
    /// else answered it.
    @Test func aMasterPausedBrieflyKeepsItsBacklog() {
        let (serving, t) = servingMaster()
        var n1 = serving
        // Late by 700 ms: a pause (over half an interval), but not long enough to be replaced.
        let woke = n1.nextWake(now: t) + Milliseconds(700)
        let connect = BEP15Codec.encode(.connect(ConnectRequest(transactionID: 7)))
        let actions = n1.stepEchoing(.peer(connect, from: peer), now: woke)
        #expect(!actions.contains(.discardPeerBacklog))
        #expect(replies(actions) == 1)
        #expect(!startsElection(actions))
    }

    /// Kept the office by its own reckoning, but its broker backlog says a newer master was
    /// elected meanwhile (a partition ended during the pause): the socket's backlog was that
    /// master's, and goes as this one steps down.
    @Test(arguments: [false, true])
    func aMasterThatLearnsOnWakingItLostTheOfficeDropsItsBacklog(paused: Bool) {
        let (serving, t) = servingMaster()
        var n1 = serving
        let woke = n1.nextWake(now: t) + Milliseconds(paused ? 700 : 0)
        _ = n1.stepEchoing(.tick, now: woke)
        let newer = Epoch(term: n1.epoch.term + 1, master: NodeID(2))
        let keepalive = ClusterEnvelope(from: NodeID(2), incarnation: 2000, epoch: newer, to: nil,
                                        message: .keepalive(Keepalive(role: .master, master: NodeID(2), lastCommitted: .zero,
                                                                      inSync: true, address: "")))
        let actions = n1.stepEchoing(.cluster(keepalive), now: woke + Milliseconds(2))
        #expect(n1.role != .master)
        #expect(actions.contains(.discardPeerBacklog) == paused)
    }

    /// Kept the office, but before its socket's backlog is read it hears another master
    /// (a partition gave each side one; here of a lower epoch, whose messages it otherwise
    /// ignores): that master may have answered what queued here, so the backlog goes,
    /// while this one stays master. Heard after the backlog was read, it changes nothing.
    @Test(arguments: [(700, 2), (700, 1500), (0, 2)] as [(Int64, Int64)])
    func aMasterThatHearsAnotherMasterOnWakingDropsItsBacklog(late: Int64, heardAfter: Int64) {
        let (serving, t) = servingMaster(restoring: Epoch(term: 5, master: NodeID(2)))
        var n1 = serving
        let woke = n1.nextWake(now: t) + Milliseconds(late)
        _ = n1.stepEchoing(.tick, now: woke)
        let lower = Epoch(term: 5, master: NodeID(2))
        #expect(lower < n1.epoch)
        let commit = ClusterEnvelope(from: NodeID(2), incarnation: 2000, epoch: lower, to: nil,
                                     message: .commit(TxRef(epoch: lower, txid: 9), digest: 1))
        let actions = n1.stepEchoing(.cluster(commit), now: woke + Milliseconds(heardAfter))
        #expect(n1.isServing)
        #expect(actions.contains(.discardPeerBacklog) == (late > 0 && heardAfter < 1000))
    }
}

/// A pause long enough for another master to serve always shows as lateness, in every role.
@Suite("Pause detection in every role") struct PauseDetectionTests {
    let t0 = Instant(milliseconds: 8_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func starting() -> TrackerNode {
        TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
    }

    func discards(_ actions: [NodeAction]) -> Bool { actions.contains(.discardPeerBacklog) }

    /// Stopped right after it started, before any step: its socket's backlog is dropped.
    @Test func aNodePausedBeforeItsFirstStepDropsItsBacklog() {
        var n = starting()
        let datagram = BEP15Codec.encode(.connect(ConnectRequest(transactionID: 5)))
        #expect(discards(n.stepEchoing(.peer(datagram, from: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)), now: t0 + Milliseconds(4000))))
        var fresh = starting()
        #expect(!discards(fresh.stepEchoing(.tick, now: fresh.nextWake(now: t0))))
    }

    /// The startup listen is longer than an interval; the node still wakes every interval,
    /// so a pause inside it is seen.
    @Test func aStartingNodeWakesEveryInterval() {
        var n = starting()
        let interval = n.config.keepaliveInterval
        #expect(n.config.startupListen > interval)
        #expect(n.nextWake(now: t0) <= t0 + interval)
        _ = n.stepEchoing(.tick, now: t0 + Milliseconds(900))
        #expect(n.role == .starting)
        #expect(discards(n.stepEchoing(.tick, now: t0 + Milliseconds(900) + interval * 2)))
    }
    /// A pause between a decision and its sending: replies decided more than the pause
    /// threshold (half a keepalive interval, the lateness that counts as a pause) before
    /// the host sends them are dropped, not sent late after the heir answered them.
    @Test(arguments: [(1000, 0, false), (1000, 500, false), (1000, 501, true), (1000, 3000, true), (200, 101, true), (200, 100, false)]
          as [(Int64, Int64, Bool)])
    func repliesDecidedBeforeAPauseAreStale(keepalive: Int64, sentAfter: Int64, stale: Bool) {
        var config = ClusterConfig()
        config.keepaliveInterval = Milliseconds(keepalive)
        #expect(config.pauseThreshold == Milliseconds(keepalive / 2))
        #expect(config.repliesStale(decidedAt: t0, now: t0 + Milliseconds(sentAfter)) == stale)
    }
}
