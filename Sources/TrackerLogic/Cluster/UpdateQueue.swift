/// The master's updates waiting for a transaction, first in first out, held as batches
/// of at most a transaction's size (`batchLimit` at each `append`). Under load the queue
/// holds more than a transaction takes; a transaction then takes its first batch whole,
/// where copying a prefix out of one array and closing the gap behind it moved every
/// update queued.
///
/// Invariant: no batch is empty, and `count` is the sum of the batches' sizes.
struct UpdateQueue: Sendable {
    private var batches: [[QueuedUpdate]] = []
    private(set) var count = 0
    /// Room a new batch reserves: the size of the last one taken. Under load a batch
    /// fills to about what the last transaction took, and grew there by doubling, each
    /// step a new buffer and a copy; idle, a transaction takes one update and a batch
    /// reserves little.
    private var expected = 1

    init(_ items: [QueuedUpdate] = []) {
        append(contentsOf: items)
    }

    var isEmpty: Bool { count == 0 }

    /// Everything queued, in order, left in place (a master leaving office reads it).
    var all: [QueuedUpdate] { Array(batches.joined()) }

    func contains(where matches: (QueuedUpdate) -> Bool) -> Bool {
        batches.contains { $0.contains(where: matches) }
    }

    /// After everything queued; in a new batch when the last holds `batchLimit` already.
    mutating func append(_ item: QueuedUpdate, batchLimit: Int) {
        if let last = batches.indices.last, batches[last].count < batchLimit {
            batches[last].append(item)
        } else {
            var batch: [QueuedUpdate] = []
            batch.reserveCapacity(min(max(expected, 1), max(batchLimit, 1)))
            batch.append(item)
            batches.append(batch)
        }
        count += 1
    }

    /// After everything queued, as a batch of their own (recovered updates: rare).
    mutating func append(contentsOf items: [QueuedUpdate]) {
        guard !items.isEmpty else { return }
        batches.append(items)
        count += items.count
    }

    /// Before everything queued, as a batch of their own (what an aborted transaction
    /// must not lose: rare).
    mutating func prepend(_ items: [QueuedUpdate]) {
        guard !items.isEmpty else { return }
        batches.insert(items, at: 0)
        count += items.count
    }

    /// Everything queued, in order, leaving the queue empty.
    mutating func removeAll() -> [QueuedUpdate] {
        defer { (batches, count) = ([], 0) }
        return batches.count == 1 ? batches[0] : Array(batches.joined())
    }

    /// The first `limit` updates (all of them if fewer), removed from the queue, in order.
    /// A first batch of exactly `limit`, or the only one, is taken without copying it.
    mutating func take(upTo limit: Int) -> [QueuedUpdate] {
        guard !batches.isEmpty, limit > 0 else { return [] }
        var taken = batches.removeFirst()
        if taken.count > limit {
            batches.insert(Array(taken[limit...]), at: 0)
            taken.removeSubrange(limit...)
        }
        // A first batch short of `limit` (one that `prepend` put there) is topped up
        // from the next.
        while taken.count < limit, !batches.isEmpty {
            let wanted = limit - taken.count
            if batches[0].count <= wanted {
                taken += batches.removeFirst()
            } else {
                taken += batches[0][..<wanted]
                batches[0].removeFirst(wanted)
            }
        }
        count -= taken.count
        expected = taken.count
        return taken
    }
}
