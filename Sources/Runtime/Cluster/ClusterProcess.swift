#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix
import TrackerLogic

/// One process hosting one cluster node: the tracker service (a `ClusterService`, made
/// anew at each Start, so every start is a fresh incarnation that joins as a restarted
/// node does) and the dashboard, which stays up while the service is stopped. All of its
/// state lives on the node's loop.
public final class ClusterProcess: DashboardBackend, @unchecked Sendable {
    /// Read again from the config file at each Start (on the loop).
    var settings: ClusterNodeSettings
    let reload: (@Sendable () throws -> ClusterNodeSettings)?
    let loop: EventLoop
    let logger: Logger
    var service: ClusterService?
    var history = ServiceHistory()
    var sampler: RepeatedTask?
    /// Resolves with the process exit code: after SIGTERM, or when the service ended by
    /// itself with an error (a refused id), which an operator must see as an exit.
    let exited: EventLoopPromise<Int32>
    var shuttingDown = false
    let startedAt = WallClock.now()
    public let metrics: NodeMetrics
    let monitoring: MonitoringSettings
    /// The HTTP tracker, once listening (on the loop): the status reads its counts.
    var httpListener: HTTPTrackerListener?
    /// systemd has heard READY=1 (on the loop).
    var notifiedReady = false

    init(settings: ClusterNodeSettings, monitoring: MonitoringSettings, loop: EventLoop, logger: Logger,
         reload: (@Sendable () throws -> ClusterNodeSettings)?) {
        self.settings = settings
        self.monitoring = monitoring
        metrics = NodeMetrics(version: monitoring.version, commit: monitoring.commit, topUsers: monitoring.metricsUsers)
        self.reload = reload
        self.loop = loop
        self.logger = logger
        exited = loop.makePromise()
    }

    /// Runs the node until SIGINT/SIGTERM (leaves cleanly, code 0) or until the service
    /// stops itself with an error (its code). With `dashboard`, Stop and Start from the
    /// page do not end the process.
    public static func run(_ settings: ClusterNodeSettings, dashboard: DashboardSettings?, monitoring: MonitoringSettings,
                           logger: Logger, reload: (@Sendable () throws -> ClusterNodeSettings)? = nil,
                           liveReload: (@Sendable () -> ReloadedConfig?)? = nil) async throws -> Int32 {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let host = ClusterProcess(settings: settings, monitoring: monitoring, loop: group.next(), logger: logger, reload: reload)
        let web = try await WebListeners.start(dashboard, metrics: monitoring.metricsEndpoint,
                                                  after: { try await host.startService() }, undo: { await host.shutdown() },
                                                  backend: host, group: group, logger: logger)
        let http = try await HTTPTrackerListener.start(settings.httpTracker, backend: host, threads: HTTPTrackerListener.defaultThreads,
                                                       logger: logger, undo: { await host.shutdown(); await web.stop() })
        host.loop.execute {
            host.httpListener = http
            host.startSampling()
        }
        monitoring.notifier?.feed(on: host.loop)
        monitoring.notifier?.status("joining the cluster")
        let code = try await NodeLifecycle.run(logger: logger, reload: {
            http?.reloadCertificate(logger: logger)
            guard let fresh = liveReload?() else { return }
            await host.reconfigure(fresh.config)
            fresh.applied()
        }, node: {
            try await host.exited.futureResult.get()
        }, stop: {
            monitoring.notifier?.stopping()
            await http?.stop()
            await host.shutdown()
        })
        await web.stop()
        try? await group.shutdownGracefully()
        return code
    }

    // MARK: the service

    /// systemd hears the node's standing: ready once it has joined (it follows a master
    /// or is one), and each change after that as its status.
    func notify(_ s: NodeStanding) {
        guard let notifier = monitoring.notifier else { return }
        let status = "\(s.role.jsonName)\(s.serving ? " (serving)" : ""), master \(s.master.map { "\($0.rawValue)" } ?? "none"), epoch \(s.epoch)"
        if !notifiedReady, s.master != nil, s.role == .slave || s.role == .master {
            notifiedReady = true
            notifier.ready(status: status)
        } else {
            notifier.status(status)
        }
    }

