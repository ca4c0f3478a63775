#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
import NIOCore
import NIOPosix
import TrackerLogic
import TrackerRuntime

/// What `tracker bench` sends: announces for `torrents` swarms of `peersPerTorrent`
/// simulated peers each, keeping `concurrency` requests in flight, spread over `sockets`
/// source sockets (a server with several SO_REUSEPORT sockets gets all of one source's
/// datagrams on one of them: to load each, send from as many sources).
public struct BenchConfig: Sendable {
    public var target: PeerEndpoint
    public var duration: TimeAmount
    public var torrents: Int
    public var concurrency: Int
    public var sockets: Int = 1
    public var peersPerTorrent: Int = 20
    /// One request in this many is a scrape of 5 torrents; 0 disables scrapes.
    public var scrapeEvery: Int = 0
    public var timeout: TimeAmount = .seconds(1)
    public var seed: UInt64 = 1
    /// The interface address multicast requests leave from, when the target is a group.
    public var multicastInterface: IPAddress = .v4(0x7F00_0001)

    public init(target: PeerEndpoint, duration: TimeAmount, torrents: Int, concurrency: Int) {
        self.target = target; self.duration = duration; self.torrents = torrents; self.concurrency = concurrency
    }

    /// The info hashes the run uses, so a whitelisting tracker (opentracker) can be told.
    public func infoHashes() -> [InfoHash] {
        var rng = SeededGenerator(seed: seed ^ 0x7472_6163_6B65_72)
        return (0..<torrents).map { _ in InfoHash(a: rng.next(), b: rng.next(), c: UInt32(truncatingIfNeeded: rng.next())) }
    }
}

public struct BenchResult: Sendable, CustomStringConvertible {
    public var target: String
    public var seconds: Double
    public var sent: Int
    public var responses: Int
    public var errorReplies: Int
    public var invalidReplies: Int
    public var timeouts: Int
    public var p50Micros: Int
    public var p99Micros: Int
    public var concurrency: Int
    public var torrents: Int

    public var responsesPerSecond: Double { seconds > 0 ? Double(responses) / seconds : 0 }

    public var description: String {
        """
        target        \(target)
        duration      \(String(format2(seconds))) s, concurrency \(concurrency), torrents \(torrents)
        responses/s   \(Int(responsesPerSecond.rounded()))
        latency       p50 \(p50Micros) µs, p99 \(p99Micros) µs
        sent          \(sent), valid responses \(responses)
        errors        \(errorReplies) BEP 15 error replies, \(invalidReplies) invalid replies, \(timeouts) timeouts
        """
    }

    public var json: String {
        "{\"target\":\"\(target)\",\"seconds\":\(format2(seconds)),\"concurrency\":\(concurrency),\"torrents\":\(torrents),"
            + "\"responses_per_second\":\(Int(responsesPerSecond.rounded())),\"responses\":\(responses),\"sent\":\(sent),"
            + "\"p50_us\":\(p50Micros),\"p99_us\":\(p99Micros),\"error_replies\":\(errorReplies),"
            + "\"invalid_replies\":\(invalidReplies),\"timeouts\":\(timeouts)}"
    }
}

func format2(_ x: Double) -> String {
    let hundredths = Int((x * 100).rounded())
    let frac = hundredths % 100
    return "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac)"
}

public enum LoadGenerator {
    /// Most source sockets a run takes: each has a thread of its own.
    public static let maxSockets = 64

    public static func run(_ config: BenchConfig) async throws -> BenchResult {
        let hashes = config.infoHashes()
        return try await run(config, hashes: hashes) { part in try LoadSocket(config: part, hashes: hashes) }
    }

    /// Splits `config` over `config.sockets` threads (slots as evenly as they go; each
    /// thread draws its own requests from a seed of its own), runs them, and merges them.
    static func run<T: BenchThread>(_ config: BenchConfig, hashes: [InfoHash], making make: (BenchConfig) throws -> T) async throws -> BenchResult {
        let sockets = max(1, min(config.sockets, config.concurrency, maxSockets))
        var parts: [T] = []
        for i in 0..<sockets {
            var part = config
            part.concurrency = config.concurrency / sockets + (i < config.concurrency % sockets ? 1 : 0)
            part.seed = config.seed &+ UInt64(i)
            parts.append(try make(part))
        }
        let pool = NIOThreadPool(numberOfThreads: sockets)
        pool.start()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var runs: [SocketRun] = []
        for future in parts.map({ part in pool.runIfActive(eventLoop: loop) { part.run() } }) {
            runs.append(try await future.get())
        }
        try await pool.shutdownGracefully()
        return merge(runs, config: config, torrents: hashes.count)
    }

