/// A replica's peers at one commit, handed whole to the store
/// (`NodeAction.persistPeerImage`), which writes its peer rows afresh from it and drops
/// the log of rows that led there.
///
/// Why: a store logs a row per announce (`CommitRows`) and must fold the log into its
/// table of peers now and then. Folding merges the log into the table row by row, and
/// its cost grows with both. Writing the peers afresh (the SQLite store writes them as
/// the new log's first rows) costs one row per peer, whatever the log held: with a log
/// of at least four times the peers, under one row per four announces, and none of
/// them a merge.
///
/// Handing it over costs nothing: `store` is a value whose storage the replica shares
/// until it next changes, and each swarm is copied once then, by the change that needs
/// it. Invariant: `store` is the replica right after committing `lastCommitted`, and the
/// node asks for it right after that commit's rows, so a store that holds
/// `lastCommitted` holds exactly these peers.
public struct PeerImage: Hashable, Sendable {
    public var lastCommitted: TxRef
    public var store: SwarmStore

    public init(lastCommitted: TxRef, store: SwarmStore) {
        self.lastCommitted = lastCommitted
        self.store = store
    }

    /// The commit and the peer count: equal images have equal hashes, and hashing never
    /// walks the repository.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(lastCommitted)
        hasher.combine(store.peerCount)
    }

    /// When a node asks for the next image: once the rows it logged since the last one
    /// reach four times its peers, and at least `minimumRows`.
    public static func isDue(loggedRows: Int, peerCount: Int, minimumRows: Int) -> Bool {
        let scaled = peerCount.multipliedReportingOverflow(by: logRatio)
        return loggedRows >= max(minimumRows, scaled.overflow ? Int.max : scaled.partialValue)
    }

    /// Rows logged per peer before the next image. A longer log costs a restart more
    /// reading (linear in the log) and saves the writer images (docs/benchmarks.md,
    /// "Design choices"). The store's fold (`SQLiteRepository.defaultFoldRatio`) must
    /// come due later than this.
    public static let logRatio = 4
}