    /// Opens the repository, binds the peer channel and joins the cluster.
    /// `reloading`: read the config file again first (Start on the dashboard).
    func startService(reloading: Bool = false) async throws {
        if reloading, let reload {
            let fresh = try reload()
            try await loop.submit { [self] in self.settings = fresh }.get()
        }
        let settings = try await loop.submit { [self] in self.settings }.get()
        let service = try ClusterService(settings: settings, loop: loop, logger: logger)
        service.metrics = metrics
        service.logContext = monitoring.log
        try await loop.submit { [self] in
            self.service = service
            service.onRoleChange = { [weak self] change, at in
                self?.history.record(change, at: at)
                self?.notify(change.current)
            }
            history.resetCounters()
            history.note(WallClock.now(), kind: "service", text: "service started")
        }.get()
        do {
            try await service.start()
        } catch {
            service.shutdownWriter()
            try? await loop.submit { [self] in self.service = nil }.get()
            throw error
        }
        service.finished.futureResult.whenSuccess { [self] code in serviceEnded(service, code: code) }
    }

    /// SIGHUP: the live settings of `fresh` apply from the service's next step on,
    /// without leaving the cluster; the next Start reads the whole file anyway.
    func reconfigure(_ fresh: TrackerConfig) async {
        try? await loop.submit { [self] in
            settings.tracker = settings.tracker.takingLiveSettings(of: fresh)
            service?.reconfigure(fresh)
        }.get()
    }

    /// Leaves the cluster as on SIGTERM (LEAVING, repository emptied); waits until done.
    func stopService() async {
        guard let service = try? await loop.submit({ [self] in self.service }).get() else { return }
        service.requestShutdown()
        _ = try? await service.wait()
    }

    /// On the loop: the service's `ClusterService` finished.
    func serviceEnded(_ ended: ClusterService, code: Int32) {
        ended.shutdownWriter()
        guard service === ended else { return }
        service = nil
        history.note(WallClock.now(), kind: "service", text: code == 0 ? "service stopped" : "service ended (code \(code))")
        if shuttingDown {
            exited.succeed(0)
        } else if code != 0 {
            logger.error("tracker service ended by itself; exiting", metadata: ["code": "\(code)"])
            exited.succeed(code)
        }
    }

    /// Stops the service, then resolves `exited`.
    func shutdown() async {
        let running = try? await loop.submit { [self] in
            shuttingDown = true
            sampler?.cancel()
            return service != nil
        }.get()
        if running == true {
            await stopService()
        } else {
            loop.execute { [self] in exited.succeed(0) }
        }
    }