    /// The runs of a generator's threads as one result.
    static func merge(_ runs: [SocketRun], config: BenchConfig, torrents: Int) -> BenchResult {
        var latencies = runs.flatMap(\.latencies)
        latencies.sort()
        func percentile(_ p: Double) -> Int {
            latencies.isEmpty ? 0 : Int(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))])
        }
        return BenchResult(
            target: config.target.description, seconds: runs.map(\.seconds).max() ?? 0, sent: runs.map(\.sent).reduce(0, +),
            responses: latencies.count, errorReplies: runs.map(\.errorReplies).reduce(0, +),
            invalidReplies: runs.map(\.invalidReplies).reduce(0, +), timeouts: runs.map(\.timeouts).reduce(0, +),
            p50Micros: percentile(0.5), p99Micros: percentile(0.99), concurrency: config.concurrency, torrents: torrents)
    }
}

/// One thread of a generator: `run` is called once, on a thread of its own.
protocol BenchThread: Sendable {
    func run() -> SocketRun
}

/// What one source socket measured; `LoadGenerator.run` merges them.
struct SocketRun: Sendable {
    var seconds: Double
    var sent: Int
    var latencies: [UInt32]
    var errorReplies: Int
    var invalidReplies: Int
    var timeouts: Int
}

/// One source socket, run on a thread of its own: keeps `concurrency` requests in
/// flight, each slot sending its next as soon as it is answered or times out.
///
/// Replies are read with recvmmsg into `DatagramSlots` and requests leave with sendmmsg
/// through a `DatagramBatch`, as the standalone tracker does. Why not a NIO channel: its
/// envelope and `SocketAddress` per datagram (the host string formatted with sprintf)
/// made the generator cost as much CPU per response as the tracker it measured, and on
/// two cores a generator that costs more than its target measures itself.
///
/// Invariants: `run` is called once, on one thread; the socket is closed when it returns.
final class LoadSocket: BenchThread, @unchecked Sendable {
    private struct Slot {
        var generation: UInt32 = 0
        var sentAt: UInt64 = 0
        var busy = false
        var isScrape = false
    }

    /// How often in-flight requests are checked for their timeout; also the longest a
    /// read blocks, so that the run ends on time with nothing arriving.
    private static let sweepNanos: UInt64 = 50_000_000
    private static let connectTID: UInt32 = 0xFFFF_FFFF

    private let config: BenchConfig
    private let hashes: [InfoHash]
    private let fd: Int32
    private let received = DatagramSlots()
    private let requests = DatagramBatch()
    private var rng: SeededGenerator
    private var slots: [Slot]
    private var connectionID: UInt64?
    private var connectSentAt: UInt64 = 0
    private var started: UInt64 = 0
    private var latencies: [UInt32] = []
    private var sent = 0, errorReplies = 0, invalid = 0, timeouts = 0, requestCounter = 0

