#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix

/// Runs one cluster node until it stops: SIGINT/SIGTERM make it leave cleanly (LEAVING
/// to the others, repository emptied), a refused id stops it with a non-zero code.
public enum ClusterNodeRunner {
    public static func run(_ settings: ClusterNodeSettings, logger: Logger) async throws -> Int32 {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server: ClusterServer
        do {
            server = try ClusterServer(settings: settings, loop: group.next(), logger: logger)
            try await server.start()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        let signals = SignalWaiter(signals: [SIGINT, SIGTERM])
        let watcher = Task {
            let signal = await signals.wait()
            logger.info("stopping on signal \(signal)")
            server.requestShutdown()
        }
        let code = try await server.wait()
        watcher.cancel()
        server.shutdownWriter()
        try? await group.shutdownGracefully()
        return code
    }
}
