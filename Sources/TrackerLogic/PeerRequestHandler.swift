import NIOCore

/// An announce accepted for commit, with what is needed to answer it afterwards.
public struct PendingAnnounce: Hashable, Sendable {
    /// Where the reply goes: the datagram's source, which may differ from the announced port.
    public var replyTo: PeerEndpoint
    public var transactionID: UInt32
    public var update: Announce
    public var peersWanted: Int
    /// An HTTP announce's exchange, which its answer goes to; nil: a BEP 15 datagram,
    /// answered to `replyTo`.
    public var exchange: HTTPExchangeID?

    public init(replyTo: PeerEndpoint, transactionID: UInt32, update: Announce, peersWanted: Int, exchange: HTTPExchangeID? = nil) {
        self.replyTo = replyTo; self.transactionID = transactionID
        self.update = update; self.peersWanted = peersWanted; self.exchange = exchange
    }
}

/// What to do with one datagram from a peer.
public enum PeerRequestDecision: Hashable, Sendable {
    /// Answer now: connect, scrape (from committed state), or a BEP 15 error.
    case reply(TrackerResponse)
    /// Commit the announce's update first, then answer with `PeerRequestHandler.answer`.
    case commit(PendingAnnounce)
    /// Not addressable (shorter than a header): say nothing.
    case drop(RequestDecodingError)
}

/// Turns peer datagrams into decisions. Pure and read-only: it never changes the store,
/// so the same code serves a standalone node (commit = apply) and a cluster master
/// (commit = two-phase commit).
public struct PeerRequestHandler: Sendable {
    public var config: TrackerConfig
    public var connectionIDs: ConnectionIDPolicy

    public init(config: TrackerConfig, connectionIDs: ConnectionIDPolicy) {
        self.config = config; self.connectionIDs = connectionIDs
    }

    public static let invalidConnectionIDMessage = "invalid or expired connection id"
    public static let privateScrapeMessage = "this is a private tracker: scrape over HTTP with your key in the URL"

    /// A reloaded configuration: its live settings (`TrackerConfig.takingLiveSettings`)
    /// replace this handler's, and `limiter`'s limits follow them.
    public mutating func reconfigure(_ fresh: TrackerConfig, limiter: inout SourceRateLimiter) {
        config = config.takingLiveSettings(of: fresh)
        limiter.reconfigure(connect: config.connectLimit, announce: config.announceLimit, error: config.errorLimit)
    }

    /// A per-source limiter for this handler's configuration (one per serving node).
    public func makeRateLimiter(key: SipHash24) -> SourceRateLimiter {
        SourceRateLimiter(connect: config.connectLimit, announce: config.announceLimit, error: config.errorLimit, key: key,
                          tableSize: config.rateLimitTableSize)
    }

    /// Decides what to do with one datagram.
    ///
    /// Amplification: a source that has not proven it owns its address (no valid
    /// connection id) never gets a reply larger than what it sent — a connect is answered
    /// with 16 bytes for 16, and an error to an unproven request is cut to the request's
    /// size (or not sent). Connects and announces beyond the source's rate limit get no
    /// reply at all.
    ///
    /// `capacityCheckedAtApply`: leave the capacity check (tracker or swarm full) to
    /// whoever applies the announce at once, as `SwarmStore.announce` does for a cluster of
    /// one; a master checks here, against the state its transaction will be prepared on.
    ///
    /// Every error reply takes a token of the source's error bucket; without one it is
    /// dropped: a spoofed source must not turn the tracker into a reflector of errors.
    ///
    /// `receivedAt`: when a request held through an election arrived (nil: now). Its
    /// announce carries that time (`Announce.at`).
    public func decide(_ datagram: ByteBuffer, from source: PeerEndpoint, now: Instant, receivedAt: Instant? = nil, store: SwarmStore,
                       limiter: inout SourceRateLimiter, capacityCheckedAtApply: Bool = false) -> PeerRequestDecision {
        let source = PeerEndpoint(ip: source.ip.unmapped, port: source.port)
        let decision = decideUnlimited(datagram, from: source, now: now, receivedAt: receivedAt ?? now, store: store, limiter: &limiter,
                                       capacityCheckedAtApply: capacityCheckedAtApply)
        guard case .reply(.error(let e)) = decision, !limiter.allow(.error, from: source.ip, now: now) else { return decision }
        return .drop(Self.rateLimited(e.transactionID))
    }

