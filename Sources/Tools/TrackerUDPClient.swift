import NIOCore
import NIOPosix
import TrackerLogic
import TrackerRuntime

/// A small BEP 15 client: one socket, requests matched to replies by transaction id,
/// timeouts and BEP 15's retransmission. Used by `tracker client` and by tests.
public final class TrackerUDPClient: Sendable {
    public struct Timeout: Error, CustomStringConvertible {
        public var description: String { "no reply from the tracker" }
    }

    private let channel: Channel
    private let handler: NIOLoopBound<ReplyMatcher>
    public let target: PeerEndpoint
    private let targetAddress: SocketAddress

    private init(channel: Channel, handler: NIOLoopBound<ReplyMatcher>, target: PeerEndpoint, targetAddress: SocketAddress) {
        self.channel = channel; self.handler = handler; self.target = target; self.targetAddress = targetAddress
    }

    /// Binds an ephemeral local port of the target's family (or `localAddress`).
    public static func make(target: PeerEndpoint, localAddress: String? = nil,
                            group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws -> TrackerUDPClient {
        let family = target.ip.family
        let bindHost = localAddress ?? (family == .v4 ? "0.0.0.0" : "::")
        let loop = group.next()
        let matcher = try await loop.submit { NIOLoopBound(ReplyMatcher(family: family), eventLoop: loop) }.get()
        // A group target (a cluster on this host): requests leave through loopback.
        let multicastInterface: IPAddress? = target.ip.isIPv4Multicast ? (localAddress.flatMap { IPAddress($0) } ?? .v4(0x7F00_0001)) : nil
        let channel = try await DatagramBootstrap(group: loop)
            .channelInitializer { channel in
                let ready = multicastInterface.map { channel.setMulticastInterface($0) } ?? channel.eventLoop.makeSucceededVoidFuture()
                return ready.flatMapThrowing { try channel.pipeline.syncOperations.addHandler(matcher.value) }
            }
            .bind(host: bindHost, port: 0).get()
        return TrackerUDPClient(channel: channel, handler: matcher, target: target, targetAddress: target.socketAddress())
    }

    public var localEndpoint: PeerEndpoint? { channel.localAddress.flatMap(PeerEndpoint.init) }

    /// Sends and waits for the reply with the same transaction id. Retransmits after
    /// `timeout`, doubling it each time, `attempts` times in all (BEP 15 uses 15 s · 2ⁿ).
    public func send(_ request: TrackerRequest, timeout: TimeAmount = .seconds(2), attempts: Int = 3) async throws -> TrackerResponse {
        var wait = timeout
        for _ in 0..<max(attempts, 1) {
            let loop = channel.eventLoop
            let handler = self.handler
            let address = targetAddress
            let channel = self.channel
            let delay = wait
            let future: EventLoopFuture<TrackerResponse> = try await loop.submit {
                let promise = loop.makePromise(of: TrackerResponse.self)
                handler.value.expect(request.transactionID, promise: promise)
                let data = BEP15Codec.encode(request)
                channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: data), promise: nil)
                let tid = request.transactionID
                loop.scheduleTask(in: delay) { handler.value.expire(tid) }
                return promise.futureResult
            }.get()
            do {
                return try await future.get()
            } catch is Timeout {
                wait = wait * 2
            }
        }
        throw Timeout()
    }

    /// Connect, and return the connection id.
    public func connect() async throws -> UInt64 {
        let response = try await send(.connect(ConnectRequest(transactionID: .random(in: 0 ... .max))))
        switch response {
        case .connect(let r): return r.connectionID
        case .error(let e): throw ConfigurationError("tracker refused connect: \(e.message)")
        default: throw ConfigurationError("unexpected reply to connect: \(response)")
        }
    }

    public func close() async {
        try? await channel.close()
    }
}

/// Matches replies to outstanding requests. Lives on the client's event loop.
final class ReplyMatcher: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let family: IPAddress.Family
    private var waiting: [UInt32: EventLoopPromise<TrackerResponse>] = [:]

    init(family: IPAddress.Family) { self.family = family }

    func expect(_ tid: UInt32, promise: EventLoopPromise<TrackerResponse>) { waiting[tid] = promise }

    func expire(_ tid: UInt32) { waiting.removeValue(forKey: tid)?.fail(TrackerUDPClient.Timeout()) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard case .success(let response) = BEP15Codec.decodeResponse(envelope.data, family: family) else { return }
        waiting.removeValue(forKey: response.transactionID)?.succeed(response)
    }
}
