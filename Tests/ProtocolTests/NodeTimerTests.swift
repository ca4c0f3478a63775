import Testing
import TrackerLogic

/// The rule both hosts arm a node's timer by: only an earlier wake replaces the armed one.
@Suite("Node timer")
struct NodeTimerTests {
    let t = Instant(milliseconds: 19_011)

    @Test func onlyAnEarlierWakeReplacesTheArmedOne() {
        var timer = NodeTimer()
        let first = timer.arm(at: t + Milliseconds(500))
        let earlier = timer.arm(at: t)
        let later = timer.arm(at: t + Milliseconds(750))
        let same = timer.arm(at: t)
        #expect(first && earlier, "nothing armed, then an earlier wake: armed")
        #expect(!later && !same, "a later or as early wake: the armed one stays")
        #expect(timer.armedAt == t)
    }

    /// A step at the very instant the wake is due (a message read just before the timer
    /// fires) asks for a later wake, since the due deadline is no longer ahead of the
    /// clock: the due wake must still go off, or that deadline waits for a later tick.
    @Test func aWakeDueNowSurvivesAStepAtTheSameInstant() {
        var timer = NodeTimer()
        let armed = timer.arm(at: t)
        let replaced = timer.arm(at: t + Milliseconds(751))
        let fired = timer.fire(at: t)
        #expect(armed && !replaced)
        #expect(fired, "the due wake goes off")
        #expect(timer.armedAt == nil)
    }

    @Test func aReplacedWakeIsStale() {
        var timer = NodeTimer()
        _ = timer.arm(at: t + Milliseconds(10))
        _ = timer.arm(at: t)
        let stale = timer.fire(at: t + Milliseconds(10))
        let due = timer.fire(at: t)
        let again = timer.fire(at: t)
        #expect(!stale, "the replaced wake does nothing")
        #expect(due && !again, "the armed one goes off once")
        timer.disarm()
        let rearmed = timer.arm(at: t + Milliseconds(900))
        #expect(rearmed)
    }
}
