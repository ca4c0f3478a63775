#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// Replies leave a node in batches: encoded into one buffer, each with its own `sockaddr`,
/// sent with one sendmmsg; one the kernel refuses costs only itself.
@Suite struct DatagramBatchTests {
    /// A client on loopback, bound so that replies can be sent to it, and its address.
    private func client() throws -> (fd: Int32, endpoint: PeerEndpoint) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let any = try #require(PeerEndpoint("127.0.0.1:0"))
        try #require(SocketAddress(any).withSockAddr { bind(fd, $0, socklen_t($1)) } == 0)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, try #require(withUnsafePointer(to: &storage) { PeerEndpoint($0, length: length) }))
    }

    @Test func eachReplyReachesItsOwnAddressAndARefusedOneCostsOnlyItself() throws {
        let server = try PeerChannelBinder.boundSocket(try #require(PeerEndpoint("127.0.0.1:0")), freeBind: false)
        defer { close(server) }
        let clients = try (0..<2).map { _ in try client() }
        defer { clients.forEach { close($0.fd) } }
        let batch = DatagramBatch()
        var expected: [[UInt32]] = [[], []]
        for i in 0..<DatagramBatch.capacity {
            let reply = TrackerResponse.connect(ConnectResponse(transactionID: UInt32(i), connectionID: UInt64(i)))
            if i == 5 {
                // An IPv6 address on an IPv4 socket: the kernel refuses this one.
                #expect(batch.append(reply, to: try #require(PeerEndpoint("[::1]:9"))))
                continue
            }
            #expect(batch.append(reply, to: clients[i % 2].endpoint))
            expected[i % 2].append(UInt32(i))
        }
        #expect(batch.isFull)
        #expect(!batch.append(.connect(ConnectResponse(transactionID: 999, connectionID: 0)), to: clients[0].endpoint))
        #expect(batch.send(on: server) == 1)
        #expect(batch.isEmpty)
        for (c, ids) in zip(clients, expected) {
            var got: [UInt32] = []
            var bytes = [UInt8](repeating: 0, count: 64)
            while got.count < ids.count, case let n = recv(c.fd, &bytes, bytes.count, 0), n > 0 {
                guard case .success(.connect(let r)) = BEP15Codec.decodeResponse(ByteBuffer(bytes: bytes[0..<n]), family: .v4) else {
                    Issue.record("not a connect reply"); break
                }
                #expect(r.connectionID == UInt64(r.transactionID))
                got.append(r.transactionID)
            }
            #expect(got == ids)
        }
        // Emptied: the next batch starts from its first slot.
        #expect(batch.append(.connect(ConnectResponse(transactionID: 7, connectionID: 7)), to: clients[0].endpoint))
        #expect(batch.send(on: server) == 0)
    }
}
