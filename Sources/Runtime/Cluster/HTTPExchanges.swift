import NIOCore
import TrackerLogic

/// The HTTP tracker requests a node is deciding, by exchange number, on the node's loop.
///
/// Invariant: each waits for at most `timeout`, and its answer is given exactly
/// once: by the node's answer (`NodeAction.answerHTTP`), by the timeout, or when the
/// service stops. An answer for an exchange no longer here (it timed out) is dropped.
/// At most `limit` wait at once; the next is refused at once.
struct HTTPExchanges {
    private var waiting: [UInt64: HTTPTrackerAnswer] = [:]
    /// Exchange numbers in the order they opened, with their deadlines (numbers already
    /// answered are skipped when reached).
    private var deadlines: [(id: UInt64, at: NIODeadline)] = []
    private var head = 0
    private var next: UInt64 = 1
    let limit: Int
    let timeout: TimeAmount

    init(limit: Int, timeout: TimeAmount) { self.limit = limit; self.timeout = timeout }

    var count: Int { waiting.count }

    mutating func open(_ answer: HTTPTrackerAnswer, now: NIODeadline) -> HTTPExchangeID? {
        guard waiting.count < limit else { return nil }
        let id = next
        next &+= 1
        waiting[id] = answer
        deadlines.append((id, now + timeout))
        return HTTPExchangeID(id)
    }

    mutating func close(_ exchange: HTTPExchangeID) -> HTTPTrackerAnswer? {
        waiting.removeValue(forKey: exchange.value)
    }

    /// The answers whose time ran out by `now`, removed.
    mutating func expired(_ now: NIODeadline) -> [HTTPTrackerAnswer] {
        var out: [HTTPTrackerAnswer] = []
        while head < deadlines.count, deadlines[head].at <= now {
            if let p = waiting.removeValue(forKey: deadlines[head].id) { out.append(p) }
            head += 1
        }
        if head > 1024, head * 2 > deadlines.count {
            deadlines.removeFirst(head)
            head = 0
        }
        return out
    }

    /// Every answer still waiting, removed (the service stops).
    mutating func removeAll() -> [HTTPTrackerAnswer] {
        defer { waiting = [:]; deadlines = []; head = 0 }
        return Array(waiting.values)
    }
}

extension ClusterService {
    static let httpTimedOut = "the tracker cluster did not decide in time; retry"
    static let httpBusy = "too many requests waiting; retry later"
    static let httpStopping = "this tracker node is stopping; retry"

    /// On the loop: an HTTP tracker request for the node to decide.
    func httpRequest(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: HTTPTrackerAnswer) {
        guard !stopping, output.speaks else { return answer.succeed(Self.httpRefusal(PeerRequestHandler.notServingMessage)) }
        guard let exchange = httpExchanges.open(answer, now: .now()) else { return answer.succeed(Self.httpRefusal(Self.httpBusy)) }
        step(.http(request, from: source, exchange: exchange))
    }

    package func answerHTTP(_ response: TrackerResponse, exchange: HTTPExchangeID) {
        guard let answer = httpExchanges.close(exchange) else { return }
        // Announces answered, over either protocol; the rest of HTTP's outcomes are the
        // listener's counts (`tracker_http_requests_total`), not the datagrams'.
        if case .announce = response { stats.announces += 1 }
        answer.succeed(response)
    }

    /// Each second: requests the node has not answered in time get a refusal.
    func expireHTTPExchanges() {
        for p in httpExchanges.expired(.now()) { p.succeed(Self.httpRefusal(Self.httpTimedOut)) }
    }

    static func httpRefusal(_ message: String) -> TrackerResponse { .error(ErrorResponse(transactionID: 0, message: message)) }
}
