import NIOCore

/// STOMP 1.2 heart-beat negotiation from the broker's CONNECTED `heart-beat: sx,sy`:
/// we send every max(ours, sy) and give up on the broker after twice max(sx, ours) plus
/// half a second of silence.
///
/// Why a value of its own: the header comes from the broker, and a broker is a peer we
/// did not write (compromised, impersonated while ActiveMQ restarts, or a man in the
/// middle). `heart-beat:4611686018427387904,0` once made the interval arithmetic overflow
/// and trap, and the node crashed again at every reconnect. Each value is read as a
/// whole number and clamped to `0...maxMilliseconds` before any arithmetic; a header
/// that is not two such numbers means no heart-beats, as STOMP's default does.
public struct StompHeartbeat: Equatable, Sendable {
    /// Milliseconds between the heart-beats we send (0: none).
    public let sendEvery: Int
    /// Milliseconds between the broker's heart-beats we expect (0: none).
    public let expectEvery: Int
    /// Whether the broker's header was refused or a value clamped (worth a log line).
    public let adjusted: Bool

    /// A minute: longer than any keepalive a tracker cluster could use.
    public static let maxMilliseconds = 60_000

    public init(ours: Int, header: String?) {
        let ours = min(max(ours, 0), Self.maxMilliseconds)
        let parts = (header ?? "0,0").split(separator: ",", omittingEmptySubsequences: false)
            .map { Int($0.trimmingBlanks) }
        var adjusted = false
        var sx = 0, sy = 0
        if parts.count == 2, let x = parts[0], let y = parts[1] {
            sx = min(max(x, 0), Self.maxMilliseconds)
            sy = min(max(y, 0), Self.maxMilliseconds)
            adjusted = sx != x || sy != y
        } else {
            adjusted = header != nil
        }
        sendEvery = (ours == 0 || sy == 0) ? 0 : max(ours, sy)
        expectEvery = (ours == 0 || sx == 0) ? 0 : max(ours, sx)
        self.adjusted = adjusted
    }

    /// Silence after which the connection is given up (nil: never, no heart-beats).
    public var readTimeout: TimeAmount? { expectEvery > 0 ? .milliseconds(Int64(expectEvery * 2 + 500)) : nil }

    /// How often the timer checks both directions: half the shorter interval, 100 ms at least.
    public var tick: TimeAmount {
        .milliseconds(Int64(max(100, min(sendEvery > 0 ? sendEvery : 1000, expectEvery > 0 ? expectEvery : 1000) / 2)))
    }
}
