#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix
import TrackerLogic

/// Hands datagrams to the host on its loop and writes its replies.
final class StandaloneHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    let host: StandaloneHost

    init(host: StandaloneHost) { self.host = host }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard let response = host.receive(envelope.data, from: envelope.remoteAddress) else { return }
        var buffer = context.channel.allocator.buffer(capacity: BEP15Codec.encodedSize(response))
        BEP15Codec.encode(response, into: &buffer)
        context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: envelope.remoteAddress, data: buffer)), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A UDP socket reports ICMP errors (peer gone) here; they are not fatal.
    }
}

/// A single tracker on one UDP socket (no cluster), with the same dashboard as a
/// cluster node: Stop closes the socket and forgets the swarms, Start binds it again,
/// a provoked failure drops every request. All state lives on the host's loop.
public final class StandaloneHost: DashboardBackend, @unchecked Sendable {
    let bind: PeerEndpoint
    /// Read again from the config file at each Start (on the loop).
    var config: TrackerConfig
    var reload: (@Sendable () throws -> TrackerConfig)?
    let connectionIDKeys: [SipHash24]
    let loop: EventLoop
    let logger: Logger
    var tracker: StandaloneTracker?
    var channel: Channel?
    var silenced = false
    var stats = ClusterServerStats()
    var history = ServiceHistory()
    public let metrics = NodeMetrics()
    var timers: [RepeatedTask] = []
    let startedAt = WallClock.now()

    init(bind: PeerEndpoint, config: TrackerConfig, connectionIDKeys: [SipHash24], loop: EventLoop, logger: Logger) {
        self.bind = bind; self.config = config; self.connectionIDKeys = connectionIDKeys; self.loop = loop; self.logger = logger
    }

