import NIOCore

/// What the client tells its owner. Called on the client's event loop.
public enum StompEvent {
    /// CONNECTED arrived and every subscription is confirmed by a RECEIPT.
    case ready
    /// The connection is gone (broker died, ERROR, missed heart-beats). The client
    /// reconnects by itself; what was in flight is lost.
    case lost(reason: String)
    case message(destination: String, headers: [(name: String, value: String)], body: ByteBuffer)
}

public struct StompStats: Sendable, Equatable {
    public var sent = 0
    public var received = 0
    /// The bodies of the frames counted in `sent` and `received`, in bytes: what the
    /// cluster's messages cost the broker, apart from STOMP's headers.
    public var bodyBytesSent = 0
    public var bodyBytesReceived = 0
    public var droppedWhileDown = 0
    public var connectionsLost = 0
    public var errorFrames = 0
    public var badFrames = 0
    public var unexpectedFrames = 0
}

/// The STOMP 1.2 session of one node with its broker, as a state machine: the host feeds
/// it what happened (a connection up or closed, a frame decoded, a timer due) and does
/// what it answers. It keeps one connection alive: reconnects with backoff down the
/// failover list, re-subscribes, and treats the broker's heart-beats as its liveness.
///
/// Why a value with no I/O: every byte of a session comes from a broker we did not write,
/// and a whole session — CONNECTED, receipts, heart-beat negotiation, ERROR, garbage —
/// can then be driven by a fuzzer or a test without a socket (`Fuzz/StompFuzz.swift`).
/// Connections are named by the attempt that opened them, so a late event of an old
/// connection can never act on the current one.
///
/// Invariants: at most one connection is live (`phase` names it); every timer the host
/// must keep is `nextWake`; nothing the broker sends can trap (heart-beats are clamped by
/// `StompHeartbeat`, receipts and destinations are only compared).
public struct StompSession {
    /// A connection, by the attempt that opened it.
    public typealias Attempt = Int

    public enum Phase: Equatable {
        case idle(retryAt: NIODeadline?)
        case connecting(Attempt)
        /// TCP is up, CONNECT sent, waiting for CONNECTED until `deadline`.
        case handshaking(Attempt, deadline: NIODeadline)
        /// CONNECTED; waiting for the receipts of the subscriptions.
        case subscribing(Attempt, pending: Set<String>)
        case ready(Attempt)
        /// DISCONNECT sent, waiting for its receipt.
        case closing(Attempt?)
        case closed
    }

    public enum LogLevel: Equatable { case debug, info, warning, error }

    public enum Action {
        /// Open a TCP connection to `broker`, named `attempt`.
        case connect(BrokerAddress, Attempt)
        case write(StompOutbound, on: Attempt)
        case close(Attempt)
        case deliver(StompEvent)
        /// The DISCONNECT receipt arrived (or no connection was open): closing is done.
        case disconnected
        case log(LogLevel, String, [(String, String)])
    }

    public let settings: StompSettings
    public private(set) var phase = Phase.idle(retryAt: nil)
    /// Destination → subscription id. Kept across reconnects.
    public private(set) var subscriptions: [String: String] = [:]
    /// Subscriptions that receive this connection's own messages too.
    var ownTooDestinations: Set<String> = []
    var nextSubscription = 0
    var attempts = 0
    var backoff: TimeAmount
    /// Which broker of the list the next attempt goes to, and how many have failed in a
    /// row since the last success: the next broker is tried at once, a whole round of
    /// failures waits the backoff.
    var brokerIndex = 0
    var failuresInRound = 0
    /// The broker of the current (or last) connection.
    public private(set) var connectedTo: BrokerAddress?
    var heartbeat: StompHeartbeat?
    var lastReceived = NIODeadline.uptimeNanoseconds(0)
    var lastSent = NIODeadline.uptimeNanoseconds(0)
    /// When `tick` last looked at the heart-beats: it looks every `StompHeartbeat.tick`,
    /// a period that does not move with every frame (the host's timer stays put).
    var lastCheck = NIODeadline.uptimeNanoseconds(0)
    public private(set) var stats = StompStats()
    /// Why the session is not connected (nil once it is ready): the last refused
    /// connection, handshake failure, ERROR frame or silence.
    public private(set) var problem: String?
    /// The connection lost last (its late error may explain it better).
    var lastLost: Attempt?
    var out: [Action] = []

    /// A broker that accepts TCP but never answers is as good as down.
    public static let handshakeTimeout = TimeAmount.seconds(5)

