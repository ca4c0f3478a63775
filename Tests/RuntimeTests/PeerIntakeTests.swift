#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing
import TrackerLogic
import TrackerRuntime

/// A node reads its peer socket itself while datagrams keep coming, in turns of bounded
/// size, and hands the wait back to NIO once the socket is quiet.
@Suite struct PeerIntakeTests {
    /// What reached the node, by which path.
    struct Seen {
        var ids: [UInt32] = []
        var throughNIO = 0
        var turns: [Int] = []
        var currentTurn = 0
    }

    /// NIO's reads of the socket (the first of each burst), handed to the same record.
    final class NIOReads: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let seen: NIOLockedValueBox<Seen>
        var intake: PeerIntake?
        init(seen: NIOLockedValueBox<Seen>) { self.seen = seen }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data).data
            seen.withLockedValue { $0.ids.append(bytes.getInteger(at: bytes.readerIndex) ?? .max); $0.throughNIO += 1 }
        }
        func channelReadComplete(context: ChannelHandlerContext) { intake?.readCompleted() }
    }

    private func send(_ ids: Range<Int>, from fd: Int32, to address: PeerEndpoint) {
        for i in ids {
            var id = UInt32(i).bigEndian
            _ = SocketAddress(address).withSockAddr { sendto(fd, &id, 4, 0, $0, socklen_t($1)) }
        }
    }

    private func waitFor(_ count: Int, _ seen: NIOLockedValueBox<Seen>) async throws {
        for _ in 0..<200 where seen.withLockedValue({ $0.ids.count }) < count { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test func aBacklogIsReadInBoundedTurnsOnceEachAndAQuietSocketStillHearsTheNextDatagram() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let fd = try PeerChannelBinder.boundSocket(try #require(PeerEndpoint("127.0.0.1:0")), freeBind: false)
        let seen = NIOLockedValueBox(Seen())
        let reads = NIOReads(seen: seen)
        let channel = try await DatagramBootstrap(group: loop)
            .channelOption(.autoRead, value: false)
            .channelOption(.datagramVectorReadMessageCount, value: 32)
            .channelOption(.socket(SocketOptionLevel(SOL_SOCKET), SocketOptionName(SO_RCVBUF)), value: 4 << 20)
            .channelInitializer { ch in ch.eventLoop.makeCompletedFuture { try ch.pipeline.syncOperations.addHandler(reads) } }
            .withBoundSocket(fd).get()
        let address = try #require(channel.localAddress.flatMap { PeerEndpoint($0) })
        let client = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(client) }

        // A backlog longer than one turn, queued before the node looks.
        let backlog = 2 * PeerIntake.batchesPerPoll * DatagramSlots.count
        send(0..<backlog, from: client, to: address)
        try await loop.submit {
            let intake = PeerIntake(channel: channel, descriptor: fd,
                                    deliver: { bytes, _, _ in seen.withLockedValue { $0.ids.append(bytes.getInteger(at: bytes.readerIndex) ?? .max); $0.currentTurn += 1 } },
                                    turnEnded: { seen.withLockedValue { $0.turns.append($0.currentTurn); $0.currentTurn = 0 } })
            reads.intake = intake
            intake.start()
        }.get()
        try await waitFor(backlog, seen)
        let first = seen.withLockedValue { $0 }
        #expect(first.ids == Array(0..<UInt32(backlog)))
        #expect(first.throughNIO > 0 && first.throughNIO < backlog)
        // No turn reads more than its bound, and the backlog needed a full one.
        #expect(first.turns.allSatisfy { $0 <= PeerIntake.batchesPerPoll * DatagramSlots.count })
        #expect(first.turns.contains(PeerIntake.batchesPerPoll * DatagramSlots.count))

        // Quiet for longer than `quietPolls` polls: the wait is NIO's again, and a lone
        // datagram still arrives.
        try await Task.sleep(for: .milliseconds(Int64(PeerIntake.quietPolls) * 10 + 50))
        send(backlog..<(backlog + 1), from: client, to: address)
        try await waitFor(backlog + 1, seen)
        let after = seen.withLockedValue { $0 }
        #expect(after.ids.last == UInt32(backlog))
        #expect(after.throughNIO == first.throughNIO + 1)
        try await channel.close()
    }
}
