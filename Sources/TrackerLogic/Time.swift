/// A point in time, in milliseconds, as told to the logic by whoever drives it.
///
/// The logic never reads a clock: the runtime passes wall-clock milliseconds, the
/// simulator passes virtual time. Milliseconds are coarse enough to be cheap and fine
/// enough for keepalives and election timeouts.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    public static let zero = Instant(milliseconds: 0)

    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.milliseconds < rhs.milliseconds }

    public static func + (lhs: Instant, rhs: Milliseconds) -> Instant {
        Instant(milliseconds: lhs.milliseconds &+ rhs.value)
    }

    public static func - (lhs: Instant, rhs: Milliseconds) -> Instant {
        Instant(milliseconds: lhs.milliseconds &- rhs.value)
    }

    public static func - (lhs: Instant, rhs: Instant) -> Milliseconds {
        Milliseconds(lhs.milliseconds &- rhs.milliseconds)
    }

    /// Whole seconds, floor-divided so that negative virtual times still order correctly.
    public var seconds: Int64 {
        milliseconds >= 0 ? milliseconds / 1000 : (milliseconds &- 999) / 1000
    }

    public var description: String {
        let s = milliseconds / 1000, ms = abs(milliseconds % 1000)
        return "\(s).\(ms < 10 ? "00" : ms < 100 ? "0" : "")\(ms)s"
    }
}

/// A span of time in milliseconds.
public struct Milliseconds: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var value: Int64

    public init(_ value: Int64) { self.value = value }

    public static func seconds(_ s: Int64) -> Milliseconds { Milliseconds(1000) * s }

    public static func < (lhs: Milliseconds, rhs: Milliseconds) -> Bool { lhs.value < rhs.value }
    public static func + (lhs: Milliseconds, rhs: Milliseconds) -> Milliseconds { Milliseconds(lhs.value &+ rhs.value) }
    public static func * (lhs: Milliseconds, rhs: Int64) -> Milliseconds { Milliseconds(lhs.value.multipliedReportingOverflow(by: rhs).overflow ? Int64.max : lhs.value &* rhs) }

    public var description: String { "\(value)ms" }
}
