import Testing
import TrackerRuntime

/// When a step's output leaves (`OutputPolicy`): at once outside a peer read; at the
/// read's end inside one, the timer re-armed once however many steps the read held.
@Suite struct OutputPolicyTests {
    @Test func aStepOutsideAReadFlushesAtOnce() {
        var policy = OutputPolicy()
        let flushes = [policy.flushesAfterStep(), policy.flushesAfterStep()]
        #expect(flushes == [true, true])
        let wake = policy.takePendingWake()
        #expect(!wake, "nothing was left for a read's end")
    }

    @Test func stepsInsideAReadWaitForItsEndWhichReArmsOnce() {
        var policy = OutputPolicy()
        policy.beginPeerRead()
        let flushes = [policy.flushesAfterStep(), policy.flushesAfterStep(), policy.flushesAfterStep()]
        policy.endPeerRead()
        #expect(flushes == [false, false, false])
        let wakes = [policy.takePendingWake(), policy.takePendingWake()]
        #expect(wakes == [true, false])
        let after = policy.flushesAfterStep()
        #expect(after, "after the read, a step flushes again")
    }

    @Test func aSilencedNodeSaysNothing() {
        var policy = OutputPolicy()
        #expect(policy.speaks)
        policy.silenced = true
        #expect(!policy.speaks)
        policy.silenced = false
        #expect(policy.speaks)
    }
}
