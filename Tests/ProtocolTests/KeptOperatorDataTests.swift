import NIOCore
import Testing
import TrackerLogic

/// The operator's data through a clean stop: stamps on every catalogue entry, the newest
/// change to each entry winning when kept data comes back in any order, tombstones, the
/// restore change on the wire, and a node that keeps its data and offers it back.
@Suite("Kept operator data") struct KeptOperatorDataTests {
    let e1 = Epoch(term: 1, master: NodeID(2)), e2 = Epoch(term: 2, master: NodeID(3))
    let h1 = InfoHash(hex: "0102030405060708090a0b0c0d0e0f1011121314")!
    let h2 = InfoHash(hex: "ffeeddccbbaa99887766554433221100ffeeddcc")!
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func ref(_ e: Epoch, _ txid: UInt64) -> TxRef { TxRef(epoch: e, txid: txid) }

    /// A replica that committed `changes`, one transaction each, in epoch `e`.
    func replica(_ changes: [CatalogueChange], in e: Epoch) -> Replica {
        var r = Replica()
        for (i, c) in changes.enumerated() { _ = r.commit(Transaction(ref: ref(e, UInt64(i + 1)), updates: [.catalogue(c)])) }
        return r
    }

    @Test func everyEntryIsStampedWithTheTransactionThatChangedIt() throws {
        let t = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: Instant(milliseconds: 5))
        let r = replica([.register(t), .setAccessRule(.allow, [h1, h2]), .setAccessMode(.allow), .removeAccessRules([h2]),
                         .unregister(t.infoHash)], in: e1)
        let stamps = r.store.catalogue.stamps
        #expect(stamps.torrents[t.infoHash] == CatalogueStamp(ref: ref(e1, 5), removed: true))
        #expect(stamps.rules[h1] == CatalogueStamp(ref: ref(e1, 2), removed: false))
        #expect(stamps.rules[h2] == CatalogueStamp(ref: ref(e1, 4), removed: true))
        #expect(stamps.mode == ref(e1, 3))
        #expect(r.store.catalogue.keptEntries == [.torrentRemoved(t.infoHash, ref(e1, 5)), .rule(h1, .allow, ref(e1, 2)),
                                                  .ruleRemoved(h2, ref(e1, 4)), .mode(.allow, ref(e1, 3))])
    }

    /// Two nodes stopped at different times: the one that stopped later holds the rule's
    /// removal and the torrent's registration; the other holds the older versions. In
    /// either order the newest of each entry wins, and a third offer changes nothing.
    @Test(arguments: [false, true])
    func theNewestChangeToEachEntryWinsInAnyOrder(laterFirst: Bool) throws {
        let t = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: Instant(milliseconds: 5))
        let earlier: [KeptEntry] = [.torrentRemoved(t.infoHash, ref(e1, 2)), .rule(h1, .allow, ref(e1, 3)), .mode(.deny, ref(e1, 4))]
        let later: [KeptEntry] = [.torrent(t, ref(e1, 6)), .ruleRemoved(h1, ref(e1, 7)), .rule(h2, .deny, ref(e1, 8))]
        var r = Replica()
        let offers = laterFirst ? [later, earlier, later] : [earlier, later, earlier]
        for (i, entries) in offers.enumerated() {
            _ = r.commit(Transaction(ref: ref(e2, UInt64(i + 1)), updates: [.catalogue(.restore(entries))]))
        }
        let c = r.store.catalogue
        #expect(c.torrents[t.infoHash] != nil && c.access.rules == [h2: .deny] && c.access.mode == .deny)
        #expect(c.stamps.rules[h1] == CatalogueStamp(ref: ref(e1, 7), removed: true), "a restored entry keeps its own stamp")
        #expect((earlier + later).allSatisfy(c.dominates))
        #expect(CatalogueChange.restore(later).refusal(in: c) != nil, "nothing left to restore")
        #expect(r.digest == Digest.recomputed(r.store))
        // A change made after the restart is newer than anything kept from before it.
        _ = r.commit(Transaction(ref: ref(e2, 4), updates: [.catalogue(.removeAccessRules([h2]))]))
        _ = r.commit(Transaction(ref: ref(e2, 5), updates: [.catalogue(.restore(later))]))
        #expect(r.store.catalogue.access.rules.isEmpty)
    }

    /// Tombstones are bounded: past `maxTombstones`, the oldest go, and the rows a store
    /// writes drop the same ones (a restart rebuilds the same stamps).
    @Test func tombstonesAreBoundedAlikeInMemoryAndOnDisk() {
        var r = Replica()
        var rows = RepositoryRows()
        let hashes = (0..<UInt32(CatalogueStamps.maxTombstones + 40)).map { InfoHash(a: 7, b: UInt64($0), c: $0) }
        var txid: UInt64 = 0
        for chunk in stride(from: 0, to: hashes.count, by: AccessPolicy.maxHashesPerChange) {
            let part = Array(hashes[chunk..<min(chunk + AccessPolicy.maxHashesPerChange, hashes.count)])
            for change in [CatalogueChange.setAccessRule(.deny, part), .removeAccessRules(part)] {
                txid += 1
                let tx = Transaction(ref: ref(e1, txid), updates: [.catalogue(change)])
                _ = r.commit(tx)
                rows.apply(CommitRows(tx, replica: r))
            }
        }
        let removed = r.store.catalogue.stamps.rules.filter(\.value.removed)
        #expect(removed.count <= CatalogueStamps.maxTombstones && removed.count >= CatalogueStamps.tombstonesAfterPruning)
        #expect(removed[hashes[0]] == nil && removed[hashes.last!] != nil, "the oldest went")
        #expect(rows.stamps == r.store.catalogue.stamps)
        #expect(rows.snapshot?.stamps == r.store.catalogue.stamps)
    }

    @Test func theRestoreChangeOnTheWire() throws {
        let header = "544b 01 15 00000002 0000000000000009 0000000200000003 00000001"
        let change = CatalogueChange.restore([.torrentRemoved(h1, ref(e1, 2)), .rule(h2, .deny, ref(e1, 3)), .ruleRemoved(h1, ref(e1, 4)),
                                              .mode(.allow, ref(e2, 5))])
        let hex = "08 00000004"
            + " 02 0102030405060708090a0b0c0d0e0f1011121314 0000000100000002 0000000000000002"
            + " 03 ffeeddccbbaa99887766554433221100ffeeddcc 02 0000000100000002 0000000000000003"
            + " 04 0102030405060708090a0b0c0d0e0f1011121314 0000000100000002 0000000000000004"
            + " 05 01 0000000200000003 0000000000000005"
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: e2, to: NodeID(1), message: .submit(change))
        let expected = bytes(header + " " + hex)
        #expect(ClusterCodec.encode(env).allBytes == expected)
        #expect(try ClusterCodec.decode(ByteBuffer(bytes: expected)).get() == env)
        for bad in ["08 00000000", "08 00000001 06 0000000100000002 0000000000000002",
                    "08 00000001 05 01 0000000000000000 0000000000000005"] {
            #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: bytes(header + " " + bad))).get() }
        }
        #expect(try ClusterCodec.decodeKeptEntry(ClusterCodec.encode(KeptEntry.rule(h2, .deny, ref(e1, 3)))).get() == .rule(h2, .deny, ref(e1, 3)))
    }

    /// A node keeps its catalogue through a clean stop; started again with it, alone, it
    /// recovers with the kept data first in its queue and commits it before anything else.
    @Test func aNodeKeepsItsDataThroughACleanStopAndRestoresItFirst() throws {
        let t0 = Instant(milliseconds: 9_000_000)
        var n = TrackerNode(id: NodeID(1), incarnation: 1000, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                            seed: 7, now: t0, restoring: DurableState(snapshot: replica([.setAccessRule(.allow, [h1]),
                                                                                          .setAccessMode(.allow)], in: e1).snapshot(),
                                                                      epoch: e1))
        let stop = n.stepEchoing(.shutdown, now: t0 + Milliseconds(10))
        let kept = try #require(stop.lazy.compactMap { if case .keepOperatorData(let k) = $0 { k } else { nil } }.first)
        #expect(kept == [.rule(h1, .allow, ref(e1, 1)), .mode(.allow, ref(e1, 2))])
        let keepAt = try #require(stop.firstIndex { if case .keepOperatorData = $0 { true } else { false } })
        let wipeAt = try #require(stop.firstIndex { if case .wipeStore = $0 { true } else { false } })
        #expect(keepAt < wipeAt, "kept before the wipe")

        var again = TrackerNode(id: NodeID(1), incarnation: 1001, config: ClusterConfig(),
                                handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                                seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: e1, kept: kept))
        var t = t0
        var actions: [NodeAction] = []
        for _ in 0..<200 where !again.replica.store.catalogue.access.rules.keys.contains(h1) {
            t = t + Milliseconds(50)
            let step = again.stepEchoing(.tick, now: t)
            actions += step
            for case .persistEpoch(let e) in step { actions += again.stepEchoing(.epochStored(e), now: t) }
        }
        #expect(again.epoch > e1, "a new epoch: anything it commits is newer than what it kept")
        #expect(again.replica.lastCommitted.txid == 1, "the kept data is its first transaction")
        #expect(again.replica.store.catalogue.access.mode == .allow)
        for _ in 0..<60 {
            t = t + Milliseconds(50)
            actions += again.stepEchoing(.tick, now: t)
        }
        #expect(actions.contains { if case .dropKeptOperatorData = $0 { true } else { false } }, "held again: the kept copy goes")
    }

    /// A registered torrent's completions outlive a clean stop: kept as a count, restored
    /// as a base under the emptied swarm (the highest count kept wins), added by a scrape,
    /// carried by snapshots and rows, and kept again at the next stop.
    @Test func completionCountsOfRegisteredTorrentsAreKept() throws {
        let t = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: Instant(milliseconds: 5))
        let h = t.infoHash
        var r = replica([.register(t)], in: e1)
        for i in UInt32(1)...3 {
            _ = r.commit(Transaction(ref: ref(e1, UInt64(i + 1)), updates: [.announce(Announce(
                infoHash: h, peerID: PeerID(a: 1, b: 2, c: i), endpoint: PeerEndpoint(ip: .v4(0x0A00_0000 | i), port: 6881),
                uploaded: 0, downloaded: 0, left: 0, event: .completed, at: Instant(milliseconds: 10)))]))
        }
        var n = TrackerNode(id: NodeID(1), incarnation: 1000, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                            seed: 7, now: Instant(milliseconds: 9_000_000), restoring: DurableState(snapshot: r.snapshot(), epoch: e1))
        let stop = n.stepEchoing(.shutdown, now: Instant(milliseconds: 9_000_010))
        let kept = try #require(stop.lazy.compactMap { if case .keepOperatorData(let k) = $0 { k } else { nil } }.first)
        #expect(kept.contains(.completed(h, 3)))

        var back = Replica()
        var rows = RepositoryRows()
        for (i, entries) in [kept, [KeptEntry.completed(h, 2)]].enumerated() {
            let tx = Transaction(ref: ref(e2, UInt64(i + 1)), updates: [.catalogue(.restore(entries))])
            _ = back.commit(tx)
            rows.apply(CommitRows(tx, replica: back))
        }
        #expect(back.store.scrape(h).completed == 3, "restored, and a lower count kept elsewhere changes nothing")
        #expect(back.digest == Digest.recomputed(back.store))
        #expect(rows.snapshot?.completedBase == [h: 3])
        let snapshot = back.snapshot()
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: e2, to: NodeID(1), message: .snapshot(snapshot))
        guard case .snapshot(let decoded) = try ClusterCodec.decode(ClusterCodec.encode(env)).get().message else {
            Issue.record("not a snapshot"); return
        }
        #expect(decoded == snapshot && decoded.isIntact)
        // A completion after the restart adds to the base, and the next stop keeps the sum.
        _ = back.commit(Transaction(ref: ref(e2, 3), updates: [.announce(Announce(
            infoHash: h, peerID: PeerID(a: 9, b: 9, c: 9), endpoint: PeerEndpoint(ip: .v4(0x0A00_0099), port: 6881),
            uploaded: 0, downloaded: 0, left: 0, event: .completed, at: Instant(milliseconds: 20)))]))
        #expect(back.store.scrape(h).completed == 4 && back.store.completedTotal(h) == 4)
    }
}
