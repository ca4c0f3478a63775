import ArgumentParser
import Foundation
import Logging
import TrackerLogic
import TrackerRuntime
import STOMP

/// Options that tune peer service, shared by every way of running a node.
struct PeerServiceOptions: ParsableArguments {
    @Option(help: "Seconds peers should wait between announces.")
    var interval: UInt32 = 1800

    @Option(name: .customLong("interval-jitter"), help: "How far each reply's interval may lie from --interval, in percent either way (0-50; 0: none), so peers re-announce spread out.")
    var intervalJitter: String = "10"

    @Option(name: .customLong("peer-timeout"), help: "Seconds after which a silent peer is dropped (default: 2 × interval).")
    var peerTimeout: Int64?

    @Option(name: .customLong("numwant-default"), help: "Peers returned when a client asks for the default (num_want ≤ 0).")
    var numWantDefault: Int = 50

    @Option(name: .customLong("numwant-max"), help: "Most peers returned per announce.")
    var numWantMax: Int = 200

    @Option(name: .customLong("max-reply-bytes"), help: "Largest announce reply in bytes of UDP payload; num_want is capped to fit (1232: no IPv6 fragmentation).")
    var maxReplyBytes: Int = 1232

    @Option(name: .customLong("connection-id-lifetime"), help: "Seconds a connection id stays valid (at least 120).")
    var connectionIDLifetime: Int64 = 300

    @Flag(name: .customLong("trust-announced-ip"), help: "Use the announce's ip field instead of the sender's address.")
    var trustAnnouncedIP = false

    @Option(name: .customLong("connect-limit"), help: "Connects per second per source (an IPv4 address or an IPv6 /64), as RATE or RATE/BURST, or 'off'.")
    var connectLimit: String = "100/200"

    @Option(name: .customLong("announce-limit"), help: "Announces per second per source (an IPv4 address or an IPv6 /64), as RATE or RATE/BURST, or 'off'.")
    var announceLimit: String = "100/200"

    @Option(name: .customLong("error-limit"), help: "Error replies per second per source (an IPv4 address or an IPv6 /64), as RATE or RATE/BURST, or 'off'.")
    var errorLimit: String = "10/20"

    @Option(name: .customLong("max-swarms"), help: "Most swarms held; an announce that would start another gets a BEP 15 error.")
    var maxSwarms: Int = 1_000_000

    @Option(name: .customLong("max-peers-per-swarm"), help: "Most peers in one swarm; a new peer beyond it gets a BEP 15 error.")
    var maxPeersPerSwarm: Int = 100_000

    @Option(name: .customLong("max-peers"), help: "Most peers in all swarms together; a new peer beyond it gets a BEP 15 error. The default keeps peer tables within 2 GiB (128 bytes a peer).")
    var maxPeers: Int = TrackerConfig().maxPeers

    @Option(name: .customLong("max-scrape"), help: "Most info hashes answered per scrape (1-74).")
    var maxScrape: Int = 74

    /// Replaced by the replicated access policy; named only to say so.
    @Flag(name: .customLong("only-registered"), help: .hidden)
    var onlyRegistered = false

    static let onlyRegisteredGone = "only-registered is gone: the access policy is cluster state now, set once for every node "
        + "with `tracker admin mode allow` (docs/operating/access-policy.md)"

    func config() throws -> TrackerConfig {
        var c = TrackerConfig()
        c.announceInterval = interval
        let jitter = intervalJitter.hasSuffix("%") ? String(intervalJitter.dropLast()) : intervalJitter
        guard let percent = UInt32(jitter.trimmingCharacters(in: .whitespaces)) else {
            throw ValidationError("--interval-jitter: expected a percentage from 0 to \(TrackerConfig.maxIntervalJitterPercent) (got '\(intervalJitter)')")
        }
        c.intervalJitterPercent = percent
        c.peerTimeout = peerTimeout.map { Milliseconds.seconds($0) }
        c.numWantDefault = numWantDefault
        c.numWantMax = numWantMax
        c.maxReplyBytes = maxReplyBytes
        c.connectionIDLifetimeSeconds = connectionIDLifetime
        c.trustAnnouncedIP = trustAnnouncedIP
        c.connectLimit = try Self.limit(connectLimit, flag: "connect-limit")
        c.announceLimit = try Self.limit(announceLimit, flag: "announce-limit")
        c.maxSwarms = maxSwarms
        c.maxPeersPerSwarm = maxPeersPerSwarm
        c.maxPeers = maxPeers
        c.errorLimit = try Self.limit(errorLimit, flag: "error-limit")
        c.maxScrapeHashes = maxScrape
        if onlyRegistered { throw ValidationError(Self.onlyRegisteredGone) }
        if let problem = c.problems.first { throw ValidationError(problem) }
        return c
    }

