import CAllocator
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
    /// the broker and cluster sockets may need.
    public var maxConnections = 256
    /// A connection that sends no complete request head for this long is closed, between
    /// requests as well as during a half-sent head.
    public var idleTimeout = TimeAmount.seconds(10)
    /// A request's body must arrive whole within this of its head (`requestBody(_:upTo:within:)`).
    public var bodyTimeout = TimeAmount.seconds(10)
    /// Event streams open at once (each holds buffers that outlive it in the allocator).
    public var maxEventStreams = 32
    /// Listings (the swarms table, a swarm's peers) each cost the node time: rows built
    /// on its loop, or a swarm's table copied at its next change. Node-wide, per second,
    /// for requests without a token; each source (an IPv4 address or an IPv6 /64) gets
    /// at most `listingsPerSource` of them, so one client cannot take them all.
    public var listingsPerSecond = 10.0
    public var listingBurst = 20.0
    public var listingsPerSource = SourceRateLimiter.Limit(perSecond: 4, burst: 8)
    /// The share kept for requests that carry the admin or the viewer token, whatever
    /// anonymous clients do.
    public var tokenListingsPerSecond = 10.0
    public var tokenListingBurst = 20.0
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

    /// Gives a place back; returns how many stay taken.
    @discardableResult
    func leave() -> Int { count.withLockedValue { $0 = max(0, $0 - 1); return $0 } }

    var current: Int { count.withLockedValue { $0 } }
}

/// Gives the allocator's free memory back to the system once a burst of dashboard work
/// is over. glibc keeps what a flood of event streams freed in its arenas, and the
/// node's resident set stayed that much higher after they were gone; `malloc_trim`
/// returns it. Asked when the last stream closes; done at most once a second, off the
/// event loops (it walks every arena).
enum AllocatorTrim {
    private static let pending = NIOLockedValueBox(false)

    static func soon() {
        let first = pending.withLockedValue { p -> Bool in
            defer { p = true }
            return !p
        }
        guard first else { return }
        Task.detached {
            try? await Task.sleep(for: .seconds(1))
            pending.withLockedValue { $0 = false }
            _ = callocator_trim(0)
        }
    }
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

/// Who may have a listing now (`DashboardLimits`): a request with a token from the
/// token holders' share; any other from its source's budget and the node's.
final class ListingBudgets: Sendable {
    let anonymous: RequestBudget
    let tokenHolders: RequestBudget
    private let sources: NIOLockedValueBox<SourceRateLimiter>

    init(_ limits: DashboardLimits) {
        anonymous = RequestBudget(perSecond: limits.listingsPerSecond, burst: limits.listingBurst)
        tokenHolders = RequestBudget(perSecond: limits.tokenListingsPerSecond, burst: limits.tokenListingBurst)
        // One table slot a source, 24 bytes each: 4,096 sources cost 96 KiB.
        sources = NIOLockedValueBox(SourceRateLimiter(connect: limits.listingsPerSource, announce: .off,
                                                      key: SipHash24(k0: WallClock.randomSeed(), k1: WallClock.randomSeed()),
                                                      tableSize: 1 << 12))
    }

    /// Whether a listing may be built now; `source` nil (no address known) counts as one
    /// source of its own.
    func take(withToken: Bool, source: IPAddress?, now: NIODeadline = .now()) -> Bool {
        if withToken { return tokenHolders.take(now: now) }
        let instant = Instant(milliseconds: Int64(now.uptimeNanoseconds / 1_000_000))
        let ip = source ?? .v4(0)
        guard sources.withLockedValue({ $0.allow(.connect, from: ip, now: instant) }) else { return false }
        return anonymous.take(now: now)
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
