#if canImport(Glibc)
import Glibc
#endif
import CEventPoll
import NIOConcurrencyHelpers
import NIOCore
import TrackerLogic

/// The plain HTTP tracker's sockets and threads: each thread waits on its own epoll set
/// for the listening sockets (shared, `EPOLLEXCLUSIVE`: one thread woken per connection)
/// and its connections, each an `HTTPTrackerSession`.
///
/// Why not NIO here: most clients open a connection per announce, and a NIO channel's
/// setting up and closing costs several times the announce it carries (measured in
/// docs/benchmarks.md). A connection here is a descriptor and a session: accepted, read
/// at once (the request usually came with the handshake), answered and closed without
/// ever entering the epoll set when its request was whole. HTTPS stays on NIO, whose TLS
/// handshake dwarfs the difference.
///
/// Invariants: a connection belongs to the one thread that accepted it, which alone
/// reads, writes and closes it; answers decided elsewhere (a cluster node's loop) reach
/// it through that thread's inbox and its eventfd, and find the connection by descriptor
/// and serial number (a descriptor closed and reused meanwhile has another serial, and
/// the answer is dropped). Each connection holds a place of `connections` while open.
/// While an answer waits unsent, nothing more of its connection is read.
final class HTTPTrackerEpoll: Sendable {
    private let workers: [EpollWorker]
    private let listeners: [CInt]
    let bound: [PeerEndpoint]

    private init(workers: [EpollWorker], listeners: [CInt], bound: [PeerEndpoint]) {
        self.workers = workers; self.listeners = listeners; self.bound = bound
    }

    /// Binds every address and starts `threads` threads. Throws a configuration error
    /// that names what failed.
    static func start(_ settings: HTTPTrackerSettings, backend: HTTPTrackerBackend, threads: Int, counters: HTTPTrackerCounters) throws
        -> HTTPTrackerEpoll {
        var listeners: [CInt] = []
        var bound: [PeerEndpoint] = []
        do {
            for endpoint in settings.binds {
                let v6Only = endpoint.ip.family == .v6 && settings.binds.contains { $0.ip.family == .v4 }
                let fd = try listeningSocket(endpoint, v6Only: v6Only)
                listeners.append(fd)
                bound.append(localEndpoint(fd) ?? endpoint)
            }
        } catch {
            for fd in listeners { close(fd) }
            throw error
        }
        let connections = Occupancy(limit: settings.limits.maxConnections)
        var workers: [EpollWorker] = []
        do {
            for _ in 0..<max(1, threads) {
                workers.append(try EpollWorker(listeners: listeners, backend: backend, settings: settings, counters: counters,
                                               connections: connections))
            }
        } catch {
            for w in workers { w.stop() }
            for fd in listeners { close(fd) }
            throw error
        }
        for w in workers { w.start() }
        return HTTPTrackerEpoll(workers: workers, listeners: listeners, bound: bound)
    }

    /// Stops the threads (each closes its connections) and closes the listening sockets.
    func stop() {
        for w in workers { w.stop() }
        for fd in listeners { close(fd) }
    }

