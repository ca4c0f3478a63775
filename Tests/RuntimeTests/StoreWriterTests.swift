import Foundation
import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
import Testing
import TrackerLogic
import TrackerRuntime

/// The writer thread takes whatever queued up while it was busy: every write completes,
/// in the order submitted, and the disk ends where the last one left it.
@Suite struct StoreWriterTests {
    @Test func queuedCommitsAllCompleteInOrder() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID().uuidString).sqlite").path
        let writer = StoreWriter(path: path, loop: loop)
        defer { writer.shutdown() }
        var replica = Replica()
        let epoch = Epoch(term: 1, master: NodeID(2))
        var futures: [EventLoopFuture<UInt64>] = []
        for txid in 1...300 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [.announce(Announce(
                infoHash: InfoHash(a: txid % 7, b: 0, c: 0), peerID: PeerID(a: txid, b: 0, c: 0),
                endpoint: PeerEndpoint(ip: .v4(UInt32(txid)), port: 6881), uploaded: 0, downloaded: 0, left: 1,
                event: .started, at: Instant(milliseconds: 1000)))])
            replica.commit(tx)
            futures.append(writer.submit(.commit(CommitRows(tx, replica: replica))).map { txid })
        }
        // Completions arrive on the loop in submission order.
        let order = NIOLockedValueBox<[UInt64]>([])
        for f in futures { f.whenSuccess { txid in order.withLockedValue { $0.append(txid) } } }
        try EventLoopFuture.andAllSucceed(futures, on: loop).wait()
        try writer.drain().wait()
        #expect(order.withLockedValue { $0 } == Array(1...300))
        #expect(try writer.load().get().snapshot?.lastCommitted == replica.lastCommitted)
        #expect(try writer.load().get().snapshot?.digest == Digest.of(replica.store))
    }
}
