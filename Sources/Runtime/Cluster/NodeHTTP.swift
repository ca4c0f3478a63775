import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import TrackerLogic

/// The node as JSON: what operators, scripts and the dashboard read.
struct NodeStatus: Codable {
    struct MemberStatus: Codable {
        var id: UInt32
        var role: String
        var master: UInt32
        var lastCommitted: UInt64
        var inSync: Bool
        var address: String
        var lastKeepaliveMsAgo: Int64
    }

    /// The cluster channel, as the STOMP client counted it.
    struct BrokerStatus: Codable {
        var connected: Bool
        var sent: Int
        var received: Int
        var droppedWhileDown: Int
        var connectionsLost: Int
        var errorFrames: Int
        var badFrames: Int
        /// Every cluster frame the channel dropped, whatever the reason.
        var badClusterMessages: Int
        /// The same, per reason (every reason listed, zeros included).
        var rejectedClusterMessages: [String: Int]
        /// False with `--insecure-cluster`: anyone on the broker can forge messages.
        var authenticated: Bool
    }

    var id: UInt32
    var role: String
    var epoch: String
    var term: UInt32
    var master: UInt32
    var serving: Bool
    var inSync: Bool
    var lastCommitted: UInt64
    var lastCommittedEpoch: String
    var digest: String
    var swarms: Int
    var peers: Int
    var storeHealthy: Bool
    var storeBacklog: Int
    var brokerConnected: Bool
    var cluster: String
    var peerService: String
    var replyFrom: String
    var database: String
    var uptimeMs: Int64
    var datagrams: Int
    var replies: Int
    var errorReplies: Int
    var broker: BrokerStatus
    var members: [MemberStatus]
}

extension Role {
    var jsonName: String {
        switch self {
        case .starting: "starting"
        case .slave: "slave"
        case .candidate: "candidate"
        case .master: "master"
        case .stopped: "stopped"
        }
    }
}

extension ClusterServer {
    /// Read on the loop.
    func status() -> NodeStatus {
        let now = WallClock.now()
        let members = node.membership.members.values.sorted { $0.id < $1.id }.map {
            NodeStatus.MemberStatus(id: $0.id.rawValue, role: $0.role.jsonName, master: $0.master.rawValue,
                                    lastCommitted: $0.lastCommitted.txid, inSync: $0.inSync, address: $0.address,
                                    lastKeepaliveMsAgo: (now - $0.lastHeard).value)
        }
        return NodeStatus(
            id: node.id.rawValue, role: node.role.jsonName, epoch: node.epoch.description, term: node.epoch.term,
            master: node.master?.rawValue ?? 0, serving: node.isServing, inSync: node.inSync,
            lastCommitted: node.replica.lastCommitted.txid, lastCommittedEpoch: node.replica.lastCommitted.epoch.description,
            digest: String(node.replica.digest, radix: 16), swarms: node.replica.store.swarmCount,
            peers: node.replica.store.peerCount, storeHealthy: node.storeHealthy, storeBacklog: stats.storeBacklog, brokerConnected: stomp?.isReady ?? false,
            cluster: settings.clusterName, peerService: settings.peers.description,
            replyFrom: sockets.map { "\($0.unicast)" } ?? "", database: settings.database,
            uptimeMs: (now - startedAt).value, datagrams: stats.datagrams, replies: stats.replies,
            errorReplies: stats.errorReplies,
            broker: NodeStatus.BrokerStatus(
                connected: stomp?.isReady ?? false, sent: stomp?.stats.sent ?? 0, received: stomp?.stats.received ?? 0,
                droppedWhileDown: stomp?.stats.droppedWhileDown ?? 0, connectionsLost: stomp?.stats.connectionsLost ?? 0,
                errorFrames: stomp?.stats.errorFrames ?? 0, badFrames: stomp?.stats.badFrames ?? 0,
                badClusterMessages: stats.rejected.values.reduce(0, +),
                rejectedClusterMessages: Dictionary(uniqueKeysWithValues: ClusterRejection.allCases.map { ($0.rawValue, stats.rejected[$0] ?? 0) }),
                authenticated: !settings.keys.isEmpty),
            members: members)
    }
}

/// A small HTTP/1.1 server for the node's API, on the node's own loop so it reads the
/// node's state without locks.
enum NodeHTTPServer {
    static func bind(_ endpoint: PeerEndpoint, loop: EventLoop, server: ClusterServer) async throws -> Channel {
        try await ServerBootstrap(group: loop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(NodeHTTPHandler(server: server))
                }
            }
            .bind(to: endpoint.socketAddress()).get()
    }
}

final class NodeHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let server: ClusterServer
    var head: HTTPRequestHead?

    init(server: ClusterServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h): head = h
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            let (status, body) = route(head)
            respond(context: context, head: head, status: status, body: body)
        }
    }

    func route(_ head: HTTPRequestHead) -> (HTTPResponseStatus, String) {
        guard head.method == .GET else { return (.methodNotAllowed, #"{"error":"GET only"}"#) }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch path {
        case "/api/node":
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            guard let data = try? encoder.encode(server.status()) else { return (.internalServerError, #"{"error":"encoding"}"#) }
            return (.ok, String(decoding: data, as: UTF8.self))
        default:
            return (.notFound, #"{"error":"not found"}"#)
        }
    }

    func respond(context: ChannelHandlerContext, head: HTTPRequestHead, status: HTTPResponseStatus, body: String) {
        var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
        buffer.writeString(body)
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: "\(buffer.readableBytes)")
        headers.add(name: "cache-control", value: "no-store")
        let keepAlive = head.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlushPromise()
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            let channel = context.channel
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

private extension ChannelHandlerContext {
    func writeAndFlushPromise() -> EventLoopPromise<Void> { eventLoop.makePromise() }
}
