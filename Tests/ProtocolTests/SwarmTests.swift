import NIOCore
import Testing
import TrackerLogic

@Suite("Swarm semantics")
struct SwarmTests {
    func announce(_ peer: UInt32, ip: String = "10.0.0.1", port: UInt16 = 6881, left: Int64 = 100,
                  event: AnnounceEvent = .started, at seconds: Int64 = 0, hash: InfoHash = hashA) -> SwarmUpdate {
        .announce(Announce(infoHash: hash, peerID: peerID(peer), endpoint: PeerEndpoint(ip: IPAddress(ip)!, port: port),
                           uploaded: 0, downloaded: 0, left: left, event: event, at: Instant(milliseconds: seconds * 1000)))
    }

    /// A merge of what the repository already holds changes nothing, and the master
    /// commits no such swarm (`SwarmStore.changes(by:)`): exactly the merges whose
    /// commit would leave the digest as it is.
    @Test func aMergeChangesTheRepositoryExactlyWhenItBringsSomethingNew() throws {
        var store = SwarmStore()
        store.apply([announce(1, at: 10), announce(2, left: 0, event: .completed, at: 10), announce(3, at: 5),
                     announce(3, event: .stopped, at: 12)])
        let held = try #require(store.content(of: hashA))
        func record(_ peer: UInt32, at seconds: Int64, left: Int64 = 100) -> PeerRecord {
            PeerRecord(peerID: peerID(peer), endpoint: PeerEndpoint(ip: IPAddress("10.0.0.1")!, port: 6881), uploaded: 0,
                       downloaded: 0, left: left, lastAnnounce: Instant(milliseconds: seconds * 1000))
        }
        let key3 = PeerKey(peerID: peerID(3), ip: IPAddress("10.0.0.1")!)
        let cases: [(SwarmMerge, Bool)] = [
            (held, false),
            (SwarmMerge(infoHash: hashA, peers: [record(1, at: 5)], completed: []), false),
            (SwarmMerge(infoHash: hashA, peers: [record(1, at: 20)], completed: []), true),
            (SwarmMerge(infoHash: hashA, peers: [record(4, at: 1)], completed: []), true),
            (SwarmMerge(infoHash: hashA, peers: [record(3, at: 11)], completed: []), false),
            (SwarmMerge(infoHash: hashA, peers: [], completed: [key3]), true),
            (SwarmMerge(infoHash: hashA, peers: [], completed: [], stops: [PeerStop(key: key3, at: Instant(milliseconds: 12_000))]), false),
            (SwarmMerge(infoHash: hashA, peers: [], completed: [], stops: [PeerStop(key: key3, at: Instant(milliseconds: 13_000))]), true),
            (SwarmMerge(infoHash: hashB, peers: [record(1, at: 1)], completed: []), true),
        ]
        for (i, (m, expected)) in cases.enumerated() {
            var merged = store
            merged.apply(.merge(m))
            #expect(store.changes(by: m) == expected, "case \(i)")
            #expect((Digest.of(merged) != Digest.of(store)) == expected, "case \(i): the digest agrees")
        }
    }

    @Test func countsSeedersAndLeechers() throws {
        var store = SwarmStore()
        store.apply([announce(1, left: 0), announce(2), announce(3, ip: "10.0.0.2")])
        #expect(store.scrape(hashA) == ScrapeEntry(seeders: 1, completed: 0, leechers: 2))
        // A leecher that finishes becomes a seeder; counts move, not grow.
        store.apply(announce(2, left: 0, event: .completed))
        #expect(store.scrape(hashA) == ScrapeEntry(seeders: 2, completed: 1, leechers: 1))
        #expect(store.scrape(hashB) == ScrapeEntry(seeders: 0, completed: 0, leechers: 0))
    }

    @Test func completedCountsOncePerPeer() throws {
        var store = SwarmStore()
        store.apply([announce(1, left: 0, event: .completed), announce(1, left: 0, event: .completed), announce(1, left: 0, event: .none)])
        #expect(store.scrape(hashA).completed == 1)
        store.apply(announce(2, left: 0, event: .completed))
        #expect(store.scrape(hashA).completed == 2)
    }

