#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TrackerLogic

/// The tracker while its service runs, shared by the serving threads.
struct StandaloneService {
    var tracker: StandaloneTracker
    var silenced = false
    var stats = NodeCounters()
    /// HTTP requests decided so far (each gets its number, as a cluster's exchanges do).
    var httpRequests: UInt64 = 0
}

/// A single tracker (no cluster), with the same dashboard as a cluster node: Stop closes
/// the sockets and forgets the swarms, Start binds them again, a provoked failure drops
/// every request.
///
/// Each of `threads` serving threads reads its own socket (`BatchedUDPSocket`; with more
/// than one, SO_REUSEPORT sockets on the same address, the kernel spreading sources over
/// them), and all of them answer from one tracker under one lock, taken once per batch:
/// a peer sees the same swarms whichever socket its address hashed to. The lock covers
/// deciding and applying requests; reading, encoding and sending, most of the cost of a
/// datagram, run in parallel. Everything else (config, history, timers, the dashboard)
/// lives on one event loop.
public final class StandaloneHost: DashboardBackend, @unchecked Sendable {
    /// `--udp`: each address gets `threads` sockets. With an IPv4 address among them, an
    /// IPv6 one serves IPv6 alone (`0.0.0.0:6969` and `[::]:6969` bind side by side);
    /// alone, `[::]` serves both families.
    let binds: [PeerEndpoint]
    let threads: Int
    /// Read again from the config file at each Start (on the loop).
    var config: TrackerConfig
    var reload: (@Sendable () throws -> TrackerConfig)?
    let connectionIDKeys: [SipHash24]
    let group: EventLoopGroup
    let loop: EventLoop
    let logger: Logger
    let service = NIOLockedValueBox<StandaloneService?>(nil)
    /// The serving sockets while the service runs (on the loop), and what completes when
    /// each one's thread has returned.
    var sockets: [(socket: BatchedUDPSocket, served: EventLoopFuture<Void>)] = []
    /// One thread per socket.
    let servers: NIOThreadPool
    var history = ServiceHistory()
    public let metrics: NodeMetrics
    var timers: [RepeatedTask] = []
    let startedAt = WallClock.now()
    /// `--db`: where the operator data (registered torrents, the access policy) is kept
    /// across restarts, written as each change is made by its one thread (nil without `--db`).
    let writer: RepositoryThread?
    /// The operator data of the service that stopped, put back when it starts again (on
    /// the loop). Swarms are soft state: they are not kept.
    var keptCatalogue: Catalogue?
    /// The HTTP tracker, once listening (on the loop): the status reads its counts.
    var httpListener: HTTPTrackerListener?

    init(binds: [PeerEndpoint], threads: Int, config: TrackerConfig, connectionIDKeys: [SipHash24], group: EventLoopGroup, logger: Logger,
         metrics: NodeMetrics, repository: SQLiteRepository? = nil) {
        self.binds = binds; self.threads = threads; self.config = config; self.connectionIDKeys = connectionIDKeys
        self.group = group; self.loop = group.next(); self.logger = logger; self.metrics = metrics
        writer = repository.map { RepositoryThread($0) }
        servers = NIOThreadPool(numberOfThreads: threads * max(binds.count, 1))
        servers.start()
    }

