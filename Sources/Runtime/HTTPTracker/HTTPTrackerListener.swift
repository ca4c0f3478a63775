#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import TrackerLogic

/// What the HTTP tracker did, for the status and the log.
public struct HTTPTrackerCounts: Sendable, Equatable {
    public var announces = 0
    public var scrapes = 0
    public var failures = 0
    public var notFound = 0
    public var queriesRefused = 0
    public var headsRefused = 0
    public var idleClosed = 0
    public var floodsClosed = 0

    /// By outcome, as the status and `/metrics` name them.
    public var byOutcome: [String: Int] {
        ["announce": announces, "scrape": scrapes, "failure": failures, "not-found": notFound, "query-refused": queriesRefused,
         "head-refused": headsRefused, "idle-closed": idleClosed, "flood-closed": floodsClosed]
    }
}

package final class HTTPTrackerCounters: Sendable {
    private let box = NIOLockedValueBox(HTTPTrackerCounts())

    package init() {}

    func count(_ field: WritableKeyPath<HTTPTrackerCounts, Int> & Sendable) { box.withLockedValue { $0[keyPath: field] += 1 } }

    func answered(_ response: TrackerResponse) {
        switch response {
        case .announce: count(\.announces)
        case .scrape: count(\.scrapes)
        case .error, .connect: count(\.failures)
        }
    }

    package var snapshot: HTTPTrackerCounts { box.withLockedValue { $0 } }
}

/// The HTTP tracker's listening sockets and their own threads: parsing, TLS and writing
/// run there, beside the node's loop, which only decides. Plain HTTP is served by
/// `HTTPTrackerEpoll`, HTTPS by NIO with its TLS.
public final class HTTPTrackerListener: Sendable {
    /// Who serves the connections.
    enum Host: Sendable {
        case epoll(HTTPTrackerEpoll)
        case nio(MultiThreadedEventLoopGroup, [Channel])
    }

    let host: Host
    let counters: HTTPTrackerCounters
    public let tls: HTTPTrackerTLS?
    public let bound: [PeerEndpoint]

    private init(host: Host, counters: HTTPTrackerCounters, tls: HTTPTrackerTLS?, bound: [PeerEndpoint]) {
        self.host = host; self.counters = counters; self.tls = tls; self.bound = bound
    }

    public var counts: HTTPTrackerCounts { counters.snapshot }

    /// The listener `settings` asks for; nil without them. If it cannot listen, `undo`
    /// (stopping what the host started before it) runs before the error is thrown.
    package static func start(_ settings: HTTPTrackerSettings?, backend: HTTPTrackerBackend, threads: Int, logger: Logger,
                              undo: () async -> Void) async throws -> HTTPTrackerListener? {
        guard let settings else { return nil }
        do {
            return try await bind(settings, backend: backend, threads: threads, logger: logger)
        } catch {
            await undo()
            throw error
        }
    }

