/// One committed transaction, reduced to the rows of the repository it changes: what a
/// node's disk must hold once the transaction is durable. Built by the node as it commits
/// (`TrackerNode.commitLocally`), from its replica right after that transaction, so the
/// runtime's SQLite writer and the simulator's disk store exactly the same rows and
/// neither reads the node afterwards.
///
/// Every change is a full row (or its absence) as memory holds it after the transaction,
/// or, for a peer that announced more than once in it, after each announce, the last of
/// them what memory holds: writing the same rows twice lands on the same tables, and
/// applying them in order rebuilds the replica (`RepositoryRows`).
public struct CommitRows: Hashable, Sendable {
    /// One row-level effect, in the transaction's order: a later `expire` must not
    /// remove what an earlier operation wrote unless memory removed it too.
    public enum Change: Hashable, Sendable {
        /// The peer's row as memory holds it, or nil when the peer is gone.
        case peer(InfoHash, PeerKey, PeerRecord?)
        case completion(InfoHash, PeerKey)
        /// The peer's stop as memory holds it after a stop (`PeerStops`).
        case stop(InfoHash, PeerKey, Instant?)
        /// A merged swarm, rewritten whole (nil when it is gone).
        case swarm(InfoHash, SwarmMerge?)
        case expire(before: Instant)
        /// A catalogue entry as memory holds it after the transaction, or nil when removed.
        case torrent(InfoHash, RegisteredTorrent?)
        case accessMode(AccessMode)
        /// An access rule as memory holds it after the transaction, or nil when removed.
        case accessRule(InfoHash, AccessRule?)
        /// A catalogue entry's stamp as memory holds it after the transaction (nil: none).
        case torrentStamp(InfoHash, CatalogueStamp?)
        case ruleStamp(InfoHash, CatalogueStamp?)
        case modeStamp(TxRef?)
        /// A client rule and its stamp as memory holds them after the transaction.
        case clientRule(ClientPrefix, AccessRule?)
        case clientStamp(ClientPrefix, CatalogueStamp?)
        /// A user and its stamp as memory holds them after the transaction.
        case user(UserName, User?)
        case userStamp(UserName, CatalogueStamp?)
        /// The end of one catalogue change: drop the tombstones memory dropped, by the
        /// same rule (`CatalogueStamps.pruneTombstones`).
        case pruneTombstones
        /// A swarm's completion base as memory holds it after the transaction.
        case completedBase(InfoHash, Int?)
    }

    /// A swarm whose `swarms` row may have changed other than by a peer written into it
    /// (a peer removed, a completion, a merge): its completion count after the
    /// transaction, or nil when memory no longer holds the swarm. A store sets the row
    /// from this instead of counting rows.
    public struct SwarmRow: Hashable, Sendable {
        public var infoHash: InfoHash
        public var completed: Int?
        public init(infoHash: InfoHash, completed: Int?) { self.infoHash = infoHash; self.completed = completed }
    }

    public var lastCommitted: TxRef
    public var history: EpochHistory
    public var changes: [Change] = []
    /// Whether any change is an expiry (rows then come and go in bulk).
    public var expires = false
    public var swarms: [SwarmRow] = []
    /// How many of `changes` are peer rows (what a store logs).
    public var peerRows = 0
    /// How many peers the replica holds after the transaction: what a store measures its
    /// log against, since its table of older rows may be far smaller while peers arrive.
    public var peerCount = 0

    /// The rows `tx` changed, read from `replica` right after it committed `tx`.
    ///
    /// In a transaction of announces alone, each of which changed its peer's record, an
    /// announce's row is what it left in memory: its own record, or none after a stop. No swarm is read for it (a lookup in the
    /// swarms and one in the swarm's table, on every replica for every announce), and a
    /// peer that announced twice gets a row for each, the later one what memory holds
    /// after the transaction, as a store applies rows in order. A merge or an expiry may
    /// change a peer after its announce: then each row is read from the replica.
    public init(_ tx: Transaction, replica: Replica) {
        lastCommitted = tx.ref
        history = replica.history
        changes.reserveCapacity(tx.updates.count)
        var recount = Set<InfoHash>()
        let announcesOnly = !replica.lastCommitHadSuperseded
            && tx.updates.allSatisfy { if case .announce = $0 { true } else { false } }
        for update in tx.updates {
            switch update {
            case .announce(let a):
                let record = announcesOnly ? (a.event == .stopped ? nil : PeerRecord(a)) : replica.store.peer(a.key, in: a.infoHash)
                changes.append(.peer(a.infoHash, a.key, record))
                peerRows += 1
                // A completion is counted whenever its announce applies, so memory holds it;
                // not when the announce applied nothing (its key refused, private mode).
                if a.event == .completed && (announcesOnly || replica.store.hasCompleted(a.key, in: a.infoHash)) {
                    changes.append(.completion(a.infoHash, a.key))
                }
                if a.event == .stopped { changes.append(.stop(a.infoHash, a.key, replica.store.stops.at(a.key, in: a.infoHash))) }
                if record == nil || a.event == .completed { recount.insert(a.infoHash) }
                // A keyed announce (private mode) moved its user's totals.
                if let k = a.trackerKey, let u = replica.store.catalogue.access.users.user(holding: k) { changes.append(.user(u.name, u)) }
            case .merge(let m):
                changes.append(.swarm(m.infoHash, replica.store.content(of: m.infoHash)))
                recount.insert(m.infoHash)
            case .expire(let before):
                changes.append(.expire(before: before))
                expires = true
            case .catalogue(let change):
                changes += Self.rows(of: change, in: replica.store.catalogue)
            }
        }
        swarms = recount.sorted().map { SwarmRow(infoHash: $0, completed: replica.store.completed(in: $0)) }
        peerCount = replica.store.peerCount
    }

    /// The rows a catalogue change wrote, read from `catalogue` right after it: a cluster
    /// node's commit, or a standalone node's change to its kept operator data.
    public static func rows(of change: CatalogueChange, in catalogue: Catalogue) -> [Change] {
        let touched = change.touched
        var out: [Change] = []
        for h in touched.torrents { out += [.torrent(h, catalogue.torrents[h]), .torrentStamp(h, catalogue.stamps.torrents[h])] }
        for h in touched.rules { out += [.accessRule(h, catalogue.access.rules[h]), .ruleStamp(h, catalogue.stamps.rules[h])] }
        if touched.mode { out += [.accessMode(catalogue.access.mode), .modeStamp(catalogue.stamps.mode)] }
        for h in touched.completedBases { out.append(.completedBase(h, catalogue.completedBase[h])) }
        for p in touched.clients { out += [.clientRule(p, catalogue.access.clients.rules[p]), .clientStamp(p, catalogue.stamps.clients[p])] }
        for n in touched.users { out += [.user(n, catalogue.access.users[n]), .userStamp(n, catalogue.stamps.users[n])] }
        out.append(.pruneTombstones)
        return out
    }
}
