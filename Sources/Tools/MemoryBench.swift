#if canImport(Glibc)
import Glibc
#endif
import TrackerLogic
import TrackerRuntime

/// `tracker bench --memory`: what the repository costs per tracked peer. It fills a
/// `SwarmStore` in this process with `torrents` swarms of `peersPerTorrent` peers (IPv4,
/// half seeders, `completedPercent` of them announcing completion) exactly as announces
/// would, and reads the resident set before and after from /proc: allocator overhead and
/// fragmentation count, as they do in a running node.
public enum MemoryBench {
    public struct Result: Sendable, CustomStringConvertible {
        public var torrents: Int
        public var peers: Int
        public var completed: Int
        public var residentBytes: Int
        public var seconds: Double

        public var bytesPerPeer: Double { peers > 0 ? Double(residentBytes) / Double(peers) : 0 }

        public var description: String {
            let perPeer = (bytesPerPeer * 10).rounded() / 10
            return "memory: \(peers) peers in \(torrents) swarms (\(completed) completions): "
                + "\(residentBytes / 1_048_576) MiB resident, \(perPeer) bytes per peer, filled in \(String(format2(seconds))) s"
        }

        public var json: String {
            "{\"torrents\":\(torrents),\"peers\":\(peers),\"completed\":\(completed),\"resident_bytes\":\(residentBytes),"
                + "\"bytes_per_peer\":\(bytesPerPeer),\"seconds\":\(seconds)}"
        }
    }

    public static func run(torrents: Int, peersPerTorrent: Int, completedPercent: Int, seed: UInt64) -> Result {
        let before = residentBytes()
        let start = WallClock.now()
        let (store, completed) = fill(torrents: torrents, peersPerTorrent: peersPerTorrent, completedPercent: completedPercent,
                                      seed: seed, at: start)
        let seconds = Double((WallClock.now() - start).value) / 1000
        let after = residentBytes()
        return withExtendedLifetime(store) {
            Result(torrents: store.swarmCount, peers: store.peerCount, completed: completed, residentBytes: max(after - before, 0),
                   seconds: seconds)
        }
    }

    /// A repository of `torrents` swarms of `peersPerTorrent` IPv4 peers (half of them
    /// seeders), announced at `at`. Peers arrive interleaved across swarms, as they do at
    /// a tracker, so that no swarm is built in one go with a perfectly sized array.
    static func fill(torrents: Int, peersPerTorrent: Int, completedPercent: Int, seed: UInt64,
                     at: Instant) -> (store: SwarmStore, completed: Int) {
        var rng = SeededGenerator(seed: seed)
        let hashes = (0..<torrents).map { _ in InfoHash(a: rng.next(), b: rng.next(), c: UInt32(truncatingIfNeeded: rng.next())) }
        var store = SwarmStore()
        var completed = 0
        for round in 0..<peersPerTorrent {
            for (t, hash) in hashes.enumerated() {
                let n = t &* peersPerTorrent &+ round
                let complete = rng.below(100) < completedPercent
                if complete { completed += 1 }
                let announce = Announce(
                    infoHash: hash, peerID: PeerID(a: 0x2D54_5230_3030_302D, b: rng.next(), c: UInt32(truncatingIfNeeded: n)),
                    endpoint: PeerEndpoint(ip: .v4(0x0A00_0000 | UInt32(truncatingIfNeeded: n)), port: UInt16(truncatingIfNeeded: 1024 &+ n)),
                    uploaded: Int64(rng.below(1 << 30)), downloaded: Int64(rng.below(1 << 30)),
                    left: rng.below(2) == 0 ? 0 : Int64(rng.below(1 << 30)),
                    event: complete ? .completed : .started, at: at)
                store.apply(.announce(announce))
            }
        }
        return (store, completed)
    }

    /// VmRSS of this process, in bytes (0 where /proc is missing).
    static func residentBytes() -> Int {
        guard let file = fopen("/proc/self/status", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("VmRSS:") {
                let kib = text.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) } ?? 0
                return kib * 1024
            }
        }
        return 0
    }
}
