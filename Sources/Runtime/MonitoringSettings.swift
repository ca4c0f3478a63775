import TrackerLogic

/// How a node is watched from outside, beside its dashboard: what `/metrics` says the
/// binary is, where else `/metrics` is served, and whom the log lines name.
public struct MonitoringSettings: Sendable {
    /// `tracker_build_info{version,commit}`.
    public var version: String
    public var commit: String
    /// `--metrics HOST:PORT`: `/metrics` alone, on a listener that serves no peer data.
    public var metricsEndpoint: PeerEndpoint?
    /// The node id and role every log line names (`--log-format json`).
    public var log: LogContext
    /// systemd's readiness, status and watchdog, under `Type=notify` (`SystemdNotifier`).
    public var notifier: SystemdNotifier?
    /// `--metrics-users N`: `/metrics` exports the totals of the N users with the most
    /// announces (0: none, the default; a label per user is a series per user).
    public var metricsUsers = 0

    public init(version: String, commit: String, metricsEndpoint: PeerEndpoint? = nil, log: LogContext,
                notifier: SystemdNotifier? = SystemdNotifier()) {
        self.version = version; self.commit = commit; self.metricsEndpoint = metricsEndpoint; self.log = log
        self.notifier = notifier
    }
}
