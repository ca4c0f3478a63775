import Foundation
import Logging
import NIOCore
import STOMP
import NIOPosix
import TrackerLogic

/// Everything `tracker run` needs to host one cluster node.
public struct ClusterNodeSettings: Sendable {
    /// `.unassigned` asks the master for one (`--id auto`).
    public var id: NodeID
    public var peers: PeerChannels
    public var broker: StompSettings
    public var database: String
    public var http: PeerEndpoint?
    public var clusterName: String
    /// Authenticate every cluster message; the first signs, any verifies (rotation). Empty
    /// only with `--insecure-cluster`: messages are then framed under a public key.
    public var keys: [ClusterKey]
    /// Keys connection ids, so every node accepts the ids any master issued: derived from
    /// the cluster key, or read from a file, or (insecure, no file) random per process.
    public var connectionIDKeys: [SipHash24]
    public var cluster: ClusterConfig
    public var tracker: TrackerConfig
    /// `--http-tracker`: HTTP announces and scrapes, decided and committed as UDP ones are.
    public var httpTracker: HTTPTrackerSettings?

    public init(id: NodeID, peers: PeerChannels, broker: StompSettings, database: String, http: PeerEndpoint?,
                clusterName: String, keys: [ClusterKey], connectionIDKeys: [SipHash24], cluster: ClusterConfig, tracker: TrackerConfig) {
        self.id = id; self.peers = peers; self.broker = broker; self.database = database; self.http = http
        self.clusterName = clusterName; self.keys = keys; self.connectionIDKeys = connectionIDKeys
        self.cluster = cluster; self.tracker = tracker
    }

    public var problems: [String] {
        var out = cluster.problems + tracker.problems
        if clusterName.isEmpty || clusterName.contains(where: { !($0.isLetter || $0.isNumber || "-_.".contains($0)) }) {
            out.append("cluster name must be non-empty letters, digits, '-', '_' or '.'")
        }
        if database.isEmpty { out.append("--db needs a file path") }
        if keys.count > 2 { out.append("at most two cluster keys (the current one and the one being rotated out)") }
        if connectionIDKeys.isEmpty { out.append("no connection-id key") }
        for mode in peers.modes {
            let group: PeerEndpoint?
            switch mode {
            case .group(let g, _), .vip(_, let g, _): group = g
            case .floating(_, let keepalives): group = keepalives?.group
            case .udp: group = nil
            }
            guard let g = group else { continue }
            if !g.ip.isMulticast { out.append("group \(g.ip) is not a multicast address (224.0.0.0/4, ff00::/8)") }
            if g.ip.family != mode.family { out.append("group \(g.ip) and service address \(mode.serviceAddress) are of different families") }
        }
        return out
    }

    var topic: String { "/topic/\(clusterName)" }
    func topic(for node: NodeID) -> String { "/topic/\(clusterName).n\(node.rawValue)" }
}

