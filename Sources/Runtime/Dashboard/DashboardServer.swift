import Foundation
import HTTPTypes
import Hummingbird
import ServiceLifecycle
import Logging
import NIOCore
import NIOPosix
import TrackerLogic

/// Where and how a node serves its dashboard.
public struct DashboardSettings: Sendable {
    public var endpoint: PeerEndpoint
    public var token: AdminToken
    /// `--viewer-token-file`: reads peer data, steers nothing.
    public var viewerToken: AdminToken?
    /// With `--config FILE`: the settings the configuration tab may change in that file.
    public var editor: SettingsEditor?
    /// The configuration's keys with their values and sources, read from the layers at
    /// each request (`ConfigLayers`): the settings tab shows where each came from.
    public var configSources: (@Sendable () -> [SettingRow])?
    public var limits: DashboardLimits

    public init(endpoint: PeerEndpoint, token: AdminToken, viewerToken: AdminToken? = nil, editor: SettingsEditor? = nil,
                limits: DashboardLimits = DashboardLimits()) {
        self.endpoint = endpoint; self.token = token; self.viewerToken = viewerToken; self.editor = editor; self.limits = limits
    }

    /// Peer addresses and peer ids are personal data: a dashboard that listens beyond
    /// loopback gives them only to a request carrying the admin or the viewer token. On
    /// loopback, whoever can connect is on the host already.
    public var peerDataNeedsToken: Bool { !endpoint.ip.isLoopback }
}

/// Saves edits from the configuration tab into the node's config file. The running
/// service keeps its settings; the next Start reads the file again.
public struct SettingsEditor: Sendable {
    public var file: String
    /// Keys the page may edit (keys given on the command line are not among them: the
    /// command line would override the file anyway).
    public var editable: [String]
    /// Validates the whole file with the changes and writes it, or throws why not.
    public var save: @Sendable ([String: String]) throws -> Void

    public init(file: String, editable: [String], save: @escaping @Sendable ([String: String]) throws -> Void) {
        self.file = file; self.editable = editable; self.save = save
    }
}

/// Per request: Hummingbird's defaults with an upload limit just above the largest
/// .torrent file the catalogue takes (the only request with a body that matters).
struct DashboardContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// Where the request came from (the listing budgets are per source).
    let remote: IPAddress?
    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remote = source.channel.remoteAddress.flatMap(PeerEndpoint.init)?.ip
    }
    var maxUploadSize: Int { TorrentMetadata.maxFileBytes + 64 * 1024 }
}

/// Every refusal the API gives: a status and a sentence, as `{"error": "…"}`.
struct APIError: HTTPResponseError {
    var status: HTTPResponse.Status
    var message: String

    init(_ status: HTTPResponse.Status, _ message: String) { self.status = status; self.message = message }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        DashboardRoutes.json(["error": message], status: status)
    }
}

/// Turns every error into a JSON body with the right status, so no request, however
/// malformed, gets an HTML page, an empty 500 or a dropped connection.
struct JSONErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return DashboardRoutes.json(["error": error.message], status: error.status)
        } catch let error as HTTPError {
            let message = error.status == .notFound ? "no such resource: \(request.uri.path)" : (error.body ?? error.status.reasonPhrase)
            return DashboardRoutes.json(["error": message], status: error.status)
        } catch is NIOTooManyBytesError {
            return DashboardRoutes.json(["error": "request body too large"], status: .contentTooLarge)
        } catch {
            return DashboardRoutes.json(["error": "internal error"], status: .internalServerError)
        }
    }
}

/// Control requests (anything that is not GET or HEAD) carry the admin token or an admin's
/// session (`SignInCheck`), and so do reads of the users (`/api/users`: their keys are
/// secrets). Signing in and out (`/api/session`) is for anyone.
struct AdminTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: AdminToken
    let signIn: SignInCheck

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let controls = request.method != .get && request.method != .head && request.uri.path != "/api/session"
        let users = request.uri.path.hasPrefix("/api/users")
        guard controls || users, !token.accepts(authorization: request.headers[.authorization]) else { return try await next(request, context) }
        guard let session = await signIn.actingSession(request), session.user.role == .admin else {
            throw APIError(.unauthorized, users && !controls ? "users and their keys need the admin token (Authorization: Bearer TOKEN) or an admin's sign-in"
                           : "control requests need the admin token (Authorization: Bearer TOKEN) or an admin's sign-in (with X-Tracker-CSRF: 1)")
        }
        return try await next(request, context)
    }
}