    /// Binds the socket and serves until SIGINT or SIGTERM.
    /// `connectionIDKeys`: from `--connection-id-key-file`; nil draws a random key, so ids
    /// are secret and last as long as the process.
    public static func run(bind: PeerEndpoint, config: TrackerConfig, connectionIDKeys: [SipHash24]? = nil,
                           dashboard: DashboardSettings? = nil, logger: Logger,
                           reload: (@Sendable () throws -> TrackerConfig)? = nil) async throws {
        let problems = config.problems
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "; ")) }
        let keys = connectionIDKeys ?? [SipHash24(k0: WallClock.randomSeed(), k1: WallClock.randomSeed())]
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let host = StandaloneHost(bind: bind, config: config, connectionIDKeys: keys, loop: group.next(), logger: logger)
        host.reload = reload
        let web = try await DashboardServer.start(dashboard, after: { try await host.startService() }, undo: { await host.stopService() },
                                                  backend: host, group: group, logger: logger)
        host.loop.execute { host.startTimers() }
        let signal = await SignalWaiter(signals: [SIGINT, SIGTERM]).wait()
        logger.info("stopping on signal \(signal)")
        await web?.stop()
        await host.stopService()
        try? await host.loop.submit { host.timers.forEach { $0.cancel() } }.get()
        try? await group.shutdownGracefully()
        logger.info("stopped")
    }

    /// `reloading`: read the config file again first (Start on the dashboard).
    func startService(reloading: Bool = false) async throws {
        if reloading, let reload {
            let fresh = try reload()
            guard fresh.problems.isEmpty else { throw ConfigurationError(fresh.problems.joined(separator: "; ")) }
            try await loop.submit { [self] in self.config = fresh }.get()
        }
        let config = try await loop.submit { [self] in self.config }.get()
        let channel: Channel
        do {
            channel = try await DatagramBootstrap(group: loop)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.datagramVectorReadMessageCount, value: 32)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 32 * 2048))
                .channelInitializer { [self] channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(StandaloneHandler(host: self)) }
                }
                .bind(to: bind.socketAddress()).get()
        } catch {
            throw ConfigurationError("cannot bind UDP \(bind): \(error)")
        }
        try await loop.submit { [self] in
            self.channel = channel
            tracker = StandaloneTracker(
                handler: PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(keys: connectionIDKeys, lifetimeSeconds: config.connectionIDLifetimeSeconds)),
                seed: WallClock.randomSeed())
            stats = ClusterServerStats()
            history.resetCounters()
            history.note(WallClock.now(), kind: "service", text: "service started")
        }.get()
        logger.info("tracker listening", metadata: ["udp": "\(bind)", "interval": "\(config.announceInterval)s",
                                                    "peer-timeout": "\(config.effectivePeerTimeout)"])
    }

    func stopService() async {
        let channel = try? await loop.submit { [self] () -> Channel? in
            defer { self.channel = nil; tracker = nil; silenced = false }
            if self.channel != nil {
                logger.info("served peers", metadata: ["datagrams": "\(stats.datagrams)", "error-replies": "\(stats.errorReplies)"])
                history.note(WallClock.now(), kind: "service", text: "service stopped")
            }
            return self.channel
        }.get()
        try? await channel?.close()
    }

    func startTimers() {
        timers.append(loop.scheduleRepeatedTask(initialDelay: .seconds(5), delay: .seconds(5)) { [weak self] _ in
            self?.tracker?.tick(now: WallClock.now())
        })
        timers.append(loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [weak self] _ in
            guard let self else { return }
            history.sample(at: WallClock.now(), status: statusOnLoop(), latency: LatencyWindow())
        })
    }

    /// On the loop, from the handler.
    func receive(_ datagram: ByteBuffer, from address: SocketAddress) -> TrackerResponse? {
        stats.datagrams += 1
        guard !silenced, let source = PeerEndpoint(address), let response = tracker?.receive(datagram, from: source, now: WallClock.now()) else {
            return nil
        }
        switch response {
        case .error(let e):
            stats.errorReplies += 1
            logger.debug("peer error reply", metadata: ["peer": "\(source)", "message": "\(e.message)"])
        case .announce: stats.replies += 1; stats.announces += 1
        default: stats.replies += 1
        }
        return response
    }

    func statusOnLoop() -> NodeStatus {
        var s = NodeStatus()
        s.mode = "standalone"
        s.service = channel == nil ? "stopped" : (silenced ? "failed" : "running")
        s.role = channel == nil ? "stopped" : "standalone"
        s.serving = channel != nil && !silenced
        s.inSync = true
        s.peerService = "udp \(bind)"
        s.replyFrom = "\(bind)"
        s.swarms = tracker?.store.swarmCount ?? 0
        s.peers = tracker?.store.peerCount ?? 0
        s.datagrams = stats.datagrams
        s.replies = stats.replies
        s.errorReplies = stats.errorReplies
        s.announces = stats.announces
        s.uptimeMs = (WallClock.now() - startedAt).value
        return s
    }

    // MARK: DashboardBackend

    public func status() async -> NodeStatus {
        (try? await loop.submit { [self] in statusOnLoop() }.get()) ?? NodeStatus()
    }

    public func settings() async -> [SettingRow] {
        let config = (try? await loop.submit { [self] in self.config }.get()) ?? config
        return [SettingRow(key: "mode", value: "standalone"), SettingRow(key: "udp", value: "\(bind)")] + config.settingRows
    }

    public func swarmRows() async -> [SwarmRow] {
        (try? await loop.submit { [self] in tracker.map { SwarmListing.rows($0.store) } ?? [] }.get()) ?? []
    }

    public func swarm(_ infoHash: InfoHash, page: Int, pageSize: Int) async -> (SwarmRow, ListPage<PeerRow>)? {
        (try? await loop.submit { [self] () -> (SwarmRow, ListPage<PeerRow>)? in
            tracker.flatMap { SwarmListing.detail($0.store, infoHash, now: WallClock.now(), page: page, pageSize: pageSize) }
        }.get()) ?? nil
    }

    public func torrents() async -> [TorrentRow] {
        (try? await loop.submit { [self] in tracker.map { TorrentRow.rows($0.store.catalogue) } ?? [] }.get()) ?? []
    }

    public func torrent(_ infoHash: InfoHash) async -> RegisteredTorrent? {
        (try? await loop.submit { [self] in tracker?.store.catalogue.torrents[infoHash] }.get()) ?? nil
    }

    public func change(_ change: CatalogueChange) async throws(ControlRefusal) -> String {
        let refusal: String?
        do {
            refusal = try await loop.submit { [self] () -> String? in
                guard tracker != nil else { return "the tracker service is stopped" }
                if let refusal = tracker?.apply(change) { return refusal }
                history.note(WallClock.now(), kind: "catalogue", text: change.doneMessage)
                return nil
            }.get()
        } catch { refusal = "the node is shutting down" }
        if let refusal { throw ControlRefusal(refusal) }
        return change.doneMessage
    }

    public func history() async -> ServiceHistory.Snapshot {
        (try? await loop.submit { [self] in history.snapshot }.get()) ?? ServiceHistory().snapshot
    }

    public func control(_ request: ServiceControl) async throws(ControlRefusal) -> String {
        let state = try? await loop.submit { [self] in (running: channel != nil, silenced: silenced) }.get()
        guard let state else { throw ControlRefusal("the node is shutting down") }
        switch request {
        case .start:
            guard !state.running else { throw ControlRefusal("the tracker service is already running") }
            do { try await startService(reloading: true) } catch { throw ControlRefusal("cannot start: \(error)") }
            return "service started"
        case .stop:
            guard state.running else { throw ControlRefusal("the tracker service is already stopped") }
            await stopService()
            return "service stopped; its swarms are forgotten"
        case .provoke, .recover:
            guard state.running else { throw ControlRefusal("the tracker service is stopped") }
            let silence = request == .provoke
            guard state.silenced != silence else { throw ControlRefusal(silence ? "a failure is already provoked" : "no failure to recover from") }
            try? await loop.submit { [self] in
                silenced = silence
                history.note(WallClock.now(), kind: "service", text: silence ? "failure provoked" : "recovered")
            }.get()
            return silence ? "the tracker is silent: requests are dropped" : "the tracker answers again"
        }
    }
}
