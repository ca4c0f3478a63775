import NIOCore
import STOMP
import Testing

/// The broker session as a state machine: every frame a broker sends, every connection
/// event and every timer, with no socket.
@Suite struct StompSessionTests {
    let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func settings(_ url: String = "stomp://u:p@127.0.0.1:61613,stomp://127.0.0.1:61614") -> StompSettings {
        // A literal URL: it parses.
        (try? StompSettings(url: url)) ?? StompSettings(host: "127.0.0.1", port: 61613)
    }

    func frame(_ command: String, _ headers: [(String, String)] = [], body: String = "") -> StompCodec.Decoded {
        .frame(StompFrame(command, headers: headers, body: ByteBuffer(string: body)))
    }

    func lines(_ actions: [StompSession.Action]) -> [String] { actions.map(\.description) }

    /// Connected and subscribed to one destination, at `t0 + 10 ms`.
    func ready(heartBeat: String = "1000,1000") -> StompSession {
        var s = StompSession(settings: settings())
        _ = s.subscribe("/topic/cluster")
        _ = s.start(now: t0)
        _ = s.connected(1, now: t0)
        _ = s.received(frame("CONNECTED", [("heart-beat", heartBeat)]), on: 1, now: t0)
        _ = s.received(frame("RECEIPT", [("receipt-id", "r-sub-1")]), on: 1, now: t0 + .milliseconds(10))
        return s
    }

    /// What crossed the broker, in frames and in body bytes (the benchmark's per-announce figures).
    @Test func countsTheBodyBytesItSendsAndReceives() {
        var s = ready()
        _ = s.send(to: "/topic/cluster", body: ByteBuffer(string: "abcd"), now: t0)
        _ = s.received(frame("MESSAGE", [("destination", "/topic/cluster")], body: "xyz"), on: 1, now: t0)
        #expect(s.stats.sent == 1 && s.stats.bodyBytesSent == 4)
        #expect(s.stats.received == 1 && s.stats.bodyBytesReceived == 3)
    }

    /// Our own frames must not come back through the broker: each SUBSCRIBE asks for that,
    /// but one that asks for them (where a node's keepalives come back to prove its link),
    /// on every connection.
    @Test func subscriptionsAskTheBrokerNotToEchoOurOwnFrames() {
        var s = StompSession(settings: settings())
        _ = s.subscribe("/topic/a")
        _ = s.subscribe("/topic/a.echo", ownToo: true)
        _ = s.start(now: t0)
        _ = s.connected(1, now: t0)
        let subscribes = s.received(frame("CONNECTED", [("heart-beat", "1000,1000")]), on: 1, now: t0).compactMap { action -> StompFrame? in
            if case .write(.frame(let f), _) = action, f.command == "SUBSCRIBE" { return f }
            return nil
        }
        #expect(subscribes.count == 2)
        #expect(subscribes.first?["destination"] == "/topic/a")
        #expect(subscribes.first?["activemq.noLocal"] == "true")
        #expect(subscribes.last?["destination"] == "/topic/a.echo")
        #expect(subscribes.last?["activemq.noLocal"] == nil)
    }

    @Test func connectsSubscribesAndIsReadyOnceEveryReceiptIsIn() {
        var s = StompSession(settings: settings())
        #expect(lines(s.subscribe("/topic/a")) == [])
        #expect(lines(s.start(now: t0)) == ["connect 127.0.0.1:61613 #1"])
        #expect(lines(s.connected(1, now: t0)) == ["write CONNECT #1"])
        #expect(s.nextWake == t0 + StompSession.handshakeTimeout)
        #expect(lines(s.received(frame("CONNECTED", [("heart-beat", "1000,1000")]), on: 1, now: t0)) == ["write SUBSCRIBE #1"])
        #expect(lines(s.subscribe("/topic/b")) == ["write SUBSCRIBE #1"])
        #expect(lines(s.received(frame("RECEIPT", [("receipt-id", "r-sub-1")]), on: 1, now: t0)) == [])
        #expect(!s.isReady)
        #expect(lines(s.received(frame("RECEIPT", [("receipt-id", "r-sub-2")]), on: 1, now: t0)) == ["log info broker connected", "deliver ready"])
        #expect(s.isReady && s.connectedTo == BrokerAddress(host: "127.0.0.1", port: 61613))
        #expect(lines(s.send(to: "/topic/a", body: ByteBuffer(string: "x"), now: t0)) == ["write SEND #1"])
        #expect(lines(s.received(frame("MESSAGE", [("destination", "/topic/a")], body: "xyz"), on: 1, now: t0)) == ["deliver message /topic/a 3B"])
        #expect(s.stats.sent == 1 && s.stats.received == 1)
    }

