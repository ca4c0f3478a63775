import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import TrackerLogic

/// Performs the node's disk writes on one thread, in the order the node asked for them,
/// so SQLite never blocks the event loop that serialises the node. Results come back on
/// that loop. A repository that could not be opened (corrupt file, missing directory) is
/// reopened on the next probe: the node keeps running and votes ERROR meanwhile.
public final class StoreWriter: @unchecked Sendable {
    let pool = NIOThreadPool(numberOfThreads: 1)
    let loop: EventLoop
    let path: String
    /// Touched only on the pool's single thread (and before `start`).
    private var repository: SQLiteRepository?
    private(set) var openError: String?

    public init(path: String, loop: EventLoop) {
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
    public func load() -> Result<DurableState, Error> {
        guard let repository else { return .failure(RepositoryError(openError ?? "repository not open")) }
        return Result { try repository.load() }
    }

    /// Writes submitted and not yet taken by the writer thread, in order.
    private let pending = NIOLockedValueBox<(writes: [(StoreWrite, EventLoopPromise<Void>)], draining: Bool)>(([], false))
    /// Most commits one SQLite transaction takes from the queue.
    static let maxBatch = 64

    /// Runs `write` after every earlier one; the future fails with the reason. Commits
    /// that queue up while the writer is busy go to SQLite together (one transaction:
    /// under load the disk keeps up with fewer, larger writes).
    public func submit(_ write: StoreWrite) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        let startDrain = pending.withLockedValue { state in
            state.writes.append((write, promise))
            defer { state.draining = true }
            return !state.draining
        }
        if startDrain {
            pool.submit { [self] state in
                if case .active = state { writeQueued() } else { failQueued() }
            }
        }
        return promise.futureResult
    }

    /// On the writer thread: until the queue is empty, takes the next run of commits (or
    /// one other write) and performs it.
    private func writeQueued() {
        while true {
            let batch: [(StoreWrite, EventLoopPromise<Void>)] = pending.withLockedValue { state in
                guard !state.writes.isEmpty else {
                    state.draining = false
                    return []
                }
                var n = 1
                if case .commit = state.writes[0].0 {
                    while n < min(state.writes.count, Self.maxBatch), case .commit = state.writes[n].0 { n += 1 }
                }
                defer { state.writes.removeFirst(n) }
                return Array(state.writes.prefix(n))
            }
            guard !batch.isEmpty else { return }
            let result = Result { try perform(batch.map(\.0)) }
            for (_, promise) in batch { promise.completeWith(result) }
        }
    }

    /// The pool is shut down: nothing more will be written.
    private func failQueued() {
        let queued = pending.withLockedValue { state in
            defer { state = ([], false) }
            return state.writes
        }
        for (_, promise) in queued { promise.fail(RepositoryError("the store writer has stopped")) }
    }

    private func perform(_ writes: [StoreWrite]) throws {
        let repository: SQLiteRepository
        if let open = self.repository {
            repository = open
        } else {
            guard writes.count == 1, case .probe = writes[0] else {
                throw RepositoryError("repository \(path) is not open: \(openError ?? "")")
            }
            repository = try SQLiteRepository(path: path)
            self.repository = repository
        }
        try repository.perform(writes)
    }

    /// Completes when every write submitted before it is done (the pool has one thread
    /// and runs its tasks in order; a drain under way empties the queue before it ends).
    public func drain() -> EventLoopFuture<Void> {
        pool.runIfActive(eventLoop: loop) {}
    }

    public func shutdown() { try? pool.syncShutdownGracefully() }
}