    @Test func stoppedRemovesOnlyThatAddresssPeer() throws {
        var store = SwarmStore()
        store.apply([announce(1, ip: "10.0.0.1"), announce(2, ip: "10.0.0.2")])
        // Same peer id from another address cannot remove peer 1.
        store.apply(announce(1, ip: "10.9.9.9", event: .stopped))
        #expect(store[hashA]?.peerCount == 2)
        store.apply(announce(1, ip: "10.0.0.1", event: .stopped))
        #expect(store[hashA]?.peerCount == 1)
        store.apply(announce(2, ip: "10.0.0.2", event: .stopped))
        #expect(store[hashA] == nil, "an empty swarm with no completions is dropped")
        // A stop for an unknown swarm creates nothing.
        store.apply(announce(5, event: .stopped, hash: hashB))
        #expect(store.swarmCount == 0)
    }

    @Test func expiryDropsSilentPeers() throws {
        var store = SwarmStore()
        store.apply([announce(1, at: 10), announce(2, at: 20), announce(3, left: 0, at: 30)])
        store.apply(.expire(before: Instant(milliseconds: 20_000)))
        #expect(store[hashA]?.peerCount == 2)
        #expect(store.scrape(hashA) == ScrapeEntry(seeders: 1, completed: 0, leechers: 1))
        store.apply(.expire(before: Instant(milliseconds: 31_000)))
        #expect(store[hashA] == nil)
    }

    @Test func reannounceRefreshesInPlace() throws {
        var store = SwarmStore()
        store.apply([announce(1, port: 1000, at: 1), announce(1, port: 2000, left: 0, event: .none, at: 5)])
        let swarm = store[hashA]!
        #expect(swarm.peerCount == 1)
        let record = swarm.peer(PeerKey(peerID: peerID(1), ip: v4("10.0.0.1")))!
        #expect(record.endpoint.port == 2000 && record.isSeeder && record.lastAnnounce == Instant(milliseconds: 5000))
    }

    @Test func selectionExcludesRequesterAndOtherFamilies() throws {
        var store = SwarmStore()
        for i in 0..<30 { store.apply(announce(UInt32(i), ip: "10.0.0.\(i + 1)")) }
        for i in 0..<5 { store.apply(announce(UInt32(100 + i), ip: "2001:db8::\(i + 1)")) }
        let swarm = store[hashA]!
        var rng = SeededGenerator(seed: 9)
        let me = PeerKey(peerID: peerID(3), ip: v4("10.0.0.4"))
        for _ in 0..<200 {
            let peers = swarm.selectPeers(for: me, count: 10, rng: &rng).endpoints
            #expect(peers.count == 10)
            #expect(Set(peers).count == 10)
            #expect(!peers.contains(PeerEndpoint(ip: v4("10.0.0.4"), port: 6881)))
            #expect(peers.allSatisfy { $0.ip.family == .v4 })
        }
        let all = swarm.selectPeers(for: me, count: 200, rng: &rng)
        #expect(all.count == 29)
        let six = swarm.selectPeers(for: PeerKey(peerID: peerID(100), ip: IPAddress("2001:db8::1")!), count: 50, rng: &rng).endpoints
        #expect(six.count == 4 && six.allSatisfy { $0.ip.family == .v6 })
    }

    @Test func selectionIsRandomAcrossCalls() throws {
        var store = SwarmStore()
        for i in 0..<100 { store.apply(announce(UInt32(i), ip: "10.0.1.\(i + 1)")) }
        var rng = SeededGenerator(seed: 1)
        let me = PeerKey(peerID: peerID(999), ip: v4("10.9.9.9"))
        var seen = Set<PeerEndpoint>()
        for _ in 0..<50 { seen.formUnion(store[hashA]!.selectPeers(for: me, count: 5, rng: &rng).endpoints) }
        #expect(seen.count > 60, "a random window must reach most of the swarm")
    }

    @Test func equalityIgnoresStorageOrder() throws {
        var a = SwarmStore(), b = SwarmStore()
        a.apply([announce(1), announce(2, ip: "10.0.0.2"), announce(3, ip: "10.0.0.3")])
        b.apply([announce(3, ip: "10.0.0.3"), announce(1), announce(2, ip: "10.0.0.2")])
        #expect(a == b)
        b.apply(announce(3, ip: "10.0.0.3", left: 5))
        #expect(a != b)
    }