    private func decideUnlimited(_ datagram: ByteBuffer, from source: PeerEndpoint, now: Instant, receivedAt: Instant, store: SwarmStore,
                                 limiter: inout SourceRateLimiter, capacityCheckedAtApply: Bool) -> PeerRequestDecision {
        let size = datagram.readableBytes
        let request: TrackerRequest
        switch BEP15Codec.decodeRequest(datagram) {
        case .success(let r): request = r
        case .failure(let error):
            guard let tid = error.transactionID else { return .drop(error) }
            return Self.unproven(.error(ErrorResponse(transactionID: tid, message: error.message)), within: size, or: error)
        }
        switch request {
        case .connect(let r):
            guard limiter.allow(.connect, from: source.ip, now: now) else { return .drop(Self.rateLimited(r.transactionID)) }
            return .reply(.connect(ConnectResponse(transactionID: r.transactionID,
                                                   connectionID: connectionIDs.issue(for: source.ip, now: now))))
        case .announce(let r):
            guard connectionIDs.isValid(r.connectionID, for: source.ip, now: now) else {
                return Self.unproven(.error(ErrorResponse(transactionID: r.transactionID, message: Self.invalidConnectionIDMessage)),
                                     within: size, or: Self.invalidID(r.transactionID))
            }
            return decideAnnounce(r, from: source, now: now, receivedAt: receivedAt, store: store, limiter: &limiter,
                                  capacityCheckedAtApply: capacityCheckedAtApply)
        case .scrape(let r):
            guard connectionIDs.isValid(r.connectionID, for: source.ip, now: now) else {
                return Self.unproven(.error(ErrorResponse(transactionID: r.transactionID, message: Self.invalidConnectionIDMessage)),
                                     within: size, or: Self.invalidID(r.transactionID))
            }
            // BEP 41 options follow only an announce: a UDP scrape carries no key.
            if store.catalogue.access.mode == .private {
                return .reply(.error(ErrorResponse(transactionID: r.transactionID, message: Self.privateScrapeMessage)))
            }
            let hashes = r.infoHashes.prefix(config.maxScrapeHashes)
            return .reply(.scrape(ScrapeResponse(transactionID: r.transactionID, entries: hashes.map(store.scrape))))
        }
    }

    /// An announce from a source that proved its address (BEP 15: a valid connection id;
    /// HTTP: the TCP handshake): both protocols decide here, by the same rate limits,
    /// policy, filters and capacity, so a peer gets the same answer whichever it uses.
    func decideAnnounce(_ r: AnnounceRequest, from source: PeerEndpoint, now: Instant, receivedAt: Instant, store: SwarmStore,
                        limiter: inout SourceRateLimiter, capacityCheckedAtApply: Bool, exchange: HTTPExchangeID? = nil) -> PeerRequestDecision {
        guard limiter.allow(.announce, from: source.ip, now: now) else { return .drop(Self.rateLimited(r.transactionID)) }
        if let refusal = refusal(of: r, source: source, store: store, capacityCheckedAtApply: capacityCheckedAtApply) {
            return .reply(.error(ErrorResponse(transactionID: r.transactionID, message: refusal)))
        }
        var ip = source.ip
        if config.trustAnnouncedIP, r.ip != 0, source.ip.family == .v4 { ip = .v4(r.ip) }
        let update = Announce(infoHash: r.infoHash, peerID: r.peerID, endpoint: PeerEndpoint(ip: ip, port: r.port),
                              uploaded: r.uploaded, downloaded: r.downloaded, left: r.left, event: r.event, at: receivedAt,
                              trackerKey: store.catalogue.access.mode == .private ? r.trackerKey : nil)
        return .commit(PendingAnnounce(replyTo: source, transactionID: r.transactionID, update: update,
                                       peersWanted: config.peersWanted(r.numWant, family: ip.family), exchange: exchange))
    }