    /// Binds the sockets and serves until SIGINT or SIGTERM.
    /// `threads`: serving threads, each with its own socket (from `--threads`, at least 1).
    /// `connectionIDKeys`: from `--connection-id-key-file`; nil draws a random key, so ids
    /// are secret and last as long as the process.
    /// `database`: `--db`, the SQLite file the operator data is kept in.
    public static func run(binds: [PeerEndpoint], threads: Int = 1, config: TrackerConfig, connectionIDKeys: [SipHash24]? = nil,
                           database: String? = nil, httpTracker: HTTPTrackerSettings? = nil,
                           dashboard: DashboardSettings? = nil, monitoring: MonitoringSettings, logger: Logger,
                           reload: (@Sendable () throws -> TrackerConfig)? = nil,
                           liveReload: (@Sendable () -> ReloadedConfig?)? = nil) async throws {
        let problems = config.problems
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "; ")) }
        guard (1...StandaloneHost.maxThreads).contains(threads) else {
            throw ConfigurationError("threads must be 1 to \(StandaloneHost.maxThreads) (got \(threads))")
        }
        let keys = connectionIDKeys ?? [SipHash24(k0: WallClock.randomSeed(), k1: WallClock.randomSeed())]
        let repository: SQLiteRepository?
        do { repository = try database.map { try SQLiteRepository(path: $0) } } catch { throw ConfigurationError("\(error)") }
        let kept: Catalogue?
        do { kept = try repository?.operatorData() } catch { throw ConfigurationError("\(error)") }
        if let kept {
            logger.info("operator data restored", metadata: ["torrents": "\(kept.torrents.count)", "access-rules": "\(kept.access.rules.count)",
                                                             "access-mode": "\(kept.access.mode)"])
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        guard !binds.isEmpty else { throw ConfigurationError("a standalone node needs an address to serve peers on") }
        let host = StandaloneHost(binds: binds, threads: threads, config: config, connectionIDKeys: keys, group: group, logger: logger,
                                  metrics: NodeMetrics(version: monitoring.version, commit: monitoring.commit, topUsers: monitoring.metricsUsers), repository: repository)
        host.keptCatalogue = kept
        host.reload = reload
        let web = try await WebListeners.start(dashboard, metrics: monitoring.metricsEndpoint,
                                                  after: { try await host.startService() }, undo: { await host.stopService() },
                                                  backend: host, group: group, logger: logger)
        let http = try await HTTPTrackerListener.start(httpTracker, backend: host, threads: threads, logger: logger,
                                                       undo: { await web.stop(); await host.stopService() })
        host.loop.execute {
            host.httpListener = http
            host.startTimers()
        }
        monitoring.notifier?.feed(on: host.loop)
        monitoring.notifier?.ready(status: "standalone, serving udp \(host.boundList)" + (http.map { " and \($0.bound.map(\.description).joined(separator: ", "))" } ?? ""))
        let stopped = host.loop.makePromise(of: Int32.self)
        _ = try await NodeLifecycle.run(logger: logger, reload: {
            http?.reloadCertificate(logger: logger)
            guard let fresh = liveReload?() else { return }
            await host.reconfigure(fresh.config)
            fresh.applied()
        }, node: {
            try await stopped.futureResult.get()
        }, stop: {
            monitoring.notifier?.stopping()
            await http?.stop()
            await web.stop()
            await host.stopService()
            try? await host.loop.submit { host.timers.forEach { $0.cancel() } }.get()
            try? await host.writer?.shutdownGracefully()
            stopped.succeed(0)
        })
        try? await host.servers.shutdownGracefully()
        try? await group.shutdownGracefully()
        logger.info("stopped")
    }

    /// The `--udp` addresses, as the status and the settings tab show them.
    var boundList: String { binds.map { "\($0)" }.joined(separator: ", ") }

    /// More threads than this only add lock contention.
    public static let maxThreads = 64

    /// SIGHUP: the live settings of `fresh` apply from the next request on, sockets,
    /// swarms and connection ids untouched.
    func reconfigure(_ fresh: TrackerConfig) async {
        try? await loop.submit { [self] in config = config.takingLiveSettings(of: fresh) }.get()
        service.withLockedValue { $0?.tracker.reconfigure(fresh) }
    }

    /// `reloading`: read the config file again first (Start on the dashboard).
    func startService(reloading: Bool = false) async throws {
        if reloading, let reload {
            let fresh = try reload()
            guard fresh.problems.isEmpty else { throw ConfigurationError(fresh.problems.joined(separator: "; ")) }
            try await loop.submit { [self] in self.config = fresh }.get()
        }
        let config = try await loop.submit { [self] in self.config }.get()
        var bound: [BatchedUDPSocket] = []
        for bind in binds {
            do {
                // One socket per thread: the first binds, the others join its address (port 0 included).
                var first: PeerEndpoint?
                for _ in 0..<threads {
                    let socket = try BatchedUDPSocket(binding: first ?? bind, reusePort: threads > 1,
                                                      v6Only: binds.contains { $0.ip.family == .v4 })
                    bound.append(socket)
                    first = first ?? socket.localEndpoint
                }
            } catch {
                for socket in bound { socket.close() }
                throw ConfigurationError("cannot bind UDP \(bind): \(error)")
            }
        }
        let fresh = StandaloneTracker(
            handler: PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(keys: connectionIDKeys, lifetimeSeconds: config.connectionIDLifetimeSeconds)),
            seed: WallClock.randomSeed())
        try await loop.submit { [self, bound] in
            var tracker = fresh
            if let keptCatalogue { tracker.install(keptCatalogue) }
            service.withLockedValue { $0 = StandaloneService(tracker: tracker) }
            sockets = bound.map { socket in
                (socket, servers.runIfActive(eventLoop: loop) { [self] in socket.serve { answer(&$0) } })
            }
            history.resetCounters()
            history.note(WallClock.now(), kind: "service", text: "service started")
        }.get()
        logger.info("tracker listening", metadata: ["udp": "\(binds.map { "\($0)" }.joined(separator: ","))", "threads": "\(threads)", "interval": "\(config.announceInterval)s",
                                                    "peer-timeout": "\(config.effectivePeerTimeout)"])
    }

    func stopService() async {
        let closing = (try? await loop.submit { [self] () -> [(socket: BatchedUDPSocket, served: EventLoopFuture<Void>)] in
            defer { sockets = [] }
            if let kept = service.withLockedValue({ $0.map { $0.tracker.store.catalogue.keepingCompletions(of: $0.tracker.store) } }) {
                keptCatalogue = kept
            }
            if let stats = service.withLockedValue({ service in defer { service = nil }; return service?.stats }) {
                logger.info("served peers", metadata: ["datagrams": "\(stats.datagrams)", "error-replies": "\(stats.errorReplies)"])
                history.note(WallClock.now(), kind: "service", text: "service stopped")
            }
            return sockets
        }.get()) ?? []
        for (socket, _) in closing { socket.stop() }
        for (socket, served) in closing {
            try? await served.get()
            socket.close()
        }
        // With --db, the completion counts of registered torrents and the users' totals go
        // to the file too (the catalogue's other entries were written as they changed).
        guard let writer, let kept = try? await loop.submit({ [self] in keptCatalogue }).get() else { return }
        for change in Catalogue.restoring(kept.keptCompletionBases + kept.keptUserTotals) {
            do {
                try await writer.run(on: loop) { try $0.record(change, in: kept) }.get()
            } catch {
                logger.error("completion counts not stored", metadata: ["error": "\(error)"])
            }
        }
    }

    func startTimers() {
        timers.append(loop.scheduleRepeatedTask(initialDelay: .seconds(5), delay: .seconds(5)) { [weak self] _ in
            self?.service.withLockedValue { $0?.tracker.tick(now: WallClock.now()) }
        })
        timers.append(loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [weak self] _ in
            guard let self else { return }
            history.sample(at: WallClock.now(), status: statusOnLoop(), latency: LatencyWindow())
        })
    }

    /// On the thread of the socket that read the batch: one lock for the whole batch,
    /// one reading of the clock.
    func answer(_ batch: inout BatchedUDPSocket.Batch) {
        let now = WallClock.now()
        service.withLockedValue { service in
            service?.stats.datagrams += batch.received
            guard service?.silenced == false else { return }
            for (slot, datagram, source) in batch.requests {
                service?.stats.traffic.received(datagram, from: source)
                guard let response = service?.tracker.receive(datagram, from: source, now: now) else { continue }
                switch response {
                case .error: service?.stats.errorReplies += 1
                case .announce: service?.stats.replies += 1; service?.stats.announces += 1
                default: service?.stats.replies += 1
                }
                service?.stats.traffic.replied(response, to: source)
                batch.replies.append((slot, response))
            }
        }
        guard logger.logLevel <= .debug else { return }
        for (slot, response) in batch.replies {
            guard case .error(let e) = response, let request = batch.requests.first(where: { $0.slot == slot }) else { continue }
            logger.debug("peer error reply", metadata: ["peer": "\(request.source)", "message": "\(e.message)"])
        }
    }

    func statusOnLoop() -> NodeStatus {
        let running = !sockets.isEmpty
        var s = NodeStatus()
        s.mode = "standalone"
        s.role = running ? "standalone" : "stopped"
        s.inSync = true
        s.peerService = "udp \(boundList)" + (threads > 1 ? " (\(threads) sockets each)" : "")
        s.replyFrom = boundList
        service.withLockedValue { service in
            let silenced = service?.silenced ?? false
            s.service = running ? (silenced ? "failed" : "running") : "stopped"
            s.serving = running && !silenced
            s.swarms = service?.tracker.store.swarmCount ?? 0
            s.peers = service?.tracker.store.peerCount ?? 0
            s.datagrams = service?.stats.datagrams ?? 0
            s.replies = service?.stats.replies ?? 0
            s.errorReplies = service?.stats.errorReplies ?? 0
            s.announces = service?.stats.announces ?? 0
            s.requestCounts = (service?.stats.traffic ?? PeerTraffic()).requestCounts
            s.replyCounts = (service?.stats.traffic ?? PeerTraffic()).replyCounts
        }
        s.uptimeMs = (WallClock.now() - startedAt).value
        s.httpTracker = httpListener?.counts.byOutcome ?? [:]
        return s
    }

    // MARK: DashboardBackend

    public func status() async -> NodeStatus {
        (try? await loop.submit { [self] in statusOnLoop() }.get()) ?? NodeStatus()
    }

    public func settings() async -> [SettingRow] {
        let config = (try? await loop.submit { [self] in self.config }.get()) ?? config
        return [SettingRow(key: "mode", value: "standalone"), SettingRow(key: "udp", value: boundList),
                SettingRow(key: "threads", value: "\(threads)")] + config.settingRows
    }

    public func swarmRows() async -> [SwarmRow] {
        await SwarmListing.rowsOffLoop(service.withLockedValue { $0?.tracker.store })
    }

    /// The swarm is taken under the lock as a value, in O(1); its peers are ordered and
    /// paged outside it (the UDP path waits for that lock).
    public func swarm(_ infoHash: InfoHash, page: Int, pageSize: Int) async -> (SwarmRow, ListPage<PeerRow>)? {
        let snapshot = service.withLockedValue { service in service.flatMap { SwarmListing.snapshot($0.tracker.store, infoHash) } }
        guard let (row, swarm) = snapshot else { return nil }
        return await SwarmListing.pageOffLoop(row, swarm, page: page, pageSize: pageSize)
    }

    public func torrents() async -> [TorrentRow] {
        service.withLockedValue { $0.map { TorrentRow.rows($0.tracker.store.catalogue) } } ?? []
    }

    public func torrent(_ infoHash: InfoHash) async -> RegisteredTorrent? {
        service.withLockedValue { $0?.tracker.store.catalogue.torrents[infoHash] }
    }

    public func access(offset: Int, limit: Int) async -> AccessListing? {
        guard let catalogue = service.withLockedValue({ $0?.tracker.store.catalogue }) else { return nil }
        return await AccessListing.offLoop(catalogue, offset: offset, limit: limit)
    }

    public func accessPolicy() async -> AccessPolicy? {
        service.withLockedValue { $0?.tracker.store.catalogue.access }
    }

    /// Applied on the loop, then (with `--db`) written before the operator is told it is
    /// done, by the one writer thread: queued from the loop right after the change applied,
    /// so changes reach the disk in the order they took effect, each with the catalogue as
    /// it stood right after it.
    public func change(_ change: CatalogueChange) async throws(ControlRefusal) -> String {
        let outcome: Result<EventLoopFuture<Void>?, ControlRefusal>
        do {
            outcome = try await loop.submit { [self] () -> Result<EventLoopFuture<Void>?, ControlRefusal> in
                let applied = service.withLockedValue { service -> Result<Catalogue, ControlRefusal> in
                    guard service != nil else { return .failure(ControlRefusal("the tracker service is stopped")) }
                    if let refusal = service?.tracker.apply(change) { return .failure(ControlRefusal(refusal)) }
                    return .success(service?.tracker.store.catalogue ?? Catalogue())
                }
                return applied.map { catalogue in
                    history.note(WallClock.now(), kind: "catalogue", text: change.doneMessage)
                    guard let writer else { return nil }
                    return writer.run(on: loop) { try $0.record(change, in: catalogue) }
                }
            }.get()
        } catch { outcome = .failure(ControlRefusal("the node is shutting down")) }
        guard let written = try outcome.get() else { return change.doneMessage }
        do {
            try await written.get()
        } catch {
            logger.error("operator data not stored", metadata: ["change": "\(change.doneMessage)", "error": "\(error)"])
            throw ControlRefusal("\(change.doneMessage), but it could not be stored and is lost at the next restart: \(error)")
        }
        return change.doneMessage
    }

    public func history() async -> ServiceHistory.Snapshot {
        (try? await loop.submit { [self] in history.snapshot }.get()) ?? ServiceHistory().snapshot
    }

    public func control(_ request: ServiceControl) async throws(ControlRefusal) -> String {
        let state = try? await loop.submit { [self] in
            (running: !sockets.isEmpty, silenced: service.withLockedValue { $0?.silenced ?? false })
        }.get()
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
                service.withLockedValue { $0?.silenced = silence }
                history.note(WallClock.now(), kind: "service", text: silence ? "failure provoked" : "recovered")
            }.get()
            return silence ? "the tracker is silent: requests are dropped" : "the tracker answers again"
        }
    }
}

extension StandaloneHost: HTTPTrackerBackend {
    /// Decided at once under the tracker's lock, on the connection's thread, as a batch of
    /// datagrams is.
    package func decide(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: HTTPTrackerAnswer) {
        answer.succeed(answerNow(request, from: source))
    }

    package func answerAtOnce(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse? {
        answerNow(request, from: source)
    }

    private func answerNow(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse {
        let now = WallClock.now()
        let refusal = TrackerResponse.error(ErrorResponse(transactionID: 0, message: PeerRequestHandler.notServingMessage))
        let response = service.withLockedValue { service -> TrackerResponse in
            guard service?.silenced == false else { return refusal }
            service?.httpRequests &+= 1
            let exchange = HTTPExchangeID(service?.httpRequests ?? 0)
            guard let response = service?.tracker.receive(http: request, from: source, exchange: exchange, now: now) else { return refusal }
            // As a cluster node counts them (`ClusterService.answerHTTP`).
            if case .announce = response { service?.stats.announces += 1 }
            return response
        }
        return response
    }
}
