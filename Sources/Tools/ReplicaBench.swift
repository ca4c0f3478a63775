import Foundation
import NIOCore
import TrackerLogic
import TrackerRuntime

/// `tracker bench --replica`: what replicating an announce costs a node's event loop
/// apart from sockets and the broker, stage by stage. A repository of `torrents` ×
/// `peersPerTorrent` peers is installed (untimed); then `announces` re-announces of random
/// peers go through the path of a PREPARE and its commit, `perTransaction` at a time: the
/// master builds the transaction and seals the PREPARE, a follower opens it, and a
/// replica commits it and builds its rows for the store writer.
///
/// Each stage is timed by this thread's CPU clock, so unlike the suite's cluster figures,
/// which move by several µs run to run on a shared 2-core machine, these repeat within a
/// few per cent: it is the A/B measure for the replication logic of each node
/// (issue 30's followers, and the master's share beside its peers' sockets).
public enum ReplicaBench {
    /// The stages in the order one transaction meets them.
    public enum Stage: String, CaseIterable, Sendable {
        /// The master: `Transaction(ref:updates:)`, its digest over the updates.
        case transaction
        /// The master: the PREPARE encoded and sealed (`ClusterChannel.sealFragments`).
        case seal
        /// A follower: the frame authenticated and decoded (`ClusterChannel.open`).
        case open
        /// Every node: the transaction applied to the replica, with its digest.
        case commit
        /// Every node: the rows for its store writer (`CommitRows`).
        case rows
    }

    public struct Result: Sendable, CustomStringConvertible {
        public var peers: Int
        public var announces: Int
        public var transactions: Int
        public var bytes: Int
        /// CPU seconds of each stage, over all transactions.
        public var cpuSeconds: [Stage: Double]

        public func microsecondsPerAnnounce(_ stage: Stage) -> Double {
            announces > 0 ? (cpuSeconds[stage] ?? 0) * 1e6 / Double(announces) : 0
        }

        /// What a follower's loop spends: open, commit, rows.
        public var followerMicroseconds: Double { [Stage.open, .commit, .rows].reduce(0) { $0 + microsecondsPerAnnounce($1) } }
        /// What the master's loop spends outside answering: transaction, seal, commit, rows.
        public var masterMicroseconds: Double { [Stage.transaction, .seal, .commit, .rows].reduce(0) { $0 + microsecondsPerAnnounce($1) } }

        public var description: String {
            let stages = Stage.allCases.map { "\($0.rawValue) \(format3(microsecondsPerAnnounce($0)))" }.joined(separator: ", ")
            return "replica: \(announces) announces in \(transactions) transactions over \(peers) peers, "
                + "\(format2(Double(bytes) / Double(max(announces, 1)))) PREPARE bytes an announce; µs CPU per announce: \(stages); "
                + "follower \(format3(followerMicroseconds)), master \(format3(masterMicroseconds)) (without answers)"
        }

        public var json: String {
            let stages = Stage.allCases.map { "\"\($0.rawValue)_us\":\(microsecondsPerAnnounce($0))" }.joined(separator: ",")
            return "{\"peers\":\(peers),\"announces\":\(announces),\"transactions\":\(transactions),\"prepare_bytes\":\(bytes),"
                + "\(stages),\"follower_us\":\(followerMicroseconds),\"master_us\":\(masterMicroseconds)}"
        }
    }

    public static func run(torrents: Int, peersPerTorrent: Int, announces: Int, perTransaction: Int, seed: UInt64) throws -> Result {
        let start = WallClock.now()
        let store = MemoryBench.fill(torrents: torrents, peersPerTorrent: peersPerTorrent, completedPercent: 0, seed: seed, at: start).store
        let epoch = Epoch(term: 1, master: NodeID(1))
        let snapshot = Snapshot(lastCommitted: TxRef(epoch: epoch, txid: 1), history: EpochHistory(runs: [.init(epoch: epoch, firstTxid: 1)]),
                                content: store.content(), torrents: [], digest: Digest.of(store))
        var replica = Replica()
        replica.install(snapshot, store: store)
        guard var workload = Reannounces(of: snapshot, seed: seed) else { throw RepositoryError("no peers to announce") }
        var keyBytes = [UInt8](repeating: 0, count: ClusterKey.length)
        var keyRNG = SeededGenerator(seed: seed &+ 2)
        for i in keyBytes.indices { keyBytes[i] = UInt8(truncatingIfNeeded: keyRNG.next()) }
        guard let key = ClusterKey(bytes: keyBytes) else { throw RepositoryError("no cluster key") }
        var master = ClusterChannel(keys: [key], startedAt: start)
        var follower = ClusterChannel(keys: [key], startedAt: start)

        var cpu: [Stage: Double] = [:]
        func timed<T>(_ stage: Stage, _ body: () throws -> T) rethrows -> T {
            let c0 = StoreBench.threadCPUSeconds()
            let value = try body()
            cpu[stage, default: 0] += StoreBench.threadCPUSeconds() - c0
            return value
        }
        var done = 0, transactions = 0, bytes = 0
        var previousDigest: UInt64 = 0
        while done < announces {
            let count = min(perTransaction, announces - done)
            let now = WallClock.now()
            let updates = workload.next(count, at: now)
            let previous = replica.lastCommitted
            let tx = timed(.transaction) { Transaction(ref: TxRef(epoch: epoch, txid: previous.txid + 1), updates: updates) }
            let envelope = ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: epoch, to: nil,
                                           message: .prepare(tx, previous: previous, previousDigest: previousDigest))
            let frames = timed(.seal) { master.sealFragments(envelope, now: now) }
            bytes += frames.reduce(0) { $0 + $1.readableBytes }
            let received: Transaction? = timed(.open) {
                var out: Transaction?
                for frame in frames {
                    guard case .success(let opened?) = follower.open(frame, ownID: NodeID(2), now: now),
                          case .prepare(let t, _, _) = opened.message else { continue }
                    out = t
                }
                return out
            }
            guard let received, received.digest == tx.digest else { throw RepositoryError("transaction \(tx.txid) did not arrive whole") }
            guard timed(.commit, { replica.commit(received) }) else { throw RepositoryError("transaction \(tx.txid) did not commit") }
            let rows = timed(.rows) { CommitRows(received, replica: replica) }
            guard rows.peerRows == count else { throw RepositoryError("transaction \(tx.txid) gave \(rows.peerRows) rows for \(count) announces") }
            previousDigest = tx.digest
            done += count
            transactions += 1
        }
        return Result(peers: workload.peerCount, announces: done, transactions: transactions, bytes: bytes, cpuSeconds: cpu)
    }
}

func format3(_ x: Double) -> String { String(format: "%.3f", x) }