/// Requests for peer data (`/api/swarms…`: peer addresses and ids) carry the admin or the
/// viewer token, or a signed-in admin's or viewer's session, when
/// `DashboardSettings.peerDataNeedsToken` says so.
struct PeerDataTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let tokens: [AdminToken]
    let signIn: SignInCheck

    static var paths: String { "/api/swarms" }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.uri.path.hasPrefix(Self.paths) {
            let authorization = request.headers[.authorization]
            var allowed = tokens.contains { $0.accepts(authorization: authorization) }
            if !allowed { allowed = await signIn.session(request) != nil }
            guard allowed else {
                throw APIError(.unauthorized, "peer addresses and ids need the admin or the viewer token (Authorization: Bearer TOKEN) or a sign-in")
            }
        }
        return try await next(request, context)
    }
}

/// A request's body, whole, within `within` of asking: a client that sends its body a
/// byte at a time (with the admin token, before the node checks anything else) holds a
/// connection and its handler no longer than that.
func requestBody(_ request: Request, upTo limit: Int, within: TimeAmount) async throws -> ByteBuffer {
    try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
        group.addTask { try await request.body.collect(upTo: limit) }
        group.addTask {
            try await Task.sleep(for: .nanoseconds(within.nanoseconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let whole = first else {
            throw APIError(.requestTimeout, "the request body did not arrive within \(within.nanoseconds / 1_000_000_000) s")
        }
        return whole
    }
}

enum DashboardRoutes {
    static func router(backend: DashboardBackend, settings: DashboardSettings) -> Router<DashboardContext> {
        let token = settings.token, editor = settings.editor, limits = settings.limits
        let router = Router(context: DashboardContext.self)
        router.add(middleware: JSONErrorMiddleware())
        router.add(middleware: HostCheckMiddleware(names: limits.hostNames))
        let signIn = SignInCheck(sessions: DashboardSessions(), backend: backend)
        router.add(middleware: AdminTokenMiddleware(token: token, signIn: signIn))
        if settings.peerDataNeedsToken {
            router.add(middleware: PeerDataTokenMiddleware(tokens: [token] + (settings.viewerToken.map { [$0] } ?? []), signIn: signIn))
        }
        addSignIn(to: router, check: signIn, limits: limits)
        let listings = ListingBudgets(limits)
        let streams = Occupancy(limit: limits.maxEventStreams)
        let tokens = [token] + (settings.viewerToken.map { [$0] } ?? [])
        @Sendable func listing(_ request: Request, _ context: DashboardContext) throws {
            let authorization = request.headers[.authorization]
            let withToken = authorization != nil && tokens.contains { $0.accepts(authorization: authorization) }
            guard listings.take(withToken: withToken, source: context.remote) else {
                throw APIError(.tooManyRequests, withToken
                    ? "listings with a token are limited to \(Int(limits.tokenListingsPerSecond)) a second on this node; retry"
                    : "listings are limited to \(limits.listingsPerSource.perSecond) a second per client and \(Int(limits.listingsPerSecond)) a second on this node; retry")
            }
        }

        router.get("/") { _, _ in asset(PackageResources.index_html, type: "text/html; charset=utf-8") }
        router.get("/app.js") { _, _ in asset(PackageResources.app_js, type: "text/javascript; charset=utf-8") }
        router.get("/app.css") { _, _ in asset(PackageResources.app_css, type: "text/css; charset=utf-8") }

        router.get("/api/node") { _, _ in json(await backend.status()) }
        // 200 only while this node answers peers; 503 and the reason otherwise.
        router.get("/api/health") { _, _ in
            let verdict = HealthVerdict(await backend.status())
            return json(verdict, status: verdict.serving ? .ok : .serviceUnavailable)
        }
        // What the node runs with, then each configuration key as its layers give it now
        // and where it came from (`DashboardSettings.configSources`).
        router.get("/api/config") { _, _ in json(await backend.settings() + (settings.configSources?() ?? [])) }
        router.get("/api/trackers") { _, _ in json(TrackerRow.rows(await backend.status())) }
        router.get("/api/history") { _, _ in json(await backend.history()) }
        router.get("/api/swarms") { request, context in
            try listing(request, context)
            let query: SwarmQuery
            do { query = try SwarmQuery(parameters: parameters(request)) } catch { throw APIError(.badRequest, "\(error)") }
            let rows = await backend.swarmRows()
            // Sorted away from the event loops too (the table may hold 100,000 rows).
            return json(await Task.detached { SwarmListing.page(rows, query) }.value)
        }
        router.get("/api/swarms/:infohash") { request, context in
            try listing(request, context)
            let (swarm, peers) = try await swarm(request, context, backend: backend)
            return json(SwarmDetail(swarm: swarm, peers: peers))
        }
        router.get("/api/swarms/:infohash/peers") { request, context in
            try listing(request, context)
            return json(try await swarm(request, context, backend: backend).1)
        }
        router.get("/api/events") { _, _ in
            guard streams.enter() else { throw APIError(.serviceUnavailable, "too many event streams open on this node; retry later") }
            return events(backend, leaving: streams)
        }

        router.get("/metrics") { _, _ in await metrics(backend) }
        router.get("/api/config/editable") { _, _ in
            json(EditableSettings(file: editor?.file, keys: editor?.editable ?? []))
        }
        // A JSON object of key → value (strings); saved to the config file for the next Start.
        router.put("/api/config") { request, context in
            guard let editor else { throw APIError(.conflict, "this node runs without --config FILE: there is no file to save settings to") }
            let body = try await requestBody(request, upTo: 64 * 1024, within: limits.bodyTimeout)
            guard let changes = try? JSONDecoder().decode([String: String].self, from: Data(buffer: body)), !changes.isEmpty else {
                throw APIError(.badRequest, "the body must be a JSON object of setting names to string values")
            }
            if let key = changes.keys.sorted().first(where: { !editor.editable.contains($0) }) {
                throw APIError(.badRequest, "key '\(key)' cannot be edited here (editable: \(editor.editable.joined(separator: ", ")))")
            }
            do { try editor.save(changes) } catch { throw APIError(.badRequest, "\(error)") }
            return json(["result": "saved to \(editor.file); takes effect on the next Start"])
        }
        router.get("/api/torrents") { _, _ in json(await backend.torrents()) }
        router.get("/api/torrents/:infohash/file") { _, context in
            let hash = try infoHash(context)
            guard let t = await backend.torrent(hash) else { throw APIError(.notFound, "\(hash.hex) is not registered") }
            var headers = HTTPFields()
            headers[.contentType] = "application/x-bittorrent"
            headers[.contentDisposition] = "attachment; filename=\"\(hash.hex).torrent\""
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: t.file)))
        }
        // The body is the .torrent file itself.
        router.post("/api/torrents") { request, context in
            let body = try await requestBody(request, upTo: TorrentMetadata.maxFileBytes + 1, within: limits.bodyTimeout)
            guard body.readableBytes <= TorrentMetadata.maxFileBytes else {
                throw APIError(.contentTooLarge, "a .torrent file may be at most \(TorrentMetadata.maxFileBytes) bytes")
            }
            let torrent: RegisteredTorrent
            do { torrent = try RegisteredTorrent(file: Array(buffer: body), registeredAt: WallClock.now()) } catch {
                throw APIError(.badRequest, "not a valid .torrent file: \(error)")
            }
            do {
                let message = try await backend.change(.register(torrent))
                return json(RegisterResult(result: message, torrent: TorrentRow(torrent)), status: .created)
            } catch { throw APIError(.conflict, "\(error)") }
        }
        // The access policy: ?offset=N&limit=N pages its rules (hash order).
        router.get("/api/access") { request, _ in
            let offset = request.uri.queryParameters.get("offset", as: Int.self) ?? 0
            let limit = request.uri.queryParameters.get("limit", as: Int.self) ?? 1000
            guard let listing = await backend.access(offset: offset, limit: limit) else {
                throw APIError(.conflict, "the tracker service is stopped")
            }
            return json(listing)
        }
        // {"mode": "open" | "allow" | "deny"}
        router.put("/api/access/mode") { request, context in
            let body = try await requestBody(request, upTo: 1024, within: limits.bodyTimeout)
            guard let object = try? JSONDecoder().decode([String: String].self, from: Data(buffer: body)),
                  let text = object["mode"], let mode = AccessMode(text) else {
                throw APIError(.badRequest, "the body must be {\"mode\": \"open\" | \"allow\" | \"deny\" | \"private\"}")
            }
            do { return json(["result": try await backend.change(.setAccessMode(mode))]) } catch { throw APIError(.conflict, "\(error)") }
        }
        // {"rule": "allow" | "deny" | "remove", "infoHashes": [40 hex digits, …]}: at most
        // `AccessPolicy.maxHashesPerChange` hashes, committed as one change.
        router.post("/api/access/rules") { request, context in
            let body = try await requestBody(request, upTo: AccessPolicy.maxHashesPerChange * 48 + 1024, within: limits.bodyTimeout)
            guard let change = AccessRulesRequest.change(Data(buffer: body)) else {
                throw APIError(.badRequest, "the body must be {\"rule\": \"allow\" | \"deny\" | \"remove\", \"infoHashes\": [\"40 hex digits\", …]} "
                               + "with 1 to \(AccessPolicy.maxHashesPerChange) hashes")
            }
            do { return json(["result": try await backend.change(change)]) } catch { throw APIError(.conflict, "\(error)") }
        }
        // {"rule": "allow" | "deny" | "remove", "prefixes": ["-UT355-", "0x2d5554", …]}: the
        // client filter (`ClientFilter`), committed as one change.
        router.post("/api/access/clients") { request, context in
            let body = try await requestBody(request, upTo: AccessPolicy.maxHashesPerChange * 48 + 1024, within: limits.bodyTimeout)
            guard let change = AccessRulesRequest.clientChange(Data(buffer: body)) else {
                throw APIError(.badRequest, "the body must be {\"rule\": \"allow\" | \"deny\" | \"remove\", \"prefixes\": [\"-UT355-\", …]} "
                               + "with 1 to \(AccessPolicy.maxHashesPerChange) peer-id prefixes of 1 to 20 bytes, each printable ASCII "
                               + "without spaces or 0x and hex digits")
            }
            do { return json(["result": try await backend.change(change)]) } catch { throw APIError(.conflict, "\(error)") }
        }
        // Users and their keys (`UsersRequest`); ?offset=N&limit=N pages them (name order).
        router.get("/api/users") { request, _ in
            let offset = request.uri.queryParameters.get("offset", as: Int.self) ?? 0
            let limit = request.uri.queryParameters.get("limit", as: Int.self) ?? 1000
            guard let access = await backend.accessPolicy() else { throw APIError(.conflict, "the tracker service is stopped") }
            return json(await Task.detached { UserListing(access, offset: offset, limit: limit) }.value)
        }
        router.post("/api/users") { request, context in
            let body = try await requestBody(request, upTo: 4096, within: limits.bodyTimeout)
            var rng = SystemRandomNumberGenerator()
            var change: CatalogueChange
            do { change = try UsersRequest.change(Data(buffer: body), using: &rng) } catch { throw APIError(.badRequest, "\(error)") }
            // A password is derived here, off the loops, and only its hash is submitted.
            if case .editUser(let name, .password) = change, let password = UsersRequest.password(Data(buffer: body)) {
                do { change = .editUser(name, .password(try await PasswordHasher.hash(password))) } catch {
                    throw APIError(.badRequest, "\(error)")
                }
            }
            let result: String
            do { result = try await backend.change(change) } catch { throw APIError(.conflict, "\(error)") }
            // The key drawn for the user, for the operator to hand on.
            switch change {
            case .addUser(let u): return json(["result": result, "key": u.key?.description ?? ""])
            case .editUser(_, .key(let k)): return json(["result": result, "key": k?.description ?? ""])
            default: return json(["result": result])
            }
        }
        router.delete("/api/torrents/:infohash") { _, context in
            let hash = try infoHash(context)
            do { return json(["result": try await backend.change(.unregister(hash))]) } catch { throw APIError(.conflict, "\(error)") }
        }

        for control in ServiceControl.allCases {
            let path = control == .start || control == .stop ? "/api/service/\(control.rawValue)" : "/api/failure/\(control.rawValue)"
            router.post(RouterPath(path)) { _, _ in
                do {
                    return json(["result": try await backend.control(control)])
                } catch {
                    throw APIError(.conflict, "\(error)")
                }
            }
        }
        return router
    }

    /// `--metrics HOST:PORT`: `/metrics` and nothing else (no peer data, no controls, no
    /// page), for a Prometheus that may reach this port but not the dashboard's.
    static func metricsRouter(backend: DashboardBackend) -> Router<DashboardContext> {
        let router = Router(context: DashboardContext.self)
        router.add(middleware: JSONErrorMiddleware())
        router.get("/metrics") { _, _ in await metrics(backend) }
        return router
    }

    static func metrics(_ backend: DashboardBackend) async -> Response {
        let status = await backend.status()
        var users: [User] = []
        if backend.metrics.topUsers > 0, let access = await backend.accessPolicy() {
            users = await Task.detached { UserListing.top(backend.metrics.topUsers, of: access) }.value
        }
        let text = backend.metrics.render(status, torrents: await backend.torrents().count, users: users)
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }

    struct EditableSettings: Codable {
        var file: String?
        var keys: [String]
    }

    struct RegisterResult: Codable {
        var result: String
        var torrent: TorrentRow
    }

    static func infoHash(_ context: DashboardContext) throws -> InfoHash {
        guard let hash = InfoHash(hex: context.parameters.get("infohash") ?? "") else { throw APIError(.badRequest, "info hash: 40 hex digits") }
        return hash
    }

    struct SwarmDetail: Codable {
        var swarm: SwarmRow
        var peers: ListPage<PeerRow>
    }

    static func swarm(_ request: Request, _ context: DashboardContext, backend: DashboardBackend) async throws -> (SwarmRow, ListPage<PeerRow>) {
        let hash = try infoHash(context)
        let p = parameters(request)
        let page: Int, size: Int
        do {
            page = try SwarmQuery.number(p["page"], name: "page", default: 1, range: 1...1_000_000_000)
            size = try SwarmQuery.number(p["size"], name: "size", default: 50, range: 1...SwarmQuery.maxPageSize)
        } catch { throw APIError(.badRequest, "\(error)") }
        guard let found = await backend.swarm(hash, page: page, pageSize: size) else {
            throw APIError(.notFound, "no swarm \(hash.hex) in this node's repository")
        }
        return found
    }

    /// Query parameters, the first of each name winning.
    static func parameters(_ request: Request) -> [String: String] {
        var out: [String: String] = [:]
        for (k, v) in request.uri.queryParameters where out[String(k)] == nil { out[String(k)] = String(v) }
        return out
    }

    /// Server-sent events: the node and its trackers table at once, then every second,
    /// until the browser goes away or the server stops. The page reconnects by itself (EventSource does).
    static func events(_ backend: DashboardBackend, leaving streams: Occupancy) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        let body = ResponseBody { writer in
            defer { if streams.leave() == 0 { AllocatorTrim.soon() } }
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                let status = await backend.status()
                let frame = StatusFrame(node: status, trackers: TrackerRow.rows(status))
                let data = (try? encoder.encode(frame)) ?? Data()
                try await writer.write(ByteBuffer(string: "event: status\ndata: " + String(decoding: data, as: UTF8.self) + "\n\n"))
                try await Task.sleep(for: .seconds(1))
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    struct StatusFrame: Codable {
        var node: NodeStatus
        var trackers: [TrackerRow]
    }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        let data = (try? encoder.encode(value)) ?? Data(#"{"error":"encoding"}"#.utf8)
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func asset(_ bytes: [UInt8], type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        // The page loads only its own script and style and talks only to its own node.
        headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
        if let nosniff = HTTPField.Name("X-Content-Type-Options") { headers[nosniff] = "nosniff" }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// The dashboard's HTTP server: Hummingbird on an event loop thread of its own, in a service
/// group that `stop()` shuts down gracefully: the listener closes, requests under way
/// finish and event streams end at their next tick. (Cancelling the server instead made
/// Hummingbird log an error at every clean stop.) Whatever is still running after
/// `gracefulStopSeconds` is cancelled.
///
/// Its own thread, not the node's loop: parsing, routing and refusing requests cost CPU per
/// request whoever sends them, and on the node's loop a flood of refused listings delays
/// peers' answers (`dashboard_flood.py` holds it). The node's loop is asked only
/// for what it alone holds, in O(1) or rate-limited steps.
public final class DashboardServer: Sendable {
    let task: Task<Void, Error>
    let services: ServiceGroup
    let group: MultiThreadedEventLoopGroup
    public let boundAddress: String

    static let gracefulStopSeconds = 3

    private init(task: Task<Void, Error>, services: ServiceGroup, group: MultiThreadedEventLoopGroup, boundAddress: String) {
        self.task = task; self.services = services; self.group = group; self.boundAddress = boundAddress
    }

    /// Binds and serves; throws a clear error when the address cannot be bound.
    public static func start(_ settings: DashboardSettings, backend: DashboardBackend, logger: Logger) async throws -> DashboardServer {
        try await start(router: DashboardRoutes.router(backend: backend, settings: settings), endpoint: settings.endpoint,
                        limits: settings.limits, logger: logger)
    }

    /// `--metrics`: `/metrics` alone on a listener of its own.
    public static func startMetrics(_ endpoint: PeerEndpoint, backend: DashboardBackend, logger: Logger) async throws -> DashboardServer {
        try await start(router: DashboardRoutes.metricsRouter(backend: backend), endpoint: endpoint, limits: DashboardLimits(), logger: logger)
    }

    static func start(router: Router<DashboardContext>, endpoint: PeerEndpoint, limits: DashboardLimits,
                      logger: Logger) async throws -> DashboardServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // Under CPU contention the node's loop goes first: the dashboard's thread yields.
        try? await group.next().submit { lowerThreadPriority(by: dashboardNiceness) }.get()
        let bound = group.next().makePromise(of: String.self)
        let connections = Occupancy(limit: limits.maxConnections)
        var hbLogger = logger
        hbLogger.logLevel = max(logger.logLevel, .warning)
        let app = Application(
            router: router,
            server: .http1(configuration: .init(additionalChannelHandlers: [ConnectionCapHandler(connections: connections)],
                                                idleTimeout: limits.idleTimeout)),
            configuration: ApplicationConfiguration(address: .hostname(endpoint.ip.description, port: Int(endpoint.port)),
                                                    serverName: "tracker"),
            onServerRunning: { channel in bound.succeed(channel.localAddress.map { "\($0)" } ?? "\(endpoint)") },
            eventLoopGroupProvider: .shared(group),
            logger: hbLogger)
        var configuration = ServiceGroupConfiguration(services: [app], logger: hbLogger)
        configuration.maximumGracefulShutdownDuration = .seconds(gracefulStopSeconds)
        let services = ServiceGroup(configuration: configuration)
        let task = Task {
            do { try await services.run() } catch {
                bound.fail(ConfigurationError("cannot serve HTTP on \(endpoint): \(error)"))
                throw error
            }
        }
        let address: String
        do { address = try await bound.futureResult.get() } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        return DashboardServer(task: task, services: services, group: group, boundAddress: address)
    }

    public func stop() async {
        await services.triggerGracefulShutdown()
        _ = await task.result
        try? await group.shutdownGracefully()
    }
}

/// How much less CPU priority the dashboard's thread has than the node's threads.
let dashboardNiceness: Int32 = 10

/// Lowers the calling thread's scheduling priority. On Linux a nice value belongs to a
/// thread, and `PRIO_PROCESS` with id 0 names the calling one (setpriority(2), NOTES).
/// Best effort: a thread already at the floor stays there.
func lowerThreadPriority(by amount: Int32) {
    let which = __priority_which_t(PRIO_PROCESS.rawValue)
    errno = 0
    let current = getpriority(which, 0)
    guard errno == 0 else { return }
    _ = setpriority(which, 0, min(19, current + amount))
}

/// A node's HTTP listeners: the dashboard (`--http`) and `/metrics` alone (`--metrics`).
struct WebListeners: Sendable {
    var dashboard: DashboardServer?
    var metrics: DashboardServer?

    func stop() async {
        await dashboard?.stop()
        await metrics?.stop()
    }

    /// A host's start: the tracker service first, then the dashboard and the metrics
    /// listener (those given). When any fails, `undo` stops the service, what was bound
    /// closes and the group goes, so the caller gets the error and nothing left running.
    static func start(_ dashboard: DashboardSettings?, metrics: PeerEndpoint?, after startService: () async throws -> Void,
                      undo: () async -> Void, backend: DashboardBackend, group: MultiThreadedEventLoopGroup,
                      logger: Logger) async throws -> WebListeners {
        var web = WebListeners()
        do {
            try await startService()
            if let dashboard {
                web.dashboard = try await DashboardServer.start(dashboard, backend: backend, logger: logger)
                logger.notice("dashboard", metadata: ["url": "http://\(dashboard.endpoint)/",
                                                      "peer-data": "\(dashboard.peerDataNeedsToken ? "token needed" : "loopback only")"])
            }
            if let metrics {
                web.metrics = try await DashboardServer.startMetrics(metrics, backend: backend, logger: logger)
                logger.notice("metrics", metadata: ["url": "http://\(metrics)/metrics"])
            }
            return web
        } catch {
            await web.stop()
            await undo()
            try? await group.shutdownGracefully()
            throw error
        }
    }
}
