import TrackerLogic

/// A cluster node's replies between the step that decided them and the sendmmsg(2) that
/// sends them: one `DatagramBatch` per peer socket family.
///
/// The rule: a reply leaves within `ClusterConfig.pauseThreshold` of the step that
/// decided it, or not at all (`ClusterConfig.repliesStale`). A process stopped between the
/// two (SIGSTOP, a paused VM, a starved CPU) would otherwise send its decisions seconds
/// late, after the heir, which never heard their COMMIT, answered the same requests as the
/// next master. A dropped reply is what a lossy network does; its client retransmits, or
/// already has its answer.
///
/// Invariants: used on the node's loop only; a family's `decidedAt` is set exactly while
/// its batch holds a reply, to the step time of the first of them (a batch fills within
/// one read of the peer socket, a millisecond or so).
package final class ReplyOutbox {
    /// What sending a family's batch did.
    package enum Outcome: Equatable {
        /// Sent; `refused` datagrams the kernel refused (`lastError` the last errno).
        case sent(refused: Int, lastError: Int32)
        /// Dropped unsent: decided `age` before the send.
        case stale(dropped: Int, age: Milliseconds)
    }

    private let batches: [DatagramBatch]
    private var decidedAt: [Instant?]
    private let config: ClusterConfig

    package init(families: Int, config: ClusterConfig) {
        batches = (0..<max(families, 0)).map { _ in DatagramBatch() }
        decidedAt = batches.map { _ in nil }
        self.config = config
    }

    package var families: Range<Int> { batches.indices }

    /// Some family holds a reply not sent yet.
    package var isPending: Bool { decidedAt.contains { $0 != nil } }

    /// The family's batch must be sent before it takes another reply.
    package func isFull(_ family: Int) -> Bool { batches[family].isFull }

    /// Adds a reply the step at `decidedAt` decided; false when the batch is full (send it first).
    @discardableResult
    package func append(_ response: TrackerResponse, to endpoint: PeerEndpoint, family: Int, decidedAt step: Instant) -> Bool {
        guard batches[family].append(response, to: endpoint) else { return false }
        if decidedAt[family] == nil { decidedAt[family] = step }
        return true
    }

    /// Sends the family's batch on `fd` at `now`, or drops it when it was decided too long
    /// ago; nil when it holds nothing.
    package func send(_ family: Int, on fd: Int32, now: Instant) -> Outcome? {
        guard let step = decidedAt[family] else { return nil }
        decidedAt[family] = nil
        if config.repliesStale(decidedAt: step, now: now) {
            return .stale(dropped: batches[family].discard(), age: now - step)
        }
        let refused = batches[family].send(on: fd)
        return .sent(refused: refused, lastError: batches[family].lastError)
    }
}