    /// `off`, `RATE` (burst twice the rate) or `RATE/BURST`.
    static func limit(_ text: String, flag: String) throws -> SourceRateLimiter.Limit {
        if text == "off" || text == "0" { return .off }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let rate = UInt32(parts[0]), rate > 0, rate <= 1_000_000 else {
            throw ValidationError("--\(flag): expected RATE, RATE/BURST or off (got '\(text)')")
        }
        let burst = parts.count == 2 ? UInt32(parts[1]) : rate.multipliedReportingOverflow(by: 2).partialValue
        guard let burst, burst >= 1, burst <= 1_000_000 else { throw ValidationError("--\(flag): burst must be 1 to 1000000 (got '\(text)')") }
        return SourceRateLimiter.Limit(perSecond: rate, burst: burst)
    }
}

/// `--log-format`.
enum LogFormat: String {
    case text, json
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a tracker node. With no options: a standalone node on udp://127.0.0.1:6969.",
        discussion: """
            Cluster node: give --broker, the peer channel (--group, --vip with --group, or \
            --floating), --cluster-key-file, --db and usually --http. On one machine:
              tracker keygen --output /tmp/cluster.key
              tracker run --id 1 --group 239.255.42.99:6969 --interface lo \\
                --cluster-key-file /tmp/cluster.key --broker stomp://127.0.0.1:61613 \\
                --db /tmp/n1.sqlite --http 127.0.0.1:8081
            Across hosts: docs/operating/deploy.md. `tracker config check FILE` makes every check \
            that run makes before it binds anything.
            """)

    @Option(help: "UDP address to serve peers on, e.g. 0.0.0.0:6969 or [::]:6969 (standalone: repeat it for more, default 127.0.0.1:6969; cluster: one service address).")
    var udp: [String] = []

    @Option(help: "Standalone node: serving threads, each reading its own SO_REUSEPORT socket on the --udp address (1-\(StandaloneHost.maxThreads)).")
    var threads: Int = 1

    @Option(help: "Cluster node id (1…4294967295), or 'auto' to get one from the master.")
    var id: String = "auto"

    @Option(help: "Multicast group the cluster serves peers on, e.g. 239.255.42.99:6969 or [ff15::42]:6969 (with --floating: the group that carries keepalives). Once per address family: give an IPv4 and an IPv6 one to serve both.")
    var group: [String] = []

    @Option(help: "Shared service address every node binds (with --group of its family for delivery), e.g. 10.0.0.100:6969; once per address family.")
    var vip: [String] = []

    @Option(help: "Floating service address that keepalived moves to the serving master's host, e.g. 10.0.0.100:6969 (bound before it arrives); with --group of its family, keepalives also cross the peer network through that group. Once per address family.")
    var floating: [String] = []

    @Option(help: "Interface to join the group on (--group, --vip; no default: `lo` for a cluster on one machine).")
    var interface: String?

    @Option(help: "STOMP broker of the cluster channel, e.g. stomp+ssl://broker.example:61614 or stomp://127.0.0.1:61613, or a failover list: stomp+ssl://a:61614,stomp+ssl://b:61614.")
    var broker: String?

    @Option(help: "SQLite file. A cluster node's repository (emptied on clean shutdown); a standalone node keeps its registered torrents and access policy there across restarts.")
    var db: String?

    @Option(help: "Serve the dashboard and its JSON API on HOST:PORT (or PORT, on 127.0.0.1).")
    var http: String?

    @Option(name: .customLong("http-tracker"), help: "Serve the HTTP tracker (BEP 3 /announce, BEP 48 /scrape) on HOST:PORT (repeat, or comma-separate, for more). In a cluster: the floating service address's host and a TCP port, bound before the address arrives.")
    var httpTracker: [String] = []

    @Option(name: .customLong("http-tracker-cert-file"), help: "PEM certificate chain: the HTTP tracker serves HTTPS (read again on SIGHUP).")
    var httpTrackerCertFile: String?

    @Option(name: .customLong("http-tracker-key-file"), help: "PEM private key of --http-tracker-cert-file (read again on SIGHUP).")
    var httpTrackerKeyFile: String?

    @Option(name: .customLong("trusted-proxies"), help: "Reverse proxies (ADDRESS or ADDRESS/PREFIX, comma-separated) whose X-Forwarded-For or Forwarded header names an HTTP tracker client; from anyone else those headers are ignored.")
    var trustedProxies: String?

    @Option(name: .customLong("http-tracker-max-connections"), help: "Most HTTP tracker connections open at once; more are closed as they arrive.")
    var httpTrackerMaxConnections: Int = HTTPTrackerLimits().maxConnections

    @Option(name: .customLong("http-tracker-idle-timeout"), help: "Seconds an HTTP tracker connection may go without sending a complete request (between requests, or while a head trickles in) before it is closed.")
    var httpTrackerIdleTimeout: Int = 15

    @Option(name: .customLong("admin-token-file"),
            help: "File holding the token the dashboard's controls need (first line, 16+ characters). Default: one is drawn, and printed on a terminal or else written to a 0600 file the log names.")
    var adminTokenFile: String?

    @Option(name: .customLong("viewer-token-file"),
            help: "File holding a read-only token (first line, 16+ characters): with it, a dashboard listening beyond loopback gives peer addresses and ids, which otherwise need the admin token.")
    var viewerTokenFile: String?

    @Option(help: "Serve /metrics alone on HOST:PORT (or PORT, on 127.0.0.1): a listener with no peer data and no controls, for Prometheus.")
    var metrics: String?

    @Option(name: .customLong("metrics-users"), help: "Export the totals of the N users with the most announces on /metrics, a series per user (0: none; at most 1000).")
    var metricsUsers: Int = 0

    @Option(name: .customLong("http-host-name"), help: "A host name the dashboard answers to besides IP addresses and localhost (repeat for more). Requests naming another host get a 421: a page of another site cannot read the dashboard through DNS rebinding.")
    var httpHostNames: [String] = []

    @Option(help: "Cluster name: the broker topic is /topic/NAME.")
    var cluster: String = "tracker"

    @Option(name: .customLong("cluster-key-file"),
            help: "File with the cluster key (from `tracker keygen`); give it twice during a rotation: the first signs, both verify.")
    var clusterKeyFiles: [String] = []

    @Flag(name: .customLong("insecure-cluster"),
          help: "Run a cluster node without a key: anyone who can publish on the broker can forge cluster messages.")
    var insecureCluster = false

    @Option(name: .customLong("connection-id-key-file"),
            help: "Key file (as from `tracker keygen`) for connection ids. Default: derived from the cluster key; standalone or insecure: random per process.")
    var connectionIDKeyFile: String?

    @Option(name: .customLong("broker-user"), help: "STOMP login for the broker (or stomp://USER:PASS@HOST:PORT).")
    var brokerUser: String?

    @Option(name: .customLong("broker-password-file"), help: "File holding the STOMP passcode (first line).")
    var brokerPasswordFile: String?

    @Option(name: .customLong("broker-ca-file"),
            help: "PEM CA certificates a stomp+ssl:// broker's certificate must chain to (default: the system's trust store).")
    var brokerCAFile: String?

    @Option(name: .customLong("broker-cert-file"), help: "PEM client certificate offered to a stomp+ssl:// broker (with --broker-key-file).")
    var brokerCertFile: String?

    @Option(name: .customLong("broker-key-file"), help: "PEM private key of --broker-cert-file.")
    var brokerKeyFile: String?

    @Option(help: "Keepalive interval, e.g. 1s or 250ms; a node missing 2 is down.")
    var keepalive: String = "1s"

    @Option(help: "live: a majority of the live nodes commits; strict: a majority of --cluster-size.")
    var quorum: String = "live"

    @Option(name: .customLong("cluster-size"), help: "Configured number of nodes (strict quorum).")
    var clusterSize: Int = 3

    @Option(name: .customLong("held-requests"),
            help: "Peer requests a node holds while no master serves, for the next master to answer (0: none).")
    var heldRequests: Int = 4096

    @Option(name: .customLong("held-window"), help: "How old a held request may be when the next master answers it.")
    var heldWindow: String = "15s"

    @Option(name: .customLong("receive-skew"),
            help: "How much later than a master's message a held request may be read and still count as answered by it (the spread of the network's delays).")
    var receiveSkew: String = "10ms"

    @OptionGroup var service: PeerServiceOptions

    @Option(help: "TOML file with any of these options (keys are the long names without dashes; see `tracker config example`). Options given here override it.")
    var config: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(name: .customLong("log-format"), help: "text, or json: one JSON object per line (time, level, node, role, label, message, fields), for journald and Loki.")
    var logFormat: String = "text"

    var isCluster: Bool { broker != nil || !group.isEmpty || !vip.isEmpty || !floating.isEmpty }

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else { throw ValidationError("unknown log level '\(logLevel)'") }
        guard let format = LogFormat(rawValue: logFormat) else { throw ValidationError("--log-format must be text or json (got '\(logFormat)')") }
        let logContext = LogContext(role: isCluster ? "starting" : "standalone", level: level)
        let journal = JournalStream.isJournal(environment: ProcessInfo.processInfo.environment)
        LoggingSystem.bootstrap { label in
            switch format {
            case .json:
                return JSONLogHandler(label: label, context: logContext)
            case .text:
                // Filtered by the context's level, which a reload changes.
                // Under systemd, with the journal's priorities (`JournalStream`).
                let handler = journal ? StreamLogHandler(label: label, stream: JournalStream()) : StreamLogHandler.standardError(label: label)
                // Values from outside (a broker's ERROR message, a peer's text) cannot forge lines.
                return EscapingLogHandler(wrapping: handler, context: logContext)
            }
        }
        let logger = Logger(label: "tracker")
        // State files (the SQLite repository and its journal, a generated token, a config
        // save's temporary file) are the node's alone.
        umask(0o077)
        // SIGHUP reads the file again and applies its live settings.
        let live = LiveReload(path: config, isCluster: isCluster, logContext: logContext, logger: logger)
        // With --config, Start on the dashboard reads the file again.
        let reloadService: (@Sendable () throws -> TrackerConfig)? = config == nil ? nil : { @Sendable in
            let fresh = try Run.reparsed().service.config()
            live.adoptAll()
            return fresh
        }
        guard isCluster else {
            let binds = try standaloneBinds()
            let idKeys = try connectionIDKeyFile.map { [try Self.readKey($0, flag: "connection-id-key-file", logger: logger).connectionIDKey] }
            if let db { try Self.checkDatabaseDirectory(db) }
            try await StandaloneHost.run(binds: binds, threads: threads, config: try service.config(), connectionIDKeys: idKeys,
                                         database: db, httpTracker: try httpTrackerSettings(), dashboard: try dashboard(logger: logger), monitoring: try monitoring(log: logContext),
                                         logger: logger, reload: reloadService, liveReload: { live.reload() })
            return
        }
        guard threads == 1 else {
            throw ValidationError("--threads is for a standalone node: a cluster node serves peers on one loop, in the order it commits")
        }
        let settings = try clusterSettings(logger: logger)
        let reloadCluster: (@Sendable () throws -> ClusterNodeSettings)? = config == nil ? nil : { @Sendable in
            let fresh = try Run.reparsed().clusterSettings(logger: logger)
            live.adoptAll()
            return fresh
        }
        let code = try await ClusterProcess.run(settings, dashboard: try dashboard(logger: logger), monitoring: try monitoring(log: logContext),
                                                logger: logger, reload: reloadCluster, liveReload: { live.reload() })
        if code != 0 { throw ExitCode(code) }
    }

    /// Every check `run` makes before it binds anything, with no side effect (no token
    /// drawn, no file written): what `tracker config check` runs.
    func preflight(logger: Logger) throws -> String {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown log level '\(logLevel)'") }
        guard LogFormat(rawValue: logFormat) != nil else { throw ValidationError("--log-format must be text or json (got '\(logFormat)')") }
        let http = try httpEndpoint()
        if let adminTokenFile {
            guard http != nil else { throw ValidationError("--admin-token-file needs --http") }
            do { _ = try AdminToken(file: adminTokenFile) } catch { throw ValidationError(error.description) }
        }
        if let viewerTokenFile {
            guard http != nil else { throw ValidationError("--viewer-token-file needs --http") }
            do { _ = try AdminToken(file: viewerTokenFile, flag: "viewer-token-file") } catch { throw ValidationError(error.description) }
        }
        _ = try metricsEndpoint()
        _ = try clusterConfig()
        if let settings = try httpTrackerSettings(), let cert = settings.certFile, let key = settings.keyFile {
            _ = try HTTPTrackerTLS(certFile: cert, keyFile: key)
        }
        guard isCluster else {
            let binds = try standaloneBinds()
            guard (1...StandaloneHost.maxThreads).contains(threads) else {
                throw ValidationError("--threads must be 1 to \(StandaloneHost.maxThreads) (got \(threads))")
            }
            if let connectionIDKeyFile { _ = try Self.readKey(connectionIDKeyFile, flag: "connection-id-key-file", logger: logger) }
            if let db { try Self.checkDatabaseDirectory(db) }
            _ = try service.config()
            return "standalone node on udp \(binds.map { "\($0)" }.joined(separator: ", "))"
        }
        guard threads == 1 else {
            throw ValidationError("--threads is for a standalone node: a cluster node serves peers on one loop, in the order it commits")
        }
        let settings = try clusterSettings(logger: logger)
        return "cluster node \(id) on \(settings.peers), broker \(settings.broker.brokers.map(\.url).joined(separator: ","))"
    }

    /// `--http` and the admin token. The address defaults to loopback: the dashboard
    /// shows every peer's address and its controls stop the node.
    ///
    /// A generated token is shown on a terminal only; otherwise (a service, a redirect to
    /// a log) it goes to a 0600 file and the log names the file, never the token.
    func dashboard(logger: Logger) throws -> DashboardSettings? {
        guard let endpoint = try httpEndpoint() else {
            if adminTokenFile != nil { throw ValidationError("--admin-token-file needs --http") }
            if viewerTokenFile != nil { throw ValidationError("--viewer-token-file needs --http") }
            return nil
        }
        var viewerToken: AdminToken?
        if let viewerTokenFile {
            do { viewerToken = try AdminToken(file: viewerTokenFile, flag: "viewer-token-file") } catch { throw ValidationError(error.description) }
            Self.warnIfReadableByOthers(viewerTokenFile, what: "viewer token file", logger: logger)
        }
        if !endpoint.ip.isLoopback && viewerToken == nil {
            logger.notice("the dashboard listens beyond loopback: peer addresses and ids need the admin token (give --viewer-token-file for read-only access)")
        }
        let token: AdminToken
        if let adminTokenFile {
            do { token = try AdminToken(file: adminTokenFile) } catch { throw ValidationError(error.description) }
            Self.warnIfReadableByOthers(adminTokenFile, what: "admin token file", logger: logger)
        } else {
            token = AdminToken.generate()
            if isatty(STDOUT_FILENO) == 1 {
                FileHandle.standardOutput.write(Data("dashboard admin token (give --admin-token-file to choose one): \(token.secret)\n".utf8))
            } else {
                let path = generatedTokenPath(port: endpoint.port)
                do { try AtomicFile.write(path, token.secret + "\n", mode: 0o600) } catch {
                    throw ValidationError("cannot write the generated admin token: \(error); give --admin-token-file")
                }
                logger.notice("dashboard admin token written to a file only this user can read (give --admin-token-file to choose one)",
                              metadata: ["file": "\(path)"])
            }
        }
        var limits = DashboardLimits()
        limits.maxConnections = FileDescriptorLimit.dashboardConnections(softLimit: FileDescriptorLimit.raise(), ceiling: limits.maxConnections)
        limits.hostNames = httpHostNames
        var settings = DashboardSettings(endpoint: endpoint, token: token, viewerToken: viewerToken, editor: config.map { ConfigFile.editor(file: $0) },
                                         limits: limits)
        let path = config
        settings.configSources = { ConfigFile.sourceRows(path: path) }
        return settings
    }

    func monitoring(log: LogContext) throws -> MonitoringSettings {
        guard (0...1000).contains(metricsUsers) else { throw ValidationError("--metrics-users must be 0 to 1000 (got \(metricsUsers))") }
        var settings = MonitoringSettings(version: BuildInfo.version, commit: BuildInfo.commit, metricsEndpoint: try metricsEndpoint(), log: log)
        settings.metricsUsers = metricsUsers
        return settings
    }

    /// `--metrics`: HOST:PORT, or PORT on loopback, as `--http`.
    func metricsEndpoint() throws -> PeerEndpoint? {
        guard let metrics else { return nil }
        do {
            return try EndpointArgument(parsing: UInt16(metrics) != nil ? "127.0.0.1:\(metrics)" : metrics).endpoint
        } catch { throw ValidationError("--metrics: \(error)") }
    }

    /// The command line and the config file as they are now: what the next Start uses.
    static func reparsed() throws -> Run {
        let arguments = try ConfigFile.expand(Array(CommandLine.arguments.dropFirst()))
        do { return try Run.parse(Array(arguments.dropFirst())) } catch { throw ValidationError(Run.message(for: error)) }
    }

    /// `--http-tracker` and what goes with it; nil without it (the others then refused).
    func httpTrackerSettings() throws -> HTTPTrackerSettings? {
        let binds = try httpTracker.flatMap { $0.split(separator: ",") }.map { text in
            do { return try EndpointArgument(parsing: String(text)).endpoint } catch { throw ValidationError("--http-tracker: \(error)") }
        }
        guard !binds.isEmpty else {
            for (flag, given) in [("http-tracker-cert-file", httpTrackerCertFile != nil), ("http-tracker-key-file", httpTrackerKeyFile != nil),
                                  ("trusted-proxies", trustedProxies != nil)] where given {
                throw ValidationError("--\(flag) needs --http-tracker")
            }
            return nil
        }
        guard (httpTrackerCertFile == nil) == (httpTrackerKeyFile == nil) else {
            throw ValidationError("--http-tracker-cert-file and --http-tracker-key-file go together")
        }
        var proxies = TrustedProxies()
        if let trustedProxies {
            switch TrustedProxies.parse(trustedProxies) {
            case .success(let p): proxies = p
            case .failure(let e): throw ValidationError("--trusted-proxies: \(e)")
            }
        }
        guard (1...1_000_000).contains(httpTrackerMaxConnections) else {
            throw ValidationError("--http-tracker-max-connections must be 1 to 1000000 (got \(httpTrackerMaxConnections))")
        }
        guard (1...3600).contains(httpTrackerIdleTimeout) else {
            throw ValidationError("--http-tracker-idle-timeout must be 1 to 3600 seconds (got \(httpTrackerIdleTimeout))")
        }
        var limits = HTTPTrackerLimits()
        limits.maxConnections = httpTrackerMaxConnections
        limits.idleTimeout = .seconds(Int64(httpTrackerIdleTimeout))
        return HTTPTrackerSettings(binds: binds, certFile: httpTrackerCertFile, keyFile: httpTrackerKeyFile, trustedProxies: proxies, limits: limits)
    }

    func httpEndpoint() throws -> PeerEndpoint? {
        guard let http else { return nil }
        do {
            return try EndpointArgument(parsing: UInt16(http) != nil ? "127.0.0.1:\(http)" : http).endpoint
        } catch { throw ValidationError("--http: \(error)") }
    }

    func clusterSettings(logger: Logger) throws -> ClusterNodeSettings {
        func endpoint(_ flag: String, _ text: String) throws -> PeerEndpoint {
            do { return try EndpointArgument(parsing: text).endpoint } catch { throw ValidationError("--\(flag): \(error)") }
        }
        let nodeID: NodeID
        if id == "auto" {
            nodeID = .unassigned
        } else if let n = UInt32(id), n > 0 {
            nodeID = NodeID(n)
        } else {
            throw ValidationError("--id must be a number from 1 to 4294967295, or 'auto' (got '\(id)')")
        }
        /// The group's interface: named, present and up.
        func joinInterface(_ flag: String) throws -> String {
            guard let interface else {
                throw ValidationError("--\(flag) needs --interface NAME, the interface the group is joined on (lo for a cluster on one machine)")
            }
            if let problem = NetworkInterface.problem(named: interface) { throw ValidationError("--interface: \(problem)") }
            return interface
        }
        /// Each flag's addresses by family: at most one each.
        func byFamily(_ flag: String, _ values: [String]) throws -> [IPAddress.Family: PeerEndpoint] {
            var out: [IPAddress.Family: PeerEndpoint] = [:]
            for v in values {
                let e = try endpoint(flag, v)
                guard out[e.ip.family] == nil else {
                    throw ValidationError("--\(flag) given twice for \(e.ip.family == .v4 ? "IPv4" : "IPv6"): once per address family")
                }
                out[e.ip.family] = e
            }
            return out
        }
        let groups = try byFamily("group", group), vips = try byFamily("vip", vip), floatings = try byFamily("floating", floating)
        var modes: [PeerChannelMode] = []
        if let u = udp.first {
            guard group.isEmpty, vip.isEmpty, floating.isEmpty else {
                throw ValidationError("use one peer channel: --group, --vip with --group, --floating (with --group for keepalives), or --udp")
            }
            guard udp.count == 1 else { throw ValidationError("--udp once for a cluster node: the one service address peers send to") }
            modes = [.udp(try endpoint("udp", u))]
        }
        for family in [IPAddress.Family.v4, .v6] where udp.isEmpty {
            let name = family == .v4 ? "IPv4" : "IPv6"
            switch (groups[family], vips[family], floatings[family]) {
            case (let g?, nil, nil): modes.append(.group(g, interface: try joinInterface("group")))
            case (let g?, let v?, nil): modes.append(.vip(v, group: g, interface: try joinInterface("vip")))
            case (let g, nil, let f?):
                let keepalives = try g.map { KeepaliveGroup(group: $0, interface: try joinInterface("group")) }
                modes.append(.floating(f, keepalives: keepalives))
                if keepalives == nil {
                    logger.warning("--floating without --group: keepalives travel on the broker only, so while the broker is down every node is alone and masters on its own; give --group and --interface to carry them on the peer network too",
                                   metadata: ["family": "\(name)"])
                }
            case (nil, let v?, nil): throw ValidationError("--vip \(v) needs an \(name) --group: the group delivers the service address to every node")
            case (nil, nil, nil): break
            default: throw ValidationError("use one \(name) peer channel: --group, --vip with --group, or --floating (with --group for keepalives)")
            }
        }
        guard let peers = PeerChannels(modes) else {
            throw ValidationError("a cluster node needs a peer channel: --group, --vip with --group, or --floating")
        }
        guard let broker else { throw ValidationError("a cluster node needs --broker stomp://HOST:PORT") }
        guard let db else { throw ValidationError("a cluster node needs --db PATH (its SQLite repository)") }
        let cluster = try clusterConfig()
        var brokerSettings: StompSettings
        do { brokerSettings = try StompSettings(url: broker) } catch { throw ValidationError("--broker: \(error)") }
        if let brokerUser { brokerSettings.login = brokerUser }
        if let brokerPasswordFile {
            guard let text = try? String(contentsOfFile: brokerPasswordFile, encoding: .utf8) else {
                throw ValidationError("--broker-password-file: cannot read \(brokerPasswordFile)")
            }
            brokerSettings.passcode = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        }
        brokerSettings.caFile = brokerCAFile
        brokerSettings.certFile = brokerCertFile
        brokerSettings.keyFile = brokerKeyFile
        do { _ = try BrokerTLS.context(for: brokerSettings) } catch { throw ValidationError("\(error)") }
        let keys = try clusterKeyFiles.map { try Self.readKey($0, flag: "cluster-key-file", logger: logger) }
        if keys.isEmpty && !insecureCluster {
            throw ValidationError("""
                a cluster node needs --cluster-key-file FILE (create one with `tracker keygen --output FILE` and copy it to \
                every node), or --insecure-cluster to let anyone on the broker speak for the cluster
                """)
        }
        if !keys.isEmpty && insecureCluster { throw ValidationError("--insecure-cluster and --cluster-key-file exclude each other") }
        if keys.count > 2 { throw ValidationError("--cluster-key-file at most twice (the current key and the one being rotated out)") }
        if insecureCluster {
            for line in ["INSECURE CLUSTER: cluster messages are not authenticated (--insecure-cluster).",
                         "Anyone who can publish on the broker can become master, commit made-up peers or stop nodes.",
                         "Use it only on a broker nobody else can reach; create a key with `tracker keygen`."] {
                logger.critical("\(line)")
            }
        }
        var connectionIDKeys = keys.map(\.connectionIDKey)
        if let connectionIDKeyFile {
            connectionIDKeys = [try Self.readKey(connectionIDKeyFile, flag: "connection-id-key-file", logger: logger).connectionIDKey]
        } else if connectionIDKeys.isEmpty {
            logger.warning("connection ids keyed per process (no cluster key, no --connection-id-key-file): they do not survive failover")
            connectionIDKeys = [SipHash24(k0: WallClock.randomSeed(), k1: WallClock.randomSeed())]
        }
        try Self.checkDatabaseDirectory(db)
        var settings = ClusterNodeSettings(
            id: nodeID, peers: peers, broker: brokerSettings, database: db,
            http: try httpEndpoint(), clusterName: self.cluster,
            keys: keys, connectionIDKeys: connectionIDKeys, cluster: cluster, tracker: try service.config())
        settings.httpTracker = try httpTrackerSettings()
        if let problem = settings.problems.first { throw ValidationError(problem) }
        return settings
    }

    /// The cluster's timing and quorum. Checked on a standalone node too: a value that
    /// does not parse is an error wherever it is set, not when the node joins a cluster.
    func clusterConfig() throws -> ClusterConfig {
        var cluster = ClusterConfig()
        do { cluster.keepaliveInterval = try Self.duration(keepalive) } catch { throw ValidationError("--keepalive: \(error)") }
        switch quorum {
        case "live": cluster.quorum = .live
        case "strict": cluster.quorum = .strict
        default: throw ValidationError("--quorum must be live or strict")
        }
        cluster.clusterSize = clusterSize
        cluster.heldRequests = heldRequests
        do { cluster.heldRequestWindow = try Self.duration(heldWindow) } catch { throw ValidationError("--held-window: \(error)") }
        do { cluster.receiveSkew = try Self.duration(receiveSkew, atLeast: 0) } catch { throw ValidationError("--receive-skew: \(error)") }
        return cluster
    }

    /// A standalone node's `--udp` addresses (loopback when none is given), each once.
    func standaloneBinds() throws -> [PeerEndpoint] {
        var binds: [PeerEndpoint] = []
        for text in udp.isEmpty ? ["127.0.0.1:6969"] : udp {
            let e: PeerEndpoint
            do { e = try EndpointArgument(parsing: text).endpoint } catch { throw ValidationError("--udp: \(error)") }
            guard !binds.contains(e) else { throw ValidationError("--udp \(text) given twice") }
            binds.append(e)
        }
        return binds
    }

    /// `--db`'s directory exists and this user may write in it.
    static func checkDatabaseDirectory(_ db: String) throws {
        let directory = URL(fileURLWithPath: db).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ValidationError("--db \(db): directory \(directory) does not exist")
        }
        guard access(directory, W_OK) == 0 else { throw ValidationError("--db \(db): this user cannot write in \(directory)") }
    }

    /// Where a generated admin token goes: beside the repository, in systemd's state
    /// directory, or in the user's runtime directory.
    func generatedTokenPath(port: UInt16) -> String {
        if let db { return db + ".admin-token" }
        let env = ProcessInfo.processInfo.environment
        if let state = env["STATE_DIRECTORY"]?.split(separator: ":").first { return "\(state)/admin-token-\(port)" }
        let runtime = env["XDG_RUNTIME_DIR"] ?? FileManager.default.temporaryDirectory.path
        return "\(runtime)/tracker-admin-token-\(port)-\(getuid())"
    }

    static func warnIfReadableByOthers(_ path: String, what: String, logger: Logger) {
        if let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
            logger.warning("\(what) is readable by others; chmod 600 it", metadata: ["file": "\(path)", "mode": "\(String(mode, radix: 8))"])
        }
    }

    /// Reads a key file, with errors that name the flag and never echo the key. A file
    /// others may read is worth a warning: the key is all that stands between the broker
    /// and the cluster.
    static func readKey(_ path: String, flag: String, logger: Logger) throws -> ClusterKey {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw ValidationError("--\(flag): cannot read \(path)") }
        let key: ClusterKey
        do { key = try ClusterKey(keyFile: text) } catch { throw ValidationError("--\(flag) \(path): \(error)") }
        warnIfReadableByOthers(path, what: "key file", logger: logger)
        return key
    }

    /// `1s`, `250ms` or plain milliseconds.
    static func duration(_ text: String, atLeast minimum: Int64 = 10) throws -> Milliseconds {
        let value: Int64?
        if text.hasSuffix("ms") { value = Int64(text.dropLast(2)) }
        else if text.hasSuffix("s") {
            value = Int64(text.dropLast()).flatMap { s in
                let (ms, overflow) = s.multipliedReportingOverflow(by: 1000)
                return overflow ? nil : ms
            }
        }
        else { value = Int64(text) }
        guard let value, value >= minimum else {
            throw ValidationError("'\(text)' is not a duration of at least \(minimum)ms (e.g. 1s, 250ms)")
        }
        return Milliseconds(value)
    }
}
