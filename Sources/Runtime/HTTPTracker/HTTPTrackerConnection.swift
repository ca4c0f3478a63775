import NIOCore
import TrackerLogic

/// Who decides the HTTP tracker's requests: a standalone tracker at once under its lock,
/// a cluster node through its step (`ClusterService.httpRequest`). Either completes
/// `answer` exactly once, on any thread.
package protocol HTTPTrackerBackend: AnyObject, Sendable {
    func decide(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: EventLoopPromise<TrackerResponse>)
}

/// One HTTP tracker connection: reads request heads (`HTTPRequestHead.parse`), one at a
/// time, has the core decide each, and writes the answers in order.
///
/// Invariants: at most one request of a connection waits for the core (pipelined
/// requests wait in the buffer, at most `maxBufferedBytes` of them, in order); a head
/// must complete within `idleTimeout` of the connection opening or of the last answer;
/// a refused head is answered and the connection closed, as nothing after it can be
/// trusted to start a request.
final class HTTPTrackerConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let backend: HTTPTrackerBackend
    let proxies: TrustedProxies
    let limits: HTTPTrackerLimits
    let counters: HTTPTrackerCounters
    private var buffer: ByteBuffer?
    private var waiting = false
    private var closing = false
    private var idle: Scheduled<Void>?
    private var remote: PeerEndpoint?

    init(backend: HTTPTrackerBackend, proxies: TrustedProxies, limits: HTTPTrackerLimits, counters: HTTPTrackerCounters) {
        self.backend = backend; self.proxies = proxies; self.limits = limits; self.counters = counters
    }

    func channelActive(context: ChannelHandlerContext) {
        remote = context.channel.remoteAddress.flatMap(PeerEndpoint.init)
        armIdle(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idle?.cancel()
        closing = true
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
                idle?.cancel()
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
            let promise = context.eventLoop.makePromise(of: TrackerResponse.self)
            waiting = true
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { response in
                let (connection, context) = loopBound.value
                connection.counters.answered(response)
                connection.answered(head, HTTPTrackerReply.message(body: HTTPTrackerReply.body(response, shape: shape), keepAlive: head.keepAlive,
                                                                   headOnly: head.method == .head), context)
            }
            backend.decide(request, from: source, answer: promise)
        }
    }

    /// Writes an answer; the connection then serves what came next, or closes.
    private func answered(_ head: HTTPRequestHead, _ message: [UInt8], _ context: ChannelHandlerContext) {
        waiting = false
        guard !closing else { return }
        write(context, message)
        guard head.keepAlive else { return close(context) }
        armIdle(context)
        serveBuffered(context)
    }

    private func write(_ context: ChannelHandlerContext, _ message: [UInt8]) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: message)), promise: nil)
    }

    private func armIdle(_ context: ChannelHandlerContext) {
        idle?.cancel()
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idle = context.eventLoop.scheduleTask(in: limits.idleTimeout) {
            let (connection, context) = loopBound.value
            guard !connection.waiting else { return }
            connection.counters.count(\.idleClosed)
            connection.close(context)
        }
    }

    private func close(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        idle?.cancel()
        buffer = nil
        context.close(promise: nil)
    }
}
