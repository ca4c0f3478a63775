import NIOCore
import Testing
import TrackerLogic

/// Messages longer than one frame (a snapshot of a million peers) travel as fragments,
/// each sealed on its own; the receiver reassembles them in any order, once, within bounds.
@Suite("Fragments")
struct FragmentTests {
    let t0 = Instant(milliseconds: 1_700_000_000_000)

    /// A snapshot of `swarms` swarms of three peers, from node 3.
    func snapshotEnvelope(swarms: Int) -> ClusterEnvelope {
        var store = SwarmStore()
        for s in 0..<swarms {
            for p in 0..<3 {
                store.apply(.announce(Announce(
                    infoHash: InfoHash(a: UInt64(s), b: 1, c: 2), peerID: PeerID(a: UInt64(p), b: 3, c: 4),
                    endpoint: PeerEndpoint(ip: .v4(0x0A00_0000 | UInt32(s * 3 + p)), port: 6881), uploaded: 1, downloaded: 2,
                    left: Int64(p), event: .started, at: t0)))
            }
        }
        let ref = TxRef(epoch: Epoch(term: 2, master: NodeID(3)), txid: 9)
        let snapshot = Snapshot(lastCommitted: ref, history: EpochHistory(runs: [.init(epoch: ref.epoch, firstTxid: 1)]),
                                content: store.content(), digest: Digest.of(store))
        return ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: ref.epoch, to: NodeID(1), message: .snapshot(snapshot))
    }

    func channel(fragmentBytes: Int = 64) -> ClusterChannel {
        ClusterChannel(keys: [.insecure], startedAt: t0, fragmentBytes: fragmentBytes)
    }

    /// Every frame but the last is taken in silently; the last yields the whole message.
    func deliver(_ frames: [ByteBuffer], to receiver: inout ClusterChannel) -> [Result<ClusterEnvelope?, ClusterRejection>] {
        frames.map { receiver.open($0, ownID: NodeID(1), now: t0 + Milliseconds(5)) }
    }

    @Test func aLongMessageTravelsInPiecesAndArrivesWhole() {
        let envelope = snapshotEnvelope(swarms: 4)
        let encoded = ClusterCodec.encode(envelope).readableBytes
        var sender = channel(), receiver = channel()
        let frames = sender.sealFragments(envelope, now: t0)
        #expect(frames.count == (encoded + 63) / 64)
        let results = deliver(frames, to: &receiver)
        for r in results.dropLast() { #expect(r == .success(nil)) }
        #expect(results.last == .success(envelope))
    }

    @Test func aShortMessageIsOneOrdinaryFrame() {
        let envelope = ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: Epoch(term: 2, master: NodeID(3)), to: nil,
                                       message: .commit(TxRef(epoch: Epoch(term: 2, master: NodeID(3)), txid: 4), digest: 5))
        var sender = channel(fragmentBytes: 1 << 20), plain = channel(fragmentBytes: 1 << 20)
        let frames = sender.sealFragments(envelope, now: t0)
        #expect(frames == [plain.seal(envelope, now: t0)])
    }

    @Test(arguments: [1, 2, 3, 4, 5])
    func piecesMayArriveInAnyOrder(seed: UInt64) {
        let envelope = snapshotEnvelope(swarms: 6)
        var sender = channel(fragmentBytes: 100), receiver = channel(fragmentBytes: 100)
        var frames = sender.sealFragments(envelope, now: t0)
        var rng = SeededGenerator(seed: seed)
        for i in stride(from: frames.count - 1, to: 0, by: -1) { frames.swapAt(i, rng.below(i + 1)) }
        let whole = deliver(frames, to: &receiver).compactMap { r -> ClusterEnvelope? in
            if case .success(let e?) = r { return e } else { return nil }
        }
        #expect(whole == [envelope])
    }

    /// Frame header, then "TF", sender, incarnation, transfer (the first piece's sequence
    /// number), index, count, and the piece: here the start of the encoded message ("TK").
    @Test func aFragmentIsLaidOutByteForByte() {
        var sender = channel()
        _ = sender.seal(snapshotEnvelope(swarms: 0), now: t0)  // sequence 1 is used: the transfer is 2
        let frames = sender.sealFragments(snapshotEnvelope(swarms: 2), now: t0)
        let count = UInt8(frames.count)
        let bytes = Array(frames[0].readableBytesView)
        let header = ClusterChannel.headerBytes
        #expect(Array(bytes[header..<(header + Fragment.headerBytes + 2)]) == [
            0x54, 0x46,  // "TF"
            0x00, 0x00, 0x00, 0x03,  // from node 3
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0B, 0xB8,  // incarnation 3000
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,  // transfer 2
            0x00, 0x00, 0x00, 0x00,  // index 0
            0x00, 0x00, 0x00, count,  // of count
            0x54, 0x4B,  // the message's own magic, "TK"
        ])
        #expect(bytes.count == header + Fragment.headerBytes + 64 + ClusterChannel.tagBytes)
    }

    @Test func aReplayedPieceIsRefused() {
        var sender = channel(), receiver = channel()
        let frames = sender.sealFragments(snapshotEnvelope(swarms: 2), now: t0)
        #expect(deliver([frames[0]], to: &receiver) == [.success(nil)])
        #expect(deliver([frames[0]], to: &receiver) == [.failure(.replayed)])
    }

    @Test func aPieceAlteredInTransitIsRefused() {
        var sender = channel(), receiver = channel()
        var frames = sender.sealFragments(snapshotEnvelope(swarms: 2), now: t0)
        let at = frames[1].readerIndex + ClusterChannel.headerBytes + Fragment.headerBytes + 3
        frames[1].setInteger(frames[1].getInteger(at: at, as: UInt8.self)! ^ 0x10, at: at)
        let results = deliver(frames, to: &receiver)
        #expect(results[1] == .failure(.badTag))
        #expect(!results.contains { if case .success(_?) = $0 { true } else { false } })
    }

    // MARK: bounds of the reassembly

    func piece(transfer: UInt64 = 1, index: UInt32, count: UInt32, bytes: Int = 10) -> Fragment {
        Fragment(from: NodeID(3), incarnation: 3000, transfer: transfer, index: index, count: count,
                 payload: ByteBuffer(bytes: Array(repeating: UInt8(index & 0xFF), count: bytes)))
    }

    @Test func countsBeyondTheBoundsAreRefused() {
        var r = FragmentReassembly()
        #expect(r.accept(piece(index: 0, count: FragmentReassembly.maxFragments + 1), now: t0, maxAge: .seconds(30)) == .dropped(.oversized))
        #expect(r.accept(piece(index: 0, count: 1), now: t0, maxAge: .seconds(30)) == .dropped(.oversized))
        #expect(r.accept(piece(index: 0, count: 3), now: t0, maxAge: .seconds(30)) == .pending)
        // The same transfer claiming another count is malformed, and costs its partial.
        #expect(r.accept(piece(index: 1, count: 4), now: t0, maxAge: .seconds(30)) == .dropped(.malformed))
        #expect(r.pendingTransfers.isEmpty)
    }

    @Test func aMessageLargerThanTheLimitIsDropped() {
        var r = FragmentReassembly(maxMessageBytes: 1000)
        let big = 501
        #expect(r.accept(piece(index: 0, count: 3, bytes: big), now: t0, maxAge: .seconds(30)) == .pending)
        #expect(r.accept(piece(index: 1, count: 3, bytes: big), now: t0, maxAge: .seconds(30)) == .dropped(.oversized))
        #expect(r.pendingTransfers.isEmpty)
    }

    /// A lost piece costs its message, not memory: the partial ages out, and no more than
    /// `maxPartials` are kept.
    @Test func incompleteMessagesAreForgotten() {
        var r = FragmentReassembly()
        for transfer in 1...UInt64(FragmentReassembly.maxPartials + 3) {
            #expect(r.accept(piece(transfer: transfer, index: 0, count: 2), now: t0 + Milliseconds(Int64(transfer)), maxAge: .seconds(30)) == .pending)
        }
        #expect(r.pendingTransfers == [4, 5, 6, 7], "the least recently fed went first")
        #expect(r.accept(piece(transfer: 99, index: 0, count: 2), now: t0 + .seconds(31), maxAge: .seconds(30)) == .pending)
        #expect(r.pendingTransfers == [99])
    }

    @Test func aFragmentHeaderMustNameASenderAndAnIndexBelowItsCount() {
        var b = ByteBuffer()
        piece(index: 2, count: 2).write(into: &b)
        #expect(Fragment(decoding: b) == nil)
        b.clear()
        Fragment(from: NodeID(0), incarnation: 1, transfer: 1, index: 0, count: 2, payload: ByteBuffer(bytes: [1])).write(into: &b)
        #expect(Fragment(decoding: b) == nil)
        b.clear()
        piece(index: 1, count: 2).write(into: &b)
        #expect(Fragment(decoding: b) == piece(index: 1, count: 2))
        #expect(Fragment(decoding: b.getSlice(at: 0, length: Fragment.headerBytes)!) == nil, "no payload")
    }
}
