import Foundation

/// Descriptors: raised to the hard limit at start, with a reserve the dashboard never
/// takes from the broker, cluster, peer and store sockets and files.
///
/// Under systemd's default soft limit, idle dashboard connections could take every
/// descriptor and keep a node off its broker when the broker restarted.
public enum FileDescriptorLimit {
    /// Descriptors kept for everything but the dashboard: broker connections (a failover
    /// list reconnects), peer sockets, SQLite and its journal, logs.
    public static let reserve = 64

    /// Raises the soft limit to the hard one; returns the soft limit now in force.
    @discardableResult
    public static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// Dashboard connections that leave the reserve free, within `ceiling`.
    public static func dashboardConnections(softLimit: Int, ceiling: Int) -> Int {
        max(8, min(ceiling, (softLimit - reserve) / 2))
    }
}
