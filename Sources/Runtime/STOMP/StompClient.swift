import Logging
import NIOCore
import NIOPosix

/// Where and how to reach the broker.
/// One broker of the failover list.
public struct BrokerAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) { self.host = host; self.port = port }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

public struct StompSettings: Sendable {
    /// Tried first; the client moves down the list when a broker fails, and round again.
    public var primary: BrokerAddress
    public var fallbacks: [BrokerAddress] = []
    public var login: String?
    public var passcode: String?
    /// What we offer and ask for, in ms (STOMP `heart-beat: cx,cy`).
    public var heartbeat: Int = 1000
    public var reconnectMin = TimeAmount.milliseconds(100)
    public var reconnectMax = TimeAmount.seconds(2)

    public init(host: String, port: Int) { primary = BrokerAddress(host: host, port: port) }

    /// Every broker, in the order they are tried.
    public var brokers: [BrokerAddress] { [primary] + fallbacks }

    /// `stomp://HOST:PORT` (login and passcode as `stomp://user:pass@HOST:PORT`), or a
    /// failover list of them separated by commas (`stomp://a:61613,stomp://b:61613`);
    /// credentials, if given more than once, must be the same.
    public init(url: String) throws {
        let parts = url.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count <= 16 else { throw ConfigurationError("at most 16 brokers in a failover list (got \(parts.count))") }
        var brokers: [BrokerAddress] = []
        var login: String?, passcode: String?
        for part in parts {
            let (address, l, p) = try Self.parse(part)
            if brokers.contains(address) { throw ConfigurationError("broker \(address) is listed twice") }
            brokers.append(address)
            if let l {
                if let login, login != l || passcode != p {
                    throw ConfigurationError("brokers in one list must use the same login and passcode")
                }
                login = l
                passcode = p
            }
        }
        guard let first = brokers.first else { throw ConfigurationError("no broker URL") }
        self.init(host: first.host, port: first.port)
        fallbacks = Array(brokers.dropFirst())
        self.login = login
        self.passcode = passcode
    }

    static func parse(_ url: String) throws -> (BrokerAddress, login: String?, passcode: String?) {
        guard url.hasPrefix("stomp://") else { throw ConfigurationError("broker URL must start with stomp:// (got '\(url)')") }
        var rest = Substring(url.dropFirst("stomp://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        var login: String?, passcode: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = credentials.split(separator: ":", maxSplits: 1)
            login = parts.first.map(String.init)
            passcode = parts.count > 1 ? String(parts[1]) : nil
        }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
            throw ConfigurationError("broker URL needs HOST:PORT (got '\(url)')")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ConfigurationError("broker URL has no host (got '\(url)')") }
        if host == "localhost" {
            // ActiveMQ's STOMP connector listens on IPv4 only; "localhost" may resolve to ::1.
            host = "127.0.0.1"
        }
        return (BrokerAddress(host: host, port: port), login, passcode)
    }
}

/// What the client tells its owner. Called on the client's event loop.
public enum StompEvent {
    /// CONNECTED arrived and every subscription is confirmed by a RECEIPT.
    case ready
    /// The connection is gone (broker died, ERROR, missed heart-beats). The client
    /// reconnects by itself; what was in flight is lost.
    case lost(reason: String)
    case message(destination: String, headers: [(name: String, value: String)], body: ByteBuffer)
}

/// A STOMP 1.2 client that keeps one connection to the broker alive: it reconnects with
/// backoff, re-subscribes, and treats the broker's heart-beats as its liveness signal.
/// Every method must be called on `loop`; events are delivered there too.
public final class StompClient: @unchecked Sendable {
    public let loop: EventLoop
    let settings: StompSettings
    let logger: Logger
    let onEvent: (StompEvent) -> Void

    enum State {
        case idle
        case connecting
        /// TCP is up, CONNECT sent, waiting for CONNECTED.
        case handshaking(Channel)
        /// CONNECTED; waiting for the receipts of the subscriptions.
        case subscribing(Channel, pending: Set<String>)
        case ready(Channel)
        case closing
        case closed
    }

