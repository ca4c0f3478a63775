#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix
import TrackerLogic

/// `tracker bench --http`: the same announces (and scrapes) as the BEP 15 generator,
/// over `concurrency` keep-alive HTTP/1.1 connections, one request in flight on each,
/// spread over `sockets` threads.
///
/// Why plain sockets and poll(2) rather than NIO channels: as for the UDP generator, a
/// generator that costs more CPU per response than its target measures itself on two
/// cores. A connection that fails or closes is opened again; its request counts as a
/// timeout.
public enum HTTPLoadGenerator {
    public static func run(_ config: BenchConfig) async throws -> BenchResult {
        let hashes = config.infoHashes()
        return try await LoadGenerator.run(config, hashes: hashes) { part in HTTPLoadThread(config: part, hashes: hashes) }
    }
}

/// One thread's connections.
///
/// Invariants: each connection has at most one request in flight; `run` is called once,
/// on one thread, and closes every descriptor it opened.
final class HTTPLoadThread: BenchThread, @unchecked Sendable {
    private struct Connection {
        var fd: Int32 = -1
        var sentAt: UInt64 = 0
        var busy = false
        var buffer: [UInt8] = []
        /// Responses read on this connection since it opened.
        var answered = 0
    }

    private let config: BenchConfig
    private let hashes: [InfoHash]
    private var rng: SeededGenerator
    private var connections: [Connection]
    private var latencies: [UInt32] = []
    private var sent = 0, errorReplies = 0, invalid = 0, timeouts = 0, requestCounter = 0
    private let host: String

    init(config: BenchConfig, hashes: [InfoHash]) {
        self.config = config; self.hashes = hashes
        rng = SeededGenerator(seed: config.seed)
        connections = Array(repeating: Connection(), count: max(1, config.concurrency))
        latencies.reserveCapacity(1 << 20)
        host = config.target.description
    }

    private static func nowNanos() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

