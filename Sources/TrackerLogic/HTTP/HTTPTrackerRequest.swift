/// An HTTP tracker request waiting on its connection, by the listener's number for it.
/// The node answers it by this number (`NodeAction.answerHTTP`); only the listener knows
/// which connection it is and how its answer is written (`HTTPTrackerReply.Shape`).
public struct HTTPExchangeID: Hashable, Sendable, CustomStringConvertible {
    public var value: UInt64
    public init(_ value: UInt64) { self.value = value }
    public var description: String { "http#\(value)" }
}

/// What an HTTP tracker request asks, routed by its path.
public enum HTTPTrackerRequest: Hashable, Sendable {
    case announce(HTTPAnnounce)
    /// The hashes, and the user's key from the path (`/scrape/<key>`).
    case scrape([InfoHash], key: TrackerKey?)

    /// Why a request is not one the tracker serves.
    public enum Refusal: Error, Hashable, Sendable {
        /// A path the tracker does not serve: a 404.
        case notFound
        /// A tracker path with a query it refuses: a `failure reason`.
        case query(HTTPQueryError)
    }

    public static let announcePath = Array("/announce".utf8)
    public static let scrapePath = Array("/scrape".utf8)

    /// `/announce` and `/scrape`, each bare or with one more segment: a user's key, as a
    /// private tracker's URLs carry it (`/announce/<key>`). A segment that is no key's
    /// shape gets a `failure reason` saying so, not a 404: it is a user's typo.
    public static func decode(_ head: HTTPRequestHead) -> Result<HTTPTrackerRequest, Refusal> {
        let path = head.path
        if let key = keySegment(path, after: announcePath) {
            return HTTPAnnounce.decode(query: head.query).flatMap { a in
                var a = a
                return trackerKey(key).map { a.trackerKey = $0; return HTTPTrackerRequest.announce(a) }
            }.mapError(Refusal.query)
        }
        if let key = keySegment(path, after: scrapePath) {
            return HTTPScrape.decode(query: head.query).flatMap { hashes in
                trackerKey(key).map { HTTPTrackerRequest.scrape(hashes, key: $0) }
            }.mapError(Refusal.query)
        }
        return .failure(.notFound)
    }

    /// What follows `route` in `path`: nil when the path is not the route; an empty
    /// segment for the bare route; else the one segment after a `/`.
    static func keySegment(_ path: ArraySlice<UInt8>, after route: [UInt8]) -> ArraySlice<UInt8>? {
        guard path.starts(with: route) else { return nil }
        let rest = path.dropFirst(route.count)
        if rest.isEmpty { return rest }
        guard rest.first == UInt8(ascii: "/"), !rest.dropFirst().contains(UInt8(ascii: "/")) else { return nil }
        return rest.dropFirst()
    }

    static func trackerKey(_ segment: ArraySlice<UInt8>) -> Result<TrackerKey?, HTTPQueryError> {
        if segment.isEmpty { return .success(nil) }
        guard let key = TrackerKey(bytes: segment) else {
            return .failure(.invalid("the key in the path", "is not a tracker key (\(TrackerKey.length) of A-Z, a-z, 0-9, '-', '_')"))
        }
        return .success(key)
    }

    /// How its answer is written.
    public var shape: HTTPTrackerReply.Shape {
        switch self {
        case .announce(let a): HTTPTrackerReply.Shape(compact: a.compact)
        case .scrape(let hashes, _): HTTPTrackerReply.Shape(scraped: hashes)
        }
    }
}

extension HTTPAnnounce {
    /// As the BEP 15 announce it asks the same of, so both protocols are decided by one
    /// core (`PeerRequestHandler.decideAnnounce`). `ip` counts when it is an IPv4 address,
    /// as BEP 15's field can only be (and is used only when trusted).
    package func asBEP15(transactionID: UInt32) -> AnnounceRequest {
        var ip: UInt32 = 0
        if let text = announcedIP, case .v4(let v)? = IPAddress(String(decoding: text, as: UTF8.self)) { ip = v }
        return AnnounceRequest(connectionID: 0, transactionID: transactionID, infoHash: infoHash, peerID: peerID,
                               downloaded: downloaded, left: left, uploaded: uploaded, event: event, ip: ip,
                               numWant: numWant.map { Int32(clamping: $0) } ?? -1, port: port, trackerKey: trackerKey)
    }
}

extension PeerRequestHandler {
    public static let httpRateLimitedMessage = "too many announces from your address; retry later"
    /// What a node that does not serve peers now answers an HTTP request (a follower, or
    /// a node in an election, or a master leaving office with the request unanswered).
    public static let notServingMessage = "this tracker node is not serving peers now (election or failover); retry"

    /// Decides an HTTP tracker request as `decide` does a datagram, through the same
    /// announce core. The TCP handshake proved the source's address, so there is no
    /// connection id, and a refusal is always answered: it is a write on a connection the
    /// client opened, not a datagram a spoofed source could aim at someone. An announce
    /// beyond its source's rate gets a `failure reason` rather than silence, since a
    /// connection waiting for nothing would hold its place until it timed out.
    public func decide(http request: HTTPTrackerRequest, from source: PeerEndpoint, exchange: HTTPExchangeID, now: Instant,
                       receivedAt: Instant? = nil, store: SwarmStore, limiter: inout SourceRateLimiter,
                       capacityCheckedAtApply: Bool = false) -> PeerRequestDecision {
        let source = PeerEndpoint(ip: source.ip.unmapped, port: source.port)
        let tid = UInt32(truncatingIfNeeded: exchange.value)
        switch request {
        case .announce(let a):
            let decision = decideAnnounce(a.asBEP15(transactionID: tid), from: source, now: now, receivedAt: receivedAt ?? now,
                                          store: store, limiter: &limiter, capacityCheckedAtApply: capacityCheckedAtApply,
                                          exchange: exchange)
            guard case .drop = decision else { return decision }
            return .reply(.error(ErrorResponse(transactionID: tid, message: Self.httpRateLimitedMessage)))
        case .scrape(let hashes, let key):
            if let refused = store.catalogue.access.userRefusal(key: key) {
                return .reply(.error(ErrorResponse(transactionID: tid, message: refused)))
            }
            return .reply(.scrape(ScrapeResponse(transactionID: tid, entries: hashes.prefix(config.maxScrapeHashes).map(store.scrape))))
        }
    }
}
