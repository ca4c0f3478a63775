import Foundation
import NIOCore
import Testing
import TrackerLogic

@Suite("Cluster message codec")
struct ClusterCodecTests {
    let epoch = Epoch(term: 3, master: NodeID(2))

    @Test func keepaliveBytes() throws {
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 7, epoch: epoch, to: nil, message: .keepalive(
            Keepalive(role: .master, master: NodeID(2), lastCommitted: TxRef(epoch: epoch, txid: 10), inSync: true,
                      address: "10.0.0.2:6969")))
        let expected = bytes("""
            544b 01 01 00000002 0000000000000007 0000000300000002 00000000
            03 00000002 0000000300000002 000000000000000a 01 000d
            """) + Array("10.0.0.2:6969".utf8)
        #expect(ClusterCodec.encode(env).allBytes == expected)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: expected)).get() == env)
    }

    /// A PREPARE's announce in its compact form (kind 9): the counters and the instant as
    /// LEB128 varints. The fixed-width form (kind 1) of older masters still reads.
    @Test func prepareCarriesCompactAnnounces() throws {
        let announce = Announce(infoHash: InfoHash(a: 1, b: 2, c: 3), peerID: PeerID(a: 4, b: 5, c: 6),
                                endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881), uploaded: 0, downloaded: 300,
                                left: -1, event: .started, at: Instant(milliseconds: 1_700_000_000_000))
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: nil, message: .prepare(
            Transaction(ref: TxRef(epoch: epoch, txid: 11), updates: [.announce(announce)]),
            previous: TxRef(epoch: epoch, txid: 10), previousDigest: 7))
        let header = "544b 01 06 00000002 0000000000000009 0000000300000002 00000000 0000000300000002 000000000000000b 00000001"
        let tail = "0000000300000002 000000000000000a 0000000000000007"
        let compact = bytes(header + """
            09 0000000000000001 0000000000000002 00000003 02
            0000000000000004 0000000000000005 00000006 04 0a000001 1ae1
            00 ac02 ffffffffffffffffff01 80d095ffbc31
            """ + tail)
        #expect(ClusterCodec.encode(env).allBytes == compact)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: compact)).get() == env)
        let fixedWidth = bytes(header + """
            01 0000000000000001 0000000000000002 00000003 02
            0000000000000004 0000000000000005 00000006 04 0a000001 1ae1
            0000000000000000 000000000000012c ffffffffffffffff 0000018bcfe56800
            """ + tail)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: fixedWidth)).get() == env)
        // One value, one encoding: a trailing zero byte and an eleventh byte are refused.
        var padded = compact
        padded.replaceSubrange(padded.count - 30..<padded.count - 24, with: bytes("80d095ffbcb100"))
        #expect(ClusterCodec.decode(ByteBuffer(bytes: padded)) == .failure(ClusterDecodingError("varint with a trailing zero byte")))
        var long = compact
        long.replaceSubrange(long.count - 40..<long.count - 30, with: bytes("ffffffffffffffffff03"))
        #expect(ClusterCodec.decode(ByteBuffer(bytes: long)) == .failure(ClusterDecodingError("varint beyond 64 bits")))
    }

    /// The compact form of an IPv6 peer's announce: sixteen address bytes, and varints at
    /// the edges of one and two bytes.
    @Test func prepareCarriesACompactIPv6Announce() throws {
        let announce = Announce(infoHash: InfoHash(a: 1, b: 2, c: 3), peerID: PeerID(a: 4, b: 5, c: 6),
                                endpoint: PeerEndpoint(ip: .v6(0x2001_0db8_0000_0000, 1), port: 51413), uploaded: 127,
                                downloaded: 128, left: 0, event: .none, at: Instant(milliseconds: 0))
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: nil, message: .prepare(
            Transaction(ref: TxRef(epoch: epoch, txid: 11), updates: [.announce(announce), .announce(announce)]),
            previous: TxRef(epoch: epoch, txid: 10), previousDigest: 7))
        let one = """
            09 0000000000000001 0000000000000002 00000003 00
            0000000000000004 0000000000000005 00000006 06 20010db8000000000000000000000001 c8d5
            7f 8001 00 00
            """
        let expected = bytes("544b 01 06 00000002 0000000000000009 0000000300000002 00000000 0000000300000002 000000000000000b 00000002"
                             + one + one + "0000000300000002 000000000000000a 0000000000000007")
        #expect(ClusterCodec.encode(env).allBytes == expected)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: expected)).get() == env)
    }

    @Test func voteAndCommitBytes() throws {
        let vote = ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: epoch, to: NodeID(2),
                                   message: .vote(txid: 11, digest: 0xABCD, verdict: .storeFailed))
        let voteBytes = bytes("544b 01 07 00000001 0000000000000001 0000000300000002 00000002 000000000000000b 000000000000abcd 01")
        #expect(ClusterCodec.encode(vote).allBytes == voteBytes)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: voteBytes)).get() == vote)

        let commit = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: nil,
                                     message: .commit(TxRef(epoch: epoch, txid: 11), digest: 5))
        let commitBytes = bytes("544b 01 08 00000002 0000000000000009 0000000300000002 00000000 0000000300000002 000000000000000b 0000000000000005")
        #expect(ClusterCodec.encode(commit).allBytes == commitBytes)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: commitBytes)).get() == commit)
    }

    static func randomRecord(_ rng: inout SeededGenerator) -> PeerRecord {
        let ip: IPAddress = rng.chance(0.5) ? .v4(UInt32(truncatingIfNeeded: rng.next())) : .v6(rng.next(), rng.next())
        return PeerRecord(peerID: PropertyTests.randomHash(&rng), endpoint: PeerEndpoint(ip: ip, port: UInt16(truncatingIfNeeded: rng.next())),
                          uploaded: Int64(bitPattern: rng.next()), downloaded: Int64(bitPattern: rng.next()),
                          left: Int64(bitPattern: rng.next()), lastAnnounce: Instant(milliseconds: Int64(bitPattern: rng.next())))
    }

    static func randomMerge(_ rng: inout SeededGenerator) -> SwarmMerge {
        SwarmMerge(infoHash: PropertyTests.randomHash(&rng), peers: (0..<rng.below(4)).map { _ in randomRecord(&rng) },
                   completed: (0..<rng.below(3)).map { _ in randomRecord(&rng).key })
    }

    static func randomAccessChange(_ rng: inout SeededGenerator) -> CatalogueChange {
        let hashes = (0..<(1 + rng.below(3))).map { _ in PropertyTests.randomHash(&rng) }
        switch rng.below(4) {
        case 0: return .setAccessMode(AccessMode.allCases[rng.below(3)])
        case 1: return .setAccessRule(.allow, hashes)
        case 2: return .setAccessRule(.deny, hashes)
        default: return .removeAccessRules(hashes)
        }
    }

    static func randomUpdate(_ rng: inout SeededGenerator) -> SwarmUpdate {
        if rng.chance(0.1) { return .catalogue(randomAccessChange(&rng)) }
        switch rng.below(3) {
        case 0:
            let r = randomRecord(&rng)
            return .announce(Announce(infoHash: PropertyTests.randomHash(&rng), peerID: r.peerID, endpoint: r.endpoint,
                                      uploaded: r.uploaded, downloaded: r.downloaded, left: r.left,
                                      event: AnnounceEvent.allCases[rng.below(4)], at: r.lastAnnounce))
        case 1: return .expire(before: Instant(milliseconds: Int64(bitPattern: rng.next())))
        default: return .merge(randomMerge(&rng))
        }
    }

    /// Any epoch a node may hold: in range, with a master.
    static func randomEpoch(_ rng: inout SeededGenerator) -> Epoch {
        Epoch(term: 1 + UInt32(truncatingIfNeeded: rng.next()) % Epoch.maxTerm, master: NodeID(1 + UInt32(truncatingIfNeeded: rng.next()) % UInt32.max))
    }

    static func randomRef(_ rng: inout SeededGenerator) -> TxRef {
        rng.chance(0.1) ? .zero : TxRef(epoch: randomEpoch(&rng), txid: 1 + rng.next() % TxRef.maxTxid)
    }

    static func randomTx(_ rng: inout SeededGenerator) -> Transaction {
        Transaction(ref: TxRef(epoch: randomEpoch(&rng), txid: 1 + rng.next() % TxRef.maxTxid),
                    updates: (0..<rng.below(5)).map { _ in randomUpdate(&rng) })
    }

    static func randomMessage(_ rng: inout SeededGenerator) -> ClusterMessage {
        switch rng.below(20) {
        case 0: return .keepalive(Keepalive(role: Role(rawValue: UInt8(rng.below(5)))!, master: NodeID(UInt32(rng.below(9))),
                                            lastCommitted: randomRef(&rng), inSync: rng.chance(0.5), address: "n\(rng.below(99))"))
        case 1: return .election(lastCommitted: randomRef(&rng))
        case 2: return .answer
        case 3: return .coordinator(lastCommitted: randomRef(&rng))
        case 4: return .coordinatorAck(lastCommitted: randomRef(&rng), prepared: rng.chance(0.5) ? randomTx(&rng) : nil)
        case 5: return .prepare(randomTx(&rng), previous: randomRef(&rng), previousDigest: rng.next())
        case 6: return .vote(txid: rng.next(), digest: rng.next(), verdict: [Verdict.ok, .storeFailed, .notInSync][rng.below(3)])
        case 7: return .commit(randomRef(&rng), digest: rng.next())
        case 8: return .abort(randomRef(&rng), digest: rng.next())
        case 9: return .hello(Hello(lastCommitted: randomRef(&rng), hasState: rng.chance(0.5)))
        case 10: return .idAssigned(incarnation: rng.next(), id: NodeID(1 + UInt32(truncatingIfNeeded: rng.next()) % UInt32.max))
        case 11: return .submit(rng.chance(0.5) ? .unregister(PropertyTests.randomHash(&rng)) : randomAccessChange(&rng))
        case 12: return .catchUpRequest(after: randomRef(&rng))
        case 13: return .catchUp(after: randomRef(&rng), (0..<rng.below(3)).map { _ in randomTx(&rng) })
        case 14:
            let last = randomRef(&rng)
            var runs: [EpochHistory.Run] = []
            if last.txid > 0 {
                for i in 0..<UInt64(rng.below(3)) where i + 1 < last.txid { runs.append(.init(epoch: randomEpoch(&rng), firstTxid: i + 1)) }
                runs.append(.init(epoch: last.epoch, firstTxid: last.txid))
            }
            return .snapshot(Snapshot(lastCommitted: last, history: EpochHistory(runs: runs),
                                      content: (0..<rng.below(3)).map { _ in randomMerge(&rng) },
                                      access: AccessPolicy(mode: AccessMode.allCases[rng.below(3)],
                                                           rules: (0..<rng.below(3)).map { _ in
                                                               AccessEntry(infoHash: PropertyTests.randomHash(&rng), rule: rng.chance(0.5) ? .allow : .deny)
                                                           }),
                                      digest: rng.next()))
        case 15: return .snapshotAck(randomRef(&rng))
        case 16: return .mergeRequest
        case 17: return .mergeOffer(MergeOffer(offerID: rng.next(), part: UInt32(rng.below(4)), parts: 4,
                                               swarms: (0..<rng.below(3)).map { _ in randomMerge(&rng) }))
        case 18: return .mergeDone(offerID: rng.next())
        default: return .leaving
        }
    }

    @Test func everyMessageRoundTrips() throws {
        var rng = SeededGenerator(seed: 42)
        var kinds = Set<String>()
        for _ in 0..<5_000 {
            let message = Self.randomMessage(&rng)
            kinds.insert(message.name)
            let from = message.name == "HELLO" ? NodeID(UInt32(rng.below(10))) : NodeID(UInt32(1 + rng.below(10)))
            let env = ClusterEnvelope(from: from, incarnation: rng.next(), epoch: rng.chance(0.1) ? .zero : Self.randomEpoch(&rng),
                                      to: rng.chance(0.5) ? NodeID(UInt32(1 + rng.below(9))) : nil, message: message)
            #expect(try ClusterCodec.decode(ClusterCodec.encode(env)).get() == env)
        }
        #expect(kinds.count == 20, "every message kind was tried: \(kinds.sorted())")
    }

    /// Values no node can hold are refused where they are decoded: a term at the top of
    /// its range (which could never be succeeded), a master-less epoch, a txid that could
    /// overflow, a sender without an id on anything but HELLO, a part beyond its offer.
    @Test func impossibleValuesAreRefusedAtDecoding() {
        func decodes(_ env: ClusterEnvelope) -> Bool {
            if case .success = ClusterCodec.decode(ClusterCodec.encode(env)) { return true } else { return false }
        }
        let good = Epoch(term: 7, master: NodeID(3))
        func env(from: UInt32 = 3, epoch: Epoch = good, _ m: ClusterMessage) -> ClusterEnvelope {
            ClusterEnvelope(from: NodeID(from), incarnation: 1, epoch: epoch, to: nil, message: m)
        }
        #expect(decodes(env(.answer)))
        #expect(decodes(env(epoch: .zero, .answer)))
        #expect(decodes(env(epoch: Epoch(term: Epoch.maxTerm, master: NodeID(1)), .answer)))
        #expect(!decodes(env(epoch: Epoch(term: UInt32.max, master: NodeID(1)), .answer)), "top term")
        #expect(!decodes(env(epoch: Epoch(term: 5, master: .unassigned), .answer)), "term without a master")
        #expect(!decodes(env(epoch: Epoch(term: 0, master: NodeID(4)), .answer)), "master of term 0")
        #expect(!decodes(env(from: 0, .answer)), "sender without an id")
        #expect(decodes(env(from: 0, .hello(Hello(lastCommitted: .zero, hasState: false)))), "--id auto asks with id 0")
        #expect(!decodes(env(.commit(TxRef(epoch: good, txid: UInt64.max), digest: 1))), "txid that would overflow")
        #expect(!decodes(env(.commit(TxRef(epoch: good, txid: 0), digest: 1))), "epoch with txid 0")
        #expect(!decodes(env(.idAssigned(incarnation: 1, id: .unassigned))))
        #expect(!decodes(env(.mergeOffer(MergeOffer(offerID: 1, part: 4, parts: 4, swarms: [])))))
        #expect(decodes(env(.keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true,
                                                 address: String(repeating: "x", count: 2000))))),
                "a long address is cut by the encoder, not refused")
        let badHistory = Snapshot(lastCommitted: TxRef(epoch: good, txid: 5),
                                  history: EpochHistory(runs: [.init(epoch: good, firstTxid: 9)]), content: [], digest: 0)
        #expect(!decodes(env(.snapshot(badHistory))), "history reaching beyond the last commit")
        #expect(Epoch(term: Epoch.maxTerm, master: NodeID(1)).successor(for: NodeID(2)) == nil, "never incremented past the top")
    }

    /// Garbage, truncations and bit flips of valid messages decode to a typed error or a
    /// value, and never trap or allocate absurdly.
    @Test func decodingIsTotal() {
        var rng = SeededGenerator(seed: 43)
        var failures = 0
        for i in 0..<100_000 {
            var raw: [UInt8]
            if i % 2 == 0 {
                raw = (0..<rng.below(120)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if raw.count >= 4 && rng.chance(0.7) { raw[0] = 0x54; raw[1] = 0x4B; raw[2] = 1; raw[3] = UInt8(1 + rng.below(21)) }
            } else {
                let env = ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: .zero, to: nil, message: Self.randomMessage(&rng))
                raw = ClusterCodec.encode(env).allBytes
                if rng.chance(0.5) { raw = Array(raw.prefix(rng.below(raw.count + 1))) }
                for _ in 0..<(1 + rng.below(3)) where !raw.isEmpty { raw[rng.below(raw.count)] ^= UInt8(1 << rng.below(8)) }
            }
            if case .failure = ClusterCodec.decode(ByteBuffer(bytes: raw)) { failures += 1 }
        }
        #expect(failures > 50_000, "most garbage is rejected: \(failures)")
    }

    @Test func rejectsOtherVersionsAndHugeCounts() {
        let env = ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: .zero, to: nil, message: .catchUp(after: .zero, []))
        var raw = ClusterCodec.encode(env).allBytes
        raw[2] = 2
        #expect(ClusterCodec.decode(ByteBuffer(bytes: raw)) == .failure(ClusterDecodingError("unsupported cluster protocol version 2")))
        raw[2] = 1
        raw.replaceSubrange((raw.count - 4)..., with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(ClusterCodec.decode(ByteBuffer(bytes: raw)) == .failure(ClusterDecodingError("list of 4294967295 cannot fit")))
    }
}

