import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import UnixSignals

/// A running node as a swift-service-lifecycle `ServiceGroup` of two services: the node
/// itself, and its reloads. SIGINT and SIGTERM shut the group down gracefully (the node
/// leaves the cluster cleanly, or a standalone node stops serving); SIGHUP reloads the
/// config file's live settings.
///
/// Invariants:
/// - Reloads run one at a time, in the order their signals arrived, so two never overlap.
/// - A stop that follows a reload finds it applied: the group shuts its services down in
///   reverse order, each after the one before has returned, and the reloads come after
///   the node, so a reload under way ends before the node begins to stop.
/// - A node that ends by itself (a refused id, a stop from the dashboard that ends the
///   process) ends the group, and its exit code is the process's.
public enum NodeLifecycle {
    /// Runs `node` until a signal stops it (then `stop`, once) or until it returns, with
    /// `reload` at each SIGHUP meanwhile. Returns the node's exit code.
    public static func run(logger: Logger, reload: @escaping @Sendable () async -> Void,
                           node: @escaping @Sendable () async throws -> Int32,
                           stop: @escaping @Sendable () async -> Void) async throws -> Int32 {
        let exitCode = NIOLockedValueBox<Int32>(0)
        let nodeService = NodeService(body: node, stop: stop, logger: logger, exitCode: exitCode)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [
                .init(service: nodeService, successTerminationBehavior: .gracefullyShutdownGroup),
                .init(service: Reloads(reload: reload), successTerminationBehavior: .ignore),
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
        return exitCode.withLockedValue { $0 }
    }

    /// The node: runs until it returns, or until a graceful shutdown has `stop` end it.
    struct NodeService: Service {
        let body: @Sendable () async throws -> Int32
        let stop: @Sendable () async -> Void
        let logger: Logger
        let exitCode: NIOLockedValueBox<Int32>

        func run() async throws {
            let (stop, logger) = (self.stop, self.logger)
            let code = try await withGracefulShutdownHandler {
                try await body()
            } onGracefulShutdown: {
                logger.info("stopping on a signal (graceful shutdown)")
                Task { await stop() }
            }
            exitCode.withLockedValue { $0 = code }
        }
    }

    /// SIGHUP, each handled before the next is read.
    struct Reloads: Service {
        let reload: @Sendable () async -> Void

        func run() async throws {
            for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
                await reload()
            }
        }
    }
}
