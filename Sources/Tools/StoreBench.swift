import Foundation
import TrackerLogic
import TrackerRuntime
#if canImport(Glibc)
import Glibc
#endif

/// `tracker bench --store`: what writing commits to SQLite costs per announce, the
/// largest share of a cluster node's CPU under load. A repository of `torrents` ×
/// `peersPerTorrent` peers is written once (untimed); then `announces` re-announces of
/// random peers go through a replica as committed transactions of `perTransaction`
/// updates, and `perWrite` transactions at a time go to SQLite in one write, as the node's
/// store writer groups them. Only the writes are timed (wall clock and this thread's
/// CPU), so the figure is the writer thread's and repeats run to run (within ~2 % here,
/// where valgrind cannot run the binary and perf gets no hardware counters).
public enum StoreBench {
    public struct Result: Sendable, CustomStringConvertible {
        public var peers: Int
        public var announces: Int
        public var transactions: Int
        public var writes: Int
        public var wallSeconds: Double
        public var cpuSeconds: Double

        public var microsecondsPerAnnounce: Double { announces > 0 ? cpuSeconds * 1e6 / Double(announces) : 0 }

        public var description: String {
            "store: \(announces) announces in \(transactions) transactions, \(writes) SQLite writes, over \(peers) peers: "
                + "\(format2(wallSeconds)) s wall, \(format2(cpuSeconds)) s CPU, \(format2(microsecondsPerAnnounce)) µs CPU per announce"
        }

        public var json: String {
            "{\"peers\":\(peers),\"announces\":\(announces),\"transactions\":\(transactions),\"writes\":\(writes),"
                + "\"wall_seconds\":\(wallSeconds),\"cpu_seconds\":\(cpuSeconds),\"us_per_announce\":\(microsecondsPerAnnounce)}"
        }
    }

    public static func run(torrents: Int, peersPerTorrent: Int, announces: Int, perTransaction: Int, perWrite: Int,
                           seed: UInt64, directory: String) throws -> Result {
        let start = WallClock.now()
        let store = MemoryBench.fill(torrents: torrents, peersPerTorrent: peersPerTorrent, completedPercent: 0, seed: seed, at: start).store
        let epoch = Epoch(term: 1, master: NodeID(1))
        let history = EpochHistory(runs: [.init(epoch: epoch, firstTxid: 1)])
        let snapshot = Snapshot(lastCommitted: TxRef(epoch: epoch, txid: 1), history: history, content: store.content(),
                                torrents: [], digest: Digest.of(store))
        var replica = Replica()
        replica.install(snapshot, store: store)
        return try SQLiteRepository.scratch(in: directory, named: "store-bench") { repository in
            try repository.perform(.snapshot(snapshot))
            return try timeWrites(to: repository, of: snapshot, replica: &replica, announces: announces,
                                  perTransaction: perTransaction, perWrite: perWrite, seed: seed)
        }
    }

    /// Writes `announces` re-announces of the snapshot's peers, timing only the writes.
    static func timeWrites(to repository: SQLiteRepository, of snapshot: Snapshot, replica: inout Replica, announces: Int,
                           perTransaction: Int, perWrite: Int, seed: UInt64) throws -> Result {
        let epoch = snapshot.lastCommitted.epoch
        // Each re-announce replaces a row somewhere in the B-tree.
        guard var workload = Reannounces(of: snapshot, seed: seed) else { throw RepositoryError("no peers to announce") }
        var txid = snapshot.lastCommitted.txid
        var wall = 0.0, cpu = 0.0, writes = 0, transactions = 0, done = 0, logged = 0
        while done < announces {
            var group: [StoreWrite] = []
            for _ in 0..<perWrite where done < announces {
                let count = min(perTransaction, announces - done)
                txid += 1
                let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: workload.next(count, at: WallClock.now()))
                guard replica.commit(tx) else { throw RepositoryError("transaction \(txid) did not commit") }
                let rows = CommitRows(tx, replica: replica)
                group.append(.commit(rows))
                // As a node does (`NodeContext.commitLocally`): an image once the log is long.
                logged += rows.peerRows
                if PeerImage.isDue(loggedRows: logged, peerCount: replica.store.peerCount, minimumRows: ClusterConfig().peerImageMinimumRows) {
                    group.append(.peerImage(PeerImage(lastCommitted: tx.ref, store: replica.store)))
                    logged = 0
                }
                done += count
                transactions += 1
            }
            let (w0, c0) = (DispatchTime.now().uptimeNanoseconds, threadCPUSeconds())
            try repository.perform(group)
            wall += Double(DispatchTime.now().uptimeNanoseconds - w0) / 1e9
            cpu += threadCPUSeconds() - c0
            writes += 1
        }
        return Result(peers: workload.peerCount, announces: done, transactions: transactions, writes: writes, wallSeconds: wall, cpuSeconds: cpu)
    }

    /// CPU time of the calling thread (user and system), in seconds.
    static func threadCPUSeconds() -> Double {
        var ts = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 else { return 0 }
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
