#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import TrackerLogic

/// The real clock, read only here: the logic receives `Instant`s.
public enum WallClock {
    /// Milliseconds since the Unix epoch. Wall time rather than monotonic time because
    /// connection ids and peer expiry must mean the same on every node of a cluster.
    public static func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Instant(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }

    /// A seed for the runtime's generator: the one place the system's randomness enters.
    public static func randomSeed() -> UInt64 {
        var system = SystemRandomNumberGenerator()
        return system.next()
    }
}
