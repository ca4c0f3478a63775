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
    /// Commits 1…`count` of one epoch, each a new peer, committed to `replica`.
    static func commits(_ range: ClosedRange<UInt64>, into replica: inout Replica) -> [StoreWrite] {
        range.map { txid in
            let tx = Transaction(ref: TxRef(epoch: Epoch(term: 1, master: NodeID(2)), txid: txid), updates: [.announce(Announce(
                infoHash: InfoHash(a: txid % 7, b: 0, c: 0), peerID: PeerID(a: txid, b: 0, c: 0),
                endpoint: PeerEndpoint(ip: .v4(UInt32(txid)), port: 6881), uploaded: 0, downloaded: 0, left: 1,
                event: .started, at: Instant(milliseconds: 1000)))])
            replica.commit(tx)
            return .commit(CommitRows(tx, replica: replica))
        }
    }

    static func writer(on loop: EventLoop) -> StoreWriter {
        StoreWriter(path: FileManager.default.temporaryDirectory.appendingPathComponent("writer-\(UUID().uuidString).sqlite").path, loop: loop)
    }

    @Test func queuedCommitsAllCompleteInOrder() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let writer = Self.writer(on: loop)
        defer { writer.shutdown() }
        var replica = Replica()
        let futures = zip(1...300 as ClosedRange<UInt64>, Self.commits(1...300, into: &replica)).map { txid, write in
            writer.submit(write).map { txid }
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

    /// Commits gather for `commitInterval`; `drain()` (a clean shutdown's last step
    /// before the wipe) writes them at once, and so does any other write, behind them.
    @Test func drainAndEpochWritesDoNotWaitForTheInterval() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let writer = Self.writer(on: loop)
        defer { writer.shutdown() }
        var replica = Replica()
        var futures = Self.commits(1...5, into: &replica).map { writer.submit($0) }
        try writer.drain().wait()
        // Read at once: without the drain they would still be waiting for the interval.
        #expect(try writer.load().get().snapshot?.lastCommitted == replica.lastCommitted)
        #expect(futures.allSatisfy { (try? $0.wait()) != nil })

        futures = Self.commits(6...9, into: &replica).map { writer.submit($0) }
        let epoch = Epoch(term: 2, master: NodeID(3))
        try writer.submit(.epoch(epoch)).wait()
        // The epoch went behind the commits queued before it.
        let state = try writer.load().get()
        #expect(state.snapshot?.lastCommitted == replica.lastCommitted)
        #expect(state.epoch == epoch)
        #expect(futures.allSatisfy { (try? $0.wait()) != nil })
    }
}
