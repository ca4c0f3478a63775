import Glibc
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
        // Named, so a profile (the benchmark suite's per-thread CPU) can tell it apart.
        pool.submit { _ in Self.nameThisThread("store-writer") }
        do {
            repository = try SQLiteRepository(path: path)
        } catch {
            openError = "\(error)"
        }
    }

    /// Linux names a thread through its `comm` file (what `top -H` and /proc show).
    static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = name.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
    }

    /// What the disk held at start; nil (and an error) when it could not be read.
    public func load() -> Result<DurableState, Error> {
        guard let repository else { return .failure(RepositoryError(openError ?? "repository not open")) }
        return Result { try repository.load() }
    }

    /// What the writer thread and the loop share.
    struct Queue {
        /// Writes submitted and not yet taken by the writer thread, in order.
        var writes: [(StoreWrite, EventLoopPromise<Void>)] = []
        /// A drain is queued on the writer thread or running.
        var draining = false
        /// A drain is scheduled on the loop, `commitInterval` after the last one.
        var scheduled = false
        /// Write until the queue is empty, without waiting: a write other than a commit
        /// is queued (an epoch must be on disk before its candidate leads), or `drain()`
        /// was called.
        var urgent = false
    }

    private let queue = NIOLockedValueBox(Queue())
    /// Most commits one SQLite transaction takes from the queue.
    static let maxBatch = 64
    /// How long commits gather before they go to SQLite together. Each SQLite transaction
    /// writes the pages it dirtied to the WAL whole (the log's last page, the swarms and
    /// metadata rows) however many commits dirtied them, so gathering saves the writer CPU
    /// per announce (`tracker bench --store --per-write N` measures it; docs/benchmarks.md has the
    /// figures). It bounds what a node killed with -9 loses from its
    /// disk (the other replicas hold it; the node catches up when it rejoins); votes never
    /// wait for it.
    public static let commitInterval = TimeAmount.milliseconds(50)

    /// Runs `write` after every earlier one; the future fails with the reason. Commits
    /// go to SQLite together, every `commitInterval` (one transaction: under load the
    /// disk keeps up with fewer, larger writes); any other write goes at once, with the
    /// commits queued before it.
    public func submit(_ write: StoreWrite) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        let start = queue.withLockedValue { q -> Start in
            q.writes.append((write, promise))
            if !write.mayWait { q.urgent = true }
            return nextStart(&q)
        }
        begin(start)
        return promise.futureResult
    }

    private enum Start { case none, now, later }

    /// Under the lock, when the queue is not being drained: what starts the next drain.
    private func nextStart(_ q: inout Queue) -> Start {
        guard !q.draining, !q.writes.isEmpty else { return .none }
        if q.urgent {
            q.draining = true
            return .now
        }
        guard !q.scheduled else { return .none }
        q.scheduled = true
        return .later
    }

    private func begin(_ start: Start) {
        switch start {
        case .none: break
        case .now:
            pool.submit { [self] state in
                if case .active = state { writeQueued() } else { failQueued() }
            }
        case .later:
            loop.scheduleTask(in: Self.commitInterval) { [self] in
                let start = queue.withLockedValue { q -> Start in
                    q.scheduled = false
                    guard !q.draining, !q.writes.isEmpty else { return .none }
                    q.draining = true
                    return .now
                }
                begin(start)
            }
        }
    }

    /// On the writer thread: takes the next run of commits (or one other write) and
    /// performs it, until the queue is empty or holds less than a batch of commits that
    /// may wait.
    private func writeQueued() {
        while true {
            let batch: [(StoreWrite, EventLoopPromise<Void>)] = queue.withLockedValue { q in
                guard !q.writes.isEmpty else {
                    (q.draining, q.urgent) = (false, false)
                    return []
                }
                var n = 1
                if q.writes[0].0.mayWait {
                    while n < min(q.writes.count, Self.maxBatch), q.writes[n].0.mayWait { n += 1 }
                }
                defer { q.writes.removeFirst(n) }
                return Array(q.writes.prefix(n))
            }
            guard !batch.isEmpty else { return }
            let result = Result { try perform(batch.map(\.0)) }
            // One hop to the loop for the batch: a promise completed from this thread
            // hops to the loop by itself, a task and a wake of the loop each.
            let promises = batch.map(\.1)
            loop.execute { for promise in promises { promise.completeWith(result) } }
            let next = queue.withLockedValue { q -> Start? in
                if q.writes.isEmpty {
                    q.draining = false
                    q.urgent = false
                    return Start.none
                }
                if q.urgent || q.writes.count >= Self.maxBatch { return nil }
                // Only commits, fewer than a batch: they wait for the next interval.
                q.draining = false
                return nextStart(&q)
            }
            guard let next else { continue }
            begin(next)
            return
        }
    }

    /// The pool is shut down: nothing more will be written.
    private func failQueued() {
        let queued = queue.withLockedValue { q in
            defer { q = Queue() }
            return q.writes
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

    /// Completes when every write submitted before it is done, commits waiting for their
    /// interval included (the pool has one thread and runs its tasks in order; an urgent
    /// drain empties the queue before it ends).
    public func drain() -> EventLoopFuture<Void> {
        let start = queue.withLockedValue { q -> Start in
            if !q.writes.isEmpty { q.urgent = true }
            return nextStart(&q)
        }
        begin(start)
        return pool.runIfActive(eventLoop: loop) {}
    }

    public func shutdown() { try? pool.syncShutdownGracefully() }
}

extension StoreWrite {
    /// Commits, and the peer image that follows one, gather for `commitInterval` and go
    /// to SQLite together; anything else goes at once.
    var mayWait: Bool {
        switch self {
        case .commit, .peerImage: true
        case .snapshot, .epoch, .wipe, .keep, .dropKept, .setAside, .probe: false
        }
    }
}
