import NIOCore
import NIOHTTP1
import NIOPosix
import TrackerLogic
import TrackerRuntime

/// What a node's API answered.
public struct AdminResponse: Sendable {
    public var status: Int
    public var body: [UInt8]
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Why a request got no answer.
public struct AdminClientError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// `tracker admin`: one HTTP/1.1 request to a node's dashboard API, carrying the admin
/// token when there is one. NIO's HTTP codec reads the answer; the node is another
/// process, so its answer is bounded (`maxResponseBytes`) and timed (`timeout`) like
/// anything else read from outside.
public struct AdminClient: Sendable {
    public let node: PeerEndpoint
    public let token: String?
    public var timeout: TimeAmount = .seconds(15)
    /// The largest answer read (the whole catalogue fits: at most 32 MiB of files).
    public var maxResponseBytes = 64 << 20

    public init(node: PeerEndpoint, token: String?) { self.node = node; self.token = token }

    public enum Method: Sendable {
        case get, post, put, delete
        var http: HTTPMethod {
            switch self {
            case .get: .GET
            case .post: .POST
            case .put: .PUT
            case .delete: .DELETE
            }
        }
    }

    public func request(_ method: Method, _ path: String, body: [UInt8]? = nil,
                        contentType: String = "application/json") async throws -> AdminResponse {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        let loop = group.next()
        let answer = loop.makePromise(of: AdminResponse.self)
        let node = self.node, maxResponseBytes = self.maxResponseBytes
        let channel: Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .connectTimeout(timeout)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(ResponseCollector(answer: answer, limit: maxResponseBytes))
                    }
                }
                .connect(to: node.socketAddress()).get()
        } catch {
            throw AdminClientError("cannot reach the node's API at http://\(node): \(error)")
        }
        let seconds = timeout.nanoseconds / 1_000_000_000
        let deadline = loop.scheduleTask(in: timeout) {
            // The collector answers "closed before its answer ended", unless it answered.
            channel.pipeline.fireUserInboundEventTriggered(ResponseCollector.TimedOut(seconds: seconds))
        }
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "\(node)")
        headers.add(name: "Connection", value: "close")
        headers.add(name: "Accept", value: "application/json")
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Content-Length", value: "\(body.count)")
        }
        channel.write(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: method.http, uri: path, headers: headers)),
                      promise: nil)
        if let body { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer { deadline.cancel() }
        return try await answer.futureResult.get()
    }
}

/// Gathers one response. Completes its promise exactly once, on the channel's loop: with
/// the response, or with why there is none (too large, not HTTP, timed out, closed early).
final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    struct TimedOut { var seconds: Int64 }

    let answer: EventLoopPromise<AdminResponse>
    let limit: Int
    var status = 0
    var body: [UInt8] = []
    var done = false

    init(answer: EventLoopPromise<AdminResponse>, limit: Int) { self.answer = answer; self.limit = limit }

    func finish(_ result: Result<AdminResponse, AdminClientError>, _ context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        answer.completeWith(result.mapError { $0 as Error })
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
        case .body(let part):
            guard body.count + part.readableBytes <= limit else {
                return finish(.failure(AdminClientError("the node's answer exceeds \(limit >> 20) MiB")), context)
            }
            body += part.readableBytesView
        case .end:
            finish(.success(AdminResponse(status: status, body: body)), context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let t = event as? TimedOut { finish(.failure(AdminClientError("no answer within \(t.seconds) s")), context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        finish(.failure(AdminClientError("the node's answer is not HTTP: \(error)")), context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(AdminClientError("the node closed the connection before its answer ended")), context)
    }
}
