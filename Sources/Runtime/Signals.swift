#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import TrackerLogic

/// Calls `handler` at every arrival of one POSIX signal (SIGHUP: reload the config file),
/// on a queue of its own, until `cancel`. The signal's default action (for SIGHUP,
/// ending the process) is off from `init` on.
public final class SignalHandler: @unchecked Sendable {
    private let source: DispatchSourceSignal

    public init(signal s: Int32, handler: @escaping @Sendable () -> Void) {
        signal(s, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: s, queue: DispatchQueue(label: "signal-\(s)"))
        source.setEventHandler(handler: handler)
        source.resume()
    }

    public func cancel() { source.cancel() }
}

/// Waits for the first of some POSIX signals, so `tracker run` can shut down cleanly.
public final class SignalWaiter: @unchecked Sendable {
    private let sources: [DispatchSourceSignal]
    private let queue = DispatchQueue(label: "signals")
    private var continuation: CheckedContinuation<Int32, Never>?
    private var received: Int32?

    public init(signals: [Int32]) {
        var sources: [DispatchSourceSignal] = []
        for s in signals {
            signal(s, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: s, queue: queue)
            sources.append(source)
        }
        self.sources = sources
        for (source, s) in zip(sources, signals) {
            source.setEventHandler { [weak self] in self?.fire(s) }
            source.resume()
        }
    }

    private func fire(_ s: Int32) {
        if let c = continuation {
            continuation = nil
            c.resume(returning: s)
        } else if received == nil {
            received = s
        }
    }

    /// Returns the number of the signal that arrived.
    public func wait() async -> Int32 {
        await withCheckedContinuation { c in
            queue.async {
                if let r = self.received { c.resume(returning: r) } else { self.continuation = c }
            }
        }
    }
}

/// What SIGHUP's reload of the config file gives a running node: the settings to apply,
/// and `applied`, called once they are in effect. The log's "configuration reloaded" is
/// said there and not before, so that what reads it (an operator, a test) can count on
/// the next request getting the new settings.
public struct ReloadedConfig: Sendable {
    public var config: TrackerConfig
    public var applied: @Sendable () -> Void

    public init(config: TrackerConfig, applied: @escaping @Sendable () -> Void) {
        self.config = config
        self.applied = applied
    }
}
