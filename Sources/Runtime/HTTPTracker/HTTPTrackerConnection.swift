import NIOCore
import TrackerLogic

/// Who decides the HTTP tracker's requests: a standalone tracker at once under its lock
/// (`answerAtOnce`), a cluster node through its step (`ClusterService.httpRequest`), which
/// completes `answer` exactly once, on any thread.
package protocol HTTPTrackerBackend: AnyObject, Sendable {
    /// The answer, decided on the caller's thread; nil when the backend answers later,
    /// through `decide`.
    func answerAtOnce(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse?
    func decide(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: EventLoopPromise<TrackerResponse>)
}

extension HTTPTrackerBackend {
    package func answerAtOnce(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse? { nil }
}

/// One HTTP tracker connection: reads request heads (`HTTPRequestHead.parse`), one at a
/// time, has the core decide each, and writes the answers in order.
///
/// Invariants: the connection holds a place of the listener's `connections` from its
/// opening to its end, or is closed at once when none is free; at most one request of a
/// connection waits for the core (pipelined requests wait in the buffer, at most
/// `maxBufferedBytes` of them, in order); a head must complete within `idleTimeout` of the
/// connection opening or of the last answer (its loop's `IdleConnections` closes it
/// after); a refused head is answered and the connection closed, as nothing after it can
/// be trusted to start a request.
final class HTTPTrackerConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let backend: HTTPTrackerBackend
    let proxies: TrustedProxies
    let limits: HTTPTrackerLimits
    let counters: HTTPTrackerCounters
    let connections: Occupancy
    let idle: IdleConnections
    private var buffer: ByteBuffer?
    private var waiting = false
    private var closing = false
    private var admitted = false
    private var remote: PeerEndpoint?
    /// When the connection is closed unless a head completes first (nil while a request
    /// waits for the core); and where `idle` holds it.
    fileprivate var idleDeadline: NIODeadline?
    fileprivate var idleSlot = -1

    init(backend: HTTPTrackerBackend, proxies: TrustedProxies, limits: HTTPTrackerLimits, counters: HTTPTrackerCounters,
         connections: Occupancy, idle: IdleConnections) {
        self.backend = backend; self.proxies = proxies; self.limits = limits; self.counters = counters
        self.connections = connections; self.idle = idle
    }

    func channelActive(context: ChannelHandlerContext) {
        guard connections.enter() else { return close(context) }
        admitted = true
        remote = context.channel.remoteAddress.flatMap(PeerEndpoint.init)
        idleDeadline = .now() + limits.idleTimeout
        idle.add(self, context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        closing = true
        leave()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        guard !closing else { return }
        if buffer == nil { buffer = bytes } else { buffer!.writeBuffer(&bytes) }
        if let b = buffer, b.readableBytes > limits.maxBufferedBytes {
            counters.count(\.floodsClosed)
            return close(context)
        }
        if !waiting { serveBuffered(context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A reset, a TLS handshake gone wrong: nothing to answer.
        close(context)
    }

    /// Serves the complete heads the buffer holds, up to the first that must wait.
    private func serveBuffered(_ context: ChannelHandlerContext) {
        while !waiting, !closing, let b = buffer, b.readableBytes > 0 {
            switch HTTPRequestHead.parse(b.readableBytesView) {
            case .incomplete:
                return
            case .refused(let refusal):
                counters.count(\.headsRefused)
                let status = refusal.status
                write(context, HTTPTrackerReply.message(status: status.code, reason: status.reason, body: HTTPTrackerReply.failure(refusal.message),
                                                        keepAlive: false))
                return close(context)
            case .head(let head, let length):
                buffer!.moveReaderIndex(forwardBy: length)
                if buffer!.readableBytes == 0 { buffer = nil }
                idleDeadline = nil
                serve(head, context)
            }
        }
    }

    private func serve(_ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        guard let remote else { return close(context) }
        switch HTTPTrackerRequest.decode(head) {
        case .failure(.notFound):
            counters.count(\.notFound)
            answered(head, HTTPTrackerReply.message(status: 404, reason: "Not Found",
                                                    body: HTTPTrackerReply.failure("no such path; this tracker serves /announce and /scrape"),
                                                    keepAlive: head.keepAlive, headOnly: head.method == .head), context)
        case .failure(.query(let error)):
            counters.count(\.queriesRefused)
            answered(head, HTTPTrackerReply.message(body: HTTPTrackerReply.failure(error.description), keepAlive: head.keepAlive,
                                                    headOnly: head.method == .head), context)
        case .success(let request):
            let source = PeerEndpoint(ip: proxies.client(connection: remote.ip, head: head), port: remote.port)
            let shape = request.shape
            waiting = true
            if let response = backend.answerAtOnce(request, from: source) {
                return answered(head, response, shape: shape, context)
            }
            let promise = context.eventLoop.makePromise(of: TrackerResponse.self)
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { response in
                let (connection, context) = loopBound.value
                connection.answered(head, response, shape: shape, context)
            }
            backend.decide(request, from: source, answer: promise)
        }
    }

    private func answered(_ head: HTTPRequestHead, _ response: TrackerResponse, shape: HTTPTrackerReply.Shape, _ context: ChannelHandlerContext) {
        counters.answered(response)
        answered(head, HTTPTrackerReply.message(body: HTTPTrackerReply.body(response, shape: shape), keepAlive: head.keepAlive,
                                                headOnly: head.method == .head), context)
    }

    /// Writes an answer; the connection then serves what came next, or closes.
    private func answered(_ head: HTTPRequestHead, _ message: [UInt8], _ context: ChannelHandlerContext) {
        waiting = false
        guard !closing else { return }
        write(context, message)
        guard head.keepAlive else { return close(context) }
        idleDeadline = .now() + limits.idleTimeout
        serveBuffered(context)
    }

    private func write(_ context: ChannelHandlerContext, _ message: [UInt8]) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: message)), promise: nil)
    }

    /// Closes a connection `idle` found past its deadline.
    fileprivate func idledOut(_ context: ChannelHandlerContext) {
        counters.count(\.idleClosed)
        close(context)
    }

    private func close(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        buffer = nil
        leave()
        context.close(promise: nil)
    }

    /// Gives back the connection's place and leaves the idle sweep, once.
    private func leave() {
        if admitted { connections.leave(); admitted = false }
        idle.remove(self)
    }
}

