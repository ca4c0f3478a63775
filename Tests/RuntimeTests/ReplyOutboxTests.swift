#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// A cluster node's replies leave within the pause threshold of the step that decided
/// them, or not at all: a process stopped between deciding and sending would answer
/// requests the heir answered meanwhile (the nemesis found 22 such double replies).
@Suite struct ReplyOutboxTests {
    let t0 = Instant(milliseconds: 1_000_000)

    /// The transaction ids the client receives until a receive times out.
    private func received(_ fd: Int32) -> [UInt32] {
        var ids: [UInt32] = []
        var bytes = [UInt8](repeating: 0, count: 64)
        while case let n = recv(fd, &bytes, bytes.count, 0), n > 0 {
            guard case .success(.connect(let r)) = BEP15Codec.decodeResponse(ByteBuffer(bytes: bytes[0..<n]), family: .v4) else { break }
            ids.append(r.transactionID)
        }
        return ids
    }

    private func reply(_ tid: UInt32) -> TrackerResponse { .connect(ConnectResponse(transactionID: tid, connectionID: 1)) }

    /// Keepalive 1000 ms: sent 500 ms after the decision, the replies leave; 501 ms after,
    /// they are dropped and say how old they were; the next decision leaves again.
    @Test(arguments: [(500, true), (501, false), (3000, false)] as [(Int64, Bool)])
    func repliesLeaveOnlyWithinThePauseThreshold(sentAfter: Int64, leaves: Bool) throws {
        let server = try PeerChannelBinder.boundSocket(try #require(PeerEndpoint("127.0.0.1:0")), freeBind: false)
        defer { close(server) }
        let c = try loopbackClient(timeoutMicroseconds: 200_000)
        defer { close(c.fd) }
        let outbox = ReplyOutbox(families: 1, config: ClusterConfig())
        #expect(!outbox.isPending)
        #expect(outbox.send(0, on: server, now: t0) == nil)
        outbox.append(reply(1), to: c.endpoint, family: 0, decidedAt: t0)
        // A later step's reply does not make the batch younger.
        outbox.append(reply(2), to: c.endpoint, family: 0, decidedAt: t0 + Milliseconds(sentAfter))
        #expect(outbox.isPending)
        let sentAt = t0 + Milliseconds(sentAfter)
        let outcome = outbox.send(0, on: server, now: sentAt)
        #expect(outcome == (leaves ? .sent(refused: 0, lastError: 0) : .stale(dropped: 2, age: Milliseconds(sentAfter))))
        #expect(!outbox.isPending)
        #expect(received(c.fd) == (leaves ? [1, 2] : []))
        // Emptied either way: the next step's reply is judged by its own time.
        outbox.append(reply(3), to: c.endpoint, family: 0, decidedAt: sentAt)
        #expect(outbox.send(0, on: server, now: sentAt + Milliseconds(1)) == .sent(refused: 0, lastError: 0))
        #expect(received(c.fd) == [3])
    }

    /// Each family's batch has its own decision time, and a full batch takes no more.
    @Test func familiesAreJudgedApartAndAFullBatchRefusesMore() throws {
        let server = try PeerChannelBinder.boundSocket(try #require(PeerEndpoint("127.0.0.1:0")), freeBind: false)
        defer { close(server) }
        let c = try loopbackClient(timeoutMicroseconds: 200_000)
        defer { close(c.fd) }
        let outbox = ReplyOutbox(families: 2, config: ClusterConfig())
        outbox.append(reply(1), to: c.endpoint, family: 0, decidedAt: t0)
        outbox.append(reply(2), to: c.endpoint, family: 1, decidedAt: t0 + Milliseconds(900))
        #expect(outbox.send(0, on: server, now: t0 + Milliseconds(1000)) == .stale(dropped: 1, age: Milliseconds(1000)))
        #expect(outbox.isPending)
        // Family 1's socket is this one too here: only the address matters to the test.
        #expect(outbox.send(1, on: server, now: t0 + Milliseconds(1000)) == .sent(refused: 0, lastError: 0))
        #expect(received(c.fd) == [2])
        for i in 0..<DatagramBatch.capacity { #expect(outbox.append(reply(UInt32(i)), to: c.endpoint, family: 0, decidedAt: t0)) }
        #expect(outbox.isFull(0))
        #expect(!outbox.append(reply(99), to: c.endpoint, family: 0, decidedAt: t0))
    }
}
