import Logging
import NIOCore
import NIOPosix
import TrackerLogic

/// Serves BEP 15 on one UDP socket with a `StandaloneTracker`. All state lives in the
/// channel handler and is touched only on the channel's event loop.
final class StandaloneHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private var tracker: StandaloneTracker
    private let logger: Logger
    private var expiryTask: Scheduled<Void>?
    /// Reported when the server stops.
    private var stats = ServerStats()

    init(tracker: StandaloneTracker, logger: Logger) {
        self.tracker = tracker
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) { armExpiry(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) {
        expiryTask?.cancel()
        logger.info("served peers", metadata: ["datagrams": "\(stats.received)", "error-replies": "\(stats.errors)",
                                               "dropped": "\(stats.dropped)"])
    }

    private func armExpiry(context: ChannelHandlerContext) {
        let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        expiryTask = context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(5)) { [self] in
            tracker.tick(now: WallClock.now())
            armExpiry(context: loopBoundContext.value)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        stats.received += 1
        guard let source = PeerEndpoint(envelope.remoteAddress) else { return }
        guard let response = tracker.receive(envelope.data, from: source, now: WallClock.now()) else {
            stats.dropped += 1
            return
        }
        if case .error(let e) = response {
            stats.errors += 1
            logger.debug("peer error reply", metadata: ["peer": "\(source)", "message": "\(e.message)"])
        }
        var buffer = context.channel.allocator.buffer(capacity: 64)
        BEP15Codec.encode(response, into: &buffer)
        context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: buffer)), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A UDP socket reports ICMP errors (peer gone) here; they are not fatal.
        logger.debug("udp error: \(error)")
    }
}

struct ServerStats {
    var received = 0
    var errors = 0
    var dropped = 0
}

public enum StandaloneServer {
    /// Binds the socket and serves until SIGINT or SIGTERM.
    /// `connectionIDKeys`: from `--connection-id-key-file`; nil draws a random key, so ids
    /// are secret and last as long as the process.
    public static func run(bind: PeerEndpoint, config: TrackerConfig, connectionIDKeys: [SipHash24]? = nil, logger: Logger) async throws {
        let problems = config.problems
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "; ")) }
        let seed = WallClock.randomSeed()
        let keys = connectionIDKeys ?? [SipHash24(k0: WallClock.randomSeed(), k1: WallClock.randomSeed())]
        let tracker = StandaloneTracker(
            handler: PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(keys: keys, lifetimeSeconds: config.connectionIDLifetimeSeconds)),
            seed: seed)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel: Channel
        do {
            channel = try await DatagramBootstrap(group: group)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.datagramVectorReadMessageCount, value: 32)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 32 * 2048))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(StandaloneHandler(tracker: tracker, logger: logger))
                    }
                }
                .bind(to: bind.socketAddress()).get()
        } catch {
            try? await group.shutdownGracefully()
            throw ConfigurationError("cannot bind UDP \(bind): \(error)")
        }
        logger.info("tracker listening", metadata: ["udp": "\(bind)", "interval": "\(config.announceInterval)s",
                                                    "peer-timeout": "\(config.effectivePeerTimeout)"])
        let signals = SignalWaiter(signals: [SIGINT, SIGTERM])
        let signal = await signals.wait()
        logger.info("stopping on signal \(signal)")
        try? await channel.close()
        try? await group.shutdownGracefully()
        logger.info("stopped")
    }
}