    func run() -> SocketRun {
        defer { for c in connections where c.fd >= 0 { close(c.fd) } }
        let timeout = UInt64(config.timeout.nanoseconds), duration = UInt64(config.duration.nanoseconds)
        let begun = Self.nowNanos()
        var stoppedAt: UInt64?
        var polls = [pollfd](repeating: pollfd(), count: connections.count)
        var chunk = [UInt8](repeating: 0, count: 65536)
        for i in connections.indices { open(i, now: begun) }
        while true {
            let now = Self.nowNanos()
            if stoppedAt == nil, now - begun >= duration { stoppedAt = now }
            if let s = stoppedAt, now - s >= timeout || !connections.contains(where: \.busy) { break }
            for i in connections.indices {
                if connections[i].busy, now - connections[i].sentAt >= timeout {
                    timeouts += 1
                    reopen(i, now: now, send: stoppedAt == nil)
                }
                polls[i] = pollfd(fd: connections[i].fd, events: Int16(POLLIN), revents: 0)
            }
            guard poll(&polls, nfds_t(polls.count), 50) > 0 else { continue }
            let readAt = Self.nowNanos()
            for i in polls.indices where polls[i].revents != 0 && connections[i].fd >= 0 {
                let n = chunk.withUnsafeMutableBytes { recv(connections[i].fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else {
                    // A server that closes after each response (opentracker does, with no
                    // `Connection: close`) closes before reading the next request: that
                    // request goes again on a new connection, as wrk's does.
                    let closedAfterAnswer = connections[i].busy && connections[i].buffer.isEmpty && connections[i].answered > 0
                    if connections[i].busy && !closedAfterAnswer { timeouts += 1 }
                    reopen(i, now: readAt, send: stoppedAt == nil)
                    continue
                }
                connections[i].buffer += chunk[0..<n]
                while let (status, body, length) = Self.response(in: connections[i].buffer) {
                    connections[i].buffer.removeFirst(length)
                    guard connections[i].busy else { invalid += 1; continue }
                    connections[i].busy = false
                    connections[i].answered += 1
                    latencies.append(UInt32(clamping: (readAt - connections[i].sentAt) / 1000))
                    if status != 200 {
                        invalid += 1
                    } else if Self.contains(body, Self.failure) {
                        errorReplies += 1
                    }
                    if stoppedAt == nil { send(i, now: readAt) }
                }
            }
        }
        let end = stoppedAt ?? Self.nowNanos()
        return SocketRun(seconds: Double(end - begun) / 1e9, sent: sent, latencies: latencies, errorReplies: errorReplies,
                         invalidReplies: invalid, timeouts: timeouts)
    }

    private func open(_ i: Int, now: UInt64) {
        let v4 = config.target.ip.family == .v4
        let fd = socket(v4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let connected = SocketAddress(config.target).withSockAddr { connect(fd, $0, socklen_t($1)) } == 0
        guard connected else {
            close(fd)
            connections[i].fd = -1
            return
        }
        connections[i].fd = fd
        connections[i].buffer = []
        connections[i].answered = 0
        send(i, now: now)
    }

    private func reopen(_ i: Int, now: UInt64, send again: Bool) {
        if connections[i].fd >= 0 { close(connections[i].fd) }
        connections[i].fd = -1
        connections[i].busy = false
        if again { open(i, now: now) }
    }

    private func send(_ i: Int, now: UInt64) {
        let request = nextRequest()
        let ok = request.withUnsafeBytes { Glibc.send(connections[i].fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == request.count
        guard ok else { return reopen(i, now: now, send: false) }
        connections[i].busy = true
        connections[i].sentAt = now
        sent += 1
    }

    /// The next request: an announce of a random peer of a random torrent, or (one in
    /// `scrapeEvery`) a scrape of five torrents.
    private func nextRequest() -> [UInt8] {
        requestCounter += 1
        var target = ""
        if config.scrapeEvery > 0, requestCounter % config.scrapeEvery == 0 {
            target = "/scrape?" + (0..<5).map { _ in "info_hash=" + Self.escaped(hashes[rng.below(hashes.count)].bytes) }
                .joined(separator: "&")
        } else {
            let torrent = rng.below(hashes.count), peer = rng.below(config.peersPerTorrent)
            let id = UInt64(torrent) &* 1_000_003 &+ UInt64(peer)
            let peerID = Array("-BN0001-".utf8) + (0..<12).map { UInt8(ascii: "0") + UInt8((id >> (UInt64($0) * 5)) & 7) }
            let left = peer % 4 == 0 ? 0 : 1 << 20
            target = "/announce?info_hash=" + Self.escaped(hashes[torrent].bytes) + "&peer_id=" + Self.escaped(peerID)
                + "&port=\(10_000 + peer)&uploaded=0&downloaded=0&left=\(left)&numwant=50&compact=1"
        }
        return Array("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n".utf8)
    }

    static let failure = Array("failure reason".utf8)

    static func escaped(_ bytes: [UInt8]) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 3)
        for b in bytes {
            out.append(UInt8(ascii: "%")); out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static let headEnd: [UInt8] = [13, 10, 13, 10]
    static let contentLength = Array("content-length:".utf8)

    /// The first whole response in `buffer`: its status, body and length in bytes.
    static func response(in buffer: [UInt8]) -> (status: Int, body: ArraySlice<UInt8>, length: Int)? {
        guard let end = find(buffer[...], headEnd) else { return nil }
        var status = 0
        for b in buffer.dropFirst(9).prefix(3) where b >= 48 && b <= 57 { status = status * 10 + Int(b - 48) }
        var length = 0
        var lineStart = 0
        for i in 0..<end where buffer[i] == 10 {
            lineStart = i + 1
            let line = buffer[lineStart..<end].prefix { $0 != 13 }
            guard line.count > contentLength.count,
                  zip(line, contentLength).allSatisfy({ ($0 | 0x20) == $1 || $0 == $1 }) else { continue }
            for b in line.dropFirst(contentLength.count) where b >= 48 && b <= 57 { length = length * 10 + Int(b - 48) }
        }
        let total = end + 4 + length
        guard buffer.count >= total else { return nil }
        return (status, buffer[(end + 4)..<total], total)
    }

    static func find(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Int? {
        guard haystack.count >= needle.count, let first = needle.first else { return nil }
        var i = haystack.startIndex
        let last = haystack.endIndex - needle.count
        while i <= last {
            if haystack[i] == first, haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    static func contains(_ haystack: ArraySlice<UInt8>, _ needle: [UInt8]) -> Bool { find(haystack, needle) != nil }
}
