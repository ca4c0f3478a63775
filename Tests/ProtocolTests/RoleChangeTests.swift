import NIOCore
import Testing
import TrackerLogic

/// The gate's role changes: a role asks (follow, acknowledge a coordinator, run, lead,
/// serve) and the gate makes the change, in the order the actions say. Each role's own
/// behaviour has its suite: `Candidate` in ElectionTests, `Recovery` in RecoveryTests,
/// `Master` in VoteCountingTests and TransactionAnswerTests, `Slave` in CatchUpTests.
@Suite("Role changes") struct RoleChangeTests: MasterFixture {
    let t0 = Instant(milliseconds: 11_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0009), port: 6881)
    let e3 = Epoch(term: 1, master: NodeID(3))

    func node(_ id: UInt32, epoch: Epoch) -> TrackerNode {
        TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                    seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: epoch))
    }

    func heard(from id: UInt32, epoch: Epoch, _ m: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(id), incarnation: UInt64(id) * 1000, epoch: epoch, to: nil, message: m))
    }

    func keepalive(_ id: UInt32, role: Role) -> NodeEvent {
        heard(from: id, epoch: e3, .keepalive(Keepalive(role: role, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "")))
    }

    func sent(_ from: UInt32, incarnation: UInt64, epoch: Epoch, to: UInt32, _ m: ClusterMessage) -> NodeAction {
        .send(ClusterEnvelope(from: NodeID(from), incarnation: incarnation, epoch: epoch, to: NodeID(to), message: m))
    }

    /// n1 follows n3 beside n2; n3 falls silent, and n1 runs while n2 (higher, live) is
    /// still heard, so it waits for an answer; returns n1 as candidate and the instant.
    func candidateWaitingForAnswers() -> (TrackerNode, Instant) {
        var n1 = node(1, epoch: e3)
        var t = t0
        while t < t0 + Milliseconds(4000) {
            _ = n1.stepEchoing(keepalive(3, role: .master), now: t)
            _ = n1.stepEchoing(keepalive(2, role: .slave), now: t)
            _ = n1.stepEchoing(.tick, now: t)
            t = t + Milliseconds(500)
        }
        while n1.role == .slave && t < t0 + Milliseconds(10_000) {
            _ = n1.stepEchoing(keepalive(2, role: .slave), now: t)
            _ = n1.stepEchoing(.tick, now: t)
            t = t + Milliseconds(100)
        }
        return (n1, t)
    }

    /// A candidate that hears the master of its epoch announce itself follows it: HELLO
    /// first (the change the gate makes), then its answer with what it holds. n2 is live
    /// and higher, so n1 is not the heir: it leaves peer datagrams to n2.
    @Test func aCandidateHearingTheCoordinatorFollowsThenAnswers() {
        var (n1, t) = candidateWaitingForAnswers()
        #expect(n1.role == .candidate)
        #expect(n1.epoch == e3)
        let actions = n1.stepEchoing(heard(from: 3, epoch: e3, .coordinator(lastCommitted: .zero)), now: t)
        #expect(actions == [
            sent(1, incarnation: 1000, epoch: e3, to: 3, .hello(Hello(lastCommitted: .zero, hasState: false))),
            sent(1, incarnation: 1000, epoch: e3, to: 3, .coordinatorAck(lastCommitted: .zero, prepared: nil)),
            .standingChanged(StandingChange(previous: NodeStanding(role: .candidate, epoch: e3, master: nil, serving: false),
                                            current: NodeStanding(role: .slave, epoch: e3, master: NodeID(3), serving: false))),
            .readPeers(false),
        ])
    }

    /// A serving master that hears a higher epoch's COORDINATOR steps down and follows
    /// it; the transaction it had in flight is what it prepared, and its answer says so
    /// (the new master's recovery may propose it again). Its peer gets no answer.
    @Test func aMasterHearingAHigherCoordinatorStepsDownAndReportsItsTransaction() throws {
        var (n3, t) = masterWithTwoSlaves()
        let old = n3.epoch
        let tx = try announce(1, &n3, at: &t)
        let newer = Epoch(term: old.term + 1, master: NodeID(4))
        let actions = n3.stepEchoing(heard(from: 4, epoch: newer, .coordinator(lastCommitted: .zero)), now: t)
        #expect(actions == [
            .persistEpoch(newer),
            sent(3, incarnation: 3000, epoch: newer, to: 4, .hello(Hello(lastCommitted: .zero, hasState: false))),
            sent(3, incarnation: 3000, epoch: newer, to: 4, .coordinatorAck(lastCommitted: .zero, prepared: tx)),
            .standingChanged(StandingChange(previous: NodeStanding(role: .master, epoch: old, master: NodeID(3), serving: true),
                                            current: NodeStanding(role: .slave, epoch: newer, master: NodeID(4), serving: false))),
        ])
    }

    /// A slave whose master says farewell runs at once: it knows its members, and with the
    /// master gone nobody higher is left, so it claims the next epoch in the same step.
    @Test func aSlaveWhoseMasterLeavesRunsAndClaims() {
        var n2 = node(2, epoch: e3)
        var t = t0
        while t < t0 + Milliseconds(4000) {
            _ = n2.stepEchoing(keepalive(3, role: .master), now: t)
            _ = n2.stepEchoing(.tick, now: t)
            t = t + Milliseconds(500)
        }
        #expect(n2.role == .slave)
        let claimed = Epoch(term: 2, master: NodeID(2))
        let actions = n2.stepEchoing(heard(from: 3, epoch: e3, .leaving), now: t)
        #expect(actions == [
            .broadcast(ClusterEnvelope(from: NodeID(2), incarnation: 2000, epoch: e3, to: nil, message: .election(lastCommitted: .zero))),
            .persistEpoch(claimed),
            .standingChanged(StandingChange(previous: NodeStanding(role: .slave, epoch: e3, master: NodeID(3), serving: false),
                                            current: NodeStanding(role: .candidate, epoch: claimed, master: nil, serving: false))),
        ])
        // Once the epoch is durable it leads; with nobody left to ask, it recovers at once.
        _ = n2.stepEchoing(.epochStored(claimed), now: t)
        #expect(n2.isServing)
    }
}
