import NIOCore
import TrackerLogic

/// A BitTorrent client in the simulation: connects, announces, scrapes and retransmits
/// as BEP 15 says (15 · 2ⁿ s, scaled down to 1 · 2ⁿ s), sending to the group address.
struct SimPeer {
    let index: Int
    let endpoint: PeerEndpoint
    let peerID: PeerID
    let trackerKey: TrackerKey
    let infoHash: InfoHash
    var left: Int64 = 1 << 20
    var started = false
    var connectionID: UInt64?
    var connectedAt = Instant.zero
    var outstanding: Outstanding?
    var nextTID: UInt32
    /// Transaction ids answered or given up on recently: a late reply to them is fine (a
    /// new master answers what it held from the election).
    var answered: [UInt32] = []
    /// When an announce was last answered: its peers, or the access policy's refusal.
    var lastAnnounceReply: Instant?
    var announceReplies = 0
    var errors: [String] = []
    var wakeAt: Instant?
    /// An HTTP client (`HTTPPeers.swift`): it asks one node at a time, over a connection,
    /// instead of multicasting datagrams.
    var http = false
    /// The node slot it asks next (a client of the floating address reaches whichever
    /// host holds it): kept while answered, moved on after a refusal or a timeout.
    var httpTarget = 0
    var httpOutstanding: HTTPOutstanding?

    struct HTTPOutstanding {
        var exchange: UInt64
        var request: HTTPTrackerRequest
        var slot: Int
        var sentAt: Instant
    }

    struct Outstanding {
        var request: TrackerRequest
        var attempt: Int
        var sentAt: Instant
    }

    /// Every third peer is an IPv6 one, each in a /64 of its own (the rate limiter's unit
    /// for IPv6), so the replicas' IPv6 tables, completions and 18-byte replies are
    /// exercised beside the IPv4 ones. Decided by the index, so no draw changes.
    init(index: Int, infoHash: InfoHash, rng: inout SeededGenerator) {
        self.index = index
        let ip: IPAddress = index % 3 == 2 ? .v6(0x2001_0DB8_0000_0000 | UInt64(index + 1) << 16, 0x1) : .v4(0x0A00_0000 | UInt32(index + 1))
        self.endpoint = PeerEndpoint(ip: ip, port: UInt16(6881 + index))
        self.peerID = PeerID(a: 0x2D53_4930_3030_312D, b: rng.next(), c: UInt32(index))
        self.infoHash = infoHash
        self.nextTID = UInt32(truncatingIfNeeded: rng.next())
        self.trackerKey = Self.trackerKey(index)
    }

    /// The key of peer `k`'s user (`OperatorAction.Change.user`): every request carries it,
    /// as a private torrent's URL does, whatever the mode. Derived from the index, so no
    /// draw of the world's stream changes.
    static func trackerKey(_ k: Int) -> TrackerKey {
        var rng = SeededGenerator(seed: 0x5EC2_E7 &+ UInt64(k))
        return TrackerKey.random(using: &rng)
    }

    /// A refusal of the peer's announce that is an answer: the access policy refused the
    /// swarm, the client filter the peer, or private mode its key.
    static func isPolicyRefusal(_ message: String) -> Bool {
        message == AccessPolicy.notAllowedMessage || message == AccessPolicy.deniedMessage || ClientFilter.isRefusal(message)
            || message == UserDirectory.keyMissingMessage || message == UserDirectory.keyUnknownMessage
            || message == UserDirectory.userDisabledMessage
    }

    static func retransmitAfter(_ attempt: Int) -> Milliseconds { Milliseconds(1000 << min(attempt, 8)) }
    static let maxAttempts = 4

    var key: PeerKey { PeerKey(peerID: peerID, ip: endpoint.ip) }

