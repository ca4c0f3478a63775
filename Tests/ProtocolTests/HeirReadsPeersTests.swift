import NIOCore
import Testing
import TrackerLogic

/// Only the heir reads peer datagrams among the slaves (`TrackerNode.peersUnneeded`):
/// bully elects the highest live id, so only the highest live slave must hold requests
/// for the next master; a lower slave tells its host to drop them unread, once, and to
/// read them again the moment it could be needed (the heir gone silent, an election).
/// The heir itself leaves them unread for `receiveSkew` after each decision it hears a
/// serving master make: what it read then would count as answered anyway.
@Suite("Heir reads peers") struct HeirReadsPeersTests {
    let t0 = Instant(milliseconds: 13_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 3, k1: 4))
    let e3 = Epoch(term: 1, master: NodeID(3))

    func node(_ id: UInt32) -> TrackerNode {
        TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                    handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                    seed: 11, now: t0, restoring: DurableState(snapshot: nil, epoch: e3))
    }

    func keepalive(_ id: UInt32, role: Role) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(id), incarnation: UInt64(id) * 1000, epoch: e3, to: nil,
                                 message: .keepalive(Keepalive(role: role, master: NodeID(3), lastCommitted: .zero, inSync: true, address: ""))))
    }

    /// Steps `n` through `ms` of keepalives from the master n3 and from `others`, every
    /// 500 ms; returns every `readPeers` it said, in order, and the instant after.
    func run(_ n: inout TrackerNode, from t: Instant, for ms: Int64, others: [UInt32]) -> ([Bool], Instant) {
        var said: [Bool] = []
        var t = t
        let end = t + Milliseconds(ms)
        while t < end {
            var actions = n.stepEchoing(keepalive(3, role: .master), now: t)
            for o in others { actions += n.stepEchoing(keepalive(o, role: .slave), now: t) }
            actions += n.stepEchoing(.tick, now: t)
            for case .readPeers(let reads) in actions { said.append(reads) }
            t = t + Milliseconds(500)
        }
        return (said, t)
    }

    @Test func aSlaveBelowALiveSlaveLeavesPeersToItOnce() {
        var n1 = node(1)
        let (said, _) = run(&n1, from: t0, for: 6000, others: [2])
        #expect(n1.role == .slave)
        #expect(said == [false])
        #expect(n1.paths[.peersLeftToHeir] == 1)
    }

    @Test func theHeirKeepsReading() {
        var n2 = node(2)
        let (said, _) = run(&n2, from: t0, for: 6000, others: [1])
        #expect(n2.role == .slave)
        #expect(said == [])
    }

    /// The master's id is no heir: a slave right below it reads.
    @Test func aMasterAboveIsNotTheHeir() {
        var n2 = node(2)
        let (said, _) = run(&n2, from: t0, for: 6000, others: [])
        #expect(said == [])
    }

    /// The heir falls silent: the slave below reads again once it counts the heir down,
    /// while the master still serves, not later at the election.
    @Test func theHeirGoneTheNextReadsAgain() {
        var n1 = node(1)
        let (before, t) = run(&n1, from: t0, for: 6000, others: [2])
        #expect(before == [false])
        let (after, _) = run(&n1, from: t, for: 4000, others: [])
        #expect(after == [true])
        #expect(n1.role == .slave)
    }

    /// The master falls silent and the heir with it: the slave runs for election, and
    /// reads from the step it became a candidate.
    @Test func aCandidateReads() {
        var n1 = node(1)
        var (_, t) = run(&n1, from: t0, for: 6000, others: [2])
        var said: [Bool] = []
        while n1.role == .slave && t < t0 + Milliseconds(12_000) {
            for case .readPeers(let reads) in n1.stepEchoing(.tick, now: t) { said.append(reads) }
            t = t + Milliseconds(100)
        }
        #expect(n1.role == .candidate || n1.role == .master)
        #expect(said == [true])
    }

    /// A COMMIT of the serving master: the heir leaves peer datagrams unread, and asks to
    /// wake when the window closes, `receiveSkew` later, when it reads them again.
    @Test func theHeirLeavesPeersUnreadForTheSkewAfterADecision() {
        var n2 = node(2)
        let (_, t) = run(&n2, from: t0, for: 6000, others: [1])
        let commit = NodeEvent.cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                                                       message: .commit(TxRef(epoch: e3, txid: 1), digest: 0)))
        var said: [Bool] = []
        for case .readPeers(let reads) in n2.stepEchoing(commit, now: t) { said.append(reads) }
        #expect(said == [false])
        let skew = ClusterConfig().receiveSkew
        #expect(n2.nextWake(now: t) == t + skew)
        #expect(!n2.stepEchoing(.tick, now: t + skew - Milliseconds(1)).contains(.readPeers(true)))
        #expect(n2.stepEchoing(.tick, now: t + skew).contains(.readPeers(true)))
    }

    /// A slave below the heir keeps its filter through decisions: it wakes for none.
    @Test func aSlaveBelowTheHeirWakesForNoWindow() {
        var n1 = node(1)
        let (_, t) = run(&n1, from: t0, for: 6000, others: [2])
        let commit = NodeEvent.cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                                                       message: .commit(TxRef(epoch: e3, txid: 1), digest: 0)))
        #expect(!n1.stepEchoing(commit, now: t).contains { if case .readPeers = $0 { true } else { false } })
        #expect(n1.nextWake(now: t) > t + ClusterConfig().receiveSkew)
    }
}