    /// Why an announce from a proven source is refused at once, with no commit: port 0,
    /// the user's key (private mode), the access policy, the client filter, or (unless
    /// whoever applies it checks) a full tracker or swarm.
    func refusal(of r: AnnounceRequest, source: PeerEndpoint, store: SwarmStore, capacityCheckedAtApply: Bool) -> String? {
        guard r.port != 0 || r.event == .stopped else { return "invalid port 0" }
        if let refused = store.catalogue.access.userRefusal(key: r.trackerKey) { return refused }
        if !store.catalogue.admits(r.infoHash) { return store.catalogue.access.refusalMessage }
        if let refused = store.catalogue.access.clients.refusal(of: r.peerID) { return refused }
        guard !capacityCheckedAtApply, r.event != .stopped else { return nil }
        return capacityProblem(r, source: source, store: store)
    }

    /// Whether a master answers this announce the moment it reads it, as it does a connect,
    /// rather than once its transaction commits: a refusal (`refusal(of:)`) or a bad
    /// connection id. What shows such an announce was answered is any message of a serving
    /// master heard after it (`HeldRequests`); rate limits aside, which only ever drop.
    /// A datagram that is not a well-formed announce counts as answered at once.
    public func answersAtOnce(_ datagram: ByteBuffer, from source: PeerEndpoint, now: Instant, store: SwarmStore) -> Bool {
        guard case .success(.announce(let r)) = BEP15Codec.decodeRequest(datagram) else { return true }
        let source = PeerEndpoint(ip: source.ip.unmapped, port: source.port)
        guard connectionIDs.isValid(r.connectionID, for: source.ip, now: now) else { return true }
        return refusal(of: r, source: source, store: store, capacityCheckedAtApply: false) != nil
    }

    /// Why a new announce cannot be held: the tracker or the swarm is full.
    func capacityProblem(_ r: AnnounceRequest, source: PeerEndpoint, store: SwarmStore) -> String? {
        // Below every limit, with no swarm that could be full, no swarm needs reading.
        if store.peerCount < config.maxPeers, store.swarmCount < config.maxSwarms,
           store.swarmPeersBound < config.maxPeersPerSwarm { return nil }
        let ip = config.trustAnnouncedIP && r.ip != 0 && source.ip.family == .v4 ? IPAddress.v4(r.ip) : source.ip
        // Whether the peer is held is a lookup into its swarm: asked only at a limit.
        return capacityProblem(peers: store.peerCount(in: r.infoHash), swarms: store.swarmCount, totalPeers: store.peerCount,
                               holdsPeer: { store.peer(PeerKey(peerID: r.peerID, ip: ip), in: r.infoHash) != nil })
    }

    /// The same, from the announce's swarm: how many peers it holds (nil: no such swarm
    /// yet), how many swarms and peers there are in all, and whether the announcing peer
    /// is already in the swarm (asked only when a limit is reached: it is a lookup). A
    /// peer already held keeps announcing whatever the limits.
    public func capacityProblem(peers: Int?, swarms: Int, totalPeers: Int, holdsPeer: () -> Bool) -> String? {
        let trackerFull = totalPeers >= config.maxPeers
        guard let peers else {
            if swarms >= config.maxSwarms { return "tracker is full (\(config.maxSwarms) swarms); retry later" }
            return trackerFull ? Self.trackerFull(config.maxPeers) : nil
        }
        let swarmFull = peers >= config.maxPeersPerSwarm
        guard swarmFull || trackerFull, !holdsPeer() else { return nil }
        return swarmFull ? "swarm is full (\(config.maxPeersPerSwarm) peers); retry later" : Self.trackerFull(config.maxPeers)
    }

