import Testing
import TrackerLogic

/// A node's runs are told apart by their incarnation, drawn from the start time: what an
/// older run sent is a replay or a straggler, and never stands for the node.
@Suite("Older incarnations") struct IncarnationTests {
    let t0 = Instant(milliseconds: 11_000_000)
    let e3 = Epoch(term: 1, master: NodeID(3))
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func envelope(incarnation: UInt64, _ message: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(3), incarnation: incarnation, epoch: e3, to: nil, message: message))
    }

    func keepalive(incarnation: UInt64, address: String) -> NodeEvent {
        envelope(incarnation: incarnation, .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero,
                                                                inSync: true, address: address)))
    }

    /// n2, settled as the slave of n3's run 3000; returns it and its last step.
    func aSlave() -> (TrackerNode, Instant) {
        var n2 = TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                             seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: e3))
        let last = follow(&n2, hearing: keepalive(incarnation: 3000, address: "10.0.0.3:6969"), from: t0, until: t0 + Milliseconds(4000))
        #expect(n2.role == .slave && n2.master == NodeID(3))
        return (n2, last)
    }

    @Test func theLeavingOfTheRunFollowedStartsAnElection() {
        var (n2, t) = aSlave()
        _ = n2.stepEchoing(envelope(incarnation: 3000, .leaving), now: t + Milliseconds(10))
        #expect(n2.role == .candidate)
    }

    /// A clean restart's LEAVING, replayed after the node came back: refused.
    @Test func theLeavingOfAnOlderRunChangesNothing() {
        var (n2, t) = aSlave()
        _ = n2.stepEchoing(envelope(incarnation: 2999, .leaving), now: t + Milliseconds(10))
        #expect(n2.role == .slave && n2.master == NodeID(3))
        #expect(n2.membership[NodeID(3)]?.incarnation == 3000)
    }

    /// A LEAVING from a run never heard (the receiver restarted and the replay came first,
    /// or the run left before it was heard) drops nobody.
    @Test func theLeavingOfARunNeverHeardChangesNothing() {
        var (n2, t) = aSlave()
        _ = n2.stepEchoing(envelope(incarnation: 3001, .leaving), now: t + Milliseconds(10))
        #expect(n2.role == .slave && n2.master == NodeID(3))
        #expect(n2.membership[NodeID(3)]?.incarnation == 3000)
    }

    /// Two live processes of one id (the newer yields soon): the run heard first is still
    /// heard meanwhile, or the node it is would go unheard once the newcomer is gone.
    @Test func theRunHeardBeforeTheNewerOneIsStillHeard() {
        var (n2, t) = aSlave()
        _ = n2.stepEchoing(keepalive(incarnation: 3001, address: "10.0.0.99:6969"), now: t + Milliseconds(10))
        _ = n2.stepEchoing(keepalive(incarnation: 3000, address: "10.0.0.3:6969"), now: t + Milliseconds(20))
        #expect(n2.membership[NodeID(3)]?.incarnation == 3000)
        _ = n2.stepEchoing(keepalive(incarnation: 2999, address: "10.6.6.6:6969"), now: t + Milliseconds(30))
        #expect(n2.membership[NodeID(3)]?.address == "10.0.0.3:6969", "but no run older than both")
    }

    /// An older run's keepalive does not replace what the current run said of itself.
    @Test func anOlderRunsKeepaliveIsNotRecorded() {
        var (n2, t) = aSlave()
        _ = n2.stepEchoing(keepalive(incarnation: 2999, address: "10.6.6.6:6969"), now: t + Milliseconds(10))
        #expect(n2.membership[NodeID(3)]?.address == "10.0.0.3:6969")
        _ = n2.stepEchoing(keepalive(incarnation: 3001, address: "10.0.0.33:6969"), now: t + Milliseconds(20))
        #expect(n2.membership[NodeID(3)]?.address == "10.0.0.33:6969", "a newer run replaces the old one")
    }
}
