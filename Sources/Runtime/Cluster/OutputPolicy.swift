/// When a cluster node's output leaves: the one value that decides whether what a step
/// produced (replies, frames, the timer) goes out now, at the end of the read under way,
/// or not at all.
///
/// - A provoked failure (the dashboard's button) silences the node: it hears and says
///   nothing, to peers or to the cluster, as if its link were cut; its timers run on, so
///   it behaves as a partitioned node does.
/// - Within a read of the peer socket, a step's replies and the timer wait for the read's
///   end (`ClusterService.peerReadComplete`): one sendmmsg and one look at the node's
///   deadlines per burst, not per datagram.
///
/// Invariant: a step inside a read leaves the timer to re-arm at the read's end, and
/// that end re-arms it exactly once.
package struct OutputPolicy {
    package var silenced = false
    package private(set) var inPeerRead = false
    private var wakePending = false

    package init() {}

    /// Whether the node hears and says anything now.
    package var speaks: Bool { !silenced }

    package mutating func beginPeerRead() { inPeerRead = true }
    package mutating func endPeerRead() { inPeerRead = false }

    /// After a step: true when its replies and the timer go now; false when they wait for
    /// the end of the peer read under way.
    package mutating func flushesAfterStep() -> Bool {
        guard inPeerRead else { return true }
        wakePending = true
        return false
    }

    /// At the end of a peer read: whether a step within it left the timer to re-arm.
    package mutating func takePendingWake() -> Bool {
        defer { wakePending = false }
        return wakePending
    }
}
