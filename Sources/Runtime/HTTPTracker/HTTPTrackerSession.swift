import NIOCore
import TrackerLogic

/// Gives an HTTP tracker request's answer back to its connection, exactly once, from any
/// thread: the connection's host takes it to the thread the connection lives on.
package struct HTTPTrackerAnswer: Sendable {
    let deliver: @Sendable (TrackerResponse) -> Void

    package init(_ deliver: @escaping @Sendable (TrackerResponse) -> Void) { self.deliver = deliver }

    package func succeed(_ response: TrackerResponse) { deliver(response) }
}

/// What one HTTP tracker connection does with the bytes it reads, whoever reads them (the
/// epoll host for plain HTTP, NIO under TLS): it buffers them, parses request heads one at
/// a time (`HTTPRequestHead.parse`), has each decided, and writes the answers in order.
/// The host performs its effects and hands it the answers.
///
/// Invariants: at most one request waits for the core (pipelined requests wait in the
/// buffer, in order: at most `maxBufferedBytes` once a read comes while one waits, and
/// at most one read of the host's beyond that); a head must complete by
/// `idleDeadline`, set at the opening and after each answer, or the host closes the
/// connection (`idledOut`); a refused head is answered and the connection closed, as
/// nothing after it can be trusted to start a request; once closing, nothing more is
/// written.
package struct HTTPTrackerSession {
    /// What the host does for the session, in order.
    package enum Effect {
        case write([UInt8])
        case close
        /// Decide `request`, then hand the answer to `answered` with `pending`.
        case decide(HTTPTrackerRequest, from: PeerEndpoint, Pending)
    }

    /// A request waiting for its answer: how the answer is written.
    package struct Pending {
        let keepAlive: Bool
        let headOnly: Bool
        let shape: HTTPTrackerReply.Shape
    }

    let remote: PeerEndpoint
    let proxies: TrustedProxies
    let limits: HTTPTrackerLimits
    let counters: HTTPTrackerCounters
    private var buffer: [UInt8] = []
    private var start = 0
    package private(set) var waiting = false
    package private(set) var closing = false
    /// When the connection is to be closed unless a head completes first; nil while a
    /// request waits for the core.
    private(set) var idleDeadline: NIODeadline?

    package init(remote: PeerEndpoint, proxies: TrustedProxies, limits: HTTPTrackerLimits, counters: HTTPTrackerCounters, now: NIODeadline) {
        self.remote = remote; self.proxies = proxies; self.limits = limits; self.counters = counters
        idleDeadline = now + limits.idleTimeout
    }

    /// Bytes read from the connection.
    package mutating func read(_ bytes: some Collection<UInt8>, into effects: inout [Effect]) {
        guard !closing else { return }
        // What was served goes before more is read: the buffer holds at most what waits.
        if start > 0 { buffer.removeFirst(start); start = 0 }
        buffer.append(contentsOf: bytes)
        guard waiting else { return serveBuffered(&effects) }
        // Bytes that come while a request waits are bounded. A read that comes while
        // none waits is served, however many requests it carries: a standalone node
        // answers each before the next read.
        if buffer.count - start > limits.maxBufferedBytes {
            counters.count(\.floodsClosed)
            close(&effects)
        }
    }

    /// The answer to the request that waited.
    package mutating func answered(_ pending: Pending, _ response: TrackerResponse, now: NIODeadline, into effects: inout [Effect]) {
        counters.answered(response)
        finish(HTTPTrackerReply.message(body: HTTPTrackerReply.body(response, shape: pending.shape), keepAlive: pending.keepAlive,
                                        headOnly: pending.headOnly),
               keepAlive: pending.keepAlive, now: now, &effects)
    }

    /// The host found `idleDeadline` past.
    mutating func idledOut(into effects: inout [Effect]) {
        guard !closing else { return }
        counters.count(\.idleClosed)
        close(&effects)
    }

    /// The connection ended (the peer closed it, or an error): nothing more is written.
    mutating func ended() {
        closing = true
        buffer = []
    }

    private mutating func serveBuffered(_ effects: inout [Effect]) {
        while !waiting, !closing, start < buffer.count {
            switch HTTPRequestHead.parse(buffer[start...]) {
            case .incomplete:
                return
            case .refused(let refusal):
                counters.count(\.headsRefused)
                let status = refusal.status
                effects.append(.write(HTTPTrackerReply.message(status: status.code, reason: status.reason,
                                                               body: HTTPTrackerReply.failure(refusal.message), keepAlive: false)))
                return close(&effects)
            case .head(let head, let length):
                start += length
                idleDeadline = nil
                serve(head, &effects)
            }
        }
    }

    private mutating func serve(_ head: HTTPRequestHead, _ effects: inout [Effect]) {
        let headOnly = head.method == .head
        switch HTTPTrackerRequest.decode(head) {
        case .failure(.notFound):
            counters.count(\.notFound)
            finish(HTTPTrackerReply.message(status: 404, reason: "Not Found",
                                            body: HTTPTrackerReply.failure("no such path; this tracker serves /announce and /scrape"),
                                            keepAlive: head.keepAlive, headOnly: headOnly),
                   keepAlive: head.keepAlive, now: .now(), &effects)
        case .failure(.query(let error)):
            counters.count(\.queriesRefused)
            finish(HTTPTrackerReply.message(body: HTTPTrackerReply.failure(error.description), keepAlive: head.keepAlive, headOnly: headOnly),
                   keepAlive: head.keepAlive, now: .now(), &effects)
        case .success(let request):
            let source = PeerEndpoint(ip: proxies.client(connection: remote.ip, head: head), port: remote.port)
            waiting = true
            effects.append(.decide(request, from: source, Pending(keepAlive: head.keepAlive, headOnly: headOnly, shape: request.shape)))
        }
    }

    /// Writes an answer; the connection then serves what came next, or closes.
    private mutating func finish(_ message: [UInt8], keepAlive: Bool, now: NIODeadline, _ effects: inout [Effect]) {
        waiting = false
        guard !closing else { return }
        effects.append(.write(message))
        guard keepAlive else { return close(&effects) }
        idleDeadline = now + limits.idleTimeout
        serveBuffered(&effects)
    }

    private mutating func close(_ effects: inout [Effect]) {
        guard !closing else { return }
        closing = true
        buffer = []
        start = 0
        effects.append(.close)
    }
}