    /// What an earlier connection still delivers after the session moved on (its bytes
    /// were in flight, its close not yet seen) is nothing: no message, no error, no loss.
    @Test func onlyTheCurrentConnectionIsHeard() {
        var s = ready()
        var moved = lines(s.received(frame("ERROR", [("message", "bye")]), on: 1, now: t0 + .milliseconds(20)))
        #expect(!s.isReady)
        moved += lines(s.tick(now: t0 + .seconds(1)))
        #expect(moved.contains { $0.hasPrefix("connect ") && $0.hasSuffix("#2") }, "\(moved)")
        #expect(lines(s.received(frame("MESSAGE", [("destination", "/topic/cluster")], body: "old"), on: 1, now: t0 + .seconds(1))) == [])
        #expect(lines(s.received(frame("ERROR", [("message", "late")]), on: 1, now: t0 + .seconds(1))) == [])
        #expect(lines(s.closed(1, reason: "reset", now: t0 + .seconds(1))) == [])
        #expect(s.stats.received == 0 && s.stats.errorFrames == 1)
    }

    /// 2⁶² in the broker's heart-beat once trapped the client at every reconnect.
    @Test func aHostileHeartBeatIsClampedAndSaidSo() {
        var s = StompSession(settings: settings())
        _ = s.start(now: t0)
        _ = s.connected(1, now: t0)
        let actions = lines(s.received(frame("CONNECTED", [("heart-beat", "4611686018427387904,4611686018427387904")]), on: 1, now: t0))
        #expect(actions == ["log warning broker heart-beat header out of range; clamped", "log info broker connected", "deliver ready"])
        // Clamped to a minute both ways: the next check is at most half of that away.
        #expect(s.nextWake.map { $0 <= t0 + .seconds(30) } == true)
    }

