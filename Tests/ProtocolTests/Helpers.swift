import NIOCore
import Testing
import TrackerLogic

func bytes(_ hex: String) -> [UInt8] {
    let clean = hex.filter { !$0.isWhitespace }
    var out: [UInt8] = []
    var i = clean.startIndex
    while i < clean.endIndex {
        let j = clean.index(i, offsetBy: 2)
        out.append(UInt8(clean[i..<j], radix: 16)!)
        i = j
    }
    return out
}

func buffer(_ hex: String) -> ByteBuffer { ByteBuffer(bytes: bytes(hex)) }

extension ByteBuffer {
    var allBytes: [UInt8] { getBytes(at: readerIndex, length: readableBytes) ?? [] }
}

let hashA = InfoHash(hex: "0123456789abcdef0123456789abcdef01234567")!
let hashB = InfoHash(hex: "fedcba9876543210fedcba9876543210fedcba98")!

func peerID(_ n: UInt32) -> PeerID { PeerID(a: 0x2D54_5430_3030_312D, b: 0, c: n) }

func v4(_ text: String) -> IPAddress { IPAddress(text)! }

/// Steps `node` as a slave that hears `keepalive` and ticks every 500 ms from `start`
/// until `end`; returns the instant of its last step.
func follow(_ node: inout TrackerNode, hearing keepalive: NodeEvent, from start: Instant, until end: Instant) -> Instant {
    var t = start
    while t < end {
        _ = node.stepEchoing(keepalive, now: t)
        _ = node.stepEchoing(.tick, now: t)
        t = t + Milliseconds(500)
    }
    return t - Milliseconds(500)
}

/// The epoch n2 follows in `n2FollowingN3`: n3's first.
let n3Epoch = Epoch(term: 1, master: NodeID(3))

/// n3's keepalive as master of `n3Epoch`.
func n3Keepalive() -> NodeEvent {
    .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: n3Epoch, to: nil,
                             message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: true, address: ""))))
}

/// n2 (incarnation 2000), restored at `n3Epoch`, starting at `t0`.
func n2(at t0: Instant, ids: ConnectionIDPolicy, config: ClusterConfig = ClusterConfig()) -> TrackerNode {
    TrackerNode(id: NodeID(2), incarnation: 2000, config: config,
                handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: n3Epoch))
}

/// n2 following n3 from `t0` until `t0 + 3 s`, when n3 falls silent. Returns n2 and the
/// instant of n3's last keepalive.
func n2FollowingN3(from t0: Instant, ids: ConnectionIDPolicy, config: ClusterConfig = ClusterConfig()) -> (TrackerNode, Instant) {
    var n = n2(at: t0, ids: ids, config: config)
    let last = follow(&n, hearing: n3Keepalive(), from: t0, until: t0 + Milliseconds(3000))
    return (n, last)
}

/// A master of a 3-node cluster with its two slaves played by the test: what vote
/// counting and the effects contract are tested on.
protocol MasterFixture {
    var t0: Instant { get }
    var ids: ConnectionIDPolicy { get }
    var peer: PeerEndpoint { get }
}

