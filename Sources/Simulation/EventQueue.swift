import TrackerLogic

/// A min-heap of timed events; ties break by insertion order, so runs are deterministic.
///
/// The heap orders small plain keys; the payloads (a frame and its flags, over a hundred
/// bytes) stay put in a slab and are moved once in and once out, not at every sift.
struct EventQueue<Payload> {
    private struct Key {
        var time: Instant
        var seq: UInt64
        var slab: Int

        func precedes(_ other: Key) -> Bool { (time, seq) < (other.time, other.seq) }
    }

    private var heap: [Key] = []
    private var slab: [Payload?] = []
    private var freeSlabs: [Int] = []
    private var seq: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }

    /// When the next event is due, without taking it: a run that stops at a time leaves
    /// later events in place (popped and pushed back, one would lose its place among
    /// events due at the same instant).
    var nextTime: Instant? { heap.first?.time }

    mutating func push(_ time: Instant, _ payload: Payload) {
        seq += 1
        let index: Int
        if let free = freeSlabs.popLast() {
            index = free
            slab[index] = payload
        } else {
            index = slab.count
            slab.append(payload)
        }
        heap.append(Key(time: time, seq: seq, slab: index))
        var i = heap.count - 1
        let key = heap[i]
        while i > 0 {
            let parent = (i - 1) / 2
            guard key.precedes(heap[parent]) else { break }
            heap[i] = heap[parent]
            i = parent
        }
        heap[i] = key
    }

    mutating func pop() -> (time: Instant, payload: Payload)? {
        guard let top = heap.first else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                guard l < heap.count else { break }
                let child = r < heap.count && heap[r].precedes(heap[l]) ? r : l
                guard heap[child].precedes(last) else { break }
                heap[i] = heap[child]
                i = child
            }
            heap[i] = last
        }
        guard let payload = slab[top.slab].take() else { return nil }
        freeSlabs.append(top.slab)
        return (top.time, payload)
    }
}