    var state = State.idle
    /// Destination → subscription id. Kept across reconnects.
    var subscriptions: [String: String] = [:]
    var nextID = 0
    var backoff: TimeAmount
    /// Which broker of the list the next attempt goes to, and how many have failed in a
    /// row since the last success: the next broker is tried at once, a whole round of
    /// failures waits the backoff.
    var brokerIndex = 0
    var failuresInRound = 0
    /// The broker of the current (or last) connection.
    public private(set) var connectedTo: BrokerAddress?
    var reconnectTask: Scheduled<Void>?
    var heartbeatTask: RepeatedTask?
    var lastReceived = NIODeadline.now()
    var lastSent = NIODeadline.now()
    var readTimeout: TimeAmount?
    var disconnectReceipt: EventLoopPromise<Void>?
    public private(set) var stats = StompStats()

    public init(settings: StompSettings, loop: EventLoop, logger: Logger, onEvent: @escaping (StompEvent) -> Void) {
        self.settings = settings
        self.loop = loop
        self.logger = logger
        self.onEvent = onEvent
        self.backoff = settings.reconnectMin
    }

    public var isReady: Bool { if case .ready = state { return true } else { return false } }

    public func start() {
        loop.preconditionInEventLoop()
        guard case .idle = state else { return }
        connect()
    }

    /// Adds a subscription (kept across reconnects); confirmed by a receipt.
    public func subscribe(_ destination: String) {
        loop.preconditionInEventLoop()
        guard subscriptions[destination] == nil else { return }
        nextID += 1
        let id = "sub-\(nextID)"
        subscriptions[destination] = id
        switch state {
        case .ready(let ch):
            sendSubscribe(destination, id: id, on: ch)
        case .subscribing(let ch, var pending):
            pending.insert("r-\(id)")
            state = .subscribing(ch, pending: pending)
            sendSubscribe(destination, id: id, on: ch)
        default: break
        }
    }

    /// Publishes a binary body. Dropped (and counted) while not connected: the cluster
    /// protocol treats the broker as a lossy channel anyway.
    public func send(to destination: String, body: ByteBuffer, headers extra: [(String, String)] = []) {
        loop.preconditionInEventLoop()
        guard case .ready(let ch) = state else {
            stats.droppedWhileDown += 1
            return
        }
        var headers = [("destination", destination), ("content-type", "application/octet-stream")]
        headers += extra
        headers.append(("content-length", "\(body.readableBytes)"))
        stats.sent += 1
        ch.writeAndFlush(StompOutbound.frame(StompFrame("SEND", headers: headers, body: body)), promise: nil)
    }