/// Hosts one `TrackerNode` on one event loop: peer datagrams, broker messages, timers
/// and store results all become `step` calls there, and the returned actions are
/// performed there. Nothing else touches the node.
public final class ClusterService: NodeExecutor, @unchecked Sendable {
    /// The live tracker settings change on a reload (`reconfigure`); nothing else does.
    var settings: ClusterNodeSettings
    let loop: EventLoop
    let logger: Logger
    let writer: StoreWriter
    let incarnation: UInt64
    var node: TrackerNode
    /// Seals what we publish and verifies what the broker delivers.
    var channel: ClusterChannel
    let rejectLog: RateLimitedLog
    var peerSendFailures: PeerSendFailures
    /// The node's path counts at its last standing change: what it took since names why
    /// the next one happened (`ProtocolPath.leavingOffice`).
    var pathsAtRoleChange = PathCounts()
    /// A peer send failed since the node was last told (`NodeEvent.peerSendFailed`).
    var peerSendFailureUnreported = false
    /// What `start` bound: the broker client and the peer sockets (nil before, and if
    /// binding failed).
    struct Bound {
        let stomp: StompClient
        let sockets: PeerSocketSet
    }
    var bound: Bound?
    var stomp: StompClient? { bound?.stomp }
    var sockets: PeerSocketSet? { bound?.sockets }
    /// Each family's peer socket, read by the node itself (`PeerIntake`).
    var intakes: [PeerIntake] = []
    /// Each family's replies not yet sent (`flushReplies`); none leaves long after the
    /// step that decided it.
    var replies = ReplyOutbox(families: 0, config: ClusterConfig())
    /// The time of the step whose actions are being performed (`ReplyOutbox`).
    var stepNow = Instant.zero
    /// When replies, frames and the timer go out (`OutputPolicy`).
    var output = OutputPolicy()
    /// A provoked failure (the dashboard's button; `OutputPolicy.silenced`).
    var silenced: Bool {
        get { output.silenced }
        set { output.silenced = newValue }
    }
    /// Told of role, epoch and master changes, on the loop (the dashboard's timeline).
    var onRoleChange: ((StandingChange, Instant) -> Void)?
    /// The node's one timer (`NodeTimer`: the rule the simulator follows too) and its task.
    var timer = NodeTimer()
    var wake: Scheduled<Void>?
    /// The node's id once it told it (`NodeAction.subscribe`): its own topic, and how its
    /// own frames are told apart.
    var ownTopic: NodeID?
    var stopping = false
    var storeFailing = false
    /// Operators' catalogue changes waiting to show in this node's replica (each for at
    /// most 5 s).
    var catalogueWaiters = CatalogueWaiters()
    /// HTTP tracker requests the node is deciding (`HTTPExchanges`), and the task that
    /// refuses those it takes too long over.
    var httpExchanges: HTTPExchanges
    var httpExpiry: RepeatedTask?
    /// Set by `.discardPeerBacklog`: peer datagrams are dropped unread while it lasts.
    var backlogDiscard: PeerBacklogDiscard?
    public internal(set) var stats = NodeCounters()
    /// The dashboard's exporter, when there is one: commit latencies go to its histogram.
    var metrics: NodeMetrics?
    /// The log lines' node id and role: set at each change of either.
    var logContext: LogContext?
    let finished: EventLoopPromise<Int32>
    let startedAt: Instant