    /// A non-blocking listening socket on `endpoint`: SO_REUSEADDR, IP_FREEBIND (a floating
    /// address may arrive later), TCP_NODELAY (accepted sockets inherit it), a backlog of 1024.
    static func listeningSocket(_ endpoint: PeerEndpoint, v6Only: Bool) throws -> CInt {
        let v4 = endpoint.ip.family == .v4
        let fd = cevent_stream_socket(v4 ? AF_INET : AF_INET6)
        guard fd >= 0 else { throw ConfigurationError("--http-tracker: cannot make a socket for \(endpoint): \(String(cString: strerror(errno)))") }
        var one: CInt = 1, v6OnlyValue: CInt = v6Only ? 1 : 0
        let size = socklen_t(MemoryLayout<CInt>.size)
        var failed: String?
        if setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) != 0 {
            failed = "SO_REUSEADDR"
        } else if (v4 ? setsockopt(fd, CInt(IPPROTO_IP), PeerChannelBinder.ipFreeBind, &one, size)
                      : setsockopt(fd, CInt(IPPROTO_IPV6), PeerChannelBinder.ipv6FreeBind, &one, size)) != 0 {
            failed = "IP_FREEBIND"
        } else if !v4, setsockopt(fd, CInt(IPPROTO_IPV6), IPV6_V6ONLY, &v6OnlyValue, size) != 0 {
            failed = "IPV6_V6ONLY"
        } else if setsockopt(fd, CInt(IPPROTO_TCP), TCP_NODELAY, &one, size) != 0 {
            failed = "TCP_NODELAY"
        } else if SocketAddress(endpoint).withSockAddr({ Glibc.bind(fd, $0, socklen_t($1)) }) != 0 {
            failed = "bind"
        } else if listen(fd, 1024) != 0 {
            failed = "listen"
        }
        guard let failed else { return fd }
        let reason = String(cString: strerror(errno))
        close(fd)
        throw ConfigurationError("--http-tracker: cannot listen on \(endpoint) (\(failed)): \(reason)")
    }

    static func localEndpoint(_ fd: CInt) -> PeerEndpoint? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafePointer(to: &storage) { PeerEndpoint($0, length: length) }
    }
}

/// One thread of the epoll listener: its epoll set, its connections and its inbox.
private final class EpollWorker: @unchecked Sendable {
    /// A connection of this thread, by descriptor.
    final class Connection {
        let serial: UInt64
        var session: HTTPTrackerSession
        /// Bytes the socket did not take yet (it is then in the epoll set for writing).
        var unsent: [UInt8] = []
        var inEpoll = false
        /// Close once `unsent` is written.
        var closeAfterSending = false
        /// Since when `unsent` waits: a client that reads nothing is closed after the idle
        /// timeout, as one that sends nothing is.
        var unsentSince: NIODeadline?

        init(serial: UInt64, session: HTTPTrackerSession) { self.serial = serial; self.session = session }
    }

    let listeners: [CInt]
    let backend: HTTPTrackerBackend
    let settings: HTTPTrackerSettings
    let counters: HTTPTrackerCounters
    let connections: Occupancy
    let epoll: CInt
    let wake: CInt
    /// Answers decided on other threads, for connections of this one.
    private let inbox = NIOLockedValueBox<[(fd: CInt, serial: UInt64, pending: HTTPTrackerSession.Pending, response: TrackerResponse)]>([])
    /// Whether the thread is to end, and whether `wake` is closed: an answer that comes
    /// after the stop (a cluster node deciding late) must not write to a descriptor number
    /// something else may hold by then.
    private enum WakeState { case running, stopping, closed }
    private let wakeState = NIOLockedValueBox(WakeState.running)
    // The rest is touched by the worker's thread only.
    private var open: [CInt: Connection] = [:]
    private var nextSerial: UInt64 = 0
    private var readBuffer = [UInt8](repeating: 0, count: 16384)
    private var thread: pthread_t?
    private var lastSweep = NIODeadline.now()
    /// Out of descriptors (or kernel memory), accepting stops for a while: the listening
    /// sockets leave the epoll set, which would otherwise report them ready at once, again
    /// and again, while nothing can be accepted.
    private var acceptingAgainAt: NIODeadline?
    static let acceptPause = TimeAmount.milliseconds(100)
    private let sweepPeriod: TimeAmount