    @Test func anErrorFrameDropsTheConnectionAndTheNextBrokerIsTriedAtOnce() {
        var s = ready()
        let t = t0 + .milliseconds(20)
        #expect(lines(s.received(frame("ERROR", [("message", "bad\nline")]), on: 1, now: t))
                == ["log error broker sent ERROR", "close #1", "log warning broker connection lost",
                    "deliver lost: ERROR frame: bad\nline", "log debug broker unavailable; retrying"])
        #expect(s.nextWake == t + s.settings.reconnectMin)
        #expect(lines(s.tick(now: t + s.settings.reconnectMin)) == ["connect 127.0.0.1:61614 #2"])
        // Anything the old connection still says changes nothing.
        #expect(lines(s.received(frame("CONNECTED"), on: 1, now: t)) == [])
        #expect(lines(s.closed(1, reason: "late", now: t)) == [])
        #expect(s.stats.connectionsLost == 1 && s.stats.errorFrames == 1)
    }

    /// A whole round of failures waits the backoff, doubling up to its cap.
    @Test func aWholeRoundOfFailuresBacksOff() {
        var s = StompSession(settings: settings())
        var t = t0
        _ = s.start(now: t)
        var waits: [Int64] = []
        for attempt in 1...6 {
            _ = s.connectFailed(attempt, reason: "refused", now: t)
            guard let wake = s.nextWake else { Issue.record("no retry scheduled"); return }
            waits.append((wake - t).nanoseconds / 1_000_000)
            t = wake
            _ = s.tick(now: t)
        }
        #expect(waits == [100, 100, 100, 200, 100, 400])
    }

    @Test func aBrokerThatNeverAnswersIsDroppedAfterTheHandshakeTimeout() {
        var s = StompSession(settings: settings())
        _ = s.start(now: t0)
        _ = s.connected(1, now: t0)
        #expect(lines(s.tick(now: t0 + .seconds(4))) == [])
        #expect(lines(s.tick(now: t0 + StompSession.handshakeTimeout)).prefix(2) == ["close #1", "log warning broker connection lost"])
    }

    @Test func heartBeatsAreSentAndTheirAbsenceDropsTheConnection() {
        var s = ready(heartBeat: "1000,1000")
        // We send every second; the broker is given 2 × 1 s + 0.5 s.
        var t = t0
        var sent = 0
        while t < t0 + .milliseconds(2400) {
            guard let wake = s.nextWake else { Issue.record("no timer"); return }
            t = wake
            sent += s.tick(now: t).filter { $0.description == "write heart-beat #1" }.count
        }
        #expect(sent == 2)
        _ = s.received(.heartbeat, on: 1, now: t)
        var dropped = false
        while !dropped && t < t0 + .seconds(10) {
            guard let wake = s.nextWake else { break }
            t = wake
            dropped = s.tick(now: t).contains { $0.description == "close #1" }
        }
        #expect(dropped)
        #expect(t > t0 + .milliseconds(2400 + 2500))
    }

    @Test func closeWaitsForTheReceiptOfItsDisconnect() {
        var s = ready()
        #expect(lines(s.close()) == ["write DISCONNECT #1"])
        #expect(lines(s.received(frame("RECEIPT", [("receipt-id", "r-sub-9")]), on: 1, now: t0)) == [])
        #expect(lines(s.received(frame("RECEIPT", [("receipt-id", "bye")]), on: 1, now: t0)) == ["close #1", "disconnected"])
        #expect(lines(s.send(to: "/topic/a", body: ByteBuffer(), now: t0)) == [])
        #expect(s.stats.droppedWhileDown == 1)
    }

    /// A TLS handshake failure may reach the client after the close it caused: it then
    /// only says better why the connection went, which is what the operator reads.
    @Test func aLateErrorExplainsTheLastLoss() {
        var s = StompSession(settings: settings())
        _ = s.start(now: t0)
        _ = s.connected(1, now: t0)
        _ = s.closed(1, reason: "connection closed by the broker", now: t0)
        #expect(s.problem == "connection closed by the broker")
        #expect(lines(s.failed(1, reason: "TLS: certificate", now: t0)) == ["log warning broker connection failed"])
        #expect(s.problem == "TLS: certificate")
        // Once the next connection is under way, an old error changes nothing.
        _ = s.tick(now: t0 + .seconds(1))
        #expect(lines(s.failed(1, reason: "late", now: t0 + .seconds(1))) == [])
        #expect(s.problem == "TLS: certificate")
        // A connection that fails while current is closed and lost, once.
        _ = s.connected(2, now: t0 + .seconds(1))
        #expect(lines(s.failed(2, reason: "reset", now: t0 + .seconds(1))).prefix(2) == ["close #2", "log warning broker connection lost"])
        #expect(s.stats.connectionsLost == 2)
        _ = s.received(frame("CONNECTED"), on: 3, now: t0)
        #expect(s.problem == "reset")
    }

    @Test func malformedBytesReconnect() {
        var s = ready()
        let actions = lines(s.malformed(1, error: "header too long", now: t0))
        #expect(actions.first == "log error malformed data from broker; reconnecting")
        #expect(actions.contains("close #1") && actions.contains("deliver lost: malformed frame: header too long"))
        #expect(s.stats.badFrames == 1)
    }
}
