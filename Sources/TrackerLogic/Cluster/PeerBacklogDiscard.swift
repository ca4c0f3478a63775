/// Dropping a paused node's peer backlog (`NodeAction.discardPeerBacklog`): the datagrams
/// its socket queued while it was stopped were another master's to answer, and read now
/// nothing tells them from fresh ones. The host drops what it reads until the socket's
/// queue is down to what one read takes (the rest arrived after the wake) or until a
/// keepalive interval has passed, whichever comes first.
///
/// A value the host feeds what it sees (each datagram read, the bytes still queued after
/// a read), so the runtime and the simulator run the same rule and a unit test reaches it.
public struct PeerBacklogDiscard: Sendable, Equatable {
    public let startedAt: Instant
    /// The discard ends then at the latest, whatever is still queued.
    public let until: Instant
    /// A queue of at most this many bytes holds no backlog worth dropping.
    public let drainedBytes: Int
    /// Datagrams dropped so far.
    public private(set) var dropped = 0

    public init(now: Instant, for interval: Milliseconds, drainedBytes: Int) {
        startedAt = now
        until = now + interval
        self.drainedBytes = max(0, drainedBytes)
    }

    /// A datagram was read at `now`: true when it is dropped, false when the discard is
    /// over (this datagram and the following ones are handled).
    public mutating func drops(at now: Instant) -> Bool {
        guard now < until else { return false }
        dropped += 1
        return true
    }

    /// A read ended with `queuedBytes` still in the socket (nil: the host cannot tell):
    /// whether the backlog is gone.
    public func isDrained(queuedBytes: Int?) -> Bool {
        guard let queuedBytes else { return false }
        return queuedBytes <= drainedBytes
    }
}
