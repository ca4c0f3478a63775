/// The one timer a host keeps for its node: armed at the node's `nextWake`, it delivers
/// `.tick`. Both hosts arm it by this rule, so the simulator wakes a node when the runtime
/// would.
///
/// Invariant: an armed wake is only ever replaced by an earlier one. A node's deadline is
/// in `nextWake` only while it is ahead of the clock, so a step at the very instant a wake
/// is due (a message read just before the timer fires) asks for a later one; replacing the
/// due wake then would skip the deadline it was armed for until some later tick.
public struct NodeTimer: Sendable, Equatable {
    /// When the armed wake is due; nil when none is armed.
    public private(set) var armedAt: Instant?

    public init() {}

    /// The node asks to be woken at `at`: true when the timer must be armed there (no wake
    /// is armed, or the armed one is later); false when the armed one stays.
    public mutating func arm(at: Instant) -> Bool {
        if let armed = armedAt, armed <= at { return false }
        armedAt = at
        return true
    }

    /// A wake armed for `at` went off: true when it is the armed one (deliver `.tick`),
    /// false for one that was replaced since.
    public mutating func fire(at: Instant) -> Bool {
        guard armedAt == at else { return false }
        armedAt = nil
        return true
    }

    /// Disarmed (the process stopped, or the host re-arms it by hand).
    public mutating func disarm() { armedAt = nil }
}
