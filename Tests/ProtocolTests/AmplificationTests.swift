import NIOCore
import Testing
import TrackerLogic

/// The tracker must not be a reflector: a source that has not proven its address gets no
/// reply larger than its request; per-source limits cap what one address can draw; the
/// tables and swarms are bounded.
@Suite("No amplification, bounded state") struct AmplificationTests {
    let now = Instant(milliseconds: 1_700_000_000_000)
    let key = SipHash24(k0: 11, k1: 22)
    let source = PeerEndpoint(ip: v4("198.51.100.7"), port: 6881)

    func tracker(_ change: (inout TrackerConfig) -> Void = { _ in }) -> StandaloneTracker {
        var config = TrackerConfig()
        change(&config)
        return StandaloneTracker(handler: PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(key: key)), seed: 1)
    }

    func announce(_ connectionID: UInt64, hash: InfoHash = hashA, peer: UInt32 = 1, tid: UInt32 = 9) -> ByteBuffer {
        BEP15Codec.encode(.announce(AnnounceRequest(connectionID: connectionID, transactionID: tid, infoHash: hash, peerID: peerID(peer),
                                                    downloaded: 0, left: 10, uploaded: 0, event: .started, ip: 0, key: 0,
                                                    numWant: 200, port: 6881)))
    }

    /// Whatever arrives without a valid connection id — garbage, bad connects, announces
    /// and scrapes with forged ids, of every length — is answered within its own size.
    @Test func noReplyToAnUnprovenSourceIsLargerThanItsRequest() {
        var t = tracker()
        var rng = SeededGenerator(seed: 5)
        // Fill a swarm so an accepted announce would have a big answer.
        let policy = ConnectionIDPolicy(key: key)
        for p in 0..<60 {
            let ip = PeerEndpoint(ip: .v4(0x0A00_0000 | UInt32(p)), port: 6881)
            _ = t.receive(announce(policy.issue(for: ip.ip, now: now), peer: UInt32(p)), from: ip, now: now)
        }
        var replies = 0
        for i in 0..<20_000 {
            var raw: [UInt8]
            switch i % 4 {
            case 0: raw = (0..<rng.below(140)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            case 1: raw = announce(rng.next()).allBytes  // a forged id
            case 2: raw = Array(announce(rng.next()).allBytes.prefix(16 + rng.below(82)))
            default:
                // A scrape with a forged id, or a connect with a bad protocol id.
                var b = ByteBuffer()
                b.writeInteger(rng.next()); b.writeInteger(UInt32(rng.chance(0.5) ? 2 : 0)); b.writeInteger(UInt32(7))
                for _ in 0..<rng.below(3) { b.writeBytes((0..<20).map { _ in UInt8(truncatingIfNeeded: rng.next()) }) }
                raw = b.allBytes
            }
            let from = PeerEndpoint(ip: .v4(UInt32(truncatingIfNeeded: rng.next())), port: 1000)
            guard let reply = t.receive(ByteBuffer(bytes: raw), from: from, now: now) else { continue }
            replies += 1
            let size = BEP15Codec.encode(reply).readableBytes
            #expect(size <= raw.count, "a \(raw.count)-byte request drew a \(size)-byte reply")
        }
        #expect(replies > 1000, "errors are still sent when they fit: \(replies)")
    }

    /// A 16-byte connect with a bad protocol id used to draw a 46-byte error.
    @Test func aBadConnectGetsNoMoreThanSixteenBytes() {
        var t = tracker()
        var b = ByteBuffer()
        b.writeInteger(UInt64(12345)); b.writeInteger(UInt32(0)); b.writeInteger(UInt32(77))
        let reply = t.receive(b, from: source, now: now)
        #expect(reply.map { BEP15Codec.encode($0).readableBytes <= 16 } ?? true)
    }

    /// An id computed offline with another key (the old default derived from a public
    /// name) is refused.
    @Test func aConnectionIDComputedWithoutTheKeyIsRefused() {
        var t = tracker()
        let forged = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2)).issue(for: source.ip, now: now)
        let reply = t.receive(announce(forged), from: source, now: now)
        guard case .error(let e)? = reply else { Issue.record("a forged id must not be served: \(String(describing: reply))"); return }
        #expect(e.message.contains("connection id"))
        let real = ConnectionIDPolicy(key: key).issue(for: source.ip, now: now)
        guard case .announce? = t.receive(announce(real), from: source, now: now) else { Issue.record("the real id works"); return }
    }

    /// Connects beyond the burst are dropped for that source only, and its bucket refills.
    @Test func connectsAreLimitedPerSource() {
        var t = tracker { $0.connectLimit = .init(perSecond: 10, burst: 20) }
        var b = ByteBuffer()
        b.writeInteger(bep15ProtocolID); b.writeInteger(UInt32(0)); b.writeInteger(UInt32(1))
        let answered = (0..<100).filter { _ in t.receive(b, from: source, now: now) != nil }.count
        #expect(answered == 20)
        let other = PeerEndpoint(ip: v4("203.0.113.9"), port: 1)
        #expect(t.receive(b, from: other, now: now) != nil, "another source has its own bucket")
        let later = (0..<100).filter { _ in t.receive(b, from: source, now: now + Milliseconds(1000)) != nil }.count
        #expect(later == 10, "ten tokens a second")
        #expect(t.limiter.refused == 170)
    }

    @Test func announcesAreLimitedPerSource() {
        var t = tracker { $0.announceLimit = .init(perSecond: 5, burst: 5) }
        let id = ConnectionIDPolicy(key: key).issue(for: source.ip, now: now)
        let answered = (0..<50).filter { t.receive(announce(id, peer: UInt32($0)), from: source, now: now) != nil }.count
        #expect(answered == 5)
    }

    /// The source table has a fixed size, however many addresses a flood uses.
    @Test func theSourceTableIsBounded() {
        var limiter = SourceRateLimiter(connect: .init(perSecond: 1, burst: 1), announce: .off, key: key, tableSize: 1024)
        for i in 0..<100_000 { _ = limiter.allow(.connect, from: .v4(UInt32(i)), now: now) }
        #expect(limiter.tableSlots == 1024)
    }

    /// Error replies are rate-limited per source: a spoofer cannot reflect one datagram
    /// for each it sends, whatever kind of error it provokes.
    @Test func errorRepliesAreLimitedPerSource() {
        var t = tracker { $0.errorLimit = .init(perSecond: 5, burst: 5) }
        let forged = (0..<50).filter { t.receive(announce(UInt64($0)), from: source, now: now) != nil }.count
        #expect(forged == 5)
        let other = PeerEndpoint(ip: v4("203.0.113.9"), port: 1)
        #expect(t.receive(announce(1), from: other, now: now) != nil, "another source has its own bucket")
        #expect(t.receive(announce(1), from: source, now: now + Milliseconds(200)) != nil, "five a second")
        // Served announces take no error token.
        let id = ConnectionIDPolicy(key: key).issue(for: other.ip, now: now)
        let served = (0..<20).filter { t.receive(announce(id, peer: UInt32($0)), from: other, now: now) != nil }.count
        #expect(served == 20)
    }

    /// One host holds a whole /64: its addresses share one bucket; another /64 has its own.
    @Test func ipv6SourcesAreLimitedPerSlash64() {
        var t = tracker { $0.connectLimit = .init(perSecond: 1, burst: 3) }
        var b = ByteBuffer()
        b.writeInteger(bep15ProtocolID); b.writeInteger(UInt32(0)); b.writeInteger(UInt32(1))
        let prefix: UInt64 = 0x2001_0DB8_0001_0002
        let answered = (0..<100).filter { t.receive(b, from: PeerEndpoint(ip: .v6(prefix, UInt64($0) &* 7919), port: 1), now: now) != nil }.count
        #expect(answered == 3)
        #expect(t.receive(b, from: PeerEndpoint(ip: .v6(prefix + 1, 5), port: 1), now: now) != nil)
    }

    /// The peers of all swarms together are capped: a new peer beyond it gets an error, a
    /// peer already held keeps announcing.
    @Test func theTrackerWidePeerCapAnswersWithAnError() {
        var t = tracker { $0.maxPeers = 3 }
        let id = ConnectionIDPolicy(key: key).issue(for: source.ip, now: now)
        for (hash, peer) in [(hashA, 1), (hashA, 2), (hashB, 3)] {
            guard case .announce? = t.receive(announce(id, hash: hash, peer: UInt32(peer)), from: source, now: now) else {
                Issue.record("peer \(peer) fits"); return
            }
        }
        for (hash, peer) in [(hashB, 4), (InfoHash(a: 3, b: 3, c: 3), 5)] {
            guard case .error(let full)? = t.receive(announce(id, hash: hash, peer: UInt32(peer)), from: source, now: now) else {
                Issue.record("peer \(peer) is refused"); return
            }
            #expect(full.message == "tracker is full (3 peers); retry later")
        }
        guard case .announce? = t.receive(announce(id, hash: hashA, peer: 2), from: source, now: now) else {
            Issue.record("a peer already held keeps announcing"); return
        }
        #expect(t.store.peerCount == 3)
    }

    @Test func swarmAndPeerCapsAnswerWithAnError() {
        var t = tracker { $0.maxSwarms = 2; $0.maxPeersPerSwarm = 2 }
        let id = ConnectionIDPolicy(key: key).issue(for: source.ip, now: now)
        let third = InfoHash(a: 3, b: 3, c: 3)
        guard case .announce? = t.receive(announce(id, hash: hashA, peer: 1), from: source, now: now),
              case .announce? = t.receive(announce(id, hash: hashB, peer: 1), from: source, now: now) else {
            Issue.record("the first two swarms are accepted"); return
        }
        guard case .error(let full)? = t.receive(announce(id, hash: third, peer: 1), from: source, now: now) else {
            Issue.record("a third swarm is refused"); return
        }
        #expect(full.message.contains("tracker is full"))
        _ = t.receive(announce(id, hash: hashA, peer: 2), from: source, now: now)
        guard case .error(let swarmFull)? = t.receive(announce(id, hash: hashA, peer: 3), from: source, now: now) else {
            Issue.record("a third peer is refused"); return
        }
        #expect(swarmFull.message.contains("swarm is full"))
        guard case .announce? = t.receive(announce(id, hash: hashA, peer: 1), from: source, now: now) else {
            Issue.record("a peer already in the full swarm keeps announcing"); return
        }
        #expect(t.store.swarmCount == 2 && t.store[hashA]?.peerCount == 2)
    }

    @Test func scrapesAreCapped() {
        var t = tracker { $0.maxScrapeHashes = 3 }
        let id = ConnectionIDPolicy(key: key).issue(for: source.ip, now: now)
        let request = TrackerRequest.scrape(ScrapeRequest(connectionID: id, transactionID: 4,
                                                          infoHashes: (0..<5).map { InfoHash(a: UInt64($0), b: 0, c: 0) }))
        guard case .scrape(let s)? = t.receive(BEP15Codec.encode(request), from: source, now: now) else { Issue.record("scrape"); return }
        #expect(s.entries.count == 3)
    }
}
