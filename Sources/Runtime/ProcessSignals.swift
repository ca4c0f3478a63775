import UnixSignals

/// The signals a running node acts on, read through swift-service-lifecycle's
/// `UnixSignalsSequence`: SIGHUP reloads the config file's live settings, SIGINT or
/// SIGTERM stop the node.
///
/// Invariant: one signal is handled at a time, in arrival order, so two reloads never
/// overlap and a stop that follows a reload finds it applied.
public struct ProcessSignals: Sendable {
    private let signals: UnixSignalsSequence

    /// Traps the three signals from now on (a SIGHUP no longer ends the process).
    public init() async {
        signals = await UnixSignalsSequence(trapping: .sighup, .sigint, .sigterm)
    }

    /// Runs `reload` at each SIGHUP until SIGINT or SIGTERM arrives, and names that signal;
    /// nil when the task was cancelled first.
    public func untilStop(onHangup reload: @Sendable () async -> Void) async -> String? {
        for await signal in signals {
            switch signal {
            case .sighup: await reload()
            case .sigint: return "SIGINT"
            default: return "SIGTERM"
            }
        }
        return nil
    }
}
