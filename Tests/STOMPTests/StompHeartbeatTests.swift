import NIOCore
import STOMP
import Testing

/// The broker's heart-beat header is hostile input: every value is clamped before any
/// arithmetic, so no header can trap the client.
@Suite struct StompHeartbeatTests {
    @Test func negotiatesAsStompSays() {
        let h = StompHeartbeat(ours: 1000, header: "2000,500")
        #expect(h == StompHeartbeat(ours: 1000, header: " 2000 , 500 "))
        #expect(h.sendEvery == 1000 && h.expectEvery == 2000 && !h.adjusted)
        #expect(h.readTimeout == .milliseconds(4500))
        #expect(h.tick == .milliseconds(500))
        let none = StompHeartbeat(ours: 1000, header: nil)
        #expect(none.sendEvery == 0 && none.expectEvery == 0 && none.readTimeout == nil && !none.adjusted)
        #expect(StompHeartbeat(ours: 0, header: "1000,1000").readTimeout == nil)
    }

    /// 2⁶² once overflowed `expectEvery * 2` (SIGILL at every reconnect).
    @Test(arguments: ["4611686018427387904,0", "0,4611686018427387904", "9223372036854775807,9223372036854775807"])
    func hugeValuesAreClamped(header: String) {
        let h = StompHeartbeat(ours: 1000, header: header)
        #expect(h.adjusted)
        #expect(h.sendEvery <= StompHeartbeat.maxMilliseconds && h.expectEvery <= StompHeartbeat.maxMilliseconds)
        _ = (h.readTimeout, h.tick)
    }

    @Test(arguments: ["-5,-5", "99999999999999999999999,1", "1000", "x,y", "1,2,3", ""])
    func malformedHeadersMeanNoOrClampedHeartbeats(header: String) {
        let h = StompHeartbeat(ours: 1000, header: header)
        #expect(h.adjusted)
        #expect(h.sendEvery >= 0 && h.expectEvery >= 0)
    }
}
