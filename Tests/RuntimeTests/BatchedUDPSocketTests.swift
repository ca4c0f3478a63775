#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// The standalone node's socket: batches of recvmmsg and sendmmsg over buffers allocated
/// once, each reply sent to the `sockaddr` its request came from.
@Suite struct BatchedUDPSocketTests {
    /// A client socket on loopback that gives up on a read after `timeout` ms.
    private func clientSocket(timeout: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        var tv = timeval(tv_sec: timeout / 1000, tv_usec: timeout % 1000 * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    @Test func everyDatagramOfABurstLongerThanABatchIsAnsweredAtItsSourceAndAnOverlongOneIsDropped() throws {
        let server = try BatchedUDPSocket(binding: try #require(PeerEndpoint("127.0.0.1:0")), reusePort: false)
        let address = try #require(server.localEndpoint)
        #expect(address.port != 0)
        let received = NIOLockedValueBox(0)
        // The reply says which request it answers (its transaction id) and how long it was.
        let done = serveOnAThreadOfItsOwn(server) { batch in
            received.withLockedValue { $0 += batch.received }
            for (slot, bytes, _) in batch.requests {
                let id = bytes.getInteger(at: bytes.readerIndex, as: UInt32.self) ?? 0
                batch.replies.append((slot, .connect(ConnectResponse(transactionID: id, connectionID: UInt64(bytes.readableBytes)))))
            }
        }
        defer { server.stop(); done.wait(); server.close() }

        // A read waits long (the tests share two cores); none waits once all are answered.
        let clients = try (0..<2).map { _ in try clientSocket(timeout: 10_000) }
        defer { clients.forEach { _ = Glibc.close($0) } }
        // One request answered first: the burst then meets a socket being read, not one
        // whose receive buffer (about 200 of these datagrams by default) fills unread.
        let probe = [UInt8](repeating: 0xFF, count: 4)
        _ = SocketAddress(address).withSockAddr { sendto(clients[1], probe, probe.count, 0, $0, socklen_t($1)) }
        var probeReply = [UInt8](repeating: 0, count: 64)
        #expect(recv(clients[1], &probeReply, probeReply.count, 0) == 16)
        let count = 2 * BatchedUDPSocket.batchSize + 5
        var sent: [Int32: Set<[UInt64]>] = [:]
        for i in 0..<count {
            let client = clients[i % 2]
            let length = 4 + i % 97
            var bytes = [UInt8](repeating: 0, count: length)
            bytes.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(i).bigEndian, as: UInt32.self) }
            _ = SocketAddress(address).withSockAddr { sendto(client, bytes, length, 0, $0, socklen_t($1)) }
            sent[client, default: []].insert([UInt64(i), UInt64(length)])
        }
        // Longer than a slot: the kernel truncates it, the socket drops it unanswered.
        let overlong = [UInt8](repeating: 7, count: BatchedUDPSocket.slotBytes + 100)
        _ = SocketAddress(address).withSockAddr { sendto(clients[0], overlong, overlong.count, 0, $0, socklen_t($1)) }

        for client in clients {
            var answered: Set<[UInt64]> = []
            var reply = [UInt8](repeating: 0, count: 64)
            while answered.count < sent[client, default: []].count, case let n = recv(client, &reply, reply.count, 0), n > 0 {
                guard case .success(.connect(let r)) = BEP15Codec.decodeResponse(ByteBuffer(bytes: reply[0..<n]), family: .v4) else { Issue.record("not a connect reply"); break }
                answered.insert([UInt64(r.transactionID), r.connectionID])
            }
            #expect(answered == sent[client])
        }
        // The overlong datagram came last: once the server has read it, a reply to it would
        // already be on its way to the first client.
        let deadline = DispatchTime.now() + .seconds(10)
        while received.withLockedValue({ $0 }) < count + 2, DispatchTime.now() < deadline { usleep(10_000) }
        #expect(received.withLockedValue { $0 } == count + 2)
        var tv = timeval(tv_sec: 0, tv_usec: 300_000)
        setsockopt(clients[0], SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var extra = [UInt8](repeating: 0, count: 64)
        #expect(recv(clients[0], &extra, extra.count, 0) < 0, "the overlong datagram was answered")
    }

    @Test func stopEndsServeWhileItWaitsForADatagram() throws {
        let server = try BatchedUDPSocket(binding: try #require(PeerEndpoint("127.0.0.1:0")), reusePort: false)
        let done = serveOnAThreadOfItsOwn(server) { _ in }
        server.stop()
        #expect(done.wait(timeout: .now() + 2) == .success)
        server.close()
    }

    @Test func aSecondSocketJoinsTheAddressOfTheFirstWithReusePort() throws {
        let first = try BatchedUDPSocket(binding: try #require(PeerEndpoint("127.0.0.1:0")), reusePort: true)
        defer { first.close() }
        let address = try #require(first.localEndpoint)
        let second = try BatchedUDPSocket(binding: address, reusePort: true)
        defer { second.close() }
        #expect(second.localEndpoint == address)
        // Without SO_REUSEPORT on both, the address is taken.
        #expect(throws: BatchedUDPSocket.SocketError.self) { try BatchedUDPSocket(binding: address, reusePort: false) }
    }

    @Test func sourceAddressesAreReadFromTheSockaddrAndAShortOrForeignOneIsRefused() throws {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(51413).bigEndian
            sin.sin_addr.s_addr = UInt32(0x0A01_0203).bigEndian
            raw.storeBytes(of: sin, as: sockaddr_in.self)
        }
        withUnsafePointer(to: &storage) { p in
            #expect(PeerEndpoint(p, length: socklen_t(MemoryLayout<sockaddr_in>.size)) == PeerEndpoint("10.1.2.3:51413"))
            #expect(PeerEndpoint(p, length: socklen_t(MemoryLayout<sockaddr_in>.size - 1)) == nil)
        }
        let v6 = try #require(PeerEndpoint("[2001:db8::8a2e:370:7334]:6969"))
        SocketAddress(v6).withSockAddr { sockaddr, length in
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: sockaddr, count: length)) }
        }
        withUnsafePointer(to: &storage) { p in
            #expect(PeerEndpoint(p, length: socklen_t(MemoryLayout<sockaddr_in6>.size)) == v6)
        }
        storage.ss_family = sa_family_t(AF_UNIX)
        withUnsafePointer(to: &storage) { p in
            #expect(PeerEndpoint(p, length: socklen_t(MemoryLayout<sockaddr_storage>.size)) == nil)
        }
    }
}