    /// What to send now, if anything.
    mutating func wake(now: Instant, rng: inout SeededGenerator) -> ByteBuffer? {
        if var o = outstanding {
            guard now - o.sentAt >= Self.retransmitAfter(o.attempt) else { return nil }
            o.attempt += 1
            if o.attempt >= Self.maxAttempts {
                // Give up on this request and start over with a fresh connection.
                remember(o.request.transactionID)
                outstanding = nil
                connectionID = nil
            } else {
                o.sentAt = now
                outstanding = o
                return BEP15Codec.encode(o.request)
            }
        }
        nextTID &+= 1
        let tid = nextTID
        let request: TrackerRequest
        if let cid = connectionID, now - connectedAt < Milliseconds.seconds(100) {
            if rng.chance(0.15) {
                request = .scrape(ScrapeRequest(connectionID: cid, transactionID: tid, infoHashes: [infoHash]))
            } else {
                let event = nextEvent(&rng)
                request = .announce(AnnounceRequest(
                    connectionID: cid, transactionID: tid, infoHash: infoHash, peerID: peerID,
                    downloaded: Int64(rng.below(1000)), left: left, uploaded: Int64(rng.below(1000)), event: event,
                    key: UInt32(index), numWant: Int32(rng.below(60)) - 5, port: endpoint.port, trackerKey: trackerKey))
            }
        } else {
            connectionID = nil
            request = .connect(ConnectRequest(transactionID: tid))
        }
        outstanding = Outstanding(request: request, attempt: 0, sentAt: now)
        return BEP15Codec.encode(request)
    }

    mutating func remember(_ tid: UInt32) {
        answered.append(tid)
        if answered.count > 16 { answered.removeFirst() }
    }

    /// Checks an announce's answer, whichever protocol carried it.
    mutating func announceAnswered(_ event: AnnounceEvent, _ r: AnnounceResponse, now: Instant) -> String? {
        if r.peers.contains(endpoint) { return "peer p\(index) was given itself as a peer" }
        if event != .stopped && r.seeders + r.leechers == 0 { return "announce reply to p\(index) counts no peer" }
        if event == .stopped { started = false } else { started = true }
        lastAnnounceReply = now
        announceReplies += 1
        return nil
    }

    /// The next announce's event, as a client's lifecycle goes: started, then completed
    /// once, sometimes stopped.
    mutating func nextEvent(_ rng: inout SeededGenerator) -> AnnounceEvent {
        if !started { return .started }
        if left > 0 && rng.chance(0.15) {
            left = 0
            return .completed
        }
        return rng.chance(0.05) ? .stopped : .none
    }

    var nextDeadline: Instant? { outstanding.map { $0.sentAt + Self.retransmitAfter($0.attempt) } }

    /// Checks a reply against what was asked. Returns a violation, or nil.
    mutating func receive(_ datagram: ByteBuffer, now: Instant) -> String? {
        guard case .success(let response) = BEP15Codec.decodeResponse(datagram, family: endpoint.ip.family) else {
            return "peer p\(index) got a malformed reply"
        }
        let tid = response.transactionID
        guard let o = outstanding, o.request.transactionID == tid else {
            if answered.contains(tid) { return nil }  // a duplicate of an answered request
            return "peer p\(index) got a reply to unknown transaction \(tid)"
        }
        outstanding = nil
        remember(tid)
        switch (o.request, response) {
        case (.connect, .connect(let r)):
            connectionID = r.connectionID
            connectedAt = now
        case (.announce(let a), .announce(let r)):
            if let v = announceAnswered(a.event, r, now: now) { return v }
        case (.scrape(let s), .scrape(let r)):
            if r.entries.count != s.infoHashes.count { return "scrape reply to p\(index) has \(r.entries.count) entries" }
        case (.announce, .error(let e)) where Self.isPolicyRefusal(e.message):
            // The access policy refused the swarm, the client filter the peer, or private
            // mode its key: the tracker answered, as it should.

            errors.append(e.message)
            lastAnnounceReply = now
        case (.announce, .error(let e)), (.scrape, .error(let e)):
            errors.append(e.message)
            if e.message == PeerRequestHandler.invalidConnectionIDMessage { connectionID = nil }
        default:
            return "peer p\(index) got \(response) to \(o.request)"
        }
        return nil
    }
}