    /// Opens the repository and restores what it holds; binds nothing yet.
    public init(settings: ClusterNodeSettings, loop: EventLoop, logger: Logger) throws {
        let problems = settings.problems
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "; ")) }
        self.settings = settings
        self.loop = loop
        self.logger = logger
        self.finished = loop.makePromise()
        let httpLimits = settings.httpTracker?.limits ?? HTTPTrackerLimits()
        httpExchanges = HTTPExchanges(limit: httpLimits.maxWaiting, timeout: httpLimits.answerTimeout)
        let directory = settings.database.contains("/") ? String(settings.database[..<settings.database.lastIndex(of: "/")!]) : "."
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.isEmpty ? "/" : directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ConfigurationError("--db \(settings.database): directory \(directory) does not exist")
        }
        writer = StoreWriter(path: settings.database, loop: loop)
        var restored: DurableState?
        var storeFailure: String?
        switch writer.load() {
        case .success(let state): restored = state
        case .failure(let error): storeFailure = "\(error)"
        }
        let handler = PeerRequestHandler(config: settings.tracker,
                                         connectionIDs: ConnectionIDPolicy(keys: settings.connectionIDKeys,
                                                                           lifetimeSeconds: settings.tracker.connectionIDLifetimeSeconds))
        startedAt = WallClock.now()
        channel = ClusterChannel(keys: settings.keys, maxAge: max(.seconds(30), settings.cluster.keepaliveInterval * 10), startedAt: startedAt)
        rejectLog = RateLimitedLog(logger: logger, every: .seconds(10))
        peerSendFailures = PeerSendFailures(logger: logger)
        // Start time in the high bits: of two running nodes with one id, the newer yields.
        incarnation = UInt64(clamping: startedAt.milliseconds) << 20 | WallClock.randomSeed() & 0xF_FFFF
        node = TrackerNode(id: settings.id, incarnation: incarnation, config: settings.cluster, handler: handler,
                           seed: WallClock.randomSeed(), now: startedAt, restoring: restored,
                           address: settings.http.map { "http://\($0)" } ?? settings.peers.serviceAddress.description)
        // A configured id is known before the first step; `--id auto` learns it by `.subscribe`.
        ownTopic = settings.id.isAssigned ? settings.id : nil
        for problem in node.restoreProblems {
            logger.error("repository held an impossible value; repaired", metadata: ["problem": "\(problem)", "db": "\(settings.database)"])
        }
        if let storeFailure {
            logger.error("repository unusable; voting ERROR until it recovers", metadata: ["error": "\(storeFailure)"])
            // Nothing is bound yet: a subscription is remembered for `start`, and no
            // other action is possible before the node's first tick.
            for case .subscribe(let id) in node.step(.storeResult(ok: false, detail: storeFailure), now: startedAt) { ownTopic = id }
        } else if let s = restored?.snapshot {
            logger.info("restored repository", metadata: ["last-committed": "\(s.lastCommitted)", "swarms": "\(s.content.count)"])
        }
    }

    /// Binds the peer channel and connects to the broker.
    public func start() async throws {
        let tls = try BrokerTLS.context(for: settings.broker)
        for broker in settings.broker.brokers where !broker.tls && !broker.isLoopback {
            logger.warning("broker connection not encrypted: the broker password and every peer address cross the network in clear text; use stomp+ssl://",
                           metadata: ["broker": "\(broker.url)"])
        }
        let peerSockets = try await PeerChannelBinder.bind(settings.peers, loop: loop) { [self] in PeerDatagramHandler(service: self) }
        try await loop.submit { [self] in
            intakes = peerSockets.families.map { family in
                PeerIntake(channel: family.receive, descriptor: family.receiveDescriptor,
                           deliver: { [self] bytes, source, now in peerDatagram(bytes, from: source, at: now) },
                           turnEnded: { [self] in peerReadComplete() })
            }
            for intake in intakes { intake.start() }
            replies = ReplyOutbox(families: peerSockets.families.count, config: settings.cluster)
            let stomp = StompClient(settings: settings.broker, tls: tls, loop: loop, logger: logger) { [self] event in brokerEvent(event) }
            bound = Bound(stomp: stomp, sockets: peerSockets)
            stomp.subscribe(settings.topic)
            stomp.subscribe(echoTopic, ownToo: true)
            if let ownTopic { stomp.subscribe(settings.topic(for: ownTopic)) }
            stomp.start()
            armWake(WallClock.now())
            httpExpiry = loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [weak self] _ in self?.expireHTTPExchanges() }
        }.get()
        logger.info("cluster node started", metadata: [
            "id": "\(settings.id.isAssigned ? "\(settings.id.rawValue)" : "auto")", "peers": "\(settings.peers)",
            "reply-from": "\(peerSockets.unicast)", "broker": "\(settings.broker.brokers.map(\.description).joined(separator: ","))",
            "cluster": "\(settings.clusterName)", "db": "\(settings.database)",
            "http": "\(settings.http.map { "\($0)" } ?? "off")",
        ])
    }

    /// Asks the node to leave cleanly; resolves `run()`.
    public func requestShutdown() {
        loop.execute { [self] in
            guard !stopping else { return }
            logger.info("leaving the cluster")
            step(.shutdown)
            // A node that had already stopped produces no exit action.
            if !stopping { teardown(code: 0) }
        }
    }

    /// Completes with the process exit code once the node has stopped.
    public func wait() async throws -> Int32 { try await finished.futureResult.get() }

    // MARK: stepping

    /// `now` is read once per recvmmsg for the datagrams it read (`PeerIntake`): they
    /// were all queued by then, and the node counts in milliseconds.
    func step(_ event: NodeEvent, now: Instant = WallClock.now()) {
        let actions = node.step(event, now: now)
        let outer = stepNow
        stepNow = now
        defer { stepNow = outer }
        // Each action borrowed from the array: iterating copied each one out (a retain
        // of its payload, a reply's peers among them) and released it after.
        actions.withUnsafeBufferPointer { performed in
            for i in performed.indices { perform(performed[i]) }
        }
        // Within a read of the peer socket, replies and the timer wait for its end
        // (`peerReadComplete`): one sendmmsg and one look at the node's deadlines a burst.
        if output.flushesAfterStep() {
            if replies.isPending { flushReplies() }
            armWake(now)
            reportPeerSendFailure(now)
        }
    }

    func perform(_ action: NodeAction) {
        var executor = self
        executor.run(action)
    }

    /// An operator's catalogue change: succeeds once this node's replica shows it done,
    /// fails with the node's refusal or after 5 s. On the loop.
    func submit(_ change: CatalogueChange) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        guard let id = catalogueWaiters.add(change, promise) else {
            promise.fail(ControlRefusal("too many catalogue changes in progress; retry"))
            return promise.futureResult
        }
        step(.submit(change))
        loop.scheduleTask(in: .seconds(5)) { [self] in
            catalogueWaiters.fail(id, "not committed within 5 s (no quorum, or the master changed); check the torrents tab and retry")
        }
        return promise.futureResult
    }

    func publish(_ env: ClusterEnvelope, to destination: String) {
        guard output.speaks, let stomp else { return }
        let headers = [("sender", String(incarnation, radix: 16))]
        let frames = channel.sealFragments(env, now: WallClock.now())
        for frame in frames { stomp.send(to: destination, body: frame, headers: headers) }
        // The broker hands a node none of its own messages on the cluster's topics
        // (`activemq.noLocal`), so each keepalive goes once more to a topic only this
        // process reads, its own included: what comes back proves the link both ways
        // (`BrokerLink.swift`).
        if case .keepalive = env.message, destination == settings.topic {
            for frame in frames { stomp.send(to: echoTopic, body: frame, headers: headers) }
        }
    }

    /// Where this process's keepalives come back to it.
    var echoTopic: String { "\(settings.topic).echo.\(String(incarnation, radix: 16))" }

    /// Hands a write to the writer thread; what the node hears back is `write.outcome`'s.
    package func store(_ write: StoreWrite) {
        let name = write.name
        let isProbe: Bool
        if case .probe = write { isProbe = true } else { isProbe = false }
        stats.storeBacklog += 1
        writer.submit(write).whenComplete { [self] result in
            stats.storeBacklog -= 1
            switch result {
            case .success:
                if isProbe && storeFailing {
                    storeFailing = false
                    logger.notice("repository accepts writes again; rewriting it whole", metadata: ["db": "\(settings.database)"])
                }
                if !stopping, let event = write.outcome(ok: true) { step(event) }
            case .failure(let error):
                stats.storeFailures += 1
                // The first failure is an error; the retries of a known-bad disk are not news.
                logger.log(level: storeFailing ? .debug : .error, "repository write failed; voting ERROR until it recovers",
                           metadata: ["write": "\(name)", "error": "\(error)"])
                storeFailing = true
                if !stopping, let event = write.outcome(ok: false, detail: "\(error)") { step(event) }
            }
        }
    }

    func flushReplies() {
        for family in replies.families { sendReplies(family) }
    }

    /// The descriptor is NIO's: nothing is sent once it closed the socket.
    func sendReplies(_ family: Int) {
        guard let socket = sockets?.families[family] else { return }
        guard socket.reply.isActive else { return }
        let now = WallClock.now()
        switch replies.send(family, on: socket.replyDescriptor, now: now) {
        case nil:
            break
        case .sent(let refused, let lastError)?:
            for _ in 0..<refused { peerSendFailures.failed("reply", code: lastError, now: now) }
            if refused > 0 { peerSendFailureUnreported = true }
        case .stale(let dropped, let age)?:
            stats.staleRepliesDropped += dropped
            logger.notice("replies decided before a pause dropped unsent (the next master answers their requests)",
                          metadata: ["replies": "\(dropped)", "decided-ms-ago": "\(age.value)"])
        }
    }

    /// Tells the node its peer sends failed, once for all that failed since it was last
    /// told: it leaves the office if another node can answer peers (`PeerSends.swift`).
    func reportPeerSendFailure(_ now: Instant) {
        guard peerSendFailureUnreported, !stopping else { return }
        peerSendFailureUnreported = false
        step(.peerSendFailed, now: now)
    }

    /// Asked through `inout`: `node.nextWake(now:)` on the stored property copied the whole
    /// node first (a retain and a release of each of its buffers), 1.4–1.7 % of a node's
    /// CPU, after every step.
    private static func nextWake(of node: inout TrackerNode, now: Instant) -> Instant { node.nextWake(now: now) }

    /// One timer, always at the node's next deadline.
    func armWake(_ now: Instant) {
        guard !stopping else { return }
        let at = Self.nextWake(of: &node, now: now)
        guard timer.arm(at: at) else { return }
        wake?.cancel()
        wake = loop.scheduleTask(in: .milliseconds(max(0, (at - now).value))) { [self] in
            guard timer.fire(at: at) else { return }
            wake = nil
            step(.tick)
        }
    }

    // MARK: inputs

    /// A datagram NIO read (the first of a burst, or any on a socket the node does not
    /// read itself).
    func peerDatagram(_ data: ByteBuffer, from source: SocketAddress) {
        guard let endpoint = PeerEndpoint(source) else { stats.datagrams += 1; return }
        peerDatagram(data, from: endpoint)
    }

    func peerDatagram(_ data: ByteBuffer, from endpoint: PeerEndpoint, at now: Instant = WallClock.now()) {
        stats.datagrams += 1
        // Every node receives every request; only the serving master answers. The others
        // hold it, so that whoever serves next answers what arrived while nobody did.
        guard !stopping, output.speaks else { return }
        if ClusterChannel.isFrame(data) { return beaconReceived(data) }
        stats.traffic.received(data, from: endpoint)
        if var discard = backlogDiscard {
            if discard.drops(at: now) {
                backlogDiscard = discard
                stats.backlogDiscarded += 1
                return
            }
            endBacklogDiscard()
        }
        output.beginPeerRead()
        step(.peer(data, from: endpoint), now: now)
        output.endPeerRead()
    }

    /// NIO finished a read on `channel`: its intake, if the node reads it, polls from now on.
    func nioReadComplete(on channel: Channel) {
        peerReadComplete()
        intakes.first { $0.channel === channel }?.readCompleted()
    }

    func peerReadComplete() {
        if replies.isPending { flushReplies() }
        reportPeerSendFailure(WallClock.now())
        if output.takePendingWake() { armWake(WallClock.now()) }
        // The socket is read in bursts; once what is still queued is less than a burst,
        // the rest arrived after the wake.
        if let discard = backlogDiscard, discard.isDrained(queuedBytes: sockets?.receiveQueueBytes()) {
            endBacklogDiscard()
        }
    }

    /// A receive queue this short holds no pause backlog (about 32 small datagrams).
    static let drainedQueueBytes = 64 << 10

    func endBacklogDiscard() {
        guard let discard = backlogDiscard else { return }
        backlogDiscard = nil
        logger.notice("peer backlog dropped", metadata: ["datagrams": "\(discard.dropped)",
                                                         "ms": "\((WallClock.now() - discard.startedAt).value)"])
    }

    /// A keepalive from the peer network (our own comes back too: the group loops).
    func beaconReceived(_ frame: ByteBuffer) {
        switch channel.open(frame, ownID: ownTopic ?? .unassigned, now: WallClock.now()) {
        case .success(nil):
            break
        case .success(let env?):
            if env.from == ownTopic && env.incarnation == incarnation { return }
            stats.beacons += 1
            step(.beacon(env))
        case .failure(.replayed) where (sockets?.families.count ?? 0) > 1:
            // Keepalives go to every family's group and every node joins each, so each
            // arrives once per family: the later copies are expected, not a replay to
            // count or warn about.
            break
        case .failure(let reason):
            stats.rejected[reason, default: 0] += 1
            rejectLog.warning("dropped a keepalive from the peer network", key: "beacon-\(reason.rawValue)", metadata: [
                "reason": "\(reason)", "bytes": "\(frame.readableBytes)"])
        }
    }

    func brokerEvent(_ event: StompEvent) {
        switch event {
        case .ready:
            if !stopping, output.speaks { step(.brokerConnected) }
        case .lost:
            // Lost messages are the protocol's business: keepalives and catch-up resync.
            break
        case .message(let destination, let headers, let body):
            guard output.speaks else { return }
            if headers.first(where: { $0.name == "sender" })?.value == String(incarnation, radix: 16), destination != echoTopic { return }
            switch channel.open(body, ownID: ownTopic ?? .unassigned, now: WallClock.now()) {
            case .success(nil):
                break  // a fragment taken in; its message is not whole yet
            case .success(let env?):
                stats.clusterMessages += 1
                if !stopping { step(.cluster(env)) }
            case .failure(let reason):
                stats.rejected[reason, default: 0] += 1
                rejectLog.warning("dropped a cluster message", key: reason.rawValue, metadata: [
                    "reason": "\(reason)", "destination": "\(destination)", "bytes": "\(body.readableBytes)"])
            }
        }
    }

    // MARK: stopping

    func teardown(code: Int32) {
        guard !stopping else { return }
        stopping = true
        catalogueWaiters.failAll("the tracker service stopped")
        httpExpiry?.cancel()
        for p in httpExchanges.removeAll() { p.succeed(Self.httpRefusal(Self.httpStopping)) }
        wake?.cancel()
        wake = nil
        timer.disarm()
        for intake in intakes { intake.stop() }
        // Writes first (the wipe of a clean shutdown), then the broker's receipt for our
        // LEAVING, then the sockets.
        writer.drain().flatMap { [self] in stomp?.close() ?? loop.makeSucceededVoidFuture() }.whenComplete { [self] _ in
            let closes = (sockets?.all ?? []).map { $0.close() }
            EventLoopFuture.andAllComplete(closes, on: loop).whenComplete { [self] _ in
                logger.info("stopped", metadata: ["datagrams": "\(stats.datagrams)", "replies": "\(stats.replies)",
                                                  "error-replies": "\(stats.errorReplies)"])
                logContext?.set(node: node.id.rawValue, role: Role.stopped.jsonName)
                finished.succeed(code)
            }
        }
    }

    /// On the loop: a reloaded configuration's live settings, for the node and the
    /// configuration tab.
    func reconfigure(_ fresh: TrackerConfig) {
        guard !stopping else { return }
        settings.tracker = settings.tracker.takingLiveSettings(of: fresh)
        step(.reconfigure(fresh))
    }

    /// Called once `wait()` returned.
    public func shutdownWriter() { writer.shutdown() }

    /// The commit latencies since the last call; the dashboard's sampler reads one window per second.
    public func takeCommitLatency() -> LatencyWindow { stats.commitLatency.take() }
}

