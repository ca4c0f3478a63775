import Dispatch
import Foundation
import TrackerRuntime

/// Runs `server.serve(answer)` on a thread of its own and returns what `serve` signals
/// when it returns.
///
/// Why not `DispatchQueue.global()`: its workers are shared with every other test in
/// the process, and while they are blocked (a `serve` blocks for a whole test) the pool
/// grows slowly. A `serve` queued there started more than a second late in CI, after
/// its test's clients had given up.
func serveOnAThreadOfItsOwn(_ server: BatchedUDPSocket,
                            _ answer: @escaping @Sendable (inout BatchedUDPSocket.Batch) -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        server.serve(answer)
        done.signal()
    }
    thread.name = "test serve"
    thread.start()
    return done
}
