import NIOCore
import TrackerLogic

/// libFuzzer target: the cluster channel (frame verification), the cluster message
/// decoder, the fragment reassembly and one node's `step`. Properties: decoding is total;
/// a decoded envelope re-encodes to bytes that decode to the same envelope; a sealed frame
/// opens to the envelope that was sealed, once (a second copy is a replay); fragments of
/// any header and size never trap the reassembly nor grow it past its bounds; no input
/// traps the node.
struct ClusterFuzzState {
    var node: TrackerNode
    var now = Instant(milliseconds: 1_700_000_000_000)
    var runs = 0
    var sender = ClusterChannel(keys: [ClusterKey(bytes: Array(repeating: 7, count: 32))!], startedAt: Instant(milliseconds: 0))
    var receiver = ClusterChannel(keys: [ClusterKey(bytes: Array(repeating: 7, count: 32))!], startedAt: Instant(milliseconds: 0))
    /// Small, so that inputs reach the byte bound too.
    var reassembly = FragmentReassembly(maxMessageBytes: 4096)

    static func freshNode(at now: Instant) -> TrackerNode {
        var node = TrackerNode(id: NodeID(1), incarnation: 1, config: ClusterConfig(),
                               handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))),
                               seed: 1, now: now)
        var t = now
        // A lone node becomes master of e1.1, so inputs reach the master's handlers.
        for _ in 0..<60 where !node.isServing {
            t = t + Milliseconds(100)
            for case .persistEpoch(let e) in node.step(.tick, now: t) { _ = node.step(.epochStored(e), now: t) }
        }
        return node
    }
}

nonisolated(unsafe) var clusterFuzz = ClusterFuzzState(node: ClusterFuzzState.freshNode(at: Instant(milliseconds: 1_700_000_000_000)))

@_cdecl("LLVMFuzzerTestOneInput")
public func clusterFuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = ByteBuffer(bytes: UnsafeBufferPointer(start: data, count: size))
    clusterFuzz.runs += 1
    if clusterFuzz.runs % 50_000 == 0 { clusterFuzz.node = ClusterFuzzState.freshNode(at: clusterFuzz.now) }
    clusterFuzz.now = clusterFuzz.now + Milliseconds(7)
    // Frames as the broker delivers them: verified first (must not trap either).
    _ = clusterFuzz.receiver.open(bytes, ownID: NodeID(1), now: clusterFuzz.now)
    // A fragment as an authenticated sender could shape it (what `open` hands on after the tag).
    if let fragment = Fragment(decoding: bytes) {
        if case .complete(let message) = clusterFuzz.reassembly.accept(fragment, now: clusterFuzz.now, maxAge: .seconds(30)) {
            guard message.readableBytes <= clusterFuzz.reassembly.maxMessageBytes else { fatalError("a reassembled message over the bound") }
            _ = ClusterCodec.decode(message)
        }
        guard clusterFuzz.reassembly.pendingTransfers.count <= FragmentReassembly.maxPartials else { fatalError("too many partial messages") }
        return 0
    }
    guard case .success(let envelope) = ClusterCodec.decode(bytes) else { return 0 }
    guard case .success(let again) = ClusterCodec.decode(ClusterCodec.encode(envelope)), again == envelope else {
        fatalError("cluster message does not round-trip: \(envelope.message.name)")
    }
    let frame = clusterFuzz.sender.seal(envelope, now: clusterFuzz.now)
    guard case .success(let opened) = clusterFuzz.receiver.open(frame, ownID: NodeID(99), now: clusterFuzz.now), opened == envelope else {
        fatalError("a sealed frame does not open to its envelope")
    }
    guard case .failure(.replayed) = clusterFuzz.receiver.open(frame, ownID: NodeID(99), now: clusterFuzz.now) else {
        fatalError("a second copy of a frame was not refused as a replay")
    }
    _ = clusterFuzz.node.step(.cluster(envelope), now: clusterFuzz.now)
    _ = clusterFuzz.node.step(.tick, now: clusterFuzz.now)
    return 0
}
