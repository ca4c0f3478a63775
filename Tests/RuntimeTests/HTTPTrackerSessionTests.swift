import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// `HTTPTrackerSession`, driven by its effects as a host would: what it bounds is what
/// waits, not what one read brings.
@Suite struct HTTPTrackerSessionTests {
    static let request = Array(("GET /announce?info_hash=" + String(repeating: "%41", count: 20)
        + "&peer_id=-XX0001-000000000001&port=1&uploaded=0&downloaded=0&left=1 HTTP/1.1\r\nHost: t\r\n\r\n").utf8)

    static func session(_ counters: HTTPTrackerCounters) throws -> HTTPTrackerSession {
        HTTPTrackerSession(remote: try #require(PeerEndpoint("127.0.0.1:9")), proxies: TrustedProxies(), limits: HTTPTrackerLimits(),
                           counters: counters, now: .now())
    }

    static let answer = TrackerResponse.error(ErrorResponse(transactionID: 0, message: "answered"))

    /// Performs `effects` as a standalone host does (each decision answered at once);
    /// returns the writes and whether the session closed.
    static func performAtOnce(_ effects: [HTTPTrackerSession.Effect], _ s: inout HTTPTrackerSession) -> (writes: Int, closed: Bool) {
        var effects = effects, i = 0, writes = 0, closed = false
        while i < effects.count {
            switch effects[i] {
            case .write: writes += 1
            case .close: closed = true
            case .decide(_, _, let pending): s.answered(pending, answer, now: .now(), into: &effects)
            }
            i += 1
        }
        return (writes, closed)
    }

    /// A client may pipeline: one read carrying more whole requests than the flood bound,
    /// none waiting when it comes, is served in full.
    @Test func aReadOfManyRequestsWhileNoneWaitsIsServed() throws {
        let counters = HTTPTrackerCounters()
        var s = try Self.session(counters)
        let count = 2 * HTTPTrackerLimits().maxBufferedBytes / Self.request.count
        var effects: [HTTPTrackerSession.Effect] = []
        s.read(Array([[UInt8]](repeating: Self.request, count: count).joined()), into: &effects)
        let (writes, closed) = Self.performAtOnce(effects, &s)
        #expect(writes == count && !closed, "\(writes) of \(count) answered")
        #expect(counters.snapshot.floodsClosed == 0)
    }

    /// Bytes that come while a request waits for the core are bounded: past the bound,
    /// the connection is closed; below it, the requests are served in order once the one
    /// that waited is answered.
    @Test func bytesComingWhileARequestWaitsAreBounded() throws {
        let counters = HTTPTrackerCounters()
        var s = try Self.session(counters)
        var effects: [HTTPTrackerSession.Effect] = []
        s.read(Self.request, into: &effects)
        guard case .decide(_, _, let pending)? = effects.first, effects.count == 1 else { Issue.record("\(effects)"); return }
        #expect(s.waiting)
        let within = HTTPTrackerLimits().maxBufferedBytes / Self.request.count
        effects = []
        s.read(Array([[UInt8]](repeating: Self.request, count: within).joined()), into: &effects)
        #expect(effects.isEmpty && !s.closing)
        s.answered(pending, Self.answer, now: .now(), into: &effects)
        #expect(Self.performAtOnce(effects, &s) == (within + 1, false))

        effects = []
        s.read(Self.request, into: &effects)
        guard case .decide? = effects.first else { Issue.record("\(effects)"); return }
        effects = []
        s.read(Array([[UInt8]](repeating: Self.request, count: within + 1).joined()), into: &effects)
        #expect(Self.performAtOnce(effects, &s) == (0, true))
        #expect(counters.snapshot.floodsClosed == 1)
    }
}
