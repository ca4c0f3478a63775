import Testing
import TrackerLogic

/// Node ids are the operator's to keep unique; a second process of a taken id that can
/// hear the first must never act on the cluster.
@Suite("One live process per node id") struct DuplicateIDTests {
    let t0 = Instant(milliseconds: 9_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func starting() -> TrackerNode {
        TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
    }

    /// A keepalive of another process holding our id.
    let twin = NodeEvent.cluster(ClusterEnvelope(from: NodeID(2), incarnation: 1000, epoch: .zero, to: nil, message: .keepalive(
        Keepalive(role: .slave, master: .unassigned, lastCommitted: .zero, inSync: false, address: ""))))

    /// Ticks `node` at every wake it asks for up to `end`, each time still starting.
    func tick(_ node: inout TrackerNode, from start: Instant, until end: Instant) {
        var t = node.nextWake(now: start)
        while t <= end {
            _ = node.stepEchoing(.tick, now: t)
            #expect(node.role == .starting)
            t = node.nextWake(now: t)
        }
    }

    /// Heard once just before its startup listen ends (the others lost or were too early):
    /// the node stays starting, then yields once the twin has been heard for an interval.
    @Test func aStartingNodeThatHeardItsIDWaitsToKnowWhetherTheTwinIsLive() {
        var n = starting()
        let until = t0 + n.config.startupListen
        _ = n.stepEchoing(twin, now: until - Milliseconds(100))
        tick(&n, from: until - Milliseconds(100), until: until + Milliseconds(899))
        let actions = n.stepEchoing(twin, now: until + Milliseconds(900))
        #expect(actions.contains(.exit(reason: .idInUse(NodeID(2)))))
    }

    /// A twin heard once and never again was a dead run's last frame: startup goes on,
    /// at most `downAfter` later.
    @Test func aTwinHeardOnceDelaysStartupByAtMostDownAfter() {
        var n = starting()
        let heard = t0 + n.config.startupListen - Milliseconds(100)
        _ = n.stepEchoing(twin, now: heard)
        tick(&n, from: heard, until: heard + n.config.downAfter)
        _ = n.stepEchoing(.tick, now: heard + n.config.downAfter + Milliseconds(1))
        #expect(n.role == .candidate)
    }

    /// A pause right after hearing the twin once does not make it look heard for the
    /// whole pause: time the node did not run is no evidence either way.
    @Test func aPauseDoesNotStretchOneSightingIntoAnInterval() {
        var n = starting()
        let heard = t0 + n.config.startupListen - Milliseconds(100)
        _ = n.stepEchoing(twin, now: heard)
        let woke = heard + n.config.downAfter + Milliseconds(1)
        let actions = n.stepEchoing(.tick, now: woke)
        #expect(actions.contains(.discardPeerBacklog))
        #expect(!actions.contains(.exit(reason: .idInUse(NodeID(2)))))
        #expect(n.role == .starting)
    }
    /// A COMMIT of the twin, master of e1.2: its keepalives may all be lost.
    func twinCommit(_ txid: UInt64) -> NodeEvent {
        let e = Epoch(term: 1, master: NodeID(2))
        return .cluster(ClusterEnvelope(from: NodeID(2), incarnation: 1000, epoch: e, to: nil,
                                        message: .commit(TxRef(epoch: e, txid: txid), digest: 0)))
    }

    /// Every frame of the twin shows it is live, not only its keepalives (fresh seed
    /// 25277421324759605: both keepalives of a startup lost, the twin's COMMITs heard,
    /// and the new process led the twin's epoch beside it).
    @Test func aTwinHeardOnlyThroughItsCommitsIsLiveToo() {
        var n = starting()
        let until = t0 + n.config.startupListen
        _ = n.stepEchoing(twinCommit(1), now: until - Milliseconds(100))
        tick(&n, from: until - Milliseconds(100), until: until + Milliseconds(899))
        let actions = n.stepEchoing(twinCommit(2), now: until + Milliseconds(900))
        #expect(actions.contains(.exit(reason: .idInUse(NodeID(2)))))
    }

    /// The epoch a twin led is never claimed again by this process, even when the twin
    /// turns out dead: two reigns of one epoch would number two transactions alike.
    @Test func theTwinsEpochIsNeverClaimedAgain() {
        var n = starting()
        let heard = t0 + n.config.startupListen - Milliseconds(100)
        #expect(n.stepEchoing(twinCommit(1), now: heard).contains(.persistEpoch(Epoch(term: 1, master: NodeID(2)))))
        #expect(n.epoch == Epoch(term: 1, master: NodeID(2)))
    }

    /// n2 (incarnation 2000) following n3 until `t0 + 3 s`, when n3 falls silent; and a
    /// keepalive of a run of n2 with `twinIncarnation`.
    func slaveOfADeadMaster(twinIncarnation: UInt64) -> (TrackerNode, Instant, twin: NodeEvent) {
        let (n, last) = n2FollowingN3(from: t0, ids: ids)
        let twin = NodeEvent.cluster(ClusterEnvelope(from: NodeID(2), incarnation: twinIncarnation, epoch: n3Epoch, to: nil, message: .keepalive(
            Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true, address: ""))))
        return (n, last, twin)
    }

    /// Ticks `n` every 50 ms from `start` to `end`, with `event` at `at`; the epochs it
    /// claims and when.
    func claims(_ n: inout TrackerNode, from start: Instant, until end: Instant,
                hearing event: NodeEvent, at: Instant) -> [(Epoch, Instant)] {
        var claimed: [(Epoch, Instant)] = []
        var t = start
        while t < end {
            t = t + Milliseconds(50)
            var actions = n.stepEchoing(.tick, now: t)
            if t == at { actions += n.stepEchoing(event, now: t) }
            for case .persistEpoch(let e) in actions where e.master == n.id { claimed.append((e, t)) }
        }
        return claimed
    }

    /// A running node that heard an older run of its own id does not claim an epoch: that
    /// run claims by the same rule, and both would lead the same one (fresh seed
    /// 1472068450387257325: e4.2 led by two processes, each committing its own e4.2#1).
    /// Once the sighting is `downAfter` old, the older run counts as gone and it claims.
    @Test func aNodeThatHeardAnOlderRunOfItsIDLeavesTheClaimToIt() throws {
        var (n, last, twin) = slaveOfADeadMaster(twinIncarnation: 1000)
        let sighting = last + n.config.downAfter - Milliseconds(200)
        let claimed = claims(&n, from: last, until: last + Milliseconds(8000), hearing: twin, at: sighting)
        #expect(n.paths[.claimLeftToOlderRun] >= 1)
        let first = try #require(claimed.first)
        #expect(first.1 > sighting + n.config.downAfter)
    }

    /// The older run is the one that stays: a newer one heard does not hold it back.
    @Test func aNewerRunOfItsIDDoesNotHoldTheOlderBack() throws {
        var (n, last, twin) = slaveOfADeadMaster(twinIncarnation: 3000)
        let sighting = last + n.config.downAfter - Milliseconds(200)
        let claimed = claims(&n, from: last, until: last + Milliseconds(8000), hearing: twin, at: sighting)
        let first = try #require(claimed.first)
        #expect(first.1 <= last + n.config.downAfter + Milliseconds(100))
        #expect(n.paths[.claimLeftToOlderRun] == 0)
    }
}