    /// A cluster of one admits, applies and answers in one access; it must end where
    /// the master's three steps (check, apply, answer) end, answer for answer.
    @Test func announceInOneAccessMatchesApplyThenAnswer() throws {
        var rng = SeededGenerator(seed: 7)
        var oneAccess = SwarmStore(), threeSteps = SwarmStore()
        var rngA = SeededGenerator(seed: 9), rngB = SeededGenerator(seed: 9)
        let maxPeers = 12, maxSwarms = 3
        for step in 0..<2_000 {
            let hash = InfoHash(a: rng.next() % 4, b: 0, c: 0)
            let events: [AnnounceEvent] = [.none, .none, .none, .started, .completed, .stopped]
            guard case .announce(let a) = announce(UInt32(rng.next() % 20), ip: "10.0.\(rng.next() % 2).1", left: Int64(rng.next() % 3),
                                                   event: events[Int(rng.next() % 6)], at: Int64(step), hash: hash) else { continue }
            let admit = { (peers: Int?, swarms: Int, _: Int, holds: () -> Bool) -> String? in
                guard let peers else { return swarms >= maxSwarms ? "tracker full" : nil }
                return peers >= maxPeers && !holds() ? "swarm full" : nil
            }
            let outcome = oneAccess.announce(a, wanting: 5, rng: &rngA, admit: admit)
            let expected: AnnounceOutcome
            if a.event != .stopped, let refusal = admit(threeSteps.peerCount(in: hash), threeSteps.swarmCount, threeSteps.peerCount,
                                                        { threeSteps.peer(a.key, in: hash) != nil }) {
                expected = .refused(refusal)
            } else {
                threeSteps.apply(.announce(a))
                let swarm = threeSteps[hash]
                let peers = a.event == .stopped ? CompactPeers() : swarm?.selectPeers(for: a.key, count: 5, rng: &rngB) ?? CompactPeers()
                expected = .applied(AnnounceAnswer(peers: peers, seeders: swarm?.seeders ?? 0, leechers: swarm?.leechers ?? 0))
            }
            #expect(outcome == expected, "step \(step)")
            #expect(oneAccess == threeSteps, "step \(step)")
        }
        #expect(oneAccess.swarmCount == maxSwarms)
    }
}

@Suite("Peer request handling")
struct PeerRequestHandlerTests {
    let me = PeerEndpoint(ip: v4("10.0.0.1"), port: 40000)
    let now = Instant(milliseconds: 1_700_000_000_000)