    public init(settings: StompSettings) {
        self.settings = settings
        self.backoff = settings.reconnectMin
    }

    public var isReady: Bool { if case .ready = phase { return true } else { return false } }

    /// The connection the session uses now, if any.
    public var current: Attempt? {
        switch phase {
        case .connecting(let a), .handshaking(let a, _), .subscribing(let a, _), .ready(let a): return a
        case .closing(let a): return a
        case .idle, .closed: return nil
        }
    }

    /// When the host must call `tick` next (nil: only events move the session).
    public var nextWake: NIODeadline? {
        switch phase {
        case .idle(let retryAt): return retryAt
        case .handshaking(_, let deadline): return deadline
        case .subscribing, .ready: return heartbeat.map { lastCheck + $0.tick }
        case .connecting, .closing, .closed: return nil
        }
    }

    // MARK: the owner's calls

    public mutating func start(now: NIODeadline) -> [Action] {
        guard case .idle(nil) = phase else { return [] }
        connect()
        return take()
    }

    /// Adds a subscription (kept across reconnects); confirmed by a receipt. `ownToo`:
    /// the broker hands this connection back what it sent there itself (not so elsewhere,
    /// `sendSubscribe`).
    public mutating func subscribe(_ destination: String, ownToo: Bool = false) -> [Action] {
        guard subscriptions[destination] == nil else { return [] }
        nextSubscription += 1
        let id = "sub-\(nextSubscription)"
        subscriptions[destination] = id
        if ownToo { ownTooDestinations.insert(destination) }
        switch phase {
        case .ready(let a):
            sendSubscribe(destination, id: id, on: a)
        case .subscribing(let a, var pending):
            pending.insert("r-\(id)")
            phase = .subscribing(a, pending: pending)
            sendSubscribe(destination, id: id, on: a)
        default: break
        }
        return take()
    }

    /// Publishes a binary body. Dropped (and counted) while not connected: the cluster
    /// protocol treats the broker as a lossy channel anyway.
    public mutating func send(to destination: String, body: ByteBuffer, headers extra: [(String, String)] = [], now: NIODeadline) -> [Action] {
        guard case .ready(let a) = phase else {
            stats.droppedWhileDown += 1
            return []
        }
        var headers = [("destination", destination), ("content-type", "application/octet-stream")]
        headers += extra
        headers.append(("content-length", "\(body.readableBytes)"))
        stats.sent += 1
        stats.bodyBytesSent &+= body.readableBytes
        lastSent = now
        return [.write(.frame(StompFrame("SEND", headers: headers, body: body)), on: a)]
    }

    /// DISCONNECT with a receipt, so everything sent before it reached the broker (the
    /// host bounds the wait).
    public mutating func close() -> [Action] {
        switch phase {
        case .handshaking(let a, _), .subscribing(let a, _), .ready(let a):
            phase = .closing(a)
            heartbeat = nil
            return [.write(.frame(StompFrame("DISCONNECT", headers: [("receipt", "bye")])), on: a)]
        case .closing:
            return []
        case .connecting(let a):
            phase = .closed
            return [.close(a), .disconnected]
        case .idle, .closed:
            phase = .closed
            return [.disconnected]
        }
    }

    // MARK: what the host saw

    /// TCP to the broker is up: CONNECT goes out.
    public mutating func connected(_ attempt: Attempt, now: NIODeadline) -> [Action] {
        guard case .connecting(attempt) = phase else { return [.close(attempt)] }
        phase = .handshaking(attempt, deadline: now + Self.handshakeTimeout)
        lastReceived = now
        var headers = [("accept-version", "1.2"), ("host", "/"), ("heart-beat", "\(settings.heartbeat),\(settings.heartbeat)")]
        if let l = settings.login { headers.append(("login", l)) }
        if let p = settings.passcode { headers.append(("passcode", p)) }
        return [.write(.frame(StompFrame("CONNECT", headers: headers)), on: attempt)]
    }

    public mutating func connectFailed(_ attempt: Attempt, reason: String, now: NIODeadline) -> [Action] {
        guard case .connecting(attempt) = phase else { return [] }
        scheduleReconnect(reason: reason, now: now)
        return take()
    }

    /// The connection closed (by the broker, the network, or our own `.close`).
    public mutating func closed(_ attempt: Attempt, reason: String, now: NIODeadline) -> [Action] {
        lose(attempt, reason: reason, now: now)
        return take()
    }