/// The HTTP tracker's open connections on one event loop, swept for those idle past their
/// deadline by one repeating task, rather than a timer per connection re-armed at every
/// request: a client that opens a connection per announce would pay for the timer's
/// scheduling and cancelling on each.
///
/// Invariant: touched only on its loop (the connections and the sweep run there), which
/// is what makes it `Sendable`; a connection is held from its opening to its close, at
/// `idleSlot`.
final class IdleConnections: @unchecked Sendable {
    private var members: [(connection: HTTPTrackerConnection, context: ChannelHandlerContext)] = []

    fileprivate func add(_ connection: HTTPTrackerConnection, _ context: ChannelHandlerContext) {
        connection.idleSlot = members.count
        members.append((connection, context))
    }

    fileprivate func remove(_ connection: HTTPTrackerConnection) {
        let slot = connection.idleSlot
        guard slot >= 0, slot < members.count, members[slot].connection === connection else { return }
        connection.idleSlot = -1
        let last = members.removeLast()
        if slot < members.count {
            members[slot] = last
            last.connection.idleSlot = slot
        }
    }

    /// Closes the connections whose deadline passed by `now`.
    func sweep(now: NIODeadline) {
        let expired = members.filter { ($0.connection.idleDeadline ?? .distantFuture) <= now }
        for m in expired { m.connection.idledOut(m.context) }
    }

    /// How often a loop sweeps: a connection is closed at most this long after its deadline.
    static func period(for timeout: TimeAmount) -> TimeAmount {
        .nanoseconds(min(max(timeout.nanoseconds / 4, TimeAmount.milliseconds(50).nanoseconds), TimeAmount.seconds(1).nanoseconds))
    }
}