    func startSampling() {
        sampler = loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [weak self] _ in
            guard let self else { return }
            var latency = LatencyWindow()
            let status = service.map { s in
                latency = s.takeCommitLatency()
                return s.status()
            } ?? NodeStatus()
            history.sample(at: WallClock.now(), status: status, latency: latency)
        }
    }

    // MARK: DashboardBackend

    func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T? {
        try? await loop.submit(body).get()
    }

    public func status() async -> NodeStatus {
        await onLoop { [self] in
            var s = service?.status() ?? stoppedStatus()
            s.uptimeMs = (WallClock.now() - startedAt).value
            s.httpTracker = httpListener?.counts.byOutcome ?? [:]
            return s
        } ?? stoppedStatus()
    }

    func stoppedStatus() -> NodeStatus {
        var s = NodeStatus()
        s.service = "stopped"
        s.id = settings.id.rawValue
        s.cluster = settings.clusterName
        s.peerService = settings.peers.description
        s.database = settings.database
        s.keepaliveMs = settings.cluster.keepaliveInterval.value
        s.broker.authenticated = !settings.keys.isEmpty
        return s
    }

    public func settings() async -> [SettingRow] { await onLoop { [self] in settings.settingRows } ?? [] }

    public func swarmRows() async -> [SwarmRow] {
        await SwarmListing.rowsOffLoop(await onLoop { [self] in service?.node.replica.store } ?? nil)
    }

    /// The swarm is taken on the loop as a value, in O(1); its peers are ordered and paged
    /// off it (ordering 100k peers on the loop made the master miss keepalives).
    public func swarm(_ infoHash: InfoHash, page: Int, pageSize: Int) async -> (SwarmRow, ListPage<PeerRow>)? {
        let snapshot = await onLoop { [self] in service.flatMap { SwarmListing.snapshot($0.node.replica.store, infoHash) } } ?? nil
        guard let (row, swarm) = snapshot else { return nil }
        return await SwarmListing.pageOffLoop(row, swarm, page: page, pageSize: pageSize)
    }

    public func history() async -> ServiceHistory.Snapshot {
        await onLoop { [self] in history.snapshot } ?? ServiceHistory().snapshot
    }

    public func control(_ request: ServiceControl) async throws(ControlRefusal) -> String {
        let state = await onLoop { [self] in (running: service != nil, silenced: service?.silenced ?? false, shuttingDown: shuttingDown) }
        guard let state, !state.shuttingDown else { throw ControlRefusal("the node is shutting down") }
        switch request {
        case .start:
            guard !state.running else { throw ControlRefusal("the tracker service is already running") }
            do { try await startService(reloading: true) } catch { throw ControlRefusal("cannot start: \(error)") }
            logger.notice("tracker service started from the dashboard")
            return "service started; joining the cluster"
        case .stop:
            guard state.running else { throw ControlRefusal("the tracker service is already stopped") }
            logger.notice("tracker service stopped from the dashboard")
            await stopService()
            return "service stopped; the node left the cluster"
        case .provoke, .recover:
            guard state.running else { throw ControlRefusal("the tracker service is stopped") }
            let silence = request == .provoke
            guard state.silenced != silence else {
                throw ControlRefusal(silence ? "a failure is already provoked" : "no failure to recover from")
            }
            _ = await onLoop { [self] in
                service?.silenced = silence
                history.note(WallClock.now(), kind: "service", text: silence ? "failure provoked" : "recovered")
            }
            logger.notice(silence ? "failure provoked from the dashboard: the node is silent" : "recovered from the provoked failure")
            return silence ? "the node is silent: no keepalives, no cluster traffic, no replies to peers"
                           : "the node speaks again and rejoins the cluster"
        }
    }

    public func torrents() async -> [TorrentRow] {
        await onLoop { [self] in service.map { TorrentRow.rows($0.node.replica.store.catalogue) } ?? [] } ?? []
    }

    public func torrent(_ infoHash: InfoHash) async -> RegisteredTorrent? {
        await onLoop { [self] in service?.node.replica.store.catalogue.torrents[infoHash] } ?? nil
    }

    public func access(offset: Int, limit: Int) async -> AccessListing? {
        // The catalogue is copied on the loop (a reference), sorted away from it.
        guard let catalogue = await onLoop({ [self] in service?.node.replica.store.catalogue }) ?? nil else { return nil }
        return await AccessListing.offLoop(catalogue, offset: offset, limit: limit)
    }

    public func accessPolicy() async -> AccessPolicy? {
        await onLoop({ [self] in service?.node.replica.store.catalogue.access }) ?? nil
    }

    /// The master commits the change; a slave forwards it to the master. Either way this
    /// node's own replica shows it once committed, which is what the caller waits for.
    public func change(_ change: CatalogueChange) async throws(ControlRefusal) -> String {
        let submitted: Result<EventLoopFuture<Void>, ControlRefusal>? = await onLoop { [self] in
            guard let service else { return .failure(ControlRefusal("the tracker service is stopped")) }
            guard !service.silenced else { return .failure(ControlRefusal("the node is cut off from the cluster (provoked failure)")) }
            return .success(service.submit(change))
        }
        guard let submitted else { throw ControlRefusal("the node is shutting down") }
        do {
            try await submitted.get().get()
        } catch let refusal as ControlRefusal {
            throw refusal
        } catch {
            throw ControlRefusal("\(error)")
        }
        _ = await onLoop { [self] in history.note(WallClock.now(), kind: "catalogue", text: change.doneMessage) }
        return change.doneMessage
    }
}

extension ClusterProcess: HTTPTrackerBackend {
    /// Whichever service runs decides; with none (stopped from the dashboard), the request
    /// is refused at once.
    package func decide(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: HTTPTrackerAnswer) {
        loop.execute { [self] in
            guard let service else { return answer.succeed(ClusterService.httpRefusal(PeerRequestHandler.notServingMessage)) }
            service.httpRequest(request, from: source, answer: answer)
        }
    }
}
