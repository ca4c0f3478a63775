import TrackerLogic

/// The scenario's HTTP clients (`Scenario.httpPeers`): each asks one node at a time over
/// a connection, as a client of the floating address reaches whichever host holds it.
/// A node that does not serve says so; the client then asks the next node, and so it
/// does when its connection fails (the process is down, or cut from the peers) or no
/// answer comes within `timeout`.
///
/// What the checker holds them to, beside what it holds every announce to:
/// - an exchange is answered at most once, and only by the process it reached;
/// - an announce is answered only by a serving master, with its configured interval, and
///   is then acknowledged as a datagram's answer is (nothing acknowledged is lost).
struct HTTPExchange {
    var peer: Int
    var slot: Int
    var request: HTTPTrackerRequest
    /// The process that read it (nil while in flight).
    var process: UInt64?
    var answered = false
}

extension SimPeer {
    /// How long a client waits for an answer before it gives up on the connection.
    static let httpTimeout = Milliseconds.seconds(4)

    /// The request for this turn: an announce (its lifecycle as a BEP 15 peer's), or now
    /// and then a scrape.
    mutating func httpRequest(_ rng: inout SeededGenerator) -> HTTPTrackerRequest {
        if started, rng.chance(0.15) { return .scrape([infoHash], key: trackerKey) }
        let event = nextEvent(&rng)
        var a = HTTPAnnounce(infoHash: infoHash, peerID: peerID, port: endpoint.port, uploaded: Int64(rng.below(1000)),
                             downloaded: Int64(rng.below(1000)), left: left, event: event,
                             numWant: rng.chance(0.2) ? nil : rng.below(60), key: nil, compact: true, noPeerID: false, announcedIP: nil)
        a.trackerKey = trackerKey
        return .announce(a)
    }

    /// The answer to exchange `exchange` (nil: the connection failed): a violation, or nil.
    mutating func receiveHTTP(_ response: TrackerResponse?, exchange: UInt64, nodes: Int, now: Instant) -> String? {
        guard let o = httpOutstanding, o.exchange == exchange else { return nil }  // given up on already
        httpOutstanding = nil
        guard let response else {
            httpTarget = (o.slot + 1) % max(nodes, 1)
            return nil
        }
        switch (o.request, response) {
        case (.announce(let a), .announce(let r)):
            return announceAnswered(a.event, r, now: now)
        case (.scrape(let hashes, _), .scrape(let r)):
            return r.entries.count == hashes.count ? nil : "HTTP scrape reply to p\(index) has \(r.entries.count) entries"
        case (_, .error(let e)):
            errors.append(e.message)
            if SimPeer.isPolicyRefusal(e.message) {
                lastAnnounceReply = now
            } else {
                // Not served here (or not now): the next node.
                httpTarget = (o.slot + 1) % max(nodes, 1)
            }
            return nil
        default:
            return "peer p\(index) got \(response) over HTTP to \(o.request)"
        }
    }
}

extension Simulator {
    /// An HTTP peer's turn: a new request to the node it asks now, unless one is still
    /// waiting within its timeout.
    mutating func httpTurn(_ p: Int) {
        if let o = workload.peers[p].httpOutstanding {
            if now - o.sentAt < SimPeer.httpTimeout {
                workload.schedule(p, at: o.sentAt + SimPeer.httpTimeout, now: now, queue: &queue)
                return
            }
            workload.peers[p].httpOutstanding = nil
            workload.peers[p].httpTarget = (o.slot + 1) % max(slots.count, 1)
        }
        let request = workload.peers[p].httpRequest(&rng)
        nextExchange += 1
        let exchange = nextExchange
        let slot = workload.peers[p].httpTarget % max(slots.count, 1)
        workload.peers[p].httpOutstanding = SimPeer.HTTPOutstanding(exchange: exchange, request: request, slot: slot, sentAt: now)
        httpExchanges[exchange] = HTTPExchange(peer: p, slot: slot, request: request)
        if case .announce(let a) = request {
            let key = RequestKey(peer: p, tid: UInt32(truncatingIfNeeded: exchange))
            if a.event == .stopped { checker.stopSent(by: workload.peers[p].key, at: now) }
            checker.announceSent(by: workload.peers[p].key, values: .init(uploaded: a.uploaded, downloaded: a.downloaded, left: a.left,
                                                                          port: a.port),
                                 request: key, at: now)
        }
        // A connection: it fails at once where no process listens or the peers cannot
        // reach the host; a stream does not lose what it carries.
        if slots[slot].isRunning && !network.isolated.contains(slot) {
            queue.push(now + network.delay(slot), .httpRequest(slot, exchange))
        } else {
            queue.push(now + network.delay(slot), .httpReply(p, exchange, nil))
        }
        workload.schedule(p, at: now + SimPeer.httpTimeout, now: now, queue: &queue)
    }

    /// A request reaches its node: the process running there reads it.
    mutating func deliverHTTP(_ exchange: UInt64, to slot: Int) {
        guard var x = httpExchanges[exchange] else { return }
        guard slots[slot].isRunning, !network.isolated.contains(slot), let process = slots[slot].inspect({ $0.incarnation }) else {
            queue.push(now + network.delay(slot), .httpReply(x.peer, exchange, nil))
            return
        }
        x.process = process
        httpExchanges[exchange] = x
        step(slot, .http(x.request, from: workload.peers[x.peer].endpoint, exchange: HTTPExchangeID(exchange)),
             label: "http p\(x.peer) #\(exchange)")
    }

    /// A node answers an HTTP exchange (`NodeExecutor.answerHTTP`).
    mutating func answerHTTPExchange(_ response: TrackerResponse, exchange: HTTPExchangeID, from slot: Int) {
        guard var x = httpExchanges[exchange.value] else { return fail("s\(slot) answered \(exchange), which no peer opened") }
        let me = slots[slot].inspect { $0.incarnation }
        guard x.slot == slot, x.process != nil, x.process == me else {
            return fail("s\(slot) answered \(exchange), which another process read")
        }
        guard !x.answered else { return fail("s\(slot) answered \(exchange) twice") }
        x.answered = true
        httpExchanges[exchange.value] = x
        replies.append((now, slot, { if case .error = response { true } else { false } }()))
        if case .announce(let r) = response {
            guard slots[slot].isServing else { return fail("s\(slot) answered an HTTP announce while not a serving master") }
            let band = trackerConfig(of: slot).intervalBand
            if !band.contains(r.interval) {
                return fail("s\(slot) told p\(x.peer) over HTTP to announce every \(r.interval)s; its configuration says "
                            + "\(band.lowerBound)...\(band.upperBound)s")
            }
            recordAck(peer: x.peer, request: RequestKey(peer: x.peer, tid: UInt32(truncatingIfNeeded: exchange.value)), by: slot)
        }
        queue.push(now + network.delay(slot), .httpReply(x.peer, exchange.value, response))
    }

    /// The answer (or the connection's failure) reaches its peer, which checks it.
    mutating func httpReplyReaches(_ p: Int, exchange: UInt64, _ response: TrackerResponse?) {
        httpExchanges[exchange] = nil
        if let v = workload.peers[p].receiveHTTP(response, exchange: exchange, nodes: slots.count, now: now) { fail(v) }
        traceDigest.add(UInt64(p), exchange)
        workload.schedule(p, at: now + Milliseconds(Int64(200 + rng.below(1500))), now: now, queue: &queue)
    }
}
