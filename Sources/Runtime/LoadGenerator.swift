import NIOCore
import NIOPosix
import TrackerLogic

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
    public static func run(_ config: BenchConfig) async throws -> BenchResult {
        let hashes = config.infoHashes()
        let sockets = max(1, min(config.sockets, config.concurrency))
        let runs = try await withThrowingTaskGroup(of: SocketRun.self) { group in
            for i in 0..<sockets {
                var part = config
                // Slots split as evenly as they go; each source draws its own requests.
                part.concurrency = config.concurrency / sockets + (i < config.concurrency % sockets ? 1 : 0)
                part.seed = config.seed &+ UInt64(i)
                group.addTask { try await runSocket(part, hashes: hashes) }
            }
            var runs: [SocketRun] = []
            for try await run in group { runs.append(run) }
            return runs
        }
        var latencies = runs.flatMap(\.latencies)
        latencies.sort()
        func percentile(_ p: Double) -> Int {
            latencies.isEmpty ? 0 : Int(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))])
        }
        return BenchResult(
            target: config.target.description, seconds: runs.map(\.seconds).max() ?? 0, sent: runs.map(\.sent).reduce(0, +),
            responses: latencies.count, errorReplies: runs.map(\.errorReplies).reduce(0, +),
            invalidReplies: runs.map(\.invalidReplies).reduce(0, +), timeouts: runs.map(\.timeouts).reduce(0, +),
            p50Micros: percentile(0.5), p99Micros: percentile(0.99), concurrency: config.concurrency, torrents: hashes.count)
    }

    /// One source socket on its own event loop of the shared group.
    static func runSocket(_ config: BenchConfig, hashes: [InfoHash]) async throws -> SocketRun {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let targetAddress = config.target.socketAddress()
        let finished = loop.makePromise(of: SocketRun.self)
        let handler = try await loop.submit {
            NIOLoopBound(LoadHandler(config: config, hashes: hashes, target: targetAddress, finished: finished), eventLoop: loop)
        }.get()
        let bindHost = config.target.ip.family == .v4 ? "0.0.0.0" : "::"
        let multicast = config.target.ip.isIPv4Multicast ? config.multicastInterface : nil
        let channel = try await DatagramBootstrap(group: loop)
            .channelOption(.datagramVectorReadMessageCount, value: 32)
            .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
            // Vector reads split one buffer among the messages: give each 2 KiB.
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 32 * 2048))
            .channelInitializer { channel in
                let ready = multicast.map { channel.setMulticastInterface($0) } ?? channel.eventLoop.makeSucceededVoidFuture()
                return ready.flatMapThrowing { try channel.pipeline.syncOperations.addHandler(handler.value) }
            }
            .bind(host: bindHost, port: 0).get()
        defer { channel.close(promise: nil) }
        return try await finished.futureResult.get()
    }
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

