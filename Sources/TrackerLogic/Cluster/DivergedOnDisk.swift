/// What the disk holds while a leading role's replica is not it: a recovering master's
/// own diverged state, replaced in memory by the state it fetched. Written over before the
/// merge that carries it back has committed, a crash of every node holding it loses what
/// only it held (a registration one node committed alone in a partition). So it stays on
/// disk until `Master` sees that merge committed (`Master.persistMergedStateIfDone`); a
/// master that leaves office first goes back to it (`TrackerNode.stepDown`), for the next
/// master to merge.
///
/// Held by the leading roles only (`Recovery`, passed to the `Master` it becomes and back
/// to a `Recovery` again), so a node that does not lead cannot keep one.
///
/// Invariant: while it holds a state, nothing is written to the store (commits apply in
/// memory only: `persisting` is false).
struct DivergedOnDisk: Sendable {
    private(set) var state: Replica?

    /// Whether what the replica takes is written to the store.
    var persisting: Bool { state == nil }

    /// Recovery fetched a state its own is not a prefix of: the disk keeps its own, or
    /// what it already kept from an earlier fetch.
    mutating func keep(_ replica: Replica) {
        if state == nil { state = replica }
    }

    /// The merge committed, or the office ended: what the disk kept, given up.
    mutating func take() -> Replica? {
        defer { state = nil }
        return state
    }
}
