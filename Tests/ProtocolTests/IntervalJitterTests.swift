import NIOCore
import Testing
import TrackerLogic

/// Each announce reply's interval lies in `TrackerConfig.intervalBand` (the interval ±
/// the jitter, never past the peer timeout), spread over it request by request, the same
/// for a retransmitted request.
@Suite("Interval jitter") struct IntervalJitterTests {
    let now = Instant(milliseconds: 1_700_000_000_000)
    let key = SipHash24(k0: 11, k1: 22)

    func handler(_ change: (inout TrackerConfig) -> Void = { _ in }) -> PeerRequestHandler {
        var config = TrackerConfig()
        change(&config)
        return PeerRequestHandler(config: config, connectionIDs: ConnectionIDPolicy(key: key))
    }

    func pending(_ tid: UInt32, from source: PeerEndpoint = PeerEndpoint(ip: .v4(0xC633_6407), port: 6881)) -> PendingAnnounce {
        PendingAnnounce(replyTo: source, transactionID: tid,
                        update: Announce(infoHash: InfoHash(a: 1, b: 2, c: 3), peerID: PeerID(a: 4, b: 5, c: 6), endpoint: source,
                                         uploaded: 0, downloaded: 0, left: 10, event: .started, at: now),
                        peersWanted: 10)
    }

    @Test func repliesSpreadOverTheBandAndARetransmissionGetsTheSameInterval() {
        let h = handler()
        #expect(TrackerConfig().intervalBand == 1620...1980)
        let intervals = (0..<2000).map { h.interval(for: pending(UInt32($0))) }
        #expect(intervals.allSatisfy { (1620...1980).contains($0) })
        #expect(Set(intervals).count > 300, "spread over the band, not a few values")
        let low = intervals.filter { $0 < 1800 }.count, high = intervals.filter { $0 > 1800 }.count
        #expect(low > 800 && high > 800, "both sides of the interval: \(low) below, \(high) above")
        #expect(h.interval(for: pending(77)) == h.interval(for: pending(77)))
        let v6 = PeerEndpoint(ip: .v6(0x2001_0db8_0000_0000, 1), port: 6881)
        #expect((1620...1980).contains(h.interval(for: pending(77, from: v6))))
    }

    @Test func noJitterGivesTheIntervalItself() {
        let h = handler { $0.intervalJitterPercent = 0 }
        #expect((0..<100).allSatisfy { h.interval(for: pending(UInt32($0))) == 1800 })
    }

    @Test func theBandNeverPassesThePeerTimeoutNorGoesBelowASecond() {
        var c = TrackerConfig()
        c.announceInterval = 1000
        c.peerTimeout = .seconds(1050)
        #expect(c.intervalBand == 900...1050)
        c.announceInterval = 1
        c.peerTimeout = nil
        c.intervalJitterPercent = 50
        #expect(c.intervalBand == 1...1)
        c.announceInterval = .max
        #expect(c.intervalBand.upperBound == .max)
        c.intervalJitterPercent = 51
        #expect(c.problems.contains { $0.contains("interval jitter") })
    }

    /// What the peer reads: the reply's interval field.
    @Test func aStandaloneTrackersReplyCarriesTheJitteredInterval() throws {
        var t = StandaloneTracker(handler: handler { $0.intervalJitterPercent = 50 }, seed: 1)
        let source = PeerEndpoint(ip: .v4(0xC633_6407), port: 6881)
        let id = ConnectionIDPolicy(key: key).issue(for: source.ip, now: now)
        var seen: Set<UInt32> = []
        for tid in UInt32(0)..<50 {
            let request = BEP15Codec.encode(.announce(AnnounceRequest(connectionID: id, transactionID: tid, infoHash: InfoHash(a: 1, b: 2, c: 3),
                                                                      peerID: PeerID(a: 4, b: 5, c: 6), downloaded: 0, left: 10, uploaded: 0,
                                                                      event: .none, ip: 0, key: 0, numWant: 10, port: 6881)))
            let reply = t.receive(request, from: source, now: now)
            guard case .announce(let r) = reply else { Issue.record("not an announce reply: \(String(describing: reply))"); return }
            #expect((900...2700).contains(r.interval))
            seen.insert(r.interval)
        }
        #expect(seen.count > 10)
    }
}