@Suite("Replica")
struct ReplicaTests {
    func tx(_ txid: UInt64, epoch: Epoch, peer: UInt32) -> Transaction {
        Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [.announce(Announce(
            infoHash: hashA, peerID: peerID(peer), endpoint: PeerEndpoint(ip: .v4(peer), port: 1), uploaded: 0, downloaded: 0,
            left: 1, event: .started, at: Instant(milliseconds: Int64(txid))))])
    }

    @Test func historyAndPrefixes() {
        let e1 = Epoch(term: 1, master: NodeID(1)), e2 = Epoch(term: 2, master: NodeID(3))
        var r = Replica()
        for i in 1...3 { r.commit(tx(UInt64(i), epoch: e1, peer: UInt32(i))) }
        for i in 4...5 { r.commit(tx(UInt64(i), epoch: e2, peer: UInt32(i))) }
        #expect(r.history.epoch(of: 2) == e1 && r.history.epoch(of: 4) == e2 && r.history.epoch(of: 0) == .zero)
        #expect(r.isPrefix(TxRef(epoch: e1, txid: 3)))
        #expect(!r.isPrefix(TxRef(epoch: e2, txid: 3)), "same txid from another epoch diverged")
        #expect(!r.isPrefix(TxRef(epoch: e2, txid: 6)), "ahead of us is not a prefix")
        #expect(r.transactions(after: 3, limit: 256)?.map(\.txid) == [4, 5])
        #expect(r.transactions(after: 5, limit: 256)?.isEmpty == true)
    }

    @Test func snapshotInstallsAnEqualReplica() {
        var r = Replica()
        let e = Epoch(term: 1, master: NodeID(1))
        for i in 1...20 { r.commit(tx(UInt64(i), epoch: e, peer: UInt32(i % 7))) }
        let s = r.snapshot()
        #expect(s.isIntact)
        var copy = Replica()
        copy.install(s)
        #expect(copy == r && copy.digest == r.digest)
        var tampered = s
        tampered.content[0].peers[0].endpoint.port &+= 1
        #expect(!tampered.isIntact)
    }

    @Test func logIsBoundedAndFallsBackToSnapshots() {
        var r = Replica(logLimit: 8)
        let e = Epoch(term: 1, master: NodeID(1))
        for i in 1...30 { r.commit(tx(UInt64(i), epoch: e, peer: 1)) }
        #expect(r.transactions(after: 2, limit: 256) == nil, "too old: a snapshot is needed")
        #expect(r.transactions(after: 27, limit: 256)?.map(\.txid) == [28, 29, 30])
    }

    @Test func mergeKeepsTheLatestAndUnitesCompletions() {
        var a = SwarmStore(), b = SwarmStore()
        let key = PeerKey(peerID: peerID(1), ip: .v4(1))
        func announce(at: Int64, left: Int64, event: AnnounceEvent) -> SwarmUpdate {
            .announce(Announce(infoHash: hashA, peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: 1), uploaded: 0,
                               downloaded: 0, left: left, event: event, at: Instant(milliseconds: at)))
        }
        a.apply(announce(at: 10, left: 0, event: .completed))
        b.apply(announce(at: 20, left: 5, event: .started))
        var merged = b
        merged.apply(a.content().map { .merge($0) })
        #expect(merged[hashA]?.peer(key)?.lastAnnounce == Instant(milliseconds: 20), "the newer record wins")
        #expect(merged.scrape(hashA).completed == 1)
        merged.apply(a.content().map { .merge($0) })
        #expect(merged.scrape(hashA).completed == 1, "merging twice does not double count")
    }
}

/// The committed fuzzing seeds (Fuzz/corpus/cluster) stay valid messages (or, named
/// `fragment-*`, valid fragment headers) as the codec evolves, so the fuzzer starts from
/// inputs that reach the node and the reassembly.
@Suite("Fuzzing seed corpus") struct FuzzCorpusTests {
    @Test func clusterSeedsDecode() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/corpus/cluster").standardized
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(files.count >= 10)
        for name in files {
            let data = try Data(contentsOf: dir.appendingPathComponent(name))
            if name.hasPrefix("fragment-") {
                if Fragment(decoding: ByteBuffer(bytes: data)) == nil { Issue.record("seed \(name) is no fragment") }
                continue
            }
            let decoded = ClusterCodec.decode(ByteBuffer(bytes: data))
            if case .failure(let e) = decoded { Issue.record("seed \(name) does not decode: \(e)") }
        }
    }
}
