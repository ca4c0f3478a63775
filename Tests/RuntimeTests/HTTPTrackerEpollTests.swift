#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing
import TrackerRuntime
import TrackerLogic

/// The plain HTTP tracker's own listener (`HTTPTrackerEpoll`) over real sockets on
/// loopback: a connection per request, keep-alive, pipelining, answers decided on another
/// thread, the connection cap, the idle deadline, a flood, a client that reads no answer,
/// and stopping with connections open.
@Suite("HTTP tracker epoll listener", .serialized)
struct HTTPTrackerEpollTests {
    /// Answers every request with a `failure reason` naming its source's port, at once or
    /// (`later`) from another thread after `delay`.
    final class Backend: HTTPTrackerBackend {
        let later: Bool
        let delay: TimeInterval
        let decided = NIOLockedValueBox(0)

        init(later: Bool = false, delay: TimeInterval = 0.05) { self.later = later; self.delay = delay }

        func answerAtOnce(_ request: HTTPTrackerRequest, from source: PeerEndpoint) -> TrackerResponse? {
            later ? nil : answer(request)
        }

        func decide(_ request: HTTPTrackerRequest, from source: PeerEndpoint, answer: HTTPTrackerAnswer) {
            let response = self.answer(request)
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { answer.succeed(response) }
        }

        func answer(_ request: HTTPTrackerRequest) -> TrackerResponse {
            let n = decided.withLockedValue { $0 += 1; return $0 }
            guard case .announce(let a) = request else { return .error(ErrorResponse(transactionID: 0, message: "scrape")) }
            return .error(ErrorResponse(transactionID: 0, message: "answer \(n) port \(a.port)"))
        }
    }

