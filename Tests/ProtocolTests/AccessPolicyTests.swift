import NIOCore
import Testing
import TrackerLogic

/// The access policy as cluster state: its changes on the wire (byte-exact), in the
/// digest replicas compare, in snapshots and in the rows a store keeps; and the list
/// files operators import.
@Suite("Access policy") struct AccessPolicyTests: MasterFixture {
    let t0 = Instant(milliseconds: 9_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)
    let epoch = Epoch(term: 3, master: NodeID(2))
    let h1 = InfoHash(hex: "0102030405060708090a0b0c0d0e0f1011121314")!
    let h2 = InfoHash(hex: "ffeeddccbbaa99887766554433221100ffeeddcc")!

    func submit(_ change: CatalogueChange) -> ClusterEnvelope {
        ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .submit(change))
    }

    @Test func changesOnTheWire() throws {
        let header = "544b 01 15 00000002 0000000000000009 0000000300000002 00000001"
        let vectors: [(CatalogueChange, String)] = [
            (.setAccessMode(.deny), "06 02"),
            (.setAccessMode(.open), "06 00"),
            (.setAccessMode(.private), "06 03"),
            (.setAccessRule(.allow, [h1, h2]), "07 01 00000002 0102030405060708090a0b0c0d0e0f1011121314 ffeeddccbbaa99887766554433221100ffeeddcc"),
            (.setAccessRule(.deny, [h2]), "07 02 00000001 ffeeddccbbaa99887766554433221100ffeeddcc"),
            (.removeAccessRules([h1]), "07 00 00000001 0102030405060708090a0b0c0d0e0f1011121314"),
        ]
        for (change, hex) in vectors {
            let expected = bytes(header + " " + hex)
            #expect(ClusterCodec.encode(submit(change)).allBytes == expected, "\(change)")
            #expect(try ClusterCodec.decode(ByteBuffer(bytes: expected)).get() == submit(change))
        }
        // A mode or rule no version defines, and lists no change may carry, are refused.
        for bad in ["06 04", "07 03 00000001 0102030405060708090a0b0c0d0e0f1011121314", "07 01 00000000"] {
            #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: bytes(header + " " + bad))).get() }
        }
    }

    /// The kept digest follows every change (as a pass over the store computes it), a
    /// snapshot carries the policy through the codec, and the rows a store writes rebuild it.
    @Test func digestSnapshotAndRowsCarryThePolicy() throws {
        var replica = Replica()
        var rows = RepositoryRows()
        let changes: [CatalogueChange] = [.setAccessRule(.allow, [h1, h2, h1]), .setAccessMode(.allow), .setAccessRule(.deny, [h2]),
                                          .setAccessMode(.deny), .removeAccessRules([h1]), .setAccessMode(.open), .setAccessMode(.deny)]
        var digests = Set<UInt64>()
        for (i, change) in changes.enumerated() {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: UInt64(i + 1)), updates: [.catalogue(change)])
            let applied = replica.commit(tx)
            #expect(applied)
            rows.apply(CommitRows(tx, replica: replica))
            #expect(replica.digest == Digest.recomputed(replica.store), "after \(change)")
            digests.insert(replica.digest)
        }
        #expect(digests.count == changes.count - 1, "each change but the last mode's return moves the digest")
        #expect(replica.store.catalogue.access == AccessPolicy(mode: .deny, rules: [AccessEntry(infoHash: h2, rule: .deny)]))

        let snapshot = replica.snapshot()
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .snapshot(snapshot))
        guard case .snapshot(let decoded) = try ClusterCodec.decode(ClusterCodec.encode(env)).get().message else {
            Issue.record("not a snapshot"); return
        }
        #expect(decoded == snapshot && decoded.isIntact)
        var copy = Replica()
        copy.install(decoded)
        #expect(copy == replica && copy.digest == replica.digest)

        let restored = try #require(rows.snapshot)
        #expect(restored == snapshot, "the rows a store keeps rebuild the same policy")
        var tampered = snapshot
        tampered.access = AccessPolicy(mode: .allow, rules: tampered.access.sortedRules)
        #expect(!tampered.isIntact, "the digest covers the mode")
    }

    @Test func listFiles() {
        let text = "# opentracker whitelist\r\n\(h1.hex)\n\n  \(h2.hex.uppercased())  # a comment\n\(h1.hex)\n"
        #expect(AccessListFile.parse(text) == .success([h1, h2]))
        #expect(AccessListFile.parse("") == .success([]))
        #expect(AccessListFile.parse("\(h1.hex)\nnot-a-hash\n") == .failure(AccessListFile.Problem(line: 2, text: "not-a-hash")))
        #expect(AccessListFile.parse(String(h1.hex.dropLast())) == .failure(AccessListFile.Problem(line: 1, text: String(h1.hex.dropLast()))))
    }

    /// A diverged slave's merge offer carries its access rules: the master commits those of
    /// hashes it holds no rule for and keeps its own (with the rules not carried, a rule a
    /// partitioned minority committed was lost: the simulator's checker found it in 2 of
    /// 20,000 seeds).
    @Test func aMergeBringsBackTheRulesTheMasterLacks() throws {
        var (n3, t) = masterWithTwoSlaves()
        let own = Transaction(ref: TxRef(epoch: n3.epoch, txid: 1), updates: [.catalogue(.setAccessRule(.deny, [h2]))])
        _ = n3.stepEchoing(.submit(.setAccessRule(.deny, [h2])), now: t)
        t = t + Milliseconds(10)
        var actions = n3.stepEchoing(.tick, now: t)
        let first = try #require(actions.lazy.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { tx } else { nil } }.first)
        #expect(first.updates == own.updates)
        _ = vote(1, first, .ok, &n3, at: t)
        #expect(n3.replica.store.catalogue.access.rules == [h2: .deny])

        let offer = MergeOffer(offerID: 5, part: 0, parts: 1, swarms: [],
                               access: [AccessEntry(infoHash: h1, rule: .allow), AccessEntry(infoHash: h2, rule: .allow)])
        actions = n3.stepEchoing(env(from: 1, epoch: n3.epoch, .mergeOffer(offer)), now: t)
        t = t + Milliseconds(10)
        actions += n3.stepEchoing(.tick, now: t)
        let merge = try #require(actions.lazy.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { tx } else { nil } }.first)
        #expect(merge.updates == [.catalogue(.setAccessRule(.allow, [h1]))], "only the hash the master holds no rule for")
        actions = vote(1, merge, .ok, &n3, at: t)
        #expect(n3.replica.store.catalogue.access.rules == [h1: .allow, h2: .deny])
        #expect(actions.contains { if case .send(let e) = $0, case .mergeDone(5) = e.message { true } else { false } })
    }
}
