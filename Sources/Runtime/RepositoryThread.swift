import NIOCore
import NIOPosix

/// A repository and the one thread that touches it: a standalone node's `--db` writes
/// leave its event loop and reach the file in the order they were queued.
///
/// Invariant: `repository` is used only on the pool's single thread, so the repository
/// itself (a SQLite connection and the writer's memory of the file) needs no lock and
/// is never shared between threads.
final class RepositoryThread: @unchecked Sendable {
    private let pool = NIOThreadPool(numberOfThreads: 1)
    private let repository: SQLiteRepository

    init(_ repository: SQLiteRepository) {
        self.repository = repository
        pool.start()
    }

    /// Runs `body` on the thread, after everything queued before it; completes on `loop`.
    func run<T: Sendable>(on loop: EventLoop, _ body: @escaping @Sendable (SQLiteRepository) throws -> T) -> EventLoopFuture<T> {
        pool.runIfActive(eventLoop: loop) { try body(self.repository) }
    }

    func shutdownGracefully() async throws { try await pool.shutdownGracefully() }
}
