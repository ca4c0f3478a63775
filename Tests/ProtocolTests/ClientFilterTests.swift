import NIOCore
import Testing
import TrackerLogic

/// The client filter: prefixes as operators write them, the longest-prefix rule, the
/// refusal a peer gets, and the filter as cluster state (its changes on the wire, byte
/// for byte; the digest; snapshots, older nodes' included; the rows a store keeps; kept
/// data; merges).
@Suite("Client filter") struct ClientFilterTests: MasterFixture {
    let t0 = Instant(milliseconds: 9_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)
    let epoch = Epoch(term: 3, master: NodeID(2))
    let ut = ClientPrefix("-UT")!, ut2210 = ClientPrefix("-UT2210")!, xl = ClientPrefix("-XL0012-")!

    /// A peer id starting with `text`, padded with bytes no prefix here names.
    func id(_ text: String) -> PeerID {
        PeerID(bytes: Array(text.utf8) + Array(repeating: 0xEE, count: 20 - text.utf8.count))!
    }

    @Test func prefixesAsOperatorsWriteThem() {
        #expect(ClientPrefix("-UT355-")?.bytes == Array("-UT355-".utf8))
        #expect(ClientPrefix("0x2d5554")?.bytes == [0x2D, 0x55, 0x54])
        #expect(ClientPrefix("0x2D5554") == ClientPrefix("-UT"), "hex digits of either case")
        #expect(ClientPrefix("S58B")?.bytes.count == 4, "Shadow-style")
        for bad in ["", "-UT 355-", "0x", "0x2d5", "0xzz", String(repeating: "A", count: 21), "0x" + String(repeating: "00", count: 21), "é"] {
            #expect(ClientPrefix(bad) == nil, "\(bad)")
        }
        #expect(ClientPrefix(bytes: Array(repeating: 0x41, count: 20)) != nil && ClientPrefix(bytes: []) == nil)
        // What `description` writes reads back, binary and `0x`-looking text included.
        for p in [ut, xl, ClientPrefix(bytes: [0x00, 0xFF])!, ClientPrefix(bytes: Array("0x41".utf8))!] {
            #expect(ClientPrefix(p.description) == p, "\(p)")
        }
        #expect(ClientPrefix(bytes: [0x00, 0xFF])?.description == "0x00ff")
    }

    @Test func theLongestMatchingPrefixDecides() {
        var c = Catalogue()
        let filter = { c.access.clients }
        #expect(filter().refusal(of: id("-UT355-")) == nil, "an empty list serves every client")

        c.apply(.setClientRule(.deny, [xl]))
        #expect(filter().refusal(of: id("-XL0012-")) == "client -XL0012- is denied by this tracker")
        #expect(filter().refusal(of: id("-XL0013-")) == nil && filter().refusal(of: id("-UT355-")) == nil, "a deny list serves the rest")

        c.apply(.setClientRule(.allow, [ut]))
        c.apply(.setClientRule(.deny, [ut2210]))
        #expect(filter().refusal(of: id("-UT355-")) == nil)
        #expect(filter().refusal(of: id("-UT2210-")) == "client -UT2210 is denied by this tracker", "a longer deny carves out a version")
        #expect(filter().refusal(of: id("-TR300-")) == "client -TR300-\u{EE} is not allowed by this tracker".replacingOccurrences(of: "\u{EE}", with: "?"),
                "an allow list refuses clients no rule names, named by their first eight bytes")
        #expect(filter().refusal(of: PeerID(a: 0, b: 0, c: 0)) == "client ???????? is not allowed by this tracker")

