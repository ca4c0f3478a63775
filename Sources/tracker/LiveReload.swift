import ArgumentParser
import Foundation
import Logging
import TrackerLogic
import TrackerRuntime

/// SIGHUP: the config file read again, and what can change while a node runs applied
/// without leaving the cluster (a standalone node keeps its swarms).
///
/// The file must pass every check `run` makes (`tracker config check`), or nothing
/// changes and the log says why. Of the keys whose values differ from what the node runs
/// with, the live ones (`liveKeys`) apply; every other one is named in the log as needing
/// a restart, at this reload and every later one until the process restarts or the
/// dashboard's Start reads the whole file (`adoptAll`). Keys given on the command line
/// override the file, so their changes are ignored.
final class LiveReload: @unchecked Sendable {
    /// The settings `TrackerConfig.takingLiveSettings` applies, and the log level.
    static let liveKeys: Set<String> = ["interval", "interval-jitter", "peer-timeout", "numwant-default", "numwant-max", "max-reply-bytes", "connect-limit",
                                        "announce-limit", "error-limit", "max-swarms", "max-peers-per-swarm", "max-peers",
                                        "max-scrape", "trust-announced-ip", "log-level"]

    let path: String?
    let isCluster: Bool
    let logContext: LogContext
    let logger: Logger
    let commandLineKeys: Set<String>
    let lock = NSLock()
    /// The file's values the node runs with, by key (guarded by `lock`).
    var running: [String: String]

    init(path: String?, isCluster: Bool, logContext: LogContext, logger: Logger) {
        self.path = path
        self.isCluster = isCluster
        self.logContext = logContext
        self.logger = logger
        commandLineKeys = Set(CommandLine.arguments.filter { $0.hasPrefix("--") }.map {
            String($0.dropFirst(2).prefix { $0 != "=" })
        })
        running = path.flatMap { try? ConfigFile.values(path: $0) } ?? [:]
    }

    /// The dashboard's Start read the whole file: the node runs with all of it now.
    func adoptAll() {
        guard let path, let values = try? ConfigFile.values(path: path) else { return }
        lock.withLock { running = values }
    }

    /// Reads the file again; returns the tracker settings to apply, or nil when nothing
    /// changes (no file, or a file that fails its checks).
    func reload() -> ReloadedConfig? {
        guard let path else {
            logger.warning("SIGHUP: this node runs without --config FILE; nothing to reload")
            return nil
        }
        return lock.withLock { () -> ReloadedConfig? in
            let fresh: [String: String]
            let tracker: TrackerConfig
            let level: Logger.Level
            do {
                fresh = try ConfigFile.values(path: path)
                let run = try Run.reparsed()
                tracker = try run.service.config()
                // Every check run makes, without its warnings again.
                if isCluster { _ = try run.clusterSettings(logger: Logger(label: "reload", factory: { _ in SwiftLogNoOpLogHandler() })) }
                guard let l = Logger.Level(rawValue: run.logLevel) else { throw ValidationError("unknown log level '\(run.logLevel)'") }
                level = l
            } catch let problem as ConfigFile.Problem {
                logger.error("config reload failed; nothing changed", metadata: ["file": "\(path)", "error": "\(problem.description)"])
                return nil
            } catch {
                logger.error("config reload failed; nothing changed",
                             metadata: ["file": "\(path)", "error": "\(ConfigFile.rewrite(Run.message(for: error)))"])
                return nil
            }
            let changed = Set(fresh.keys).union(running.keys)
                .filter { fresh[$0] != running[$0] && !commandLineKeys.contains($0) }.sorted()
            let live = changed.filter(Self.liveKeys.contains)
            let restart = changed.filter { !Self.liveKeys.contains($0) }
            for key in live { running[key] = fresh[key] }
            logContext.level = level
            for key in restart {
                logger.warning("config reload: a changed setting takes effect only after a restart",
                               metadata: ["file": "\(path)", "key": "\(key)"])
            }
            let logger = logger
            let metadata: Logger.Metadata = [
                "file": "\(path)", "applied": "\(live.isEmpty ? "none" : live.joined(separator: ","))",
                "restart-needed": "\(restart.isEmpty ? "none" : restart.joined(separator: ","))",
            ]
            return ReloadedConfig(config: tracker) { logger.notice("configuration reloaded", metadata: metadata) }
        }
    }
}