extension MasterFixture {
    /// n3, master of a 3-node cluster (strict quorum: 2 of 3), followed by n1 and n2,
    /// both confirmed at the empty repository.
    func masterWithTwoSlaves(peerImageMinimumRows: Int = ClusterConfig().peerImageMinimumRows,
                             batchMaxUpdates: Int = ClusterConfig().batchMaxUpdates) -> (TrackerNode, Instant) {
        var config = ClusterConfig()
        config.peerImageMinimumRows = peerImageMinimumRows
        config.batchMaxUpdates = batchMaxUpdates
        config.quorum = .strict
        config.clusterSize = 3
        var n = TrackerNode(id: NodeID(3), incarnation: 3000, config: config,
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                            seed: 7, now: t0, restoring: nil)
        var t = t0
        for _ in 0..<100 where !n.isServing {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in n.stepEchoing(.tick, now: t) { _ = n.stepEchoing(.epochStored(e), now: t) }
        }
        for slave in [UInt32(1), 2] {
            _ = n.stepEchoing(env(from: slave, epoch: n.epoch, .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero,
                                                                                  inSync: true, address: ""))), now: t)
        }
        // The slaves answer the COORDINATOR (n3 took office alone, with nothing to recover).
        for slave in [UInt32(1), 2] {
            _ = n.stepEchoing(env(from: slave, epoch: n.epoch, .coordinatorAck(lastCommitted: .zero, prepared: nil)), now: t)
        }
        for _ in 0..<20 where !n.isServing {
            t = t + Milliseconds(10)
            _ = n.stepEchoing(.tick, now: t)
        }
        return (n, t)
    }

    func env(from: UInt32, epoch: Epoch, _ m: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: epoch, to: NodeID(3), message: m))
    }

    /// An announce from `peer`, then the tick that sends its PREPARE: the transaction.
    /// `peerNumber` names the peer (by default, each transaction id is another peer).
    func announce(_ tid: UInt32, peerNumber: UInt32? = nil, _ n: inout TrackerNode, at t: inout Instant) throws -> Transaction {
        var actions = n.stepEchoing(announceDatagram(tid, peerNumber: peerNumber, at: t), now: t)
        t = t + Milliseconds(5)
        actions += n.stepEchoing(.tick, now: t)
        let prepared = actions.compactMap { action -> Transaction? in
            if case .broadcast(let e) = action, case .prepare(let tx, _, _) = e.message { return tx } else { return nil }
        }
        return try #require(prepared.first)
    }

    /// A peer's announce (a start) as the master reads it; `peerNumber` as above.
    func announceDatagram(_ tid: UInt32, peerNumber: UInt32? = nil, at t: Instant) -> NodeEvent {
        .peer(BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: peer.ip, now: t), transactionID: tid,
            infoHash: InfoHash(a: 1, b: 2, c: 3), peerID: PeerID(a: 4, b: 5, c: peerNumber ?? tid), downloaded: 0, left: 100, uploaded: 0,
            event: .started, key: 1, numWant: 10, port: peer.port))), from: peer)
    }

    func vote(_ from: UInt32, _ tx: Transaction, _ verdict: Verdict, _ n: inout TrackerNode, at t: Instant) -> [NodeAction] {
        n.stepEchoing(env(from: from, epoch: n.epoch, .vote(txid: tx.txid, digest: tx.digest, verdict: verdict)), now: t)
    }

    func answers(_ actions: [NodeAction]) -> [TrackerResponse] {
        actions.compactMap { if case .reply(let r, _) = $0 { return r } else { return nil } }
    }

    func isAnnounce(_ r: TrackerResponse) -> Bool { if case .announce = r { return true } else { return false } }
    func isError(_ r: TrackerResponse) -> Bool { if case .error = r { return true } else { return false } }
}

extension TrackerNode {
    /// Steps the node as a host with a working broker link does: every keepalive it
    /// publishes comes back to it through the broker (`BrokerLink.swift`), here at once.
    /// Tests of what a node does without that echo step it plainly.
    mutating func stepEchoing(_ event: NodeEvent, now: Instant) -> [NodeAction] {
        var actions = step(event, now: now)
        for e in keepalives(in: actions) { actions += step(.cluster(e), now: now) }
        return actions
    }
}

/// The keepalives a node published on the broker in `actions`: what the broker carries
/// back to it as its echoes (`BrokerLink.swift`).
func keepalives(in actions: [NodeAction]) -> [ClusterEnvelope] {
    actions.compactMap { a -> ClusterEnvelope? in
        if case .broadcast(let e) = a, case .keepalive = e.message { return e } else { return nil }
    }
}

/// A replica and the rows a store would hold, committed together: what a test compares
/// memory and the store by.
struct RecordedReplica {
    var replica = Replica()
    var rows = RepositoryRows()
    let epoch: Epoch

    /// The next transaction of `updates`; whether the replica applied it.
    @discardableResult
    mutating func commit(_ updates: [SwarmUpdate]) -> Bool {
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: replica.lastCommitted.txid + 1), updates: updates)
        guard replica.commit(tx) else { return false }
        rows.apply(CommitRows(tx, replica: replica))
        return true
    }
}

/// `snapshot` through the cluster codec, as a node receives it.
func onTheWire(_ snapshot: Snapshot, epoch: Epoch) throws -> Snapshot? {
    let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .snapshot(snapshot))
    guard case .snapshot(let decoded) = try ClusterCodec.decode(ClusterCodec.encode(env)).get().message else { return nil }
    return decoded
}
