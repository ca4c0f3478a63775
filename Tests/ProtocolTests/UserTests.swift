import NIOCore
import Testing
import TrackerLogic

/// Users and keys: names and keys from hostile text, the directory's rules, private mode
/// over both protocols (BEP 41 URL data for UDP, the path for HTTP), users as cluster state
/// (their changes on the wire, byte for byte; the digest; snapshots; rows; kept data;
/// merges), and a key disabled while its announce waited.
@Suite("Users and keys") struct UserTests: MasterFixture {
    let t0 = Instant(milliseconds: 9_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 5, k1: 6))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)
    let epoch = Epoch(term: 3, master: NodeID(2))
    let alice = UserName("alice")!, bob = UserName("bob")!
    let keyA = TrackerKey(String(repeating: "A", count: 31) + "a")!, keyB = TrackerKey(String(repeating: "b-_", count: 10) + "Zz")!

    @Test func namesAndKeysFromText() {
        for good in ["alice", "a", "0day", "a.b_c-d", String(repeating: "x", count: 32)] { #expect(UserName(good) != nil, "\(good)") }
        for bad in ["", "Alice", "-alice", ".a", "a b", "é", String(repeating: "x", count: 33), "a/b"] { #expect(UserName(bad) == nil, "\(bad)") }
        #expect(TrackerKey(String(repeating: "A", count: 32)) != nil)
        for bad in [String(repeating: "A", count: 31), String(repeating: "A", count: 33), String(repeating: "A", count: 31) + "/",
                    String(repeating: "A", count: 31) + "%", String(repeating: "A", count: 31) + "="] {
            #expect(TrackerKey(bad) == nil, "\(bad)")
        }
        var rng = SeededGenerator(seed: 42)
        let keys = (0..<100).map { _ in TrackerKey.random(using: &rng) }
        #expect(Set(keys).count == 100 && keys.allSatisfy { TrackerKey($0.description) == $0 }, "random keys are well formed")
        #expect(PasswordHash(encoded: [1, 15, 8, 1] + Array(repeating: 7, count: 48)) != nil)
        #expect(PasswordHash(encoded: [2, 15, 8, 1] + Array(repeating: 7, count: 48)) == nil, "an unknown format")
        #expect(PasswordHash(encoded: [1, 40, 8, 1] + Array(repeating: 7, count: 48)) == nil, "a cost no one may ask")
    }

    @Test func theDirectoryKeepsKeysUnique() {
        var c = Catalogue()
        #expect(CatalogueChange.addUser(User(name: alice, role: .peer, key: keyA)).refusal(in: c) == nil)
        c.apply(.addUser(User(name: alice, role: .peer, key: keyA)))
        #expect(CatalogueChange.addUser(User(name: alice, role: .admin)).refusal(in: c) == "user alice exists")
        #expect(CatalogueChange.addUser(User(name: bob, role: .peer, key: keyA)).refusal(in: c) == "another user holds that key")
        #expect(CatalogueChange.editUser(bob, .enabled(false)).refusal(in: c) == "no user bob")
        c.apply(.addUser(User(name: bob, role: .viewer, key: keyB)))
        #expect(CatalogueChange.editUser(bob, .key(keyA)).refusal(in: c) == "another user holds that key")
        #expect(CatalogueChange.editUser(alice, .key(keyA)).refusal(in: c) == nil, "a user may keep its own key")
        // Applied anyway (a store or a restore may bring it), the key stays with its holder.
        c.apply(.editUser(bob, .key(keyA)))
        #expect(c.access.users.user(holding: keyA)?.name == alice && c.access.users[bob]?.key == keyB)
        c.apply(.editUser(alice, .key(nil)))
        #expect(c.access.users.user(holding: keyA) == nil)
        c.apply(.removeUser(bob))
        #expect(c.access.users.user(holding: keyB) == nil && c.access.users.count == 1)
        #expect(CatalogueChange.removeUser(bob).refusal(in: c) == "no user bob")
    }

    /// BEP 41: URL data after an announce's 98 bytes, byte for byte; the key is the path's
    /// last segment; a list cut short still yields what came before.
    @Test func bep41URLDataCarriesTheKey() throws {
        let request = AnnounceRequest(connectionID: 1, transactionID: 2, infoHash: hashA, peerID: PeerID(a: 1, b: 2, c: 3), downloaded: 0,
                                      left: 1, uploaded: 0, event: .started, port: 6881, trackerKey: keyA)
        let encoded = BEP15Codec.encode(.announce(request))
        let tail = Array(encoded.readableBytesView.dropFirst(98))
        #expect(tail == bytes("02 2a") + Array("/announce/".utf8) + keyA.bytes + [0])
        #expect(try BEP15Codec.decodeRequest(encoded).get() == .announce(request))
        func keyOf(_ options: [UInt8]) throws -> TrackerKey? {
            var plain = request
            plain.trackerKey = nil
            var b = BEP15Codec.encode(.announce(plain))
            b.writeBytes(options)
            guard case .announce(let r) = try BEP15Codec.decodeRequest(b).get() else { return nil }
            return r.trackerKey
        }
        let k = keyA.bytes
        #expect(try keyOf([0x01, 0x02, 33, 0x2F] + k + [0x00]) == keyA, "a no-op first; the path /<key>")
        #expect(try keyOf([0x02, 10] + Array("/announce/".utf8) + [0x02, 32] + k) == keyA, "URL data in two options, unended")
        #expect(try keyOf([0x02, 42 + 5] + Array("/announce/".utf8) + k + Array("?a=b".utf8) + [0]) == keyA, "a query after the key")
        #expect(try keyOf([0x02, 9] + Array("/announce".utf8)) == nil, "libtorrent's /announce: no key")
        #expect(try keyOf([0x02, 60] + Array("/announce/".utf8) + k) == keyA, "an option cut short keeps what came")
        #expect(try keyOf([0x02, 42] + Array("/announce/".utf8) + k.dropLast()) == nil, "cut short: 31 bytes are no key")
        #expect(try keyOf([0x07, 3, 1, 2, 3, 0x02, 33, 0x2F] + k) == keyA, "an unknown option is skipped by its length")
        #expect(try keyOf([0x00, 0x02, 33, 0x2F] + k) == nil, "nothing after the end")
    }

    func udpAnnounce(_ cid: UInt64, _ tid: UInt32, key: TrackerKey?, event: AnnounceEvent = .started) -> ByteBuffer {
        BEP15Codec.encode(.announce(AnnounceRequest(connectionID: cid, transactionID: tid, infoHash: hashA, peerID: PeerID(a: 9, b: 9, c: tid),
                                                    downloaded: 0, left: 1, uploaded: 0, event: event, numWant: 10, port: 6881, trackerKey: key)))
    }

    func httpRequest(_ path: String, _ query: String) -> Result<HTTPTrackerRequest, HTTPTrackerRequest.Refusal> {
        guard case .head(let head, _) = HTTPRequestHead.parse(Array("GET \(path)?\(query) HTTP/1.1\r\nHost: t\r\n\r\n".utf8)) else {
            return .failure(.notFound)
        }
        return HTTPTrackerRequest.decode(head)
    }

    var hashQuery: String { hashA.bytes.map { String(format: "%%%02X", $0) }.joined() }
    var announceQuery: String { "info_hash=\(hashQuery)&peer_id=-XX0001-000000000001&port=6881&uploaded=0&downloaded=0&left=5" }

    @Test func theKeyIsTheSegmentAfterTheRoute() throws {
        guard case .success(.announce(let a)) = httpRequest("/announce/\(keyA)", announceQuery) else { Issue.record("not routed"); return }
        #expect(a.trackerKey == keyA && a.asBEP15(transactionID: 1).trackerKey == keyA)
        guard case .success(.announce(let bare)) = httpRequest("/announce", announceQuery) else { Issue.record("not routed"); return }
        #expect(bare.trackerKey == nil)
        guard case .success(.scrape(let hashes, let key)) = httpRequest("/scrape/\(keyB)", "info_hash=\(hashQuery)") else {
            Issue.record("not routed"); return
        }
        #expect(hashes == [hashA] && key == keyB)
        guard case .failure(.query(let e)) = httpRequest("/announce/short", announceQuery) else { Issue.record("a bad key routed"); return }
        #expect(e.description.contains("is not a tracker key"))
        for path in ["/announce/\(keyA)/x", "/announcer", "/announce//", "/scrape/a/b"] {
            #expect(httpRequest(path, announceQuery) == .failure(.notFound), "\(path)")
        }
    }

    /// Private mode, standalone: no key, an unknown key and a disabled user's key are
    /// refused over both protocols with a clear message; an enabled user's key is served;
    /// a UDP scrape, which can carry no key, is refused; an HTTP scrape with a key is served.
    @Test func privateModeOverBothProtocols() throws {
        var t = StandaloneTracker(handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 1)
        let now = Instant(milliseconds: 1_000_000)
        let cid = ids.issue(for: peer.ip, now: now)
        #expect(t.apply(.addUser(User(name: alice, role: .peer, key: keyA))) == nil)
        #expect(t.apply(.setAccessRule(.allow, [hashA])) == nil)
        guard case .announce? = t.receive(udpAnnounce(cid, 1, key: nil), from: peer, now: now) else { Issue.record("open mode asks no key"); return }
        #expect(t.apply(.setAccessMode(.private)) == nil)

        func udpError(_ tid: UInt32, _ key: TrackerKey?) -> String? {
            if case .error(let e)? = t.receive(udpAnnounce(cid, tid, key: key), from: peer, now: now) { e.message } else { nil }
        }
        func httpAnswer(_ path: String, _ query: String) throws -> TrackerResponse {
            t.receive(http: try httpRequest(path, query).get(), from: peer, exchange: HTTPExchangeID(1), now: now)
        }
        #expect(udpError(2, nil) == UserDirectory.keyMissingMessage)
        #expect(udpError(3, keyB) == UserDirectory.keyUnknownMessage)
        #expect(udpError(4, keyA) == nil)
        guard case .error(let e) = try httpAnswer("/announce", announceQuery) else { Issue.record("served without a key"); return }
        #expect(e.message == UserDirectory.keyMissingMessage)
        guard case .announce(let served) = try httpAnswer("/announce/\(keyA)", announceQuery) else { Issue.record("refused"); return }
        #expect(served.leechers == 3, "the open-mode peer, the UDP one with the key, and this one")
        #expect(t.store.catalogue.access.users[alice]?.totals.announces == 2, "a standalone tracker counts its users' announces too")

        guard case .error(let s)? = t.receive(BEP15Codec.encode(.scrape(ScrapeRequest(connectionID: cid, transactionID: 9, infoHashes: [hashA]))),
                                              from: peer, now: now) else { Issue.record("a UDP scrape served"); return }
        #expect(s.message == PeerRequestHandler.privateScrapeMessage)
        guard case .scrape = try httpAnswer("/scrape/\(keyA)", "info_hash=\(hashQuery)") else { Issue.record("an HTTP scrape with a key refused"); return }
        guard case .error = try httpAnswer("/scrape", "info_hash=\(hashQuery)") else { Issue.record("an HTTP scrape without a key served"); return }

        #expect(t.apply(.editUser(alice, .enabled(false))) == nil)
        #expect(udpError(5, keyA) == UserDirectory.userDisabledMessage)
        guard case .error(let d) = try httpAnswer("/announce/\(keyA)", announceQuery) else { Issue.record("a disabled user served"); return }
        #expect(d.message == UserDirectory.userDisabledMessage)
        #expect(t.handler.answersAtOnce(udpAnnounce(cid, 6, key: keyA), from: peer, now: now, store: t.store), "a refusal is answered at once")
    }

    @Test func userChangesOnTheWire() throws {
        let header = "544b 01 15 00000002 0000000000000009 0000000300000002 00000001"
        func submit(_ change: CatalogueChange) -> ClusterEnvelope {
            ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: NodeID(1), message: .submit(change))
        }
        let hash = PasswordHash(encoded: [1, 15, 8, 1] + Array(repeating: 0xAB, count: 48))!
        let keyHex = keyA.bytes.map { String(format: "%02x", $0) }.joined()
        let hashHex = hash.encoded.map { String(format: "%02x", $0) }.joined()
        let vectors: [(CatalogueChange, String)] = [
            (.addUser(User(name: alice, role: .peer, key: keyA)), "0c 01 05 616c696365 03 03 " + keyHex),
            (.addUser(User(name: bob, role: .admin, enabled: false, password: hash)), "0c 01 03 626f62 01 04 " + hashHex),
            (.editUser(alice, .role(.viewer)), "0c 02 05 616c696365 01 02"),
            (.editUser(alice, .key(keyA)), "0c 02 05 616c696365 02 01 " + keyHex),
            (.editUser(alice, .key(nil)), "0c 02 05 616c696365 02 00"),
            (.editUser(alice, .enabled(false)), "0c 02 05 616c696365 03 00"),
            (.editUser(bob, .password(nil)), "0c 02 03 626f62 04 00"),
            (.removeUser(bob), "0c 03 03 626f62"),
        ]
        for (change, hex) in vectors {
            let expected = bytes(header + " " + hex)
            #expect(ClusterCodec.encode(submit(change)).allBytes == expected, "\(change)")
            #expect(try ClusterCodec.decode(ByteBuffer(bytes: expected)).get() == submit(change))
        }
        // An upper-case name, a name of 0 or 33 bytes, a role or flag no version defines,
        // a key with a '/', a password of another format, an unknown edit or change.
        for bad in ["0c 01 05 416c696365 03 01", "0c 01 00 03 01", "0c 01 21 " + String(repeating: "61", count: 33) + " 03 01",
                    "0c 01 05 616c696365 04 01", "0c 01 05 616c696365 03 09", "0c 02 05 616c696365 02 01 2f" + keyHex.dropFirst(2),
                    "0c 02 05 616c696365 04 01 02" + hashHex.dropFirst(2), "0c 02 05 616c696365 05 00", "0c 04 05 616c696365",
                    "0c 01 05 616c696365 03 03 " + keyHex.dropLast(2)] {
            #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: bytes(header + " " + bad))).get() }
        }
    }

    /// A keyed announce is kind 11 (a compact announce and the key); one without a key is
    /// still kind 9, byte for byte what an older node reads.
    @Test func aKeyedAnnounceIsKindEleven() throws {
        let a = Announce(infoHash: hashA, peerID: PeerID(a: 1, b: 2, c: 3), endpoint: peer, uploaded: 1, downloaded: 2, left: 3, event: .started,
                         at: t0)
        var keyed = a
        keyed.trackerKey = keyA
        var plain = ByteBuffer(), withKey = ByteBuffer()
        ClusterCodec.write(.announce(a), &plain)
        ClusterCodec.write(.announce(keyed), &withKey)
        #expect(plain.getInteger(at: 0, as: UInt8.self) == 9 && withKey.getInteger(at: 0, as: UInt8.self) == 11)
        #expect(Array(withKey.readableBytesView.dropFirst()) == Array(plain.readableBytesView.dropFirst()) + keyA.bytes)
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [.announce(keyed), .announce(a)])
        let env = ClusterEnvelope(from: NodeID(2), incarnation: 9, epoch: epoch, to: nil,
                                  message: .prepare(tx, previous: .zero, previousDigest: 0))
        #expect(try ClusterCodec.decode(ClusterCodec.encode(env)).get() == env)
        var d1 = Digest(), d2 = Digest()
        d1.add(SwarmUpdate.announce(a)); d2.add(SwarmUpdate.announce(keyed))
        #expect(d1.value != d2.value, "the transaction's digest covers the key")
    }

    /// The digest follows every user change, a snapshot carries the users and their stamps
    /// (after the client rules' trailer, empty or not), and the rows a store writes rebuild
    /// them.
    @Test func digestSnapshotAndRowsCarryTheUsers() throws {
        var r = RecordedReplica(epoch: epoch)
        let changes: [CatalogueChange] = [.addUser(User(name: alice, role: .peer, key: keyA)), .addUser(User(name: bob, role: .viewer)),
                                          .editUser(alice, .enabled(false)), .editUser(bob, .key(keyB)), .removeUser(bob),
                                          .setAccessMode(.private)]
        var digests = Set<UInt64>()
        for change in changes {
            let applied = r.commit([.catalogue(change)])
            #expect(applied && r.replica.digest == Digest.recomputed(r.replica.store), "after \(change)")
            digests.insert(r.replica.digest)
        }
        let (replica, rows) = (r.replica, r.rows)
        #expect(digests.count == changes.count, "each change moves the digest")
        #expect(replica.store.catalogue.access.users.sorted == [User(name: alice, role: .peer, key: keyA, enabled: false)])
        #expect(replica.store.catalogue.stamps.users[bob] == CatalogueStamp(ref: TxRef(epoch: epoch, txid: 5), removed: true))

        let snapshot = replica.snapshot()
        let decoded = try #require(try onTheWire(snapshot, epoch: epoch))
        #expect(decoded == snapshot && decoded.isIntact)
        #expect(try #require(rows.snapshot) == snapshot, "the rows a store keeps rebuild the same users")
        var tampered = snapshot
        tampered.access = AccessPolicy(mode: .private, rules: [], users: [User(name: alice, role: .peer, key: keyA, enabled: true)])
        #expect(!tampered.isIntact, "the digest covers the users")
    }

    /// Kept through a clean stop with their stamps, tombstones included; the newest
    /// version of each comes back whatever order the offers come in.
    @Test(arguments: [false, true])
    func keptThroughACleanStop(laterFirst: Bool) throws {
        func ref(_ txid: UInt64) -> TxRef { TxRef(epoch: epoch, txid: txid) }
        var r = Replica()
        _ = r.commit(Transaction(ref: ref(1), updates: [.catalogue(.addUser(User(name: alice, role: .peer, key: keyA))),
                                                        .catalogue(.addUser(User(name: bob, role: .peer)))]))
        _ = r.commit(Transaction(ref: ref(2), updates: [.catalogue(.removeUser(bob)), .catalogue(.editUser(alice, .enabled(false)))]))
        let kept = r.store.catalogue.keptEntries
        let disabled = User(name: alice, role: .peer, key: keyA, enabled: false)
        #expect(kept == [.user(disabled, ref(2)), .userRemoved(bob, ref(2))])
        for e in kept { #expect(ClusterCodec.decodeKeptEntry(ClusterCodec.encode(e)) == .success(e)) }

        let earlier: [KeptEntry] = [.user(User(name: alice, role: .peer, key: keyA), ref(1)), .user(User(name: bob, role: .peer), ref(1))]
        var back = Replica()
        let later = Epoch(term: 4, master: NodeID(1))
        let offers: [[KeptEntry]] = laterFirst ? [kept, earlier] : [earlier, kept]
        for (i, entries) in offers.enumerated() {
            _ = back.commit(Transaction(ref: TxRef(epoch: later, txid: UInt64(i + 1)), updates: [.catalogue(.restore(entries))]))
        }
        #expect(back.store.catalogue.access.users.sorted == [disabled])
        #expect(back.digest == Digest.recomputed(back.store))
        var standalone = Catalogue()
        for change in back.store.catalogue.rebuildingChanges { standalone.apply(change) }
        #expect(standalone.access.users == back.store.catalogue.access.users)
    }

    /// A diverged slave's merge offer carries its users: the master adds those it lacks.
    @Test func aMergeBringsBackTheUsersTheMasterLacks() throws {
        var (n3, t) = masterWithTwoSlaves()
        _ = n3.stepEchoing(.submit(.addUser(User(name: alice, role: .peer, key: keyA))), now: t)
        t = t + Milliseconds(10)
        var actions = n3.stepEchoing(.tick, now: t)
        let first = try #require(prepared(actions))
        _ = vote(1, first, .ok, &n3, at: t)
        let offer = MergeOffer(offerID: 5, part: 0, parts: 1, swarms: [],
                               users: [User(name: alice, role: .admin), User(name: bob, role: .peer, key: keyB)])
        let decoded = try ClusterCodec.decodeMergeOffer(ClusterCodec.encode(offer)).get()
        #expect(decoded == offer, "a set-aside part keeps its users on disk and on the wire")
        actions = n3.stepEchoing(env(from: 1, epoch: n3.epoch, .mergeOffer(decoded)), now: t)
        t = t + Milliseconds(10)
        actions += n3.stepEchoing(.tick, now: t)
        let merge = try #require(prepared(actions))
        #expect(merge.updates == [.catalogue(.addUser(User(name: bob, role: .peer, key: keyB)))], "only the user the master lacks")
    }

    /// Has the master `n` commit `change` in a transaction of its own, its slave n1 voting OK.
    func commit(_ change: CatalogueChange, alone n: inout TrackerNode, at t: inout Instant) throws {
        _ = n.stepEchoing(.submit(change), now: t)
        t = t + Milliseconds(10)
        let tx = try #require(prepared(n.stepEchoing(.tick, now: t)))
        _ = vote(1, tx, .ok, &n, at: t)
    }

    func prepared(_ actions: [NodeAction]) -> Transaction? {
        actions.lazy.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { tx } else { nil } }.first
    }

    /// The rows a store writes for a transaction whose announces applied nothing (their
    /// key refused) are what memory holds: no record, no completion. A commit's rows take
    /// an announce of a transaction of announces alone for its record, unless the store
    /// counted it superseded (the simulator's seed 1061: a disk holding a peer and a
    /// completion no replica held).
    @Test func rowsOfARefusedAnnounceAreWhatMemoryHolds() throws {
        var r = RecordedReplica(epoch: epoch)
        func commit(_ updates: [SwarmUpdate]) {
            let applied = r.commit(updates)
            #expect(applied)
        }
        func completed(_ n: UInt32, _ key: TrackerKey) -> SwarmUpdate {
            .announce(Announce(infoHash: hashA, peerID: PeerID(a: 7, b: 7, c: n), endpoint: peer, uploaded: 0, downloaded: 9, left: 0,
                               event: .completed, at: t0, trackerKey: key))
        }
        commit([.catalogue(.addUser(User(name: alice, role: .peer, key: keyA))), .catalogue(.setAccessMode(.private)),
                .catalogue(.setAccessRule(.allow, [hashA]))])
        commit([completed(1, keyA)])
        commit([completed(2, keyB)])
        commit([.catalogue(.editUser(alice, .enabled(false)))])
        commit([completed(3, keyA)])
        #expect(r.replica.store.peerCount == 1 && r.replica.store.completed(in: hashA) == 1)
        #expect(try #require(r.rows.snapshot) == r.replica.snapshot(), "the rows hold what memory holds")
    }

    /// Per-user totals: derived from each committed keyed announce as every replica
    /// applies it, against the peer's record before it; in the digest, snapshots, rows and
    /// kept data; hostile counters add nothing and totals saturate.
    @Test func totalsFollowTheCommittedAnnounces() throws {
        var r = RecordedReplica(epoch: epoch)
        func commit(_ updates: [SwarmUpdate]) {
            let applied = r.commit(updates)
            #expect(applied && r.replica.digest == Digest.recomputed(r.replica.store))
        }
        func announce(_ n: UInt32, _ event: AnnounceEvent, up: Int64, down: Int64, at ms: Int64, key: TrackerKey? = nil) -> SwarmUpdate {
            .announce(Announce(infoHash: hashA, peerID: PeerID(a: 8, b: 8, c: n), endpoint: peer, uploaded: up, downloaded: down,
                               left: event == .completed ? 0 : 10, event: event, at: t0 + Milliseconds(ms), trackerKey: key ?? keyA))
        }
        commit([.catalogue(.addUser(User(name: alice, role: .peer, key: keyA))), .catalogue(.setAccessMode(.private)),
                .catalogue(.setAccessRule(.allow, [hashA]))])
        commit([announce(1, .started, up: 0, down: 0, at: 1), announce(2, .started, up: 40, down: 5, at: 1)])
        commit([announce(1, .none, up: 100, down: 50, at: 2)])
        commit([announce(1, .completed, up: 90, down: 70, at: 3), announce(2, .none, up: -7, down: -1, at: 2)])
        // An older request of peer 1, superseded by the record it holds: counts nothing.
        commit([announce(1, .none, up: 1_000, down: 1_000, at: 0)])
        // Another key's announce is not alice's.
        commit([.catalogue(.addUser(User(name: bob, role: .peer, key: keyB))), announce(3, .started, up: 5, down: 5, at: 1, key: keyB)])
        let replica = r.replica
        let totals = try #require(replica.store.catalogue.access.users[alice]?.totals)
        #expect(totals == UserTotals(announces: 5, completed: 1, uploaded: 140, downloaded: 75),
                "two peers' five announces; 40 + 100 (nothing for 90 < 100, or a negative counter); 5 + 50 + 20")
        #expect(replica.store.catalogue.access.users[bob]?.totals == UserTotals(announces: 1, completed: 0, uploaded: 5, downloaded: 5))
        #expect(try #require(r.rows.snapshot) == replica.snapshot(), "the rows hold the totals")
        let snapshot = replica.snapshot()
        let decoded = try #require(try onTheWire(snapshot, epoch: epoch))
        #expect(decoded == snapshot && decoded.isIntact)
        var tampered = snapshot
        var users = snapshot.access.users.sorted
        users[0].totals.uploaded += 1
        tampered.access = AccessPolicy(mode: .private, rules: snapshot.access.sortedRules, users: users)
        #expect(!tampered.isIntact, "the digest covers the totals")

        // Kept through a clean stop: the same version of the user keeps the higher totals.
        let kept = replica.store.catalogue.keptEntries
        for e in kept { #expect(ClusterCodec.decodeKeptEntry(ClusterCodec.encode(e)) == .success(e)) }
        var back = Replica()
        let later = Epoch(term: 4, master: NodeID(1))
        var lower = kept
        for (i, e) in lower.enumerated() { if case .user(var u, let ref) = e { u.totals = UserTotals(announces: 1); lower[i] = .user(u, ref) } }
        _ = back.commit(Transaction(ref: TxRef(epoch: later, txid: 1), updates: [.catalogue(.restore(lower))]))
        let aliceKept = try #require(kept.first { if case .user(let u, _) = $0 { u.name == alice } else { false } })
        #expect(!back.store.catalogue.dominates(aliceKept), "a higher total of the same version is news")
        _ = back.commit(Transaction(ref: TxRef(epoch: later, txid: 2), updates: [.catalogue(.restore(kept))]))
        #expect(back.store.catalogue.access.users[alice]?.totals == totals)
        #expect(back.digest == Digest.recomputed(back.store))

        var saturated = UserTotals(uploaded: .max - 1)
        saturated.add(Announce(infoHash: hashA, peerID: PeerID(a: 1, b: 1, c: 1), endpoint: peer, uploaded: .max, downloaded: .min, left: 0,
                               event: .none, at: t0), previous: nil)
        #expect(saturated.uploaded == .max && saturated.downloaded == 0 && saturated.announces == 1)
    }

    /// The rule: a user disabled by a commit is refused from then on, on every replica,
    /// even for an announce decided before that commit and carried by a later one. Its
    /// apply is a no-op (`SwarmStore.apply`) and its answer a refusal (`Master`).
    @Test func anAnnounceWaitingWhileItsUserIsDisabledIsRefusedAndAppliesNothing() throws {
        var (n, t) = masterWithTwoSlaves()
        func commitAlone(_ change: CatalogueChange) throws { try commit(change, alone: &n, at: &t) }
        try commitAlone(.addUser(User(name: alice, role: .peer, key: keyA)))
        try commitAlone(.setAccessMode(.private))
        try commitAlone(.setAccessRule(.allow, [hashA]))
        #expect(n.replica.store.catalogue.access.mode == .private)

        // The disabling change goes out first; the announce, decided while alice is still
        // enabled, waits for the next transaction.
        _ = n.stepEchoing(.submit(.editUser(alice, .enabled(false))), now: t)
        t = t + Milliseconds(10)
        let disabling = try #require(prepared(n.stepEchoing(.tick, now: t)))
        #expect(disabling.updates == [.catalogue(.editUser(alice, .enabled(false)))])
        let request = try httpRequest("/announce/\(keyA)", announceQuery).get()
        let read = n.stepEchoing(.http(request, from: peer, exchange: HTTPExchangeID(8)), now: t)
        #expect(!read.contains { if case .answerHTTP = $0 { true } else { false } }, "decided against the catalogue before the disabling commit")
        var actions = vote(1, disabling, .ok, &n, at: t)
        t = t + Milliseconds(10)
        actions += n.stepEchoing(.tick, now: t)
        let carrying = try #require(prepared(actions))
        guard case .announce(let a)? = carrying.updates.first else { Issue.record("\(carrying.updates)"); return }
        #expect(a.trackerKey == keyA, "the announce carries its key to every replica")
        let answered = vote(1, carrying, .ok, &n, at: t)
        #expect(answered.contains {
            if case .answerHTTP(.error(let e), HTTPExchangeID(8)) = $0 { e.message == UserDirectory.userDisabledMessage } else { false }
        })
        #expect(n.replica.store.peerCount == 0, "a disabled user's announce applies nothing")
        // A replica applying the same transactions holds the same.
        var other = Replica()
        for tx in n.replica.retained { _ = other.commit(tx) }
        #expect(other.store.peerCount == 0)
    }

    /// The rule: an announce is judged against the policy where it stands in its
    /// transaction, once, by the store's apply; the master answers what that apply did. A
    /// transaction may carry an announce decided in `allow` mode and, after it, an
    /// operator's change: the master answered by the policy after the whole transaction,
    /// acknowledging an announce no replica held (the simulator's seed 17441556600011794),
    /// or refusing one every replica held.
    @Test(arguments: [AccessMode.allow, .private])
    func theAnswerIsWhatTheApplyDidWhereTheAnnounceStands(modeAfter: AccessMode) throws {
        var (n, t) = masterWithTwoSlaves()
        func commitAlone(_ change: CatalogueChange) throws { try commit(change, alone: &n, at: &t) }
        try commitAlone(.setAccessRule(.allow, [hashA]))
        try commitAlone(.setAccessMode(.allow))
        // Allow → private → allow: the announce's apply is refused and the master refuses
        // it. Allow → allow → private: it applies, and the master acknowledges it.
        let modeBefore: AccessMode = modeAfter == .allow ? .private : .allow
        _ = n.stepEchoing(.submit(.setAccessMode(modeBefore)), now: t)
        t = t + Milliseconds(10)
        let first = try #require(prepared(n.stepEchoing(.tick, now: t)))
        // Decided in `allow` mode while the first change is in flight: it carries no key.
        let request = try httpRequest("/announce", announceQuery).get()
        _ = n.stepEchoing(.http(request, from: peer, exchange: HTTPExchangeID(9)), now: t)
        _ = n.stepEchoing(.submit(.setAccessMode(modeAfter)), now: t)
        var actions = vote(1, first, .ok, &n, at: t)
        t = t + Milliseconds(10)
        actions += n.stepEchoing(.tick, now: t)
        let carrying = try #require(prepared(actions))
        guard case .announce(let a)? = carrying.updates.first else { Issue.record("\(carrying.updates)"); return }
        #expect(a.trackerKey == nil)
        #expect(carrying.updates.dropFirst() == [.catalogue(.setAccessMode(modeAfter))], "the change after the announce")
        let answered = vote(1, carrying, .ok, &n, at: t)
        #expect(n.replica.store.catalogue.access.mode == modeAfter)
        let refusal = answered.lazy.compactMap { action -> String? in
            if case .answerHTTP(.error(let e), HTTPExchangeID(9)) = action { e.message } else { nil }
        }.first
        let acknowledged = answered.contains { if case .answerHTTP(.announce, HTTPExchangeID(9)) = $0 { true } else { false } }
        if modeBefore == .private {
            #expect(n.replica.store.peerCount == 0, "no key while private: applies nothing")
            #expect(refusal == UserDirectory.keyMissingMessage && !acknowledged)
        } else {
            #expect(n.replica.store.peerCount == 1, "applied before the mode became private")
            #expect(acknowledged && refusal == nil)
        }
    }
}