    static func trackerFull(_ peers: Int) -> String { "tracker is full (\(peers) peers); retry later" }

    /// An answer to a source that proved nothing: cut to fit in the request's size, or
    /// dropped when not even the header fits.
    static func unproven(_ response: TrackerResponse, within size: Int, or error: RequestDecodingError) -> PeerRequestDecision {
        guard case .error(var e) = response else { return .reply(response) }
        let room = size - 8
        guard room > 0 else { return .drop(error) }
        if e.message.utf8.count > room { e.message = String(decoding: e.message.utf8.prefix(room), as: UTF8.self) }
        // Decoding repair may lengthen a cut multi-byte character: stay within the room.
        while e.message.utf8.count > room { e.message.removeLast() }
        return .reply(.error(e))
    }


    static func rateLimited(_ tid: UInt32) -> RequestDecodingError { RequestDecodingError(reason: .rateLimited, transactionID: tid) }
    static func invalidID(_ tid: UInt32) -> RequestDecodingError { RequestDecodingError(reason: .invalidConnectionID, transactionID: tid) }

    /// The answer to a committed announce, computed from the state its transaction left.
    ///
    /// Invariant: a start or refresh is answered by counts that hold its own peer. When a
    /// later stop of the same peer in the same transaction removed it (a peer may send its
    /// stop before the start is answered), the peer is counted as its announce left it: the
    /// answer is then the state after every other update of the transaction, which a serial
    /// order of the announces gives, since updates of different peers commute. Answered from
    /// the final state alone, the start would get "0 seeders, 0 leechers", which no order of
    /// the two announces explains (TransactionAnswerTests).
    ///
    /// `swarm`: what the announce's swarm says (`SwarmStore.answer`, read with
    /// `peersToPick(for:)` peers), nil when the store holds no such swarm.
    public func answer(_ pending: PendingAnnounce, swarm: SwarmAnswer?) -> TrackerResponse {
        let update = pending.update
        var answered = swarm?.answer ?? AnnounceAnswer(peers: CompactPeers(family: update.endpoint.ip.family), seeders: 0, leechers: 0)
        if update.event != .stopped, swarm?.holds != true {
            if update.left == 0 { answered.seeders += 1 } else { answered.leechers += 1 }
        }
        return answer(pending, answered)
    }

    /// How many peers a committed announce's answer carries: none for a stop.
    public func peersToPick(for pending: PendingAnnounce) -> Int? {
        pending.update.event == .stopped ? nil : pending.peersWanted
    }

    public func answer(_ pending: PendingAnnounce, _ answer: AnnounceAnswer) -> TrackerResponse {
        .announce(AnnounceResponse(
            transactionID: pending.transactionID, interval: interval(for: pending),
            leechers: UInt32(clamping: answer.leechers), seeders: UInt32(clamping: answer.seeders), compactPeers: answer.peers))
    }

    /// The interval this announce's reply carries: a point of `config.intervalBand` drawn
    /// from the request (its transaction id and where it came from) under the tracker's
    /// connection-id key. No state and no clock: a retransmitted request gets the same
    /// interval, each new request another, and nobody without the key can aim for one.
    public func interval(for pending: PendingAnnounce) -> UInt32 {
        let band = config.intervalBand
        let width = UInt64(band.upperBound - band.lowerBound) + 1
        guard width > 1 else { return band.lowerBound }
        let source: (UInt64, UInt64) = switch pending.replyTo.ip {
        case .v4(let v): (UInt64(v), 4)
        case .v6(let hi, let lo): (hi, lo)
        }
        let hasher = connectionIDs.hasher
        let h = hasher.hash(hasher.hash(Self.jitterDomain | UInt64(pending.transactionID), UInt64(pending.replyTo.port), source.0), source.1)
        return band.lowerBound + UInt32(truncatingIfNeeded: h % width)
    }

