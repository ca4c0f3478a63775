import NIOCore
import NIOPosix
import TrackerLogic

/// Performs the node's disk writes on one thread, in the order the node asked for them,
/// so SQLite never blocks the event loop that serialises the node. Results come back on
/// that loop. A repository that could not be opened (corrupt file, missing directory) is
/// reopened on the next probe: the node keeps running and votes ERROR meanwhile.
final class StoreWriter: @unchecked Sendable {
    let pool = NIOThreadPool(numberOfThreads: 1)
    let loop: EventLoop
    let path: String
    /// Touched only on the pool's single thread (and before `start`).
    private var repository: SQLiteRepository?
    private(set) var openError: String?

    init(path: String, loop: EventLoop) {
        self.path = path
        self.loop = loop
        pool.start()
        do {
            repository = try SQLiteRepository(path: path)
        } catch {
            openError = "\(error)"
        }
    }

    /// What the disk held at start; nil (and an error) when it could not be read.
    func load() -> Result<DurableState, Error> {
        guard let repository else { return .failure(RepositoryError(openError ?? "repository not open")) }
        return Result { try repository.load() }
    }

    /// Runs `write` after every earlier one; the future fails with the reason.
    func submit(_ write: StoreWrite) -> EventLoopFuture<Void> {
        pool.runIfActive(eventLoop: loop) { [self] in
            if repository == nil {
                guard case .probe = write else { throw RepositoryError("repository \(path) is not open: \(openError ?? "")") }
                repository = try SQLiteRepository(path: path)
            }
            try repository!.perform(write)
        }
    }

    /// Completes when every write submitted before it is done.
    func drain() -> EventLoopFuture<Void> {
        pool.runIfActive(eventLoop: loop) {}
    }

    func shutdown() { try? pool.syncShutdownGracefully() }
}
