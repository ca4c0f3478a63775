import Testing
import TrackerLogic

/// The rule by which a host drops a paused node's peer backlog: everything read is
/// dropped until the socket's queue is down to a read's worth or the interval is over.
@Suite("Peer backlog discard")
struct PeerBacklogDiscardTests {
    let t0 = Instant(milliseconds: 50_000)

    @Test func dropsWhatIsReadUntilTheIntervalEnds() {
        var d = PeerBacklogDiscard(now: t0, for: Milliseconds(1000), drainedBytes: 64 << 10)
        let first = d.drops(at: t0), last = d.drops(at: t0 + Milliseconds(999))
        #expect(first && last)
        #expect(d.dropped == 2)
        let after = d.drops(at: t0 + Milliseconds(1000))
        #expect(!after, "the interval is over: what is read now is handled")
        #expect(d.dropped == 2)
    }

    @Test func endsOnceTheQueueIsDownToARead() {
        let d = PeerBacklogDiscard(now: t0, for: Milliseconds(1000), drainedBytes: 64 << 10)
        #expect(!d.isDrained(queuedBytes: (64 << 10) + 1))
        #expect(d.isDrained(queuedBytes: 64 << 10))
        #expect(d.isDrained(queuedBytes: 0))
        #expect(!d.isDrained(queuedBytes: nil), "a host that cannot see its queue waits out the interval")
    }

    @Test func aNegativeThresholdIsNone() {
        let d = PeerBacklogDiscard(now: t0, for: Milliseconds(10), drainedBytes: -5)
        #expect(d.drainedBytes == 0 && d.isDrained(queuedBytes: 0) && !d.isDrained(queuedBytes: 1))
        #expect(d.until == t0 + Milliseconds(10) && d.startedAt == t0)
    }
}