    func tracker(_ configure: (inout TrackerConfig) -> Void = { _ in }) -> StandaloneTracker {
        var config = TrackerConfig()
        configure(&config)
        return StandaloneTracker(handler: PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 3, k1: 4))), seed: 1)
    }

    func connect(_ t: inout StandaloneTracker, from source: PeerEndpoint) -> UInt64 {
        guard case .connect(let r)? = t.receive(BEP15Codec.encode(.connect(ConnectRequest(transactionID: 1))), from: source, now: now) else {
            Issue.record("connect failed"); return 0
        }
        return r.connectionID
    }

    func announce(_ t: inout StandaloneTracker, cid: UInt64, from source: PeerEndpoint, peer: UInt32, numWant: Int32 = -1,
                  left: Int64 = 1, ip: UInt32 = 0, event: AnnounceEvent = .started) -> TrackerResponse? {
        let request = AnnounceRequest(connectionID: cid, transactionID: 77, infoHash: hashA, peerID: peerID(peer),
                                      downloaded: 0, left: left, uploaded: 0, event: event, ip: ip, numWant: numWant, port: 6881)
        return t.receive(BEP15Codec.encode(.announce(request)), from: source, now: now)
    }

    @Test func badConnectionIDGetsAnError() throws {
        var t = tracker()
        let reply = announce(&t, cid: 12345, from: me, peer: 1)
        #expect(reply == .error(ErrorResponse(transactionID: 77, message: PeerRequestHandler.invalidConnectionIDMessage)))
        #expect(t.store.swarmCount == 0, "a refused announce changes nothing")
    }

    @Test func numWantDefaultAndCap() throws {
        var t = tracker { $0.numWantDefault = 7; $0.numWantMax = 12 }
        for i in 0..<40 {
            let src = PeerEndpoint(ip: .v4(0x0A00_0100 + UInt32(i)), port: 5000)
            _ = announce(&t, cid: connect(&t, from: src), from: src, peer: UInt32(i))
        }
        let cid = connect(&t, from: me)
        for (asked, expected) in [(Int32(-1), 7), (0, 7), (5, 5), (100, 12)] {
            guard case .announce(let r)? = announce(&t, cid: cid, from: me, peer: 999, numWant: asked) else {
                Issue.record("no announce reply"); return
            }
            #expect(r.peers.count == expected, "num_want \(asked)")
            #expect(r.transactionID == 77 && TrackerConfig().intervalBand.contains(r.interval))
        }
    }

    /// SIGHUP: the live settings apply from the next request; the connection id lifetime
    /// and the rate-limit table's size wait for a restart; every source's limit follows.
    @Test func aReloadAppliesTheLiveSettingsOnly() throws {
        var t = tracker { $0.connectLimit = .off }
        let cid = connect(&t, from: me)
        var reloaded = t.handler.config
        reloaded.announceInterval = 900
        reloaded.numWantDefault = 3
        reloaded.connectionIDLifetimeSeconds = 7200
        reloaded.rateLimitTableSize = 16
        reloaded.connectLimit = SourceRateLimiter.Limit(perSecond: 1, burst: 1)
        t.reconfigure(reloaded)
        #expect(t.handler.config.announceInterval == 900 && t.handler.config.numWantDefault == 3)
        #expect(t.handler.config.connectionIDLifetimeSeconds == 300 && t.handler.config.rateLimitTableSize == 1 << 16)
        guard case .announce(let r)? = announce(&t, cid: cid, from: me, peer: 1) else { Issue.record("no announce reply"); return }
        #expect(reloaded.intervalBand.contains(r.interval) && !TrackerConfig().intervalBand.contains(r.interval),
                "an id handed out before the reload still works, and the reply says the new interval")
        let other = PeerEndpoint(ip: v4("10.0.0.2"), port: 1)
        #expect(t.receive(BEP15Codec.encode(.connect(ConnectRequest(transactionID: 1))), from: other, now: now) != nil)
        #expect(t.receive(BEP15Codec.encode(.connect(ConnectRequest(transactionID: 2))), from: other, now: now) == nil,
                "the new connect limit (burst 1) holds at once")
    }

    @Test func sourceAddressWinsUnlessTrusted() throws {
        var t = tracker()
        _ = announce(&t, cid: connect(&t, from: me), from: me, peer: 1, ip: 0x0808_0808)
        #expect(t.store[hashA]?.peers.first?.endpoint == PeerEndpoint(ip: v4("10.0.0.1"), port: 6881))
        var trusting = tracker { $0.trustAnnouncedIP = true }
        _ = announce(&trusting, cid: connect(&trusting, from: me), from: me, peer: 1, ip: 0x0808_0808)
        #expect(trusting.store[hashA]?.peers.first?.endpoint == PeerEndpoint(ip: v4("8.8.8.8"), port: 6881))
    }

    /// A reply never exceeds `maxReplyBytes` (1,232 by default: no IPv6 fragmentation),
    /// however many peers num_want asks for: 67 IPv6 peers, and IPv4 ones by their size.
    @Test func numWantIsCappedByReplySize() throws {
        var t = tracker { $0.connectLimit = .off; $0.announceLimit = .off }
        for i in 0..<100 {
            let six = PeerEndpoint(ip: .v6(0x2001_0db8_0000_0000, UInt64(i + 1)), port: 1)
            _ = announce(&t, cid: connect(&t, from: six), from: six, peer: UInt32(i))
        }
        let asker = PeerEndpoint(ip: .v6(0x2001_0db8_0000_0001, 1), port: 1)
        guard case .announce(let r)? = announce(&t, cid: connect(&t, from: asker), from: asker, peer: 999, numWant: 200) else {
            Issue.record("no reply"); return
        }
        #expect(r.peers.count == 67)
        #expect(BEP15Codec.encode(.announce(r)).readableBytes == 1226 && 1226 <= 1232)
        var small = tracker { $0.maxReplyBytes = 80 }
        for i in 0..<20 {
            let src = PeerEndpoint(ip: .v4(0x0A00_0100 + UInt32(i)), port: 5000)
            _ = announce(&small, cid: connect(&small, from: src), from: src, peer: UInt32(i))
        }
        guard case .announce(let v4)? = announce(&small, cid: connect(&small, from: me), from: me, peer: 999, numWant: 50) else {
            Issue.record("no reply"); return
        }
        #expect(v4.peers.count == 10, "(80 - 20) / 6")
        #expect(TrackerConfig().peersWanted(200, family: .v4) == 200, "the default caps IPv4 at numwant-max first (202 would fit)")
        var bad = TrackerConfig()
        bad.maxReplyBytes = 37
        #expect(!bad.problems.isEmpty, "a reply too small for one IPv6 peer is refused")
    }

    @Test func ipv6RequesterGetsIPv6Peers() throws {
        var t = tracker()
        let six = PeerEndpoint(ip: IPAddress("2001:db8::9")!, port: 1)
        let sixB = PeerEndpoint(ip: IPAddress("2001:db8::a")!, port: 1)
        _ = announce(&t, cid: connect(&t, from: me), from: me, peer: 1)
        _ = announce(&t, cid: connect(&t, from: sixB), from: sixB, peer: 2)
        guard case .announce(let r)? = announce(&t, cid: connect(&t, from: six), from: six, peer: 3) else {
            Issue.record("no reply"); return
        }
        #expect(r.peers == [PeerEndpoint(ip: IPAddress("2001:db8::a")!, port: 6881)])
        #expect(r.leechers == 3)
        let encoded = BEP15Codec.encode(.announce(r))
        #expect(encoded.readableBytes == 20 + 18)
    }

    @Test func scrapeIsReadOnlyAndCounts() throws {
        var t = tracker()
        let cid = connect(&t, from: me)
        _ = announce(&t, cid: cid, from: me, peer: 1, left: 0, event: .completed)
        let before = t.store
        let reply = t.receive(BEP15Codec.encode(.scrape(ScrapeRequest(connectionID: cid, transactionID: 5, infoHashes: [hashA, hashB]))),
                              from: me, now: now)
        #expect(reply == .scrape(ScrapeResponse(transactionID: 5, entries: [
            ScrapeEntry(seeders: 1, completed: 1, leechers: 0), ScrapeEntry(seeders: 0, completed: 0, leechers: 0)])))
        #expect(t.store == before)
    }

    @Test func expiryRunsFromTick() throws {
        var t = tracker { $0.announceInterval = 60 }
        _ = announce(&t, cid: connect(&t, from: me), from: me, peer: 1)
        t.tick(now: now + Milliseconds.seconds(60))
        #expect(t.store.peerCount == 1)
        t.tick(now: now + Milliseconds.seconds(121))
        #expect(t.store.peerCount == 0)
    }

    @Test func portZeroIsRefused() throws {
        var t = tracker()
        let cid = connect(&t, from: me)
        let request = AnnounceRequest(connectionID: cid, transactionID: 8, infoHash: hashA, peerID: peerID(1),
                                      downloaded: 0, left: 1, uploaded: 0, event: .started, port: 0)
        guard case .error? = t.receive(BEP15Codec.encode(.announce(request)), from: me, now: now) else {
            Issue.record("port 0 must be refused"); return
        }
    }

    @Test func configProblemsAreReported() throws {
        var c = TrackerConfig()
        #expect(c.problems.isEmpty)
        c.numWantDefault = 500
        c.connectionIDLifetimeSeconds = 30
        c.peerTimeout = Milliseconds.seconds(10)
        #expect(c.problems.count == 3)
    }

    /// The store keeps its digest and peer count change by change; after any mix of
    /// announces, stops, completions, merges, expiries and catalogue changes they equal a
    /// pass over the whole content.
    @Test(arguments: [1, 2, 3])
    func digestAndCountsAreKeptIncrementally(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        var store = SwarmStore()
        let hashes = (0..<4).map { InfoHash(a: $0, b: 7, c: 7) }
        let torrent = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: now)
        for step in 0..<3_000 {
            let hash = hashes[rng.below(hashes.count)]
            let key = PeerKey(peerID: PeerID(a: UInt64(rng.below(40)), b: 0, c: 0), ip: rng.chance(0.8) ? .v4(UInt32(rng.below(30))) : .v6(1, UInt64(rng.below(30))))
            let at = now + Milliseconds(Int64(step))
            switch rng.below(12) {
            case 0: store.apply(.expire(before: at - Milliseconds(Int64(rng.below(800)))))
            case 1:
                let peers = (0..<rng.below(5)).map { i in PeerRecord(peerID: PeerID(a: UInt64(i), b: 0, c: 0), endpoint: PeerEndpoint(ip: .v4(UInt32(i)), port: 1),
                                                                       uploaded: 0, downloaded: 0, left: Int64(rng.below(2)), lastAnnounce: at - Milliseconds(Int64(rng.below(100)))) }
                store.apply(.merge(SwarmMerge(infoHash: hash, peers: peers, completed: rng.chance(0.5) ? [key] : [])))
            case 2: store.apply(.catalogue(rng.chance(0.5) ? .register(torrent) : .unregister(torrent.infoHash)))
            default:
                let event: AnnounceEvent = [.none, .started, .completed, .stopped][rng.below(4)]
                store.apply(.announce(Announce(infoHash: hash, peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: 6881),
                                               uploaded: Int64(rng.below(9)), downloaded: 0, left: Int64(rng.below(2)), event: event, at: at)))
            }
            #expect(Digest.of(store) == Digest.recomputed(store))
            #expect(store.peerCount == store.swarms.values.reduce(0) { $0 + $1.peerCount })
        }
        let rebuilt = SwarmStore(content: store.content(), torrents: store.catalogue.sorted)
        #expect(rebuilt == store)
        #expect(Digest.recomputed(rebuilt) == Digest.recomputed(store))
        #expect(Digest.of(rebuilt) == Digest.of(store))
        #expect(rebuilt.peerCount == store.peerCount)
        #expect(rebuilt.catalogue.sorted.count == store.catalogue.sorted.count)
    }

    /// A master checks capacity as it reads an announce, against the state its
    /// transaction is prepared on, and skips the swarm while `swarmPeersBound` says none
    /// can be full; a cluster of one checks as it applies. Both must refuse the same
    /// announces with the same words, through stops and expiries, and the bound must
    /// cover every swarm (after an expiry, exactly the largest).
    @Test func aMasterRefusesWhereAClusterOfOneDoes() throws {
        var config = TrackerConfig()
        config.maxPeers = 14; config.maxSwarms = 3; config.maxPeersPerSwarm = 6
        config.connectLimit = .off; config.announceLimit = .off; config.errorLimit = .off
        let handler = PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 3, k1: 4)))
        var clusterOfOne = StandaloneTracker(handler: handler, seed: 1)
        var master = SwarmStore()
        var limiter = handler.makeRateLimiter(key: SipHash24(k0: 5, k1: 6))
        var rng = SeededGenerator(seed: 11)
        var refusals = Set<String>()
        let events: [AnnounceEvent] = [.none, .none, .started, .completed, .stopped]
        for step in 0..<4_000 {
            // 20 s a step: a peer not heard for 180 steps expires, and many are not.
            let at = now + Milliseconds.seconds(Int64(step) * 20)
            if step % 200 == 199 {
                clusterOfOne.tick(now: at)
                master.apply(.expire(before: at - config.effectivePeerTimeout))
                let largest = master.sortedInfoHashes.map { master[$0]?.peerCount ?? 0 }.max() ?? 0
                #expect(master.swarmPeersBound == largest, "step \(step): an expiry sets the bound to the largest swarm")
            }
            let request = AnnounceRequest(connectionID: handler.connectionIDs.issue(for: me.ip, now: at), transactionID: UInt32(step),
                                          infoHash: InfoHash(a: rng.next() % 4 + 1, b: 0, c: 0), peerID: peerID(UInt32(rng.next() % 40)),
                                          downloaded: 0, left: Int64(rng.next() % 2), uploaded: 0, event: events[Int(rng.next() % 5)],
                                          ip: 0, numWant: 0, port: 6881)
            let datagram = BEP15Codec.encode(.announce(request))
            let expected = clusterOfOne.receive(datagram, from: me, now: at)
            switch handler.decide(datagram, from: me, now: at, store: master, limiter: &limiter) {
            case .reply(let reply):
                #expect(reply == expected, "step \(step)")
                if case .error(let e) = reply { refusals.insert(e.message) }
            case .commit(let pending):
                guard case .announce? = expected else { Issue.record("step \(step): the cluster of one refused: \(String(describing: expected))"); return }
                master.apply(.announce(pending.update))
            case .drop(let error):
                Issue.record("step \(step): dropped: \(error)"); return
            }
            // The master also keeps stops (`PeerStops`), which a cluster of one does not.
            #expect(master.swarms == clusterOfOne.store.swarms, "step \(step)")
            for hash in master.sortedInfoHashes {
                #expect((master[hash]?.peerCount ?? 0) <= master.swarmPeersBound, "step \(step): the bound covers every swarm")
            }
        }
        #expect(refusals == ["swarm is full (6 peers); retry later", "tracker is full (3 swarms); retry later",
                             "tracker is full (14 peers); retry later"], "every limit was reached")
    }
}