    /// DISCONNECT with a receipt, so everything sent before it reached the broker; bounded.
    public func close(timeout: TimeAmount = .seconds(2)) -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        reconnectTask?.cancel()
        let channel: Channel?
        switch state {
        case .ready(let ch), .subscribing(let ch, _), .handshaking(let ch): channel = ch
        default: channel = nil
        }
        state = .closing
        guard let channel else {
            state = .closed
            return loop.makeSucceededVoidFuture()
        }
        let promise = loop.makePromise(of: Void.self)
        disconnectReceipt = promise
        channel.writeAndFlush(StompOutbound.frame(StompFrame("DISCONNECT", headers: [("receipt", "bye")])), promise: nil)
        let timer = loop.scheduleTask(in: timeout) { promise.succeed() }
        return promise.futureResult.always { _ in
            timer.cancel()
            self.heartbeatTask?.cancel()
            self.state = .closed
            channel.close(promise: nil)
        }
    }

    // MARK: connection life

    func connect() {
        state = .connecting
        let bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(2))
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(StompFrameDecoder()),
                        MessageToByteHandler(StompFrameEncoder()),
                        StompChannelHandler(client: self),
                    ])
                }
            }
        let brokers = settings.brokers
        let broker = brokers[brokerIndex % brokers.count]
        bootstrap.connect(host: broker.host, port: broker.port).whenComplete { [self] result in
            switch result {
            case .success(let ch):
                guard case .connecting = state else { ch.close(promise: nil); return }
                state = .handshaking(ch)
                lastReceived = .now()
                var headers = [("accept-version", "1.2"), ("host", "/"),
                               ("heart-beat", "\(settings.heartbeat),\(settings.heartbeat)")]
                if let l = settings.login { headers.append(("login", l)) }
                if let p = settings.passcode { headers.append(("passcode", p)) }
                ch.writeAndFlush(StompOutbound.frame(StompFrame("CONNECT", headers: headers)), promise: nil)
                // A broker that accepts TCP but never answers is as good as down.
                let attempt = ObjectIdentifier(ch)
                loop.scheduleTask(in: .seconds(5)) { [self] in
                    if case .handshaking(let c) = state, ObjectIdentifier(c) == attempt {
                        drop(c, reason: "no CONNECTED within 5 s")
                    }
                }
            case .failure(let error):
                guard case .connecting = state else { return }
                scheduleReconnect(reason: "connect to \(broker) failed: \(error)")
            }
        }
    }

    func scheduleReconnect(reason: String) {
        state = .idle
        let count = settings.brokers.count
        brokerIndex = (brokerIndex + 1) % count
        failuresInRound += 1
        let delay: TimeAmount
        if failuresInRound < count {
            delay = settings.reconnectMin  // the next broker of the list, at once
        } else {
            failuresInRound = 0
            delay = backoff
            backoff = min(backoff * 2, settings.reconnectMax)
        }
        logger.debug("broker unavailable; retrying", metadata: ["reason": "\(reason)", "in-ms": "\(delay.nanoseconds / 1_000_000)"])
        reconnectTask = loop.scheduleTask(in: delay) { [self] in
            if case .idle = state { connect() }
        }
    }

    /// Ends a connection for good; a new one is started after the backoff.
    func drop(_ channel: Channel, reason: String) {
        channel.close(promise: nil)
        channelClosed(channel, reason: reason)
    }

    func channelClosed(_ channel: Channel, reason: String) {
        let wasOurs: Bool
        switch state {
        case .handshaking(let c), .subscribing(let c, _), .ready(let c): wasOurs = c === channel
        default: wasOurs = false
        }
        guard wasOurs else {
            if case .closing = state { disconnectReceipt?.succeed() }
            return
        }
        heartbeatTask?.cancel()
        heartbeatTask = nil
        stats.connectionsLost += 1
        logger.warning("broker connection lost", metadata: ["reason": "\(reason)"])
        onEvent(.lost(reason: reason))
        scheduleReconnect(reason: reason)
    }

    func received(_ decoded: StompCodec.Decoded, on channel: Channel) {
        lastReceived = .now()
        guard case .frame(let frame) = decoded else { return }
        switch frame.command {
        case "CONNECTED":
            guard case .handshaking(let c) = state, c === channel else { return }
            backoff = settings.reconnectMin
            failuresInRound = 0
            let brokers = settings.brokers
            connectedTo = brokers[brokerIndex % brokers.count]
            startHeartbeats(frame["heart-beat"], on: channel)
            var pending = Set<String>()
            for (destination, id) in subscriptions.sorted(by: { $0.value < $1.value }) {
                pending.insert("r-\(id)")
                sendSubscribe(destination, id: id, on: channel)
            }
            state = .subscribing(channel, pending: pending)
            becomeReadyIfSubscribed()
        case "RECEIPT":
            let id = frame["receipt-id"] ?? ""
            if id == "bye" { disconnectReceipt?.succeed(); return }
            if case .subscribing(let c, var pending) = state, c === channel {
                pending.remove(id)
                state = .subscribing(c, pending: pending)
                becomeReadyIfSubscribed()
            }
        case "MESSAGE":
            stats.received += 1
            onEvent(.message(destination: frame["destination"] ?? "", headers: frame.headers, body: frame.body))
        case "ERROR":
            stats.errorFrames += 1
            let detail = frame.body.getString(at: frame.body.readerIndex, length: min(frame.body.readableBytes, 300)) ?? ""
            logger.error("broker sent ERROR", metadata: ["message": "\(frame["message"] ?? "")", "detail": "\(detail)"])
            // STOMP 1.2: the broker closes the connection after an ERROR frame.
            drop(channel, reason: "ERROR frame: \(frame["message"] ?? "no message")")
        default:
            stats.unexpectedFrames += 1
            logger.warning("unexpected frame from broker", metadata: ["command": "\(frame.command)"])
        }
    }

    func protocolError(_ error: Error, on channel: Channel) {
        stats.badFrames += 1
        logger.error("malformed data from broker; reconnecting", metadata: ["error": "\(error)"])
        drop(channel, reason: "malformed frame: \(error)")
    }

    func becomeReadyIfSubscribed() {
        guard case .subscribing(let c, let pending) = state, pending.isEmpty else { return }
        state = .ready(c)
        logger.info("broker connected", metadata: ["broker": "\(connectedTo.map { "\($0)" } ?? "?")", "subscriptions": "\(subscriptions.count)"])
        onEvent(.ready)
    }

    func sendSubscribe(_ destination: String, id: String, on channel: Channel) {
        channel.writeAndFlush(StompOutbound.frame(StompFrame("SUBSCRIBE", headers: [("destination", destination), ("id", id), ("ack", "auto"),
                                                                ("receipt", "r-\(id)")])), promise: nil)
    }

    /// Heart-beats as negotiated by `StompHeartbeat` (every value from the broker clamped).
    func startHeartbeats(_ header: String?, on channel: Channel) {
        let negotiated = StompHeartbeat(ours: settings.heartbeat, header: header)
        if negotiated.adjusted {
            logger.warning("broker heart-beat header out of range; clamped",
                           metadata: ["heart-beat": "\(String(reflecting: String((header ?? "").prefix(64))))",
                                      "send-ms": "\(negotiated.sendEvery)", "expect-ms": "\(negotiated.expectEvery)"])
        }
        let sendEvery = negotiated.sendEvery
        readTimeout = negotiated.readTimeout
        let tick = negotiated.tick
        lastSent = .now()
        heartbeatTask?.cancel()
        heartbeatTask = loop.scheduleRepeatedTask(initialDelay: tick, delay: tick) { [self] task in
            let now = NIODeadline.now()
            if sendEvery > 0, now - lastSent >= .milliseconds(Int64(sendEvery)) {
                channel.writeAndFlush(StompOutbound.heartbeat, promise: nil)
                lastSent = now
            }
            if let timeout = readTimeout, now - lastReceived > timeout {
                task.cancel()
                drop(channel, reason: "no heart-beat from the broker for \(timeout.nanoseconds / 1_000_000) ms")
            }
        }
    }
}

public struct StompStats: Sendable {
    public var sent = 0
    public var received = 0
    public var droppedWhileDown = 0
    public var connectionsLost = 0
    public var errorFrames = 0
    public var badFrames = 0
    public var unexpectedFrames = 0
}

/// The pipeline's end: hands frames and closes to the client on its loop.
final class StompChannelHandler: ChannelInboundHandler {
    typealias InboundIn = StompCodec.Decoded
    let client: StompClient

    init(client: StompClient) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        client.received(unwrapInboundIn(data), on: context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        client.channelClosed(context.channel, reason: "connection closed by the broker")
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is StompFrameError || error is ByteToMessageDecoderError {
            client.protocolError(error, on: context.channel)
        } else {
            client.drop(context.channel, reason: "\(error)")
        }
    }
}