    init(listeners: [CInt], backend: HTTPTrackerBackend, settings: HTTPTrackerSettings, counters: HTTPTrackerCounters,
         connections: Occupancy) throws {
        self.listeners = listeners; self.backend = backend; self.settings = settings; self.counters = counters
        self.connections = connections
        sweepPeriod = IdleConnections.period(for: settings.limits.idleTimeout)
        epoll = epoll_create1(CInt(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw ConfigurationError("--http-tracker: epoll_create1: \(String(cString: strerror(errno)))") }
        wake = eventfd(0, CInt(EFD_NONBLOCK) | CInt(EFD_CLOEXEC))
        guard wake >= 0 else {
            close(epoll)
            throw ConfigurationError("--http-tracker: eventfd: \(String(cString: strerror(errno)))")
        }
        var failed = !add(wake, events: EPOLLIN.rawValue)
        for fd in listeners where !failed { failed = !add(fd, events: EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue) }
        if failed {
            let reason = String(cString: strerror(errno))
            close(wake); close(epoll)
            throw ConfigurationError("--http-tracker: epoll_ctl: \(reason)")
        }
    }

    func start() {
        let box = Unmanaged.passRetained(self)
        var t = pthread_t()
        let rc = pthread_create(&t, nil, { arg in
            guard let arg else { return nil }
            let worker = Unmanaged<EpollWorker>.fromOpaque(arg).takeRetainedValue()
            worker.run()
            return nil
        }, box.toOpaque())
        if rc == 0 { thread = t } else { box.release() }
    }

    /// Asks the thread to end, waits for it, and frees what it held.
    func stop() {
        wakeState.withLockedValue { $0 = .stopping }
        wakeUp()
        if let thread { pthread_join(thread, nil) }
        thread = nil
        wakeState.withLockedValue { state in
            state = .closed
            close(wake)
        }
        close(epoll)
    }

    private func wakeUp() {
        wakeState.withLockedValue { state in
            guard state != .closed else { return }
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }
    }

    private func add(_ fd: CInt, events: UInt32) -> Bool {
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0
    }

    private func modify(_ fd: CInt, events: UInt32) {
        var event = epoll_event(events: events, data: epoll_data_t(fd: fd))
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event)
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        let timeout = CInt(max(1, min(sweepPeriod, Self.acceptPause).nanoseconds / 1_000_000))
        while wakeState.withLockedValue({ $0 == .running }) {
            let n = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, CInt($0.count), timeout) }
            if n < 0 && errno != EINTR { break }
            for i in 0..<max(0, Int(n)) {
                let fd = events[i].data.fd, flags = events[i].events
                if fd == wake {
                    var value: UInt64 = 0
                    _ = read(wake, &value, 8)
                    deliverInbox()
                } else if listeners.contains(fd) {
                    acceptAll(fd)
                } else if let c = open[fd] {
                    if flags & EPOLLOUT.rawValue != 0 { flush(fd, c) }
                    let ending = flags & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0
                    if ending || flags & EPOLLIN.rawValue != 0, open[fd] === c { readAll(fd, c, toTheEnd: ending) }
                }
            }
            let now = NIODeadline.now()
            if let at = acceptingAgainAt, now >= at {
                acceptingAgainAt = nil
                for fd in listeners { _ = add(fd, events: EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue) }
            }
            if now - lastSweep >= sweepPeriod {
                lastSweep = now
                sweep(now)
            }
        }
        for (fd, c) in open { end(fd, c) }
    }

    /// Accepts what waits, at most a batch per wakeup (other threads take the rest).
    private func acceptAll(_ listener: CInt) {
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    cevent_accept(listener, $0, &length)
                }
            }
            guard fd >= 0 else {
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM, acceptingAgainAt == nil {
                    acceptingAgainAt = .now() + Self.acceptPause
                    for l in listeners { _ = epoll_ctl(epoll, EPOLL_CTL_DEL, l, nil) }
                }
                return
            }
            guard connections.enter() else { close(fd); continue }
            guard let remote = withUnsafePointer(to: &storage, { PeerEndpoint($0, length: length) }) else {
                connections.leave()
                close(fd)
                continue
            }
            nextSerial &+= 1
            let c = Connection(serial: nextSerial, session: HTTPTrackerSession(remote: remote, proxies: settings.trustedProxies,
                                                                               limits: settings.limits, counters: counters, now: .now()))
            open[fd] = c
            // The request usually came with the handshake: read it now, and enter the
            // epoll set only if the connection is still open after that.
            readAll(fd, c)
            if open[fd] === c, !c.inEpoll {
                if add(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue) { c.inEpoll = true } else { end(fd, c) }
            }
        }
    }

    /// Reads what the socket holds, while the answers written so far left: a client that
    /// reads none of them has no more of its requests read (and is closed after the idle
    /// timeout), so what waits unsent is bounded by the requests already buffered. Once the
    /// peer closed its side (`toTheEnd`), the rest is read through to the end.
    private func readAll(_ fd: CInt, _ c: Connection, toTheEnd: Bool = false) {
        while open[fd] === c, toTheEnd || c.unsent.isEmpty {
            let n = readBuffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                var effects: [HTTPTrackerSession.Effect] = []
                readBuffer.withUnsafeBufferPointer { c.session.read(UnsafeBufferPointer(rebasing: $0[..<n]), into: &effects) }
                perform(effects, fd, c)
                if n < readBuffer.count { return }
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                // The peer closed, or the connection failed: nothing more to answer.
                return end(fd, c)
            }
        }
    }

    private func perform(_ effects: [HTTPTrackerSession.Effect], _ fd: CInt, _ c: Connection) {
        var effects = effects, i = 0
        while i < effects.count, open[fd] === c {
            switch effects[i] {
            case .write(let message):
                send(message, fd, c)
            case .close:
                if c.unsent.isEmpty { end(fd, c) } else { c.closeAfterSending = true }
            case .decide(let request, let source, let pending):
                if let response = backend.answerAtOnce(request, from: source) {
                    c.session.answered(pending, response, now: .now(), into: &effects)
                } else {
                    let serial = c.serial
                    backend.decide(request, from: source, answer: HTTPTrackerAnswer { [self] response in
                        inbox.withLockedValue { $0.append((fd, serial, pending, response)) }
                        wakeUp()
                    })
                }
            }
            i += 1
        }
    }

    private func send(_ message: [UInt8], _ fd: CInt, _ c: Connection) {
        guard c.unsent.isEmpty else { c.unsent += message; return }
        let n = message.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
        if n == message.count { return }
        if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK { return end(fd, c) }
        c.unsent = Array(message[max(0, n)...])
        c.unsentSince = .now()
        watchWrites(fd, c)
    }

    /// Writes what the socket did not take before; closes after it if asked.
    private func flush(_ fd: CInt, _ c: Connection) {
        let n = c.unsent.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
        if n < 0 {
            if errno != EAGAIN && errno != EWOULDBLOCK { end(fd, c) }
            return
        }
        c.unsent.removeFirst(n)
        guard c.unsent.isEmpty else { return }
        c.unsentSince = nil
        if c.closeAfterSending { return end(fd, c) }
        modify(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue)
    }

    /// Waits for the socket to take more, reading nothing meanwhile (see `readAll`).
    private func watchWrites(_ fd: CInt, _ c: Connection) {
        let events = EPOLLRDHUP.rawValue | EPOLLOUT.rawValue
        if c.inEpoll { modify(fd, events: events) } else if add(fd, events: events) { c.inEpoll = true } else { end(fd, c) }
    }

    private func deliverInbox() {
        let answers = inbox.withLockedValue { a -> [(fd: CInt, serial: UInt64, pending: HTTPTrackerSession.Pending, response: TrackerResponse)] in
            defer { a.removeAll() }
            return a
        }
        for a in answers {
            guard let c = open[a.fd], c.serial == a.serial else { continue }
            var effects: [HTTPTrackerSession.Effect] = []
            c.session.answered(a.pending, a.response, now: .now(), into: &effects)
            perform(effects, a.fd, c)
        }
    }

    /// Closes the connections whose idle deadline passed, or that left an answer unread
    /// for as long.
    private func sweep(_ now: NIODeadline) {
        for (fd, c) in open {
            if let since = c.unsentSince, now - since >= settings.limits.idleTimeout {
                counters.count(\.idleClosed)
                end(fd, c)
                continue
            }
            guard (c.session.idleDeadline ?? .distantFuture) <= now else { continue }
            var effects: [HTTPTrackerSession.Effect] = []
            c.session.idledOut(into: &effects)
            perform(effects, fd, c)
        }
    }

    /// The connection is gone: its descriptor closed (which also takes it out of the
    /// epoll set), its place given back.
    private func end(_ fd: CInt, _ c: Connection) {
        guard open[fd] === c else { return }
        open[fd] = nil
        c.session.ended()
        close(fd)
        connections.leave()
    }
}
