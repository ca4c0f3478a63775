import Logging
import TrackerLogic

/// Logs at most one line per key per period, and says how many it held back: a flood of
/// forged messages must not become a flood of log lines. Used on one event loop.
final class RateLimitedLog {
    let logger: Logger
    let period: Milliseconds
    private var last: [String: (at: Instant, suppressed: Int)] = [:]

    init(logger: Logger, every period: Milliseconds) {
        self.logger = logger
        self.period = period
    }

    func warning(_ message: Logger.Message, key: String, metadata: Logger.Metadata, now: Instant = WallClock.now()) {
        if let entry = last[key], now - entry.at < period {
            last[key] = (entry.at, entry.suppressed + 1)
            return
        }
        var metadata = metadata
        if let suppressed = last[key]?.suppressed, suppressed > 0 { metadata["suppressed-since-last"] = "\(suppressed)" }
        last[key] = (now, 0)
        logger.warning(message, metadata: metadata)
    }
}
