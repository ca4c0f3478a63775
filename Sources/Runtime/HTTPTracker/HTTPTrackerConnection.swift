import NIOCore
import TrackerLogic

/// Who decides the HTTP tracker's requests: a standalone tracker at once under its lock
/// (`answerAtOnce`), a cluster node through its step (`ClusterService.httpRequest`), which
/// gives `answer` exactly once, on any thread.
package protocol HTTPTrackerBackend: AnyObject, Sendable {
    /// The answer, decided on the caller's thread; nil when the backend answers later,
    /// through `decide`.
    func answerAtOnce(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse?
    func decide(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: HTTPTrackerAnswer)
}

extension HTTPTrackerBackend {
    package func answerAtOnce(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse? { nil }
}

/// One HTTP tracker connection over NIO (the listener under TLS): its `HTTPTrackerSession`
/// on a channel.
///
/// Invariants: the connection holds a place of the listener's `connections` from its
/// opening to its end, or is closed at once when none is free; its loop's
/// `IdleConnections` holds it from its opening to its end and closes it once the
/// session's idle deadline passed.
final class HTTPTrackerConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let backend: HTTPTrackerBackend
    let proxies: TrustedProxies
    let limits: HTTPTrackerLimits
    let counters: HTTPTrackerCounters
    let connections: Occupancy
    let idle: IdleConnections
    fileprivate var session: HTTPTrackerSession?
    private var admitted = false
    fileprivate var idleSlot = -1

    init(backend: HTTPTrackerBackend, proxies: TrustedProxies, limits: HTTPTrackerLimits, counters: HTTPTrackerCounters,
         connections: Occupancy, idle: IdleConnections) {
        self.backend = backend; self.proxies = proxies; self.limits = limits; self.counters = counters
        self.connections = connections; self.idle = idle
    }

    func channelActive(context: ChannelHandlerContext) {
        guard connections.enter() else { return context.close(promise: nil) }
        admitted = true
        guard let remote = context.channel.remoteAddress.flatMap(PeerEndpoint.init) else { return context.close(promise: nil) }
        session = HTTPTrackerSession(remote: remote, proxies: proxies, limits: limits, counters: counters, now: .now())
        idle.add(self, context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        session?.ended()
        leave()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        var effects: [HTTPTrackerSession.Effect] = []
        session?.read(bytes.readableBytesView, into: &effects)
        perform(effects, context)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A reset, a TLS handshake gone wrong: nothing to answer.
        session?.ended()
        leave()
        context.close(promise: nil)
    }

    private func perform(_ effects: [HTTPTrackerSession.Effect], _ context: ChannelHandlerContext) {
        var effects = effects, i = 0
        while i < effects.count {
            switch effects[i] {
            case .write(let message):
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: message)), promise: nil)
            case .close:
                leave()
                context.close(promise: nil)
            case .decide(let request, let source, let pending):
                if let response = backend.answerAtOnce(request, from: source) {
                    session?.answered(pending, response, now: .now(), into: &effects)
                } else {
                    let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                    let loop = context.eventLoop
                    backend.decide(request, from: source, answer: HTTPTrackerAnswer { response in
                        loop.execute {
                            let (connection, context) = loopBound.value
                            var effects: [HTTPTrackerSession.Effect] = []
                            connection.session?.answered(pending, response, now: .now(), into: &effects)
                            connection.perform(effects, context)
                        }
                    })
                }
            }
            i += 1
        }
    }

    /// Closes a connection `idle` found past its deadline.
    fileprivate func idledOut(_ context: ChannelHandlerContext) {
        var effects: [HTTPTrackerSession.Effect] = []
        session?.idledOut(into: &effects)
        perform(effects, context)
    }

    /// Gives back the connection's place and leaves the idle sweep, once.
    private func leave() {
        if admitted { connections.leave(); admitted = false }
        idle.remove(self)
    }
}

/// The NIO listener's open connections on one event loop, swept for those idle past
/// their deadline by one repeating task, rather than a timer per connection re-armed at
/// every request.
///
/// Invariant: touched only on its loop (the connections and the sweep run there), which
/// is what makes it `Sendable`; a connection is held from its opening to its end, at
/// `idleSlot`.
final class IdleConnections: @unchecked Sendable {
    private var members: [(connection: HTTPTrackerConnection, context: ChannelHandlerContext)] = []

    fileprivate func add(_ connection: HTTPTrackerConnection, _ context: ChannelHandlerContext) {
        connection.idleSlot = members.count
        members.append((connection, context))
    }

    fileprivate func remove(_ connection: HTTPTrackerConnection) {
        let slot = connection.idleSlot
        guard slot >= 0, slot < members.count, members[slot].connection === connection else { return }
        connection.idleSlot = -1
        let last = members.removeLast()
        if slot < members.count {
            members[slot] = last
            last.connection.idleSlot = slot
        }
    }

    /// Closes the connections whose deadline passed by `now`.
    func sweep(now: NIODeadline) {
        let expired = members.filter { ($0.connection.session?.idleDeadline ?? .distantFuture) <= now }
        for m in expired { m.connection.idledOut(m.context) }
    }

    /// How often idle connections are looked for: one is closed at most this long after
    /// its deadline.
    static func period(for timeout: TimeAmount) -> TimeAmount {
        .nanoseconds(min(max(timeout.nanoseconds / 4, TimeAmount.milliseconds(50).nanoseconds), TimeAmount.seconds(1).nanoseconds))
    }
}
