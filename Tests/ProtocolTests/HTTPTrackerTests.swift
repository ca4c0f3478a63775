import NIOCore
import Testing
import TrackerLogic

/// The HTTP tracker: its request heads from hostile bytes, the client address behind a
/// trusted proxy, its replies byte for byte, and one core deciding both protocols.
@Suite("HTTP tracker")
struct HTTPTrackerTests: MasterFixture {
    let t0 = Instant(milliseconds: 9_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 3, k1: 4))
    let peer = PeerEndpoint(ip: IPAddress("10.0.0.7")!, port: 40_001)
    let hash = InfoHash(bytes: (1...20).map { UInt8($0) })!
    var hashQuery: String { (1...20).map { String(format: "%%%02X", $0) }.joined() }

    func q(_ s: String) -> [UInt8] { Array(s.utf8) }

    func head(_ text: String) -> HTTPRequestHead.Parsed { HTTPRequestHead.parse(q(text)) }

    // MARK: heads

    @Test func aHeadParsesWithItsLengthSoAPipelinedOneFollows() throws {
        let first = "GET /announce?a=1 HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 1.2.3.4\r\nx-forwarded-for: 5.6.7.8\r\n\r\n"
        guard case .head(let h, let length) = head(first + "GET /scrape HTTP/1.1\r\n") else { Issue.record("no head"); return }
        #expect(length == first.utf8.count)
        #expect(h.method == .get && h.target == q("/announce?a=1") && h.keepAlive)
        #expect(Array(h.path) == q("/announce") && Array(h.query) == q("a=1"))
        #expect(h.forwardedFor == q("1.2.3.4, 5.6.7.8"), "repeated headers join in order")
        #expect(head("GET /scrape HTTP/1.1\r\nHost: t\r\n") == .incomplete)
        // Bare LF line ends (RFC 9112 lets a recipient take them).
        guard case .head(_, let bare) = head("GET / HTTP/1.1\nHost: t\n\n") else { Issue.record("bare LF"); return }
        #expect(bare == 24)
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\n\r\n", true), ("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", false),
        ("GET / HTTP/1.0\r\n\r\n", false), ("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        ("GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n", false),
    ])
    func keepAliveFollowsTheVersionAndConnection(_ text: String, _ keepAlive: Bool) {
        guard case .head(let h, _) = head(text) else { Issue.record("no head"); return }
        #expect(h.keepAlive == keepAlive)
    }

    @Test(arguments: [
        ("POST /announce HTTP/1.1\r\n\r\n", 405), ("GET /announce HTTP/2.0\r\n\r\n", 505),
        ("GET /announce HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 413),
        ("GET /announce HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 413),
        ("GET /announce HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400), ("GET /a b HTTP/1.1\r\n\r\n", 400),
        ("GET announce HTTP/1.1\r\n\r\n", 400), ("GET /announce HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
        ("GET /announce HTTP/1.1\r\nX: a\u{1}b\r\n\r\n", 400), ("\r\n\r\n", 400),
    ])
    func aHeadTheTrackerDoesNotTakeIsRefused(_ text: String, _ status: Int) {
        guard case .refused(let r) = head(text) else { Issue.record("not refused: \(text)"); return }
        #expect(r.status.code == status)
    }

    @Test func aHeadLongerThanTheBoundIsRefusedBeforeItEnds() {
        let long = "GET /announce?" + String(repeating: "a", count: HTTPRequestHead.maxHeadBytes)
        guard case .refused(.headTooLarge) = head(long) else { Issue.record("an endless head waits for more"); return }
        let many = "GET / HTTP/1.1\r\n" + String(repeating: "X: 1\r\n", count: HTTPRequestHead.maxHeaderLines + 1) + "\r\n"
        guard case .refused(.headTooLarge) = head(many) else { Issue.record("too many headers"); return }
        #expect(head("GET /" + String(repeating: "a", count: 100)) == .incomplete)
    }

    // MARK: proxies

    @Test func theClientBehindATrustedProxyIsTheNearestUntrustedAddress() throws {
        let proxies = try TrustedProxies.parse("10.0.0.0/8, 2001:db8::/32").get()
        let proxy = IPAddress("10.1.2.3")!, stranger = IPAddress("192.0.2.9")!
        func with(xff: String? = nil, forwarded: String? = nil) -> HTTPRequestHead {
            HTTPRequestHead(method: .get, target: q("/announce"), keepAlive: true, forwardedFor: xff.map(q), forwarded: forwarded.map(q))
        }
        #expect(proxies.client(connection: stranger, head: with(xff: "1.1.1.1")) == stranger, "headers from anyone else are ignored")
        #expect(proxies.client(connection: proxy, head: with(xff: "1.1.1.1")) == IPAddress("1.1.1.1"))
        // A client that writes its own header gets entries on the left, never reached.
        #expect(proxies.client(connection: proxy, head: with(xff: "6.6.6.6, 1.1.1.1, 10.9.9.9")) == IPAddress("1.1.1.1"))
        #expect(proxies.client(connection: proxy, head: with(xff: "6.6.6.6, junk")) == proxy, "an entry that is no address ends the walk")
        #expect(proxies.client(connection: proxy, head: with(xff: "10.2.2.2")) == proxy, "all trusted: the connection")
        #expect(proxies.client(connection: proxy, head: with(forwarded: #"for="[2001:db9::1]:4711";proto=https, for=10.3.3.3"#))
            == IPAddress("2001:db9::1"))
        #expect(proxies.client(connection: proxy, head: with(xff: "1.2.3.4:5678")) == IPAddress("1.2.3.4"))
        #expect(TrustedProxies.parse("10.0.0.0/33").map(\.networks) == .failure(TrustedProxies.ProxyListError(entry: "10.0.0.0/33")))
        #expect(IPNetwork("10.1.255.255/16")?.description == "10.1.0.0/16")
        #expect(IPNetwork("0.0.0.0/0")?.contains(IPAddress("::ffff:1.2.3.4")!) == true, "a mapped address is its IPv4 one")
    }

    // MARK: replies

    @Test func anAnnounceReplyIsCanonicalBencodeInEveryShape() {
        let v4 = AnnounceResponse(transactionID: 1, interval: 1800, leechers: 3, seeders: 5,
                                  compactPeers: CompactPeers([PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)]))
        let body = HTTPTrackerReply.body(.announce(v4))
        #expect(body == q("d8:completei5e10:incompletei3e8:intervali1800e12:min intervali900e5:peers6:") + [10, 0, 0, 1, 0x1A, 0xE1] + q("e"))
        #expect(body == Bencode.dictionary(pairs: [("complete", .integer(5)), ("incomplete", .integer(3)), ("interval", .integer(1800)),
                                                   ("min interval", .integer(900)), ("peers", .bytes([10, 0, 0, 1, 0x1A, 0xE1]))]).encoded)
        #expect(HTTPTrackerReply.body(.announce(v4), shape: .init(compact: false))
            == q("d8:completei5e10:incompletei3e8:intervali1800e12:min intervali900e5:peersld2:ip8:10.0.0.14:porti6881eeee"))
        let six = PeerEndpoint(ip: IPAddress("2001:db8::1")!, port: 80)
        var v6 = v4
        v6.compactPeers = CompactPeers([six])
        let sixBytes = CompactPeers([six]).bytes
        #expect(HTTPTrackerReply.body(.announce(v6)) == Bencode.dictionary(pairs: [
            ("complete", .integer(5)), ("incomplete", .integer(3)), ("interval", .integer(1800)), ("min interval", .integer(900)),
            ("peers", .bytes([])), ("peers6", .bytes(sixBytes))]).encoded, "BEP 7: IPv6 peers in peers6")
        #expect(HTTPTrackerReply.body(.error(ErrorResponse(transactionID: 0, message: "unregistered torrent")))
            == q("d14:failure reason20:unregistered torrente"))
        let other = InfoHash(bytes: [UInt8](repeating: 0, count: 20))!
        let scrape = HTTPTrackerReply.body(.scrape(ScrapeResponse(transactionID: 0, entries: [
            ScrapeEntry(seeders: 1, completed: 2, leechers: 3), ScrapeEntry(seeders: 0, completed: 0, leechers: 0)])),
                                           shape: .init(scraped: [hash, other]))
        #expect(scrape == q("d5:filesd20:") + other.bytes + q("d8:completei0e10:downloadedi0e10:incompletei0ee20:") + hash.bytes
            + q("d8:completei1e10:downloadedi2e10:incompletei3eeee"), "files sorted by hash")
        #expect(HTTPTrackerReply.message(body: q("de"), keepAlive: true)
            == q("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nde"))
    }

    // MARK: one core

    func httpAnnounce(peerNumber: UInt32 = 1, event: String = "started") throws -> HTTPTrackerRequest {
        let query = "info_hash=\(hashQuery)&peer_id=-XX0001-%00%00%00%00%00%00%00%00%00%00%00\(String(format: "%%%02X", peerNumber))"
            + "&port=6881&uploaded=0&downloaded=0&left=100&event=\(event)"
        return .announce(try HTTPAnnounce.decode(query: q(query)).get())
    }

    /// The same refusal for the same swarm whichever protocol asks: both are decided by
    /// `decideAnnounce`.
    @Test func bothProtocolsGetTheSameRefusalFromTheAccessPolicy() throws {
        var config = TrackerConfig()
        config.announceLimit = .init(perSecond: 1, burst: 1)
        let handler = PeerRequestHandler(config: config, connectionIDs: ids)
        var store = SwarmStore()
        store.apply(.catalogue(.setAccessMode(.allow)))
        var limiter = handler.makeRateLimiter(key: SipHash24(k0: 9, k1: 9))
        let http = handler.decide(http: try httpAnnounce(), from: peer, exchange: HTTPExchangeID(7), now: t0, store: store, limiter: &limiter)
        guard case .reply(.error(let refusal)) = http else { Issue.record("\(http)"); return }
        #expect(refusal.message == store.catalogue.access.refusalMessage)
        let udp = BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: peer.ip, now: t0), transactionID: 1, infoHash: hash, peerID: peerID(1),
            downloaded: 0, left: 100, uploaded: 0, event: .started, port: 6881)))
        var fresh = handler.makeRateLimiter(key: SipHash24(k0: 9, k1: 9))
        guard case .reply(.error(let udpRefusal)) = handler.decide(udp, from: peer, now: t0, store: store, limiter: &fresh) else {
            Issue.record("udp"); return
        }
        #expect(udpRefusal.message == refusal.message)
        // Beyond its source's announce rate an HTTP client is told so: a connection is not
        // left waiting for nothing.
        let second = handler.decide(http: try httpAnnounce(), from: peer, exchange: HTTPExchangeID(8), now: t0, store: store, limiter: &limiter)
        #expect(second == .reply(.error(ErrorResponse(transactionID: 8, message: PeerRequestHandler.httpRateLimitedMessage))))
    }

    @Test func aStandaloneTrackerAnswersHTTPFromTheSwarmsUDPFills() throws {
        var tracker = StandaloneTracker(handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 1)
        let udpPeer = PeerEndpoint(ip: .v4(0x0A00_0063), port: 7000)
        let datagram = BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: udpPeer.ip, now: t0), transactionID: 1, infoHash: hash, peerID: peerID(99),
            downloaded: 0, left: 0, uploaded: 0, event: .started, port: 7000)))
        _ = tracker.receive(datagram, from: udpPeer, now: t0)
        guard case .announce(let a) = tracker.receive(http: try httpAnnounce(), from: peer, exchange: HTTPExchangeID(1), now: t0) else {
            Issue.record("no announce"); return
        }
        #expect(a.seeders == 1 && a.leechers == 1)
        #expect(a.compactPeers.endpoints == [udpPeer])
        guard case .scrape(let s) = tracker.receive(http: .scrape([hash], key: nil), from: peer, exchange: HTTPExchangeID(2), now: t0) else {
            Issue.record("no scrape"); return
        }
        #expect(s.entries == [ScrapeEntry(seeders: 1, completed: 0, leechers: 1)])
    }

    /// In a cluster an HTTP announce is committed by the same two-phase commit, and
    /// answered on its exchange only once its transaction commits.
    @Test func aMasterAnswersAnHTTPAnnounceOnceItsTransactionCommits() throws {
        var (n, t) = masterWithTwoSlaves()
        let exchange = HTTPExchangeID(41)
        var actions = n.stepEchoing(.http(try httpAnnounce(), from: peer, exchange: exchange), now: t)
        t = t + Milliseconds(5)
        actions += n.stepEchoing(.tick, now: t)
        #expect(!actions.contains { if case .answerHTTP = $0 { true } else { false } }, "not before the commit")
        let tx = try #require(actions.compactMap { a -> Transaction? in
            if case .broadcast(let e) = a, case .prepare(let tx, _, _) = e.message { tx } else { nil }
        }.first)
        let committed = vote(1, tx, .ok, &n, at: t)
        let answers = committed.compactMap { a -> (TrackerResponse, HTTPExchangeID)? in
            if case .answerHTTP(let r, let x) = a { (r, x) } else { nil }
        }
        #expect(answers.count == 1)
        #expect(answers.first?.1 == exchange)
        guard case .announce(let a)? = answers.first?.0 else { Issue.record("\(answers)"); return }
        #expect(a.leechers == 1)
        #expect(!committed.contains { if case .reply = $0 { true } else { false } }, "no datagram for an HTTP announce")
        #expect(n.paths[.httpRequestServed] == 1)
    }

    /// An aborted transaction's HTTP announces are refused at once: no other node holds
    /// them, so there is no heir to leave them to (`KnownRefusals.swift`).
    @Test func anAbortedHTTPAnnounceIsRefusedAtOnce() throws {
        var (n, t) = masterWithTwoSlaves()
        var actions = n.stepEchoing(.http(try httpAnnounce(), from: peer, exchange: HTTPExchangeID(5)), now: t)
        t = t + Milliseconds(5)
        actions = n.stepEchoing(.tick, now: t)
        let tx = try #require(actions.compactMap { a -> Transaction? in
            if case .broadcast(let e) = a, case .prepare(let tx, _, _) = e.message { tx } else { nil }
        }.first)
        _ = vote(1, tx, .notInSync, &n, at: t)
        let aborted = vote(2, tx, .notInSync, &n, at: t)
        #expect(aborted.contains { if case .answerHTTP(.error(let e), HTTPExchangeID(5)) = $0 { AbortRefusal.refuses(e.message) } else { false } })
    }

    @Test func aNodeThatDoesNotServeRefusesAnHTTPRequestAtOnce() throws {
        var (n2, t) = n2FollowingN3(from: t0, ids: ids)
        t = t + Milliseconds(10)
        let actions = n2.step(.http(try httpAnnounce(), from: peer, exchange: HTTPExchangeID(3)), now: t)
        #expect(actions == [.answerHTTP(.error(ErrorResponse(transactionID: 3, message: PeerRequestHandler.notServingMessage)),
                                        exchange: HTTPExchangeID(3))])
        #expect(n2.paths[.httpRefusedNotServing] == 1)
    }

    /// A master leaving office answers the HTTP announces it took and did not answer:
    /// nobody else has them, and a connection would otherwise wait for its timeout.
    @Test func aMasterLeavingOfficeRefusesTheHTTPAnnouncesItHolds() throws {
        var (n, t) = masterWithTwoSlaves()
        _ = n.stepEchoing(.http(try httpAnnounce(), from: peer, exchange: HTTPExchangeID(11)), now: t)
        t = t + Milliseconds(5)
        _ = n.stepEchoing(.tick, now: t)
        _ = n.stepEchoing(.http(try httpAnnounce(peerNumber: 2), from: peer, exchange: HTTPExchangeID(12)), now: t)
        // A higher epoch: n3 steps down.
        var higher = n.epoch
        higher.term += 1
        let actions = n.step(env(from: 1, epoch: higher, .keepalive(Keepalive(role: .master, master: NodeID(1), lastCommitted: .zero,
                                                                             inSync: true, address: ""))), now: t)
        #expect(!n.isServing)
        let refused = actions.compactMap { a -> HTTPExchangeID? in if case .answerHTTP(.error, let x) = a { x } else { nil } }
        #expect(Set(refused) == [HTTPExchangeID(11), HTTPExchangeID(12)])
        #expect(n.paths[.httpRefusedLeavingOffice] == 1)
    }
}