    /// Keeps these hashes apart from the connection ids made under the same key.
    static let jitterDomain: UInt64 = 0x6a69_7474_0000_0000

    /// The BEP 15 error a peer gets when its announce could not be committed.
    public func refusal(_ pending: PendingAnnounce, reason: String) -> TrackerResponse {
        .error(ErrorResponse(transactionID: pending.transactionID, message: reason))
    }
}

/// A cluster of one: commit is apply. Used by `tracker run --udp`, and a reference the
/// cluster's behaviour towards peers is compared with.
public struct StandaloneTracker: Sendable {
    public var handler: PeerRequestHandler
    public private(set) var store = SwarmStore(keepsDigest: false)
    private var rng: SeededGenerator
    private var nextExpiry: Instant?
    public private(set) var limiter: SourceRateLimiter

    public init(handler: PeerRequestHandler, seed: UInt64) {
        self.handler = handler
        var rng = SeededGenerator(seed: seed)
        self.limiter = handler.makeRateLimiter(key: SipHash24(k0: rng.next(), k1: rng.next()))
        self.rng = rng
    }

    /// A reloaded configuration: its live settings apply from the next request on.
    public mutating func reconfigure(_ config: TrackerConfig) {
        handler.reconfigure(config, limiter: &limiter)
    }

    /// Returns the reply to send to the datagram's source, if any.
    public mutating func receive(_ datagram: ByteBuffer, from source: PeerEndpoint, now: Instant) -> TrackerResponse? {
        carryOut(handler.decide(datagram, from: source, now: now, store: store, limiter: &limiter, capacityCheckedAtApply: true))
    }

    /// The answer to an HTTP tracker request, decided by the same core as a datagram.
    public mutating func receive(http request: HTTPTrackerRequest, from source: PeerEndpoint, exchange: HTTPExchangeID,
                                 now: Instant) -> TrackerResponse {
        let decision = handler.decide(http: request, from: source, exchange: exchange, now: now, store: store, limiter: &limiter,
                                      capacityCheckedAtApply: true)
        // An HTTP decision always answers (`decide(http:)` turns a drop into a refusal).
        return carryOut(decision) ?? .error(ErrorResponse(transactionID: 0, message: PeerRequestHandler.httpRateLimitedMessage))
    }

    /// A decision carried out: a commit is applied at once.
    mutating func carryOut(_ decision: PeerRequestDecision) -> TrackerResponse? {
        switch decision {
        case .reply(let response):
            return response
        case .commit(let pending):
            switch store.announce(pending.update, wanting: pending.peersWanted, rng: &rng, admit: handler.capacityProblem) {
            case .refused(let reason): return handler.refusal(pending, reason: reason)
            case .applied(let answer): return handler.answer(pending, answer)
            }
        case .drop:
            return nil
        }
    }

    /// The operator's catalogue change: a cluster of one commits it at once.
    public mutating func apply(_ change: CatalogueChange) -> String? {
        if let refusal = change.refusal(in: store.catalogue) { return refusal }
        store.apply(.catalogue(change))
        return nil
    }

    /// Takes `catalogue` as its own (this tracker's catalogue is empty: a service that
    /// starts), as the operator's changes would have built it.
    public mutating func install(_ catalogue: Catalogue) {
        for change in catalogue.rebuildingChanges { _ = apply(change) }
    }

    /// Drops peers that have not announced within the timeout. Call it now and then; it
    /// does the work at most once per tenth of the timeout.
    public mutating func tick(now: Instant) {
        let timeout = handler.config.effectivePeerTimeout
        if let next = nextExpiry, now < next { return }
        nextExpiry = now + Milliseconds(max(timeout.value / 10, 1000))
        store.apply(.expire(before: now - timeout))
    }
}