/// Keeps `concurrency` requests in flight; each slot resends as soon as it is answered
/// or times out. Runs entirely on one event loop.
final class LoadHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private struct Slot {
        var generation: UInt32 = 0
        var sentAt: UInt64 = 0
        var busy = false
        var isScrape = false
    }

    private let config: BenchConfig
    private let hashes: [InfoHash]
    private let target: SocketAddress
    private let finished: EventLoopPromise<SocketRun>
    private var rng: SeededGenerator
    private var slots: [Slot]
    private var connectionID: UInt64?
    private var connectSentAt: UInt64 = 0
    private var started: UInt64 = 0
    private var stopping = false
    private var latencies: [UInt32] = []
    private var sent = 0, errorReplies = 0, invalid = 0, timeouts = 0, requestCounter = 0

    init(config: BenchConfig, hashes: [InfoHash], target: SocketAddress, finished: EventLoopPromise<SocketRun>) {
        self.config = config; self.hashes = hashes; self.target = target; self.finished = finished
        self.rng = SeededGenerator(seed: config.seed)
        self.slots = Array(repeating: Slot(), count: max(1, min(config.concurrency, 65535)))
        latencies.reserveCapacity(1 << 20)
    }

    private static func nowNanos() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

    private static let connectTID: UInt32 = 0xFFFF_FFFF

    func channelActive(context: ChannelHandlerContext) {
        sendConnect(context: context)
        armSweep(context: context)
    }

    private func armSweep(context: ChannelHandlerContext) {
        let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(50)) { [self] in
            if self.sweep(context: ctx.value) { self.armSweep(context: ctx.value) }
        }
    }

    private func sendConnect(context: ChannelHandlerContext) {
        connectSentAt = Self.nowNanos()
        write(.connect(ConnectRequest(transactionID: Self.connectTID)), context: context)
        context.flush()
    }

    private func write(_ request: TrackerRequest, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 100)
        BEP15Codec.encode(request, into: &buffer)
        context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: target, data: buffer)), promise: nil)
        sent += 1
    }

    private func fire(slot index: Int, context: ChannelHandlerContext) {
        guard let cid = connectionID, !stopping else { slots[index].busy = false; return }
        slots[index].generation &+= 1
        let tid = UInt32(index) << 16 | (slots[index].generation & 0xFFFF)
        slots[index].sentAt = Self.nowNanos()
        slots[index].busy = true
        requestCounter += 1
        if config.scrapeEvery > 0 && requestCounter % config.scrapeEvery == 0 {
            slots[index].isScrape = true
            let picks = (0..<5).map { _ in hashes[rng.below(hashes.count)] }
            write(.scrape(ScrapeRequest(connectionID: cid, transactionID: tid, infoHashes: picks)), context: context)
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
            key: UInt32(peer), numWant: 50, port: UInt16(10000 + peer))), context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let now = Self.nowNanos()
        guard case .success(let response) = BEP15Codec.decodeResponse(envelope.data, family: config.target.ip.family) else {
            invalid += 1
            return
        }
        let tid = response.transactionID
        if tid == Self.connectTID {
            guard connectionID == nil, case .connect(let r) = response else { return }
            connectionID = r.connectionID
            started = now
            for i in slots.indices { fire(slot: i, context: context) }
            return
        }
        let index = Int(tid >> 16)
        guard index < slots.count, slots[index].busy, slots[index].generation & 0xFFFF == tid & 0xFFFF else {
            return  // a late reply to a request already counted as timed out
        }
        switch response {
        case .announce where !slots[index].isScrape, .scrape where slots[index].isScrape:
            // Replies that land after the measured window are drained but not counted.
            if !stopping { latencies.append(UInt32(min((now - slots[index].sentAt) / 1000, UInt64(UInt32.max)))) }
        case .error:
            errorReplies += 1
        default:
            invalid += 1
        }
        fire(slot: index, context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }

    /// Returns whether to keep sweeping.
    private func sweep(context: ChannelHandlerContext) -> Bool {
        let now = Self.nowNanos()
        if connectionID == nil {
            if now - connectSentAt > UInt64(config.timeout.nanoseconds) { timeouts += 1; sendConnect(context: context) }
            return true
        }
        if !stopping && now - started >= UInt64(config.duration.nanoseconds) {
            stopping = true
            // Give in-flight requests one timeout to land, then report.
            let ctx = NIOLoopBound(context, eventLoop: context.eventLoop)
            let elapsed = now - started
            context.eventLoop.assumeIsolated().scheduleTask(in: config.timeout) { [self] in
                self.finish(context: ctx.value, elapsed: elapsed)
            }
            return false
        }
        let limit = UInt64(config.timeout.nanoseconds)
        for i in slots.indices where slots[i].busy && now - slots[i].sentAt > limit {
            timeouts += 1
            fire(slot: i, context: context)
        }
        context.flush()
        return true
    }

    private func finish(context: ChannelHandlerContext, elapsed: UInt64) {
        finished.succeed(SocketRun(seconds: Double(elapsed) / 1e9, sent: sent, latencies: latencies,
                                   errorReplies: errorReplies, invalidReplies: invalid, timeouts: timeouts))
    }
}
