import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import TrackerLogic

/// What the dashboard may cost the node, whoever connects. The dashboard shares the
/// node's process, event loops and descriptors: no amount of HTTP may delay a keepalive or
/// a peer's answer, or keep the node off its broker.
public struct DashboardLimits: Sendable {
    /// Connections open at once; more are closed as they arrive. Each is a descriptor
    /// the broker and cluster sockets may need (1,100 idle ones kept a node off its broker).
    public var maxConnections = 256
    /// A connection that sends no complete request head for this long is closed, between
    /// requests as well as during a half-sent head (2,000 of those stayed open for 60 s).
    public var idleTimeout = TimeAmount.seconds(10)
    /// Event streams open at once (each holds buffers that outlive it in the allocator).
    public var maxEventStreams = 32
    /// Listings (the swarms table, a swarm's peers) each cost the node time: rows built
    /// on its loop, or a swarm's table copied at its next change. Node-wide, per second.
    public var listingsPerSecond = 10.0
    public var listingBurst = 20.0
    /// Host names the dashboard answers to besides IP literals and `localhost` (a page
    /// of another site that rebinds its name to this address gets nothing).
    public var hostNames: [String] = []

    public init() {}
}

/// A node-wide count with a ceiling: connections, event streams.
final class Occupancy: Sendable {
    let limit: Int
    private let count = NIOLockedValueBox(0)

    init(limit: Int) { self.limit = limit }

    /// Takes a place; false when all are taken.
    func enter() -> Bool {
        count.withLockedValue { n in
            guard n < limit else { return false }
            n += 1
            return true
        }
    }

    func leave() { count.withLockedValue { $0 = max(0, $0 - 1) } }

    var current: Int { count.withLockedValue { $0 } }
}

/// Closes a connection beyond `DashboardLimits.maxConnections` as it arrives.
final class ConnectionCapHandler: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = NIOAny
    let connections: Occupancy
    private let admitted = NIOLockedValueBox(false)

    init(connections: Occupancy) { self.connections = connections }

    func channelActive(context: ChannelHandlerContext) {
        guard connections.enter() else {
            context.close(promise: nil)
            return
        }
        admitted.withLockedValue { $0 = true }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if admitted.withLockedValue({ was in defer { was = false }; return was }) { connections.leave() }
        context.fireChannelInactive()
    }
}

/// A node-wide token bucket.
final class RequestBudget: Sendable {
    let perSecond: Double, burst: Double
    private let state: NIOLockedValueBox<(tokens: Double, at: NIODeadline)>

    init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond; self.burst = burst
        state = NIOLockedValueBox((burst, .now()))
    }

    func take(now: NIODeadline = .now()) -> Bool {
        state.withLockedValue { s in
            let elapsed = Double(max(0, (now - s.at).nanoseconds)) / 1e9
            s.tokens = min(burst, s.tokens + elapsed * perSecond)
            s.at = max(s.at, now)
            guard s.tokens >= 1 else { return false }
            s.tokens -= 1
            return true
        }
    }
}

/// Answers only requests whose `Host` names this listener: an IP literal, `localhost`, or
/// a configured name. DNS rebinding gives a hostile page our address under its own name;
/// the browser then sends that name, and gets a 421.
struct HostCheckMiddleware<Context: RequestContext>: RouterMiddleware {
    let names: Set<String>

    init(names: [String]) {
        self.names = Set((names + ["localhost"]).map { $0.lowercased() })
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let authority = request.head.authority, Self.accepts(authority, names: names) else {
            throw APIError(.misdirectedRequest, "this dashboard answers to its address, localhost or a configured name only (Host)")
        }
        return try await next(request, context)
    }

    /// The host part of `authority` (a port dropped) is an IP literal or one of `names`.
    static func accepts(_ authority: String, names: Set<String>) -> Bool {
        var host = Substring(authority.lowercased())
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            return IPAddress(String(host[host.index(after: host.startIndex)..<close])) != nil
        }
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        if host.hasSuffix(".") { host = host.dropLast() }
        return IPAddress(String(host)) != nil || names.contains(String(host))
    }
}