    /// Binds every address of `settings` (IP_FREEBIND: a floating address may arrive
    /// later). Throws a configuration error that names what failed.
    package static func bind(_ settings: HTTPTrackerSettings, backend: HTTPTrackerBackend, threads: Int,
                              logger: Logger) async throws -> HTTPTrackerListener {
        let tls: HTTPTrackerTLS?
        switch (settings.certFile, settings.keyFile) {
        case (nil, nil): tls = nil
        case (let cert?, let key?): tls = try HTTPTrackerTLS(certFile: cert, keyFile: key)
        default: throw ConfigurationError("--http-tracker-cert-file and --http-tracker-key-file go together")
        }
        let counters = HTTPTrackerCounters()
        let proxies = settings.trustedProxies
        guard let tls else {
            let epoll = try HTTPTrackerEpoll.start(settings, backend: backend, threads: threads, counters: counters)
            log(settings, bound: epoll.bound, logger: logger)
            return HTTPTrackerListener(host: .epoll(epoll), counters: counters, tls: nil, bound: epoll.bound)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        let connections = Occupancy(limit: settings.limits.maxConnections)
        let limits = settings.limits
        // One idle sweep per loop (`IdleConnections`), found by the loop a connection is on.
        var sweeps: [ObjectIdentifier: IdleConnections] = [:]
        for loop in group.makeIterator() {
            let idle = IdleConnections()
            sweeps[ObjectIdentifier(loop)] = idle
            let period = IdleConnections.period(for: limits.idleTimeout)
            loop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in idle.sweep(now: .now()) }
        }
        let idleByLoop = sweeps
        var channels: [Channel] = []
        var bound: [PeerEndpoint] = []
        do {
            for endpoint in settings.binds {
                let v4 = endpoint.ip.family == .v4
                // Beside an IPv4 address, `[::]` serves IPv6 alone (both bind, as `--udp` does).
                let v6Only = !v4 && settings.binds.contains { $0.ip.family == .v4 }
                var bootstrap = ServerBootstrap(group: group)
                    .serverChannelOption(.backlog, value: 1024)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelOption(.socket(SocketOptionLevel(v4 ? IPPROTO_IP : IPPROTO_IPV6),
                                                 SocketOptionName(v4 ? PeerChannelBinder.ipFreeBind : PeerChannelBinder.ipv6FreeBind)),
                                         value: 1)
                    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                    .childChannelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            let sync = channel.pipeline.syncOperations
                            guard let idle = idleByLoop[ObjectIdentifier(channel.eventLoop)] else {
                                throw ConfigurationError("an HTTP tracker connection on a loop outside the listener's group")
                            }
                            // A client that reads no answers has no more requests read
                            // (no read while the channel is not writable), and the idle
                            // deadline closes it, as under epoll.
                            try sync.addHandler(BackPressureHandler())
                            try sync.addHandler(NIOSSLServerHandler(context: tls.context))
                            try sync.addHandler(HTTPTrackerConnection(backend: backend, proxies: proxies, limits: limits, counters: counters,
                                                                      connections: connections, idle: idle))
                        }
                    }
                if !v4 {
                    bootstrap = bootstrap.serverChannelOption(.socket(SocketOptionLevel(IPPROTO_IPV6), SocketOptionName(IPV6_V6ONLY)),
                                                              value: v6Only ? 1 : 0)
                }
                let channel = try await bootstrap.bind(to: endpoint.socketAddress()).get()
                channels.append(channel)
                bound.append(channel.localAddress.flatMap(PeerEndpoint.init) ?? endpoint)
            }
        } catch {
            for c in channels { try? await c.close() }
            try? await group.shutdownGracefully()
            if let e = error as? ConfigurationError { throw e }
            throw ConfigurationError("--http-tracker: cannot listen on \(settings.binds.map(\.description).joined(separator: ",")): \(error)")
        }
        log(settings, bound: bound, logger: logger)
        return HTTPTrackerListener(host: .nio(group, channels), counters: counters, tls: tls, bound: bound)
    }

    private static func log(_ settings: HTTPTrackerSettings, bound: [PeerEndpoint], logger: Logger) {
        let proxies = settings.trustedProxies
        logger.info("HTTP tracker listening", metadata: [
            "address": "\(bound.map { "\(settings.scheme)://\($0)/announce" }.joined(separator: " "))",
            "trusted-proxies": "\(proxies.isEmpty ? "none" : proxies.networks.map(\.description).joined(separator: ","))",
        ])
    }

    /// Threads of the listener's own loops in a cluster node (parsing, TLS, writing).
    public static let defaultThreads = max(1, min(4, System.coreCount))

    /// Reads the certificate and key again (SIGHUP); on failure keeps the old ones and
    /// says why.
    public func reloadCertificate(logger: Logger) {
        guard let tls else { return }
        do {
            try tls.reload()
            logger.notice("HTTP tracker certificate reloaded", metadata: ["cert": "\(tls.certFile)"])
        } catch {
            logger.error("HTTP tracker certificate not reloaded; serving the one read before", metadata: ["error": "\(error)"])
        }
    }

    /// Stops accepting and closes the listeners; connections open then are closed with
    /// their loops.
    public func stop() async {
        switch host {
        case .epoll(let epoll):
            epoll.stop()
        case .nio(let group, let channels):
            for c in channels { try? await c.close() }
            try? await group.shutdownGracefully()
        }
    }
}