    /// The connection failed with an error (a TLS handshake the broker's certificate did
    /// not pass, a reset). The error may come after the close it caused: it then only
    /// says better why the last connection went.
    public mutating func failed(_ attempt: Attempt, reason: String, now: NIODeadline) -> [Action] {
        if case .connecting(attempt) = phase {
            out.append(.close(attempt))
            scheduleReconnect(reason: reason, now: now)
        } else if attempt == current {
            out.append(.close(attempt))
            lose(attempt, reason: reason, now: now)
        } else if attempt == lastLost, case .idle = phase {
            problem = reason
            out.append(.log(.warning, "broker connection failed", [("reason", reason)]))
        }
        return take()
    }

    /// Bytes that are not STOMP: the connection is dropped and a new one started.
    public mutating func malformed(_ attempt: Attempt, error: String, now: NIODeadline) -> [Action] {
        guard attempt == current else { return [] }
        stats.badFrames += 1
        out.append(.log(.error, "malformed data from broker; reconnecting", [("error", error)]))
        drop(attempt, reason: "malformed frame: \(error)", now: now)
        return take()
    }

    public mutating func received(_ decoded: StompCodec.Decoded, on attempt: Attempt, now: NIODeadline) -> [Action] {
        guard attempt == current else { return [] }
        lastReceived = now
        guard case .frame(let frame) = decoded else { return [] }
        switch frame.command {
        case "CONNECTED":
            guard case .handshaking(attempt, _) = phase else { break }
            backoff = settings.reconnectMin
            failuresInRound = 0
            connectedTo = settings.brokers[brokerIndex % settings.brokers.count]
            startHeartbeats(frame["heart-beat"], now: now)
            var pending = Set<String>()
            for (destination, id) in subscriptions.sorted(by: { $0.value < $1.value }) {
                pending.insert("r-\(id)")
                sendSubscribe(destination, id: id, on: attempt)
            }
            phase = .subscribing(attempt, pending: pending)
            becomeReadyIfSubscribed()
        case "RECEIPT":
            let id = frame["receipt-id"] ?? ""
            if case .closing = phase, id == "bye" {
                phase = .closed
                out.append(.close(attempt))
                out.append(.disconnected)
            } else if case .subscribing(attempt, var pending) = phase {
                pending.remove(id)
                phase = .subscribing(attempt, pending: pending)
                becomeReadyIfSubscribed()
            }
        case "MESSAGE":
            stats.received += 1
            stats.bodyBytesReceived &+= frame.body.readableBytes
            out.append(.deliver(.message(destination: frame["destination"] ?? "", headers: frame.headers, body: frame.body)))
        case "ERROR":
            stats.errorFrames += 1
            let detail = frame.body.getString(at: frame.body.readerIndex, length: min(frame.body.readableBytes, 300)) ?? ""
            out.append(.log(.error, "broker sent ERROR", [("message", frame["message"] ?? ""), ("detail", detail)]))
            // STOMP 1.2: the broker closes the connection after an ERROR frame.
            drop(attempt, reason: "ERROR frame: \(frame["message"] ?? "no message")", now: now)
        default:
            stats.unexpectedFrames += 1
            out.append(.log(.warning, "unexpected frame from broker", [("command", frame.command)]))
        }
        return take()
    }

    /// Timers: a reconnect due, a handshake that took too long, heart-beats to send or
    /// missed.
    public mutating func tick(now: NIODeadline) -> [Action] {
        switch phase {
        case .idle(let retryAt?) where now >= retryAt:
            connect()
        case .handshaking(let a, let deadline) where now >= deadline:
            drop(a, reason: "no CONNECTED within \(Self.handshakeTimeout.nanoseconds / 1_000_000_000) s", now: now)
        case .subscribing(let a, _), .ready(let a):
            guard let h = heartbeat, now >= lastCheck + h.tick else { break }
            lastCheck = now
            if let timeout = h.readTimeout, now - lastReceived > timeout {
                drop(a, reason: "no heart-beat from the broker for \(timeout.nanoseconds / 1_000_000) ms", now: now)
            } else if h.sendEvery > 0, now - lastSent >= .milliseconds(Int64(h.sendEvery)) {
                out.append(.write(.heartbeat, on: a))
                lastSent = now
            }
        default: break
        }
        return take()
    }

    // MARK: inside

    mutating func take() -> [Action] {
        let actions = out
        out = []
        return actions
    }