        c.apply(.removeClientRules([ut]))
        #expect(filter().refusal(of: id("-TR300-")) == nil, "with its last allow rule gone, it is a deny list again")
        #expect(filter().refusal(of: id("-UT2210-")) != nil)
        #expect(ClientFilter.isRefusal(ClientFilter.deniedMessage("x")) && ClientFilter.isRefusal(ClientFilter.notAllowedMessage("x")))
        #expect(!ClientFilter.isRefusal(AccessPolicy.deniedMessage))
    }

    /// A refused client gets a BEP 15 error naming it, at once; a scrape is not filtered;
    /// and a master counts such an announce answered at once (`HeldRequests`).
    @Test func aRefusedClientGetsAnErrorNamingIt() {
        var t = StandaloneTracker(handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 1)
        let now = Instant(milliseconds: 1_000_000)
        let cid = ids.issue(for: peer.ip, now: now)
        func announce(_ peerID: PeerID) -> ByteBuffer {
            BEP15Codec.encode(.announce(AnnounceRequest(connectionID: cid, transactionID: 7, infoHash: hashA, peerID: peerID, downloaded: 0,
                                                        left: 1, uploaded: 0, event: .started, ip: 0, key: 0, numWant: 10, port: 6881)))
        }
        #expect(t.apply(.setClientRule(.deny, [xl])) == nil)
        guard case .error(let e)? = t.receive(announce(id("-XL0012-")), from: peer, now: now) else {
            Issue.record("not refused"); return
        }
        #expect(e.message == "client -XL0012- is denied by this tracker" && e.transactionID == 7)
        guard case .announce? = t.receive(announce(id("-UT355-")), from: peer, now: now) else { Issue.record("not served"); return }
        let scrape = BEP15Codec.encode(.scrape(ScrapeRequest(connectionID: cid, transactionID: 8, infoHashes: [hashA])))
        guard case .scrape? = t.receive(scrape, from: peer, now: now) else { Issue.record("scrape filtered"); return }
        #expect(t.handler.answersAtOnce(announce(id("-XL0012-")), from: peer, now: now, store: t.store))
        #expect(!t.handler.answersAtOnce(announce(id("-UT355-")), from: peer, now: now, store: t.store))
    }

    @Test func changesAreBoundedAndRefusedWhenMoot() {
        let c = Catalogue()
        #expect(CatalogueChange.setClientRule(.allow, []).refusal(in: c) == "no client prefixes given")
        #expect(CatalogueChange.setClientRule(.allow, Array(repeating: ut, count: AccessPolicy.maxHashesPerChange + 1)).refusal(in: c)
                == "at most 1000 client prefixes per change")
        #expect(CatalogueChange.removeClientRules([ut]).refusal(in: c) == "none of these prefixes is in the client list")
        var full = Catalogue()
        let many = (0..<ClientFilter.maxRules).map { ClientPrefix("p\($0)")! }
        full.apply(.setClientRule(.deny, many))
        #expect(full.access.clients.rules.count == ClientFilter.maxRules)
        #expect(CatalogueChange.setClientRule(.deny, [ut]).refusal(in: full) == "the client list holds its maximum of 1000 prefixes")
        #expect(CatalogueChange.setClientRule(.allow, [many[0]]).refusal(in: full) == nil, "a prefix with a rule may change it")
    }

    @Test func changesOnTheWire() throws {
        let header = "544b 01 15 00000002 0000000000000009 0000000300000002 00000001"
        func submit(_ change: CatalogueChange) -> ClusterEnvelope {
            ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .submit(change))
        }
        let vectors: [(CatalogueChange, String)] = [
            (.setClientRule(.deny, [xl]), "0a 02 00000001 08 2d584c303031322d"),
            (.setClientRule(.allow, [ut, ClientPrefix(bytes: [0])!]), "0a 01 00000002 03 2d5554 01 00"),
            (.removeClientRules([ut]), "0a 00 00000001 03 2d5554"),
        ]
        for (change, hex) in vectors {
            let expected = bytes(header + " " + hex)
            #expect(ClusterCodec.encode(submit(change)).allBytes == expected, "\(change)")
            #expect(try ClusterCodec.decode(ByteBuffer(bytes: expected)).get() == submit(change))
        }
        // A rule no version defines, a prefix of no peer id's length, an empty list.
        for bad in ["0a 03 00000001 03 2d5554", "0a 01 00000001 00", "0a 01 00000001 15 " + String(repeating: "41", count: 21),
                    "0a 01 00000000", "0a 01 00000001 05 2d5554"] {
            #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: bytes(header + " " + bad))).get() }
        }
    }

    /// The digest follows every change, a snapshot carries the filter and its stamps, the
    /// rows a store writes rebuild it, and a snapshot without client rules is exactly the
    /// bytes an older node reads (the rules are a trailer, written only when there are some).
    @Test func digestSnapshotAndRowsCarryTheFilter() throws {
        var replica = Replica()
        var rows = RepositoryRows()
        let changes: [CatalogueChange] = [.setClientRule(.allow, [ut, xl]), .setClientRule(.deny, [xl]), .setClientRule(.deny, [ut2210]),
                                          .removeClientRules([ut])]
        var digests = Set<UInt64>()
        var withoutClients: Snapshot?
        for (i, change) in changes.enumerated() {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: UInt64(i + 1)), updates: [.catalogue(change)])
            if i == 0 { withoutClients = replica.snapshot() }
            let applied = replica.commit(tx)
            #expect(applied)
            rows.apply(CommitRows(tx, replica: replica))
            #expect(replica.digest == Digest.recomputed(replica.store), "after \(change)")
            digests.insert(replica.digest)
        }
        #expect(digests.count == changes.count, "each change moves the digest")
        #expect(replica.store.catalogue.access.clients.rules == [xl: .deny, ut2210: .deny])
        #expect(replica.store.catalogue.stamps.clients[ut] == CatalogueStamp(ref: TxRef(epoch: epoch, txid: 4), removed: true))

        let snapshot = replica.snapshot()
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .snapshot(snapshot))
        let decoded = try #require(try onTheWire(snapshot, epoch: epoch))
        #expect(decoded == snapshot && decoded.isIntact)
        #expect(try #require(rows.snapshot) == snapshot, "the rows a store keeps rebuild the same filter")
        var tampered = snapshot
        tampered.access = AccessPolicy(mode: .open, rules: [], clients: [ClientRuleEntry(prefix: xl, rule: .allow)])
        #expect(!tampered.isIntact, "the digest covers the client rules")

        // The same snapshot without its client rules: no trailer at all.
        var bare = snapshot
        bare.access = AccessPolicy()
        bare.stamps = CatalogueStamps()
        let bareBytes = ClusterCodec.encode(ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .snapshot(bare))).allBytes
        let fullBytes = ClusterCodec.encode(env).allBytes
        #expect(fullBytes.count > bareBytes.count && Array(fullBytes.prefix(bareBytes.count)) == bareBytes)
        let empty = try #require(withoutClients)
        guard case .snapshot(let old)? = try? ClusterCodec.decode(ClusterCodec.encode(
            ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .snapshot(empty)))).get().message else {
            Issue.record("an empty snapshot does not decode"); return
        }
        #expect(old == empty)
    }

    /// A snapshot whose trailer ends with short prefixes' stamps decodes: each entry is
    /// as short as a one-byte prefix's (19 bytes). The decoder wanted 23 a stamp, and
    /// refused a snapshot holding only a `-U` tombstone (the cluster fuzzer's crash at
    /// ef276c8: a snapshot that decoded only with 4 bytes of garbage after it).
    @Test func aSnapshotEndingWithShortPrefixesStampsDecodes() throws {
        var replica = Replica()
        let short = ClientPrefix(bytes: [0x41])!, two = ClientPrefix("-U")!
        for (i, change) in [CatalogueChange.setClientRule(.deny, [short, two]), .removeClientRules([short, two])].enumerated() {
            let applied = replica.commit(Transaction(ref: TxRef(epoch: epoch, txid: UInt64(i + 1)), updates: [.catalogue(change)]))
            #expect(applied)
        }
        let snapshot = replica.snapshot()
        #expect(snapshot.access.clients.rules.isEmpty && snapshot.stamps.clients.count == 2, "tombstones only")
        let decoded = try #require(try onTheWire(snapshot, epoch: epoch))
        #expect(decoded == snapshot)
    }

    /// Kept through a clean stop with their stamps, tombstones included; the newest
    /// version of each comes back whatever order the offers come in.
    @Test(arguments: [false, true])
    func keptThroughACleanStop(laterFirst: Bool) throws {
        func ref(_ txid: UInt64) -> TxRef { TxRef(epoch: epoch, txid: txid) }
        var r = Replica()
        _ = r.commit(Transaction(ref: ref(1), updates: [.catalogue(.setClientRule(.deny, [xl, ut]))]))
        _ = r.commit(Transaction(ref: ref(2), updates: [.catalogue(.removeClientRules([ut]))]))
        let kept = r.store.catalogue.keptEntries
        #expect(kept == [.clientRemoved(ut, ref(2)), .client(xl, .deny, ref(1))])
        for e in kept { #expect(ClusterCodec.decodeKeptEntry(ClusterCodec.encode(e)) == .success(e)) }

        let earlier: [KeptEntry] = [.client(ut, .allow, ref(1)), .client(xl, .deny, ref(1))]
        var back = Replica()
        let later = Epoch(term: 4, master: NodeID(1))
        let offers: [[KeptEntry]] = laterFirst ? [kept, earlier] : [earlier, kept]
        for (i, entries) in offers.enumerated() {
            _ = back.commit(Transaction(ref: TxRef(epoch: later, txid: UInt64(i + 1)), updates: [.catalogue(.restore(entries))]))
        }
        #expect(back.store.catalogue.access.clients.rules == [xl: .deny])
        #expect(back.store.catalogue.stamps.clients[ut] == CatalogueStamp(ref: ref(2), removed: true))
        #expect(back.digest == Digest.recomputed(back.store))
        // A standalone node's kept data rebuilds the filter.
        var standalone = Catalogue()
        for change in back.store.catalogue.rebuildingChanges { standalone.apply(change) }
        #expect(standalone.access.clients == back.store.catalogue.access.clients)
    }

    /// A diverged slave's merge offer carries its client rules: the master commits those
    /// of prefixes it holds no rule for and keeps its own.
    @Test func aMergeBringsBackTheClientRulesTheMasterLacks() throws {
        var (n3, t) = masterWithTwoSlaves()
        _ = n3.stepEchoing(.submit(.setClientRule(.deny, [xl])), now: t)
        t = t + Milliseconds(10)
        var actions = n3.stepEchoing(.tick, now: t)
        let first = try #require(actions.lazy.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { tx } else { nil } }.first)
        _ = vote(1, first, .ok, &n3, at: t)
        #expect(n3.replica.store.catalogue.access.clients.rules == [xl: .deny])

        let offer = MergeOffer(offerID: 5, part: 0, parts: 1, swarms: [],
                               clients: [ClientRuleEntry(prefix: xl, rule: .allow), ClientRuleEntry(prefix: ut, rule: .allow)])
        let decoded = try ClusterCodec.decodeMergeOffer(ClusterCodec.encode(offer)).get()
        #expect(decoded == offer, "a set-aside part keeps its client rules on disk and on the wire")
        actions = n3.stepEchoing(env(from: 1, epoch: n3.epoch, .mergeOffer(decoded)), now: t)
        t = t + Milliseconds(10)
        actions += n3.stepEchoing(.tick, now: t)
        let merge = try #require(actions.lazy.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { tx } else { nil } }.first)
        #expect(merge.updates == [.catalogue(.setClientRule(.allow, [ut]))], "only the prefix the master holds no rule for")
        actions = vote(1, merge, .ok, &n3, at: t)
        #expect(n3.replica.store.catalogue.access.clients.rules == [xl: .deny, ut: .allow])
        #expect(actions.contains { if case .send(let e) = $0, case .mergeDone(5) = e.message { true } else { false } })
    }
}
