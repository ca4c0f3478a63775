import Foundation
import NIOCore
import TrackerLogic
import TrackerRuntime

/// `tracker bench --transfer`: the CPU side of bringing a joining node to the master's
/// state, stage by stage, in this process. A repository of `torrents` × `peersPerTorrent`
/// peers is filled as announces would fill it; then it is taken as a snapshot, cut into
/// frames and sealed as the master sends it, opened and reassembled as the joiner
/// receives it, checked and installed, written to SQLite, and loaded back as a restart
/// would. The broker's relaying is not in it (`tests/bench/transfer.py` measures the
/// whole transfer between two processes).
public enum TransferBench {
    public struct Result: Sendable, CustomStringConvertible {
        public var peers: Int
        public var swarms: Int
        public var frames: Int
        public var bytes: Int
        /// Stage name and seconds, in order.
        public var stages: [(String, Double)]

        public var description: String {
            let list = stages.map { "\($0.0) \(String(format: "%.2f", $0.1)) s" }.joined(separator: ", ")
            return "transfer: \(peers) peers in \(swarms) swarms, \(bytes / 1_048_576) MiB in \(frames) frames: \(list)"
        }

        public var json: String {
            let list = stages.map { "\"\($0.0)_seconds\":\($0.1)" }.joined(separator: ",")
            return "{\"peers\":\(peers),\"swarms\":\(swarms),\"frames\":\(frames),\"bytes\":\(bytes),\(list)}"
        }
    }

    public static func run(torrents: Int, peersPerTorrent: Int, seed: UInt64, directory: String) throws -> Result {
        let now = WallClock.now()
        let store = MemoryBench.fill(torrents: torrents, peersPerTorrent: peersPerTorrent, completedPercent: 10, seed: seed, at: now).store
        var stages: [(String, Double)] = []
        func timed<T>(_ name: String, _ body: () throws -> T) rethrows -> T {
            let start = DispatchTime.now().uptimeNanoseconds
            let value = try body()
            stages.append((name, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
            return value
        }
        let ref = TxRef(epoch: Epoch(term: 1, master: NodeID(2)), txid: 1)
        let history = EpochHistory(runs: [.init(epoch: ref.epoch, firstTxid: 1)])
        let snapshot = timed("snapshot") {
            Snapshot(lastCommitted: ref, history: history, content: store.content(), torrents: store.catalogue.sorted, digest: Digest.of(store))
        }
        var keyBytes = [UInt8](repeating: 0, count: 32)
        var rng = SeededGenerator(seed: seed)
        for i in keyBytes.indices { keyBytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
        guard let key = ClusterKey(bytes: keyBytes) else { throw RepositoryError("no cluster key") }
        var sender = ClusterChannel(keys: [key], startedAt: now)
        var receiver = ClusterChannel(keys: [key], startedAt: now)
        let envelope = ClusterEnvelope(from: NodeID(2), incarnation: 7, epoch: ref.epoch, to: NodeID(1), message: .snapshot(snapshot))
        let frames = timed("seal") { sender.sealFragments(envelope, now: now) }
        let received: Snapshot? = timed("open") {
            var out: Snapshot?
            for frame in frames {
                guard case .success(let opened?) = receiver.open(frame, ownID: NodeID(1), now: now),
                      case .snapshot(let s) = opened.message else { continue }
                out = s
            }
            return out
        }
        guard let received else { throw RepositoryError("the snapshot did not arrive whole") }
        var replica = Replica()
        let installed = timed("install") { () -> Bool in
            guard received.isWellFormed, let built = received.intactStore() else { return false }
            replica.install(received, store: built)
            return true
        }
        guard installed, replica.store.peerCount == store.peerCount else { throw RepositoryError("the snapshot did not install") }
        let loaded = try SQLiteRepository.scratch(in: directory, named: "transfer-bench") { repository in
            try timed("persist") { try repository.perform(.snapshot(received)) }
            return try timed("load") { try repository.load() }
        }
        guard loaded.snapshot?.digest == snapshot.digest else { throw RepositoryError("the repository loaded back differs") }
        return Result(peers: store.peerCount, swarms: store.swarmCount, frames: frames.count,
                      bytes: frames.reduce(0) { $0 + $1.readableBytes }, stages: stages)
    }
}
