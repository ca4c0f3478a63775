import NIOCore
import TrackerLogic

/// Operators' catalogue changes waiting to show in this node's replica: each settles
/// once the node reports it done (`NodeReport.catalogueChanged`), refused
/// (`NodeReport.submitRefused`), timed out, or the service stopped. At most `limit`
/// wait at once. On the loop.
struct CatalogueWaiters {
    static let limit = 64
    private var waiting: [(id: Int, change: CatalogueChange, promise: EventLoopPromise<Void>)] = []
    private var nextID = 0

    /// Waits for `change`; nil (and the promise untouched) when `limit` already wait.
    mutating func add(_ change: CatalogueChange, _ promise: EventLoopPromise<Void>) -> Int? {
        guard waiting.count < Self.limit else { return nil }
        nextID += 1
        waiting.append((nextID, change, promise))
        return nextID
    }

    /// Every change the catalogue shows done succeeds.
    mutating func settle(_ catalogue: Catalogue) {
        let done = waiting.filter { $0.change.isDone(in: catalogue) }
        waiting.removeAll { $0.change.isDone(in: catalogue) }
        for w in done { w.promise.succeed(()) }
    }

    /// The node refused `change`: each wait for it fails with the reason.
    mutating func refuse(_ change: CatalogueChange, reason: String) {
        let refused = waiting.filter { $0.change == change }
        waiting.removeAll { $0.change == change }
        for w in refused { w.promise.fail(ControlRefusal(reason)) }
    }

    /// The wait `id` fails with `reason`, if it still waits.
    mutating func fail(_ id: Int, _ reason: String) {
        guard let i = waiting.firstIndex(where: { $0.id == id }) else { return }
        waiting.remove(at: i).promise.fail(ControlRefusal(reason))
    }

    /// Every wait fails with `reason`.
    mutating func failAll(_ reason: String) {
        for w in waiting { w.promise.fail(ControlRefusal(reason)) }
        waiting = []
    }
}