public struct NodeCounters: Sendable {
    public var datagrams = 0
    public var replies = 0
    public var errorReplies = 0
    public var clusterMessages = 0
    /// Keepalives heard on the peer network (they keep the nodes together when the broker
    /// is gone).
    public var beacons = 0
    /// Cluster frames dropped by the channel, per reason.
    public var rejected: [ClusterRejection: Int] = [:]
    public var storeFailures = 0
    /// Peer datagrams dropped unread after a pause another master served through (total).
    public var backlogDiscarded = 0
    /// Replies dropped unsent because the process was paused after deciding them (total).
    public var staleRepliesDropped = 0
    /// The peer sockets pass peer requests (false: filtered, `NodeAction.readPeers`).
    public var readsPeers = true
    /// How often the filter went on or off.
    public var peerFilterChanges = 0
    /// Writes handed to the writer thread and not yet done: how far the disk trails memory.
    public var storeBacklog = 0
    /// Requests by BEP 15 action and replies by type, each by address family.
    public var traffic = PeerTraffic()
    /// Announces answered (as master).
    public var announces = 0
    /// Transactions this node led to commit, and those it aborted.
    public var commits = 0
    public var aborts = 0
    /// PREPARE sent to COMMIT decided, as master; read and reset by the dashboard's sampler.
    public var commitLatency = LatencyWindow()
}

/// Latencies since the last look: count, sum and worst, all a per-second chart needs.
public struct LatencyWindow: Sendable {
    public var count = 0
    public var totalMs: Int64 = 0
    public var maxMs: Int64 = 0

    mutating func record(_ latency: Milliseconds) {
        count += 1
        totalMs += max(0, latency.value)
        maxMs = max(maxMs, latency.value)
    }

    /// Returns what was recorded and starts afresh.
    mutating func take() -> LatencyWindow {
        defer { self = LatencyWindow() }
        return self
    }
}

/// Hands peer datagrams to the service on its loop.
final class PeerDatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let service: ClusterService

    init(service: ClusterService) { self.service = service }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        service.peerDatagram(envelope.data, from: envelope.remoteAddress)
    }

    func channelReadComplete(context: ChannelHandlerContext) { service.nioReadComplete(on: context.channel) }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // ICMP port-unreachable from a vanished peer and the like: not fatal.
    }
}