    init(config: BenchConfig, hashes: [InfoHash]) throws(BatchedUDPSocket.SocketError) {
        self.config = config; self.hashes = hashes
        rng = SeededGenerator(seed: config.seed)
        slots = Array(repeating: Slot(), count: max(1, min(config.concurrency, 65535)))
        latencies.reserveCapacity(1 << 20)
        let v4 = config.target.ip.family == .v4
        let fd = socket(v4 ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .init(call: "socket", code: errno) }
        var buffer: Int32 = 4 << 20
        var timeout = timeval(tv_sec: 0, tv_usec: Int(Self.sweepNanos / 1000))
        var ok = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size)) == 0
            && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0
            && SocketAddress(PeerEndpoint(ip: v4 ? .v4(0) : .v6(0, 0), port: 0)).withSockAddr { bind(fd, $0, socklen_t($1)) } == 0
        // Requests to a group leave from the interface the nodes listen on.
        if ok, config.target.ip.isIPv4Multicast, case .v4(let interface) = config.multicastInterface {
            var address = in_addr(s_addr: interface.bigEndian)
            ok = setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &address, socklen_t(MemoryLayout<in_addr>.size)) == 0
        }
        guard ok else {
            let code = errno
            close(fd)
            throw .init(call: "setsockopt or bind", code: code)
        }
        self.fd = fd
    }

    private static func nowNanos() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

    /// Connects, keeps the slots busy for `config.duration`, then gives the requests in
    /// flight one timeout to land. Gives up when no connect is answered within the
    /// duration and a timeout.
    func run() -> SocketRun {
        defer { close(fd) }
        let timeout = UInt64(config.timeout.nanoseconds), duration = UInt64(config.duration.nanoseconds)
        let begun = Self.nowNanos()
        sendConnect(now: begun)
        var nextSweep = begun + Self.sweepNanos
        var stoppedAt: UInt64?
        while true {
            let count = received.receive(from: fd)
            let now = Self.nowNanos()
            for i in 0..<count {
                guard let (bytes, _) = received.datagram(i) else { invalid += 1; continue }
                handle(bytes, now: now, firing: stoppedAt == nil)
            }
            if now >= nextSweep {
                nextSweep = now + Self.sweepNanos
                if connectionID == nil {
                    if now - begun > duration + timeout { break }
                    if now - connectSentAt > timeout { timeouts += 1; sendConnect(now: now) }
                } else if let stopped = stoppedAt {
                    if now - stopped > timeout { break }
                } else if now - started >= duration {
                    stoppedAt = now
                } else {
                    sweep(now: now, timeout: timeout)
                }
            }
            requests.send(on: fd)
        }
        let elapsed = connectionID == nil ? 0 : (stoppedAt ?? Self.nowNanos()) - started
        return SocketRun(seconds: Double(elapsed) / 1e9, sent: sent, latencies: latencies,
                         errorReplies: errorReplies, invalidReplies: invalid, timeouts: timeouts)
    }

    private func sendConnect(now: UInt64) {
        connectSentAt = now
        write(.connect(ConnectRequest(transactionID: Self.connectTID)))
        requests.send(on: fd)
    }

    /// Queues a request, sending the batch first when it is full.
    private func write(_ request: TrackerRequest) {
        if !requests.append(request, to: config.target) {
            requests.send(on: fd)
            requests.append(request, to: config.target)
        }
        sent += 1
    }

    /// A reply: counted when it answers a slot's request in flight; that slot then sends
    /// its next unless the run is over. Replies landing after the measured window are
    /// read but not counted.
    private func handle(_ datagram: ByteBuffer, now: UInt64, firing: Bool) {
        guard case .success(let response) = BEP15Codec.decodeResponse(datagram, family: config.target.ip.family) else {
            invalid += 1
            return
        }
        let tid = response.transactionID
        if tid == Self.connectTID {
            guard connectionID == nil, case .connect(let r) = response else { return }
            connectionID = r.connectionID
            started = now
            for i in slots.indices { fire(slot: i, now: now) }
            return
        }
        let index = Int(tid >> 16)
        guard index < slots.count, slots[index].busy, slots[index].generation & 0xFFFF == tid & 0xFFFF else {
            return  // a late reply to a request already counted as timed out
        }
        switch response {
        case .announce where !slots[index].isScrape, .scrape where slots[index].isScrape:
            if firing { latencies.append(UInt32(min((now - slots[index].sentAt) / 1000, UInt64(UInt32.max)))) }
        case .error:
            errorReplies += 1
        default:
            invalid += 1
        }
        slots[index].busy = false
        if firing { fire(slot: index, now: now) }
    }

    /// Requests in flight longer than a timeout are counted and sent again.
    private func sweep(now: UInt64, timeout: UInt64) {
        for i in slots.indices where slots[i].busy && now - slots[i].sentAt > timeout {
            timeouts += 1
            fire(slot: i, now: now)
        }
    }

    private func fire(slot index: Int, now: UInt64) {
        guard let cid = connectionID else { return }
        slots[index].generation &+= 1
        let tid = UInt32(index) << 16 | (slots[index].generation & 0xFFFF)
        slots[index].sentAt = now
        slots[index].busy = true
        requestCounter += 1
        if config.scrapeEvery > 0 && requestCounter % config.scrapeEvery == 0 {
            slots[index].isScrape = true
            let picks = (0..<5).map { _ in hashes[rng.below(hashes.count)] }
            write(.scrape(ScrapeRequest(connectionID: cid, transactionID: tid, infoHashes: picks)))
            return
        }
        slots[index].isScrape = false
        let torrent = rng.below(hashes.count)
        let peer = rng.below(config.peersPerTorrent)
        let peerID = PeerID(a: 0x2D42_4E30_3030_312D, b: UInt64(torrent), c: UInt32(peer))
        let left: Int64 = rng.below(4) == 0 ? 0 : Int64(rng.below(1 << 20) + 1)
        write(.announce(AnnounceRequest(
            connectionID: cid, transactionID: tid, infoHash: hashes[torrent], peerID: peerID,
            downloaded: 0, left: left, uploaded: 0, event: rng.below(10) == 0 ? .started : .none,
            key: UInt32(peer), numWant: 50, port: UInt16(10000 + peer))))
    }
}