    mutating func connect() {
        attempts += 1
        phase = .connecting(attempts)
        out.append(.connect(settings.brokers[brokerIndex % settings.brokers.count], attempts))
    }

    mutating func scheduleReconnect(reason: String, now: NIODeadline) {
        problem = reason
        let count = settings.brokers.count
        brokerIndex = (brokerIndex + 1) % count
        failuresInRound += 1
        let delay: TimeAmount
        if failuresInRound < count {
            delay = settings.reconnectMin  // the next broker of the list, at once
        } else {
            failuresInRound = 0
            delay = backoff
            backoff = min(backoff * 2, settings.reconnectMax)
        }
        phase = .idle(retryAt: now + delay)
        out.append(.log(.debug, "broker unavailable; retrying", [("reason", reason), ("in-ms", "\(delay.nanoseconds / 1_000_000)")]))
    }

    /// Ends a connection for good; a new one is started after the backoff.
    mutating func drop(_ attempt: Attempt, reason: String, now: NIODeadline) {
        out.append(.close(attempt))
        lose(attempt, reason: reason, now: now)
    }

    mutating func lose(_ attempt: Attempt, reason: String, now: NIODeadline) {
        switch phase {
        case .handshaking(attempt, _), .subscribing(attempt, _), .ready(attempt): break
        case .closing(attempt):
            phase = .closed
            out.append(.disconnected)
            return
        default: return
        }
        heartbeat = nil
        lastLost = attempt
        stats.connectionsLost += 1
        out.append(.log(.warning, "broker connection lost", [("reason", reason)]))
        out.append(.deliver(.lost(reason: reason)))
        scheduleReconnect(reason: reason, now: now)
    }

    mutating func becomeReadyIfSubscribed() {
        guard case .subscribing(let a, let pending) = phase, pending.isEmpty else { return }
        phase = .ready(a)
        problem = nil
        out.append(.log(.info, "broker connected", [("broker", connectedTo.map { "\($0)" } ?? "?"), ("subscriptions", "\(subscriptions.count)")]))
        out.append(.deliver(.ready))
    }

    /// `activemq.noLocal`: the broker does not hand a connection back what it sent itself
    /// (but on a destination subscribed `ownToo`).
    /// A node's own frames on the cluster topic (a master's PREPARE and COMMIT, every
    /// keepalive) would otherwise cross the broker once more and be parsed only to be
    /// dropped (a third of a PREPARE's deliveries in a 3-node cluster). A broker that does
    /// not know the header ignores it; the reader still drops its own by their sender.
    mutating func sendSubscribe(_ destination: String, id: String, on attempt: Attempt) {
        var headers = [("destination", destination), ("id", id), ("ack", "auto")]
        if !ownTooDestinations.contains(destination) { headers.append(("activemq.noLocal", "true")) }
        headers.append(("receipt", "r-\(id)"))
        out.append(.write(.frame(StompFrame("SUBSCRIBE", headers: headers)), on: attempt))
    }

    /// Heart-beats as negotiated by `StompHeartbeat` (every value from the broker clamped).
    mutating func startHeartbeats(_ header: String?, now: NIODeadline) {
        let negotiated = StompHeartbeat(ours: settings.heartbeat, header: header)
        if negotiated.adjusted {
            out.append(.log(.warning, "broker heart-beat header out of range; clamped",
                            [("heart-beat", String(reflecting: String((header ?? "").prefix(64)))),
                             ("send-ms", "\(negotiated.sendEvery)"), ("expect-ms", "\(negotiated.expectEvery)")]))
        }
        heartbeat = negotiated.sendEvery > 0 || negotiated.readTimeout != nil ? negotiated : nil
        lastSent = now
        lastCheck = now
    }
}

extension StompSession.Action: CustomStringConvertible {
    /// One line per action, for tests and traces: `write SUBSCRIBE #2`, `deliver ready`.
    public var description: String {
        switch self {
        case .connect(let broker, let a): return "connect \(broker) #\(a)"
        case .write(.frame(let f), let a): return "write \(f.command) #\(a)"
        case .write(.heartbeat, let a): return "write heart-beat #\(a)"
        case .close(let a): return "close #\(a)"
        case .deliver(.ready): return "deliver ready"
        case .deliver(.lost(let reason)): return "deliver lost: \(reason)"
        case .deliver(.message(let destination, _, let body)): return "deliver message \(destination) \(body.readableBytes)B"
        case .disconnected: return "disconnected"
        case .log(let level, let message, _): return "log \(level) \(message)"
        }
    }
}
