import Logging
import NIOCore
import STOMP
import NIOPosix
import NIOSSL

/// The host of a `StompSession`: NIO connections, one timer, and the owner's callbacks.
/// Everything the session decides (what to write, when to reconnect, what a broker's
/// frame means) is in the session; this class only does it. Every method must be called
/// on `loop`; events are delivered there too.
public final class StompClient: @unchecked Sendable {
    public let loop: EventLoop
    let logger: Logger
    let onEvent: (StompEvent) -> Void
    var session: StompSession
    /// The session's connections, by attempt (at most one is current).
    var channels: [StompSession.Attempt: Channel] = [:]
    var wake: (at: NIODeadline, task: Scheduled<Void>)?
    var disconnected: EventLoopPromise<Void>?
    /// For `stomp+ssl://` brokers (`BrokerTLS`).
    let tls: NIOSSLContext?

    public init(settings: StompSettings, tls: NIOSSLContext? = nil, loop: EventLoop, logger: Logger,
                onEvent: @escaping (StompEvent) -> Void) {
        self.session = StompSession(settings: settings)
        self.tls = tls
        self.loop = loop
        self.logger = logger
        self.onEvent = onEvent
    }

    public var isReady: Bool { session.isReady }
    /// The broker of the current (or last) connection.
    public var connectedTo: BrokerAddress? { session.connectedTo }
    public var stats: StompStats { session.stats }
    /// Why the client is not connected (nil while it is): a refused connection, a
    /// certificate that did not verify, an ERROR frame.
    public var problem: String? { session.problem }

    public func start() {
        loop.preconditionInEventLoop()
        perform(session.start(now: .now()))
    }

    /// Adds a subscription (kept across reconnects); confirmed by a receipt.
    public func subscribe(_ destination: String, ownToo: Bool = false) {
        loop.preconditionInEventLoop()
        perform(session.subscribe(destination, ownToo: ownToo))
    }

    /// Publishes a binary body; dropped (and counted) while not connected.
    public func send(to destination: String, body: ByteBuffer, headers extra: [(String, String)] = []) {
        loop.preconditionInEventLoop()
        perform(session.send(to: destination, body: body, headers: extra, now: .now()))
    }

    /// DISCONNECT with a receipt, so everything sent before it reached the broker; bounded.
    public func close(timeout: TimeAmount = .seconds(2)) -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        let promise = disconnected ?? loop.makePromise(of: Void.self)
        disconnected = promise
        let timer = loop.scheduleTask(in: timeout) { [self] in finishClose() }
        perform(session.close())
        return promise.futureResult.always { [self] _ in
            timer.cancel()
            wake?.task.cancel()
            wake = nil
            for channel in channels.values { channel.close(promise: nil) }
            channels = [:]
        }
    }

    func finishClose() {
        let promise = disconnected
        disconnected = nil
        promise?.succeed()
    }

    // MARK: doing what the session says

    func perform(_ actions: [StompSession.Action]) {
        for action in actions {
            switch action {
            case .connect(let broker, let attempt): open(broker, attempt)
            case .write(let outbound, let attempt): channels[attempt]?.writeAndFlush(outbound, promise: nil)
            case .close(let attempt): channels.removeValue(forKey: attempt)?.close(promise: nil)
            case .deliver(let event): onEvent(event)
            case .disconnected: finishClose()
            case .log(let level, let message, let metadata):
                var m = Logger.Metadata()
                for (k, v) in metadata { m[k] = "\(v)" }
                logger.log(level: level.logging, "\(message)", metadata: m)
            }
        }
        rescheduleWake()
    }

    /// One timer, moved only when the session's next wake moves.
    func rescheduleWake() {
        let due = session.nextWake
        guard due != wake?.at else { return }
        wake?.task.cancel()
        wake = due.map { at in
            (at, loop.scheduleTask(deadline: at) { [self] in
                wake = nil
                perform(session.tick(now: .now()))
            })
        }
    }

    func open(_ broker: BrokerAddress, _ attempt: StompSession.Attempt) {
        // A handler belongs to the one channel it is added to, so the channel's own is made
        // in its initializer; this one only shows here, as the TLS error it is, what would
        // make that fail.
        let context: NIOSSLContext?
        if broker.tls {
            do {
                guard let tls else { throw ConfigurationError("no TLS configuration") }
                _ = try BrokerTLS.handler(tls, for: broker)
                context = tls
            } catch {
                perform(session.connectFailed(attempt, reason: "TLS to \(broker.url): \(error)", now: .now()))
                return
            }
        } else {
            context = nil
        }
        let bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            // TCP level: `.socketOption(.tcp_nodelay)` would be SOL_SOCKET option 1,
            // SO_DEBUG, which only root may set (a service user's connect failed on it).
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(2))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context { try channel.pipeline.syncOperations.addHandler(BrokerTLS.handler(context, for: broker)) }
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(StompFrameDecoder()),
                        MessageToByteHandler(StompFrameEncoder()),
                        StompChannelHandler(client: self, attempt: attempt, broker: broker),
                    ])
                }
            }
        bootstrap.connect(host: broker.host, port: broker.port).whenComplete { [self] result in
            switch result {
            case .success(let channel):
                channels[attempt] = channel
                perform(session.connected(attempt, now: .now()))
            case .failure(let error):
                perform(session.connectFailed(attempt, reason: "connect to \(broker.url) failed: \(error)", now: .now()))
            }
        }
    }
}

extension StompSession.LogLevel {
    var logging: Logger.Level {
        switch self {
        case .debug: return .debug
        case .info: return .info
        case .warning: return .warning
        case .error: return .error
        }
    }
}

/// The pipeline's end: hands frames and closes of one connection to the client.
final class StompChannelHandler: ChannelInboundHandler {
    typealias InboundIn = StompCodec.Decoded
    let client: StompClient
    let attempt: StompSession.Attempt
    let broker: BrokerAddress

    init(client: StompClient, attempt: StompSession.Attempt, broker: BrokerAddress) {
        self.client = client
        self.attempt = attempt
        self.broker = broker
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        client.perform(client.session.received(unwrapInboundIn(data), on: attempt, now: .now()))
    }

    func channelInactive(context: ChannelHandlerContext) {
        client.channels[attempt] = nil
        client.perform(client.session.closed(attempt, reason: "connection closed by the broker", now: .now()))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is StompFrameError || error is ByteToMessageDecoderError {
            client.perform(client.session.malformed(attempt, error: "\(error)", now: .now()))
        } else {
            let reason = BrokerTLS.explain(error, broker: broker) ?? "\(error)"
            client.perform(client.session.failed(attempt, reason: reason, now: .now()))
        }
    }
}
