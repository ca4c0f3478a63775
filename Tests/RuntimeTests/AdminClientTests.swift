import NIOCore
import NIOPosix
import Testing
import TrackerLogic
import TrackerRuntime
import TrackerTools

/// `tracker admin` reads another process's answer: whatever comes back, it gets a
/// response or an error that says why, never a hang or a trap.
@Suite struct AdminClientTests {
    /// A TCP server on loopback that answers the first bytes of every connection with
    /// `reply`, then closes it (or keeps it open and silent). It answers after the request
    /// arrives: an answer before any request is one no HTTP client accepts.
    final class CannedServer: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let reply: [UInt8]
        let close: Bool
        var answered = false
        init(reply: [UInt8], close: Bool) { self.reply = reply; self.close = close }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !answered, !reply.isEmpty else { return }
            answered = true
            context.writeAndFlush(NIOAny(ByteBuffer(bytes: reply))).assumeIsolated().whenComplete { [close] _ in if close { context.close(promise: nil) } }
        }
    }

    func withServer(_ reply: String, close: Bool = true, _ body: (PeerEndpoint) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bytes = Array(reply.utf8)
        let server = try await ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(CannedServer(reply: bytes, close: close)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = UInt16(server.localAddress?.port ?? 0)
        do { try await body(PeerEndpoint(ip: .v4(0x7F00_0001), port: port)) } catch {
            try? await server.close()
            try? await group.shutdownGracefully()
            throw error
        }
        try? await server.close()
        try? await group.shutdownGracefully()
    }

    func failure(_ client: AdminClient) async -> String {
        do {
            let r = try await client.request(.get, "/api/node")
            return "answered \(r.status)"
        } catch { return "\(error)" }
    }

    @Test func aWholeAnswerIsRead() async throws {
        try await withServer("HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: application/json\r\n\r\n{\"a\":\"bc\"}\n") { node in
            let r = try await AdminClient(node: node, token: "t").request(.get, "/api/node")
            #expect(r.status == 200 && r.text == "{\"a\":\"bc\"}\n")
        }
    }

    @Test func anAnswerTooLargeIsRefused() async throws {
        try await withServer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + String(repeating: "x", count: 100)) { node in
            var client = AdminClient(node: node, token: nil)
            client.maxResponseBytes = 10
            #expect(await failure(client).contains("exceeds"))
        }
    }

    @Test func garbageIsNotHTTP() async throws {
        try await withServer("SSH-2.0-OpenSSH_9.2\r\n\r\n") { node in
            #expect(await failure(AdminClient(node: node, token: nil)).contains("not HTTP"))
        }
    }

    @Test func anAnswerCutShortSaysSo() async throws {
        try await withServer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this") { node in
            let said = await failure(AdminClient(node: node, token: nil))
            #expect(said.contains("closed") || said.contains("not HTTP"), "\(said)")
        }
    }

    @Test func silenceTimesOut() async throws {
        try await withServer("", close: false) { node in
            var client = AdminClient(node: node, token: nil)
            client.timeout = .milliseconds(300)
            #expect(await failure(client).contains("no answer within"))
        }
    }
}