    func listener(_ backend: Backend, limits: HTTPTrackerLimits = HTTPTrackerLimits(), threads: Int = 2) async throws -> HTTPTrackerListener {
        let settings = HTTPTrackerSettings(binds: [try #require(PeerEndpoint("127.0.0.1:0"))], limits: limits)
        return try await HTTPTrackerListener.bind(settings, backend: backend, threads: threads, logger: Logger(label: "test"))
    }

    static let hash = String(repeating: "%41", count: 20)

    func request(port: Int, close: Bool = false) -> String {
        "GET /announce?info_hash=\(Self.hash)&peer_id=-XX0001-000000000001&port=\(port)&uploaded=0&downloaded=0&left=1 HTTP/1.1\r\n"
            + "Host: t\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n"
    }

    /// A blocking client socket connected to `endpoint`, whose reads give up after 3 s.
    func connect(_ endpoint: PeerEndpoint) throws -> CInt {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var tv = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        try #require(SocketAddress(endpoint).withSockAddr { Glibc.connect(fd, $0, socklen_t($1)) } == 0)
        return fd
    }

    func send(_ fd: CInt, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
    }

    /// What the socket reads until the peer closes it (or the read times out), and whether
    /// it closed.
    func readToEnd(_ fd: CInt) -> (text: String, closed: Bool) {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { out += buffer[..<n]; continue }
            // A reset closes too: the listener closed with bytes of ours unread.
            return (String(decoding: out, as: UTF8.self), n == 0 || errno == ECONNRESET)
        }
    }

    /// Reads until `count` answers (by their status lines) arrived.
    func readAnswers(_ fd: CInt, count: Int) -> String {
        var out = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while out.components(separatedBy: "HTTP/1.1 200").count - 1 < count {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            out += String(decoding: buffer[..<n], as: UTF8.self)
        }
        return out
    }

    @Test(arguments: [false, true])
    func aConnectionPerRequestIsAnsweredAndClosed(later: Bool) async throws {
        let backend = Backend(later: later)
        let l = try await listener(backend)
        for port in 1...20 {
            let fd = try connect(l.bound[0])
            send(fd, request(port: port, close: true))
            let (text, closed) = readToEnd(fd)
            close(fd)
            #expect(text.hasPrefix("HTTP/1.1 200") && text.contains("port \(port)") && closed, "\(text)")
        }
        #expect(l.counts.failures == 20)
        await l.stop()
    }

    @Test(arguments: [false, true])
    func keepAliveAndPipelinedRequestsAreAnsweredInOrder(later: Bool) async throws {
        let l = try await listener(Backend(later: later))
        let fd = try connect(l.bound[0])
        send(fd, request(port: 1))
        #expect(readAnswers(fd, count: 1).contains("port 1"))
        // Three at once, the last cut in two writes: answered one after the other, in order.
        let three = request(port: 2) + request(port: 3) + request(port: 4)
        send(fd, String(three.dropLast(10)))
        try await Task.sleep(for: .milliseconds(20))
        send(fd, String(three.suffix(10)))
        let answers = readAnswers(fd, count: 3)
        let order = ["port 2", "port 3", "port 4"].compactMap { answers.range(of: $0)?.lowerBound }
        #expect(order.count == 3 && order == order.sorted(), "\(answers)")
        close(fd)
        await l.stop()
    }

    @Test func beyondTheCapAConnectionIsClosedAtOnce() async throws {
        var limits = HTTPTrackerLimits()
        limits.maxConnections = 2
        let l = try await listener(Backend(), limits: limits, threads: 1)
        let held = [try connect(l.bound[0]), try connect(l.bound[0])]
        try await Task.sleep(for: .milliseconds(100))
        let third = try connect(l.bound[0])
        let (text, closed) = readToEnd(third)
        #expect(text.isEmpty && closed, "closed without an answer")
        for fd in held + [third] { close(fd) }
        // Places are given back: a new connection is served.
        try await Task.sleep(for: .milliseconds(100))
        let fd = try connect(l.bound[0])
        send(fd, request(port: 9, close: true))
        #expect(readToEnd(fd).text.contains("port 9"))
        close(fd)
        await l.stop()
    }

    @Test func aHeadNotCompleteByTheIdleDeadlineIsClosed() async throws {
        var limits = HTTPTrackerLimits()
        limits.idleTimeout = .milliseconds(300)
        let l = try await listener(Backend(), limits: limits)
        let fd = try connect(l.bound[0])
        send(fd, "GET /announce?info")
        let started = Date()
        let (text, closed) = readToEnd(fd)
        let after = Date().timeIntervalSince(started)
        #expect(text.isEmpty && closed && after >= 0.25 && after < 2.5, "closed after \(after) s")
        #expect(l.counts.idleClosed == 1)
        close(fd)
        await l.stop()
    }

    @Test func aFloodAheadOfItsAnswerIsClosed() async throws {
        let l = try await listener(Backend(later: true, delay: 0.5))
        let fd = try connect(l.bound[0])
        let flood = String(repeating: request(port: 1), count: HTTPTrackerLimits().maxBufferedBytes / request(port: 1).utf8.count + 2)
        send(fd, flood)
        let (_, closed) = readToEnd(fd)
        #expect(closed)
        #expect(l.counts.floodsClosed == 1)
        close(fd)
        await l.stop()
    }

    /// A client that pipelines requests and reads no answer: once the socket takes no more
    /// of the answers, its requests are read no more (what waits unsent stays bounded),
    /// and the connection is closed after the idle timeout.
    @Test func aClientThatReadsNoAnswerIsReadNoMore() async throws {
        var limits = HTTPTrackerLimits()
        limits.idleTimeout = .seconds(1)
        let backend = Backend()
        let l = try await listener(backend, limits: limits, threads: 1)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var small: CInt = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<CInt>.size))
        try #require(SocketAddress(l.bound[0]).withSockAddr { Glibc.connect(fd, $0, socklen_t($1)) } == 0)
        let batch = Array(String(repeating: request(port: 1), count: 64).utf8)
        // Sends until the listener has stopped deciding for 300 ms (or 10 s pass).
        let started = Date()
        var lastDecided = -1, stillSince = Date()
        var offset = 0
        while Date().timeIntervalSince(started) < 10 {
            let n = batch[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if n > 0 { offset = (offset + n) % batch.count } else { try await Task.sleep(for: .milliseconds(20)) }
            let decided = backend.decided.withLockedValue { $0 }
            if decided != lastDecided { lastDecided = decided; stillSince = Date() }
            if Date().timeIntervalSince(stillSince) > 0.3 { break }
        }
        #expect(Date().timeIntervalSince(stillSince) > 0.3, "requests were read all along: \(lastDecided) decided")
        #expect(lastDecided > 0)
        let n = batch[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        let error = errno
        #expect(n < 0 && (error == EAGAIN || error == EWOULDBLOCK), "the listener still reads: a send took \(n) bytes (\(error)), \(l.counts)")
        try await Task.sleep(for: .milliseconds(1500))
        #expect(l.counts.idleClosed == 1, "closed after the idle timeout with its answers unread")
        close(fd)
        await l.stop()
    }

    @Test func aBadHeadIsAnsweredAndClosed() async throws {
        let l = try await listener(Backend())
        let fd = try connect(l.bound[0])
        send(fd, "POST /announce HTTP/1.1\r\nHost: t\r\n\r\n" + request(port: 1))
        let (text, closed) = readToEnd(fd)
        #expect(text.hasPrefix("HTTP/1.1 405") && !text.contains("port 1") && closed, "\(text)")
        close(fd)
        await l.stop()
    }

    @Test func stoppingClosesTheOpenConnections() async throws {
        let l = try await listener(Backend(later: true, delay: 5))
        let fd = try connect(l.bound[0])
        send(fd, request(port: 1))
        try await Task.sleep(for: .milliseconds(100))
        await l.stop()
        let (text, closed) = readToEnd(fd)
        #expect(text.isEmpty && closed, "the waiting request's connection is closed by the stop")
        close(fd)
        // The port is free again.
        let again = try await listener(Backend())
        await again.stop()
    }
}
