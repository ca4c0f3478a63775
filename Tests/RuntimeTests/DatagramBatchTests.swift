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
    @Test func eachReplyReachesItsOwnAddressAndARefusedOneCostsOnlyItself() throws {
        let server = try PeerChannelBinder.boundSocket(try #require(PeerEndpoint("127.0.0.1:0")), freeBind: false)
        defer { close(server) }
        let clients = try (0..<2).map { _ in try loopbackClient() }
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
