/// Which epoch created each committed txid, as runs: `(epoch, first txid)` pairs.
/// Two replicas share a history up to a txid exactly when they name the same epoch
/// for it, since one epoch has one master and that master numbers its transactions
/// once. This is how a rejoining node learns whether it diverged, without shipping logs.
public struct EpochHistory: Hashable, Sendable {
    public private(set) var runs: [Run] = []

    public struct Run: Hashable, Sendable {
        public var epoch: Epoch
        public var firstTxid: UInt64
        public init(epoch: Epoch, firstTxid: UInt64) { self.epoch = epoch; self.firstTxid = firstTxid }
    }

    public init() {}
    public init(runs: [Run]) { self.runs = runs }

    mutating func record(_ ref: TxRef) {
        if runs.last?.epoch != ref.epoch { runs.append(Run(epoch: ref.epoch, firstTxid: ref.txid)) }
    }

    /// Runs of well-formed epochs in strictly increasing first-txid order, none beyond
    /// `last`, the last one being `last`'s.
    func isWellFormed(upTo last: TxRef) -> Bool {
        var previous: Run?
        for run in runs {
            guard run.epoch.isWellFormed, run.epoch != .zero, run.firstTxid >= 1, run.firstTxid <= last.txid else { return false }
            if let p = previous, p.firstTxid >= run.firstTxid { return false }
            previous = run
        }
        return last.txid == 0 ? runs.isEmpty : previous?.epoch == last.epoch
    }

    /// The epoch of a txid at or below the last committed one.
    public func epoch(of txid: UInt64) -> Epoch? {
        guard txid > 0 else { return .zero }
        var found: Epoch?
        for run in runs {
            if run.firstTxid <= txid { found = run.epoch } else { break }
        }
        return found
    }
}

/// The repository plus what replication needs around it: the last committed
/// transaction, the epoch history, and a bounded log of recent transactions for
/// catching up slaves without a full snapshot.
public struct Replica: Sendable, Equatable {
    public private(set) var store = SwarmStore()
    public private(set) var lastCommitted = TxRef.zero
    public private(set) var history = EpochHistory()
    private(set) var log: [Transaction] = []
    public let logLimit: Int
    /// Transactions applied by `commit` since this value was made (installs and wipes
    /// keep counting): the simulator holds it against the transaction ids, so that no
    /// transaction is applied twice.
    public private(set) var applied: UInt64 = 0
    /// `applied` and the last transaction id when the replica last started over (an
    /// install or a wipe): every application since moved the id by exactly one (`check`).
    private var appliedAtBase: UInt64 = 0
    private var baseTxid: UInt64 = 0
    /// Whether an announce of the last transaction changed no record (`Swarm`): its rows
    /// must then be read from the store, not from the announces.
    public private(set) var lastCommitHadSuperseded = false
    /// The announces of the last transaction that applied nothing for want of their
    /// user (private mode), by their index in it, with why (`SwarmStore.apply`).
    private var lastCommitRefusals: [Int: String] = [:]

    public init(logLimit: Int = 4096) { self.logLimit = logLimit }

    /// Applies the next transaction, exactly once and in order. Anything else is refused
    /// (false): callers only offer the next one, and the simulator checks there are no gaps.
    @discardableResult
    public mutating func commit(_ tx: Transaction) -> Bool {
        guard tx.txid == lastCommitted.txid &+ 1, tx.ref.isWellFormed else { return false }
        let superseded = store.superseded
        lastCommitRefusals.removeAll(keepingCapacity: true)
        for (i, update) in tx.updates.enumerated() {
            if let refused = store.apply(update, stamp: tx.ref) { lastCommitRefusals[i] = refused }
        }
        lastCommitHadSuperseded = store.superseded != superseded
        applied &+= 1
        lastCommitted = tx.ref
        history.record(tx.ref)
        log.append(tx)
        if log.count > logLimit { log.removeFirst(log.count - logLimit / 2) }
        return true
    }

    /// Why the update at `index` of the committed transaction `ref` applied nothing for
    /// want of its user, if it did: what its master answers the announce with. Known for
    /// the last transaction committed only.
    public func refusal(ofUpdate index: Int, in ref: TxRef) -> String? {
        ref == lastCommitted ? lastCommitRefusals[index] : nil
    }

    /// Committed transactions after `txid`, at most `limit` of them, or nil when the log
    /// no longer reaches back.
    public func transactions(after txid: UInt64, limit: Int) -> [Transaction]? {
        guard txid <= lastCommitted.txid else { return nil }
        if txid == lastCommitted.txid { return [] }
        guard let first = log.first, first.txid <= txid + 1 else { return nil }
        let start = Int(txid + 1 - first.txid)
        return Array(log[start..<(start + min(log.count - start, limit))])
    }

    /// The digest of a committed transaction the log still holds (nil when it does not:
    /// not committed yet, or older than the log reaches).
    public func digest(ofCommitted txid: UInt64) -> UInt64? {
        guard txid <= lastCommitted.txid, let first = log.first, txid >= first.txid else { return nil }
        return log[Int(txid - first.txid)].digest
    }

    /// Whether a replica whose last commit is `ref` holds only transactions we hold too
    /// (so it can catch up by replaying ours).
    public func isPrefix(_ ref: TxRef) -> Bool {
        ref.txid <= lastCommitted.txid && history.epoch(of: ref.txid) == ref.epoch
    }

    /// What a committed announce's swarm tells it (`SwarmStore.answer`: a read, which
    /// changes nothing).
    mutating func answer(for announce: Announce, wanting count: Int?, rng: inout SeededGenerator) -> SwarmAnswer? {
        store.answer(for: announce.key, in: announce.infoHash, wanting: count, rng: &rng)
    }

    public var digest: UInt64 { Digest.of(store) }

    /// The transactions the log still holds: since the last snapshot installed, at most
    /// `logLimit` of them.
    public var retained: [Transaction] { log }

    public func snapshot() -> Snapshot {
        Snapshot(lastCommitted: lastCommitted, history: history, content: store.content(), torrents: store.catalogue.sorted,
                 access: store.catalogue.access, stamps: store.catalogue.stamps, completedBase: store.catalogue.completedBase,
                 digest: digest)
    }

    /// Replaces everything with a snapshot whose checksum was verified by the caller.
    public mutating func install(_ snapshot: Snapshot) {
        install(snapshot, store: SwarmStore(content: snapshot.content, torrents: snapshot.torrents, access: snapshot.access,
                                            stamps: snapshot.stamps, completedBase: snapshot.completedBase))
    }

    /// Installs a snapshot whose store the caller built already (`Snapshot.intactStore`):
    /// a million peers are not built twice.
    public mutating func install(_ snapshot: Snapshot, store: SwarmStore) {
        self.store = store
        lastCommitted = snapshot.lastCommitted
        history = snapshot.history
        log = []
        appliedAtBase = applied
        baseTxid = lastCommitted.txid
    }

    /// Empties the repository (clean shutdown, or giving up a diverged state). The epoch
    /// history goes too: an empty replica shares nothing with anyone.
    public mutating func wipe() {
        let applied = self.applied
        self = Replica(logLimit: logLimit)
        self.applied = applied
        appliedAtBase = applied
    }

    /// The replica's invariants, for the simulator to check after every step (nil: they
    /// hold). Each transaction is applied at most once: every application since the last
    /// install or wipe moved the last transaction id by exactly one, so one applied again
    /// (the same COMMIT twice) shows as applications the id did not follow. The log ends
    /// at the last commit, without gaps, and the epoch history names its epoch.
    package func check() -> String? {
        let moved = lastCommitted.txid &- baseTxid, count = applied &- appliedAtBase
        guard count == moved else {
            return "applied \(count) transactions since it last started over at txid \(baseTxid), but moved \(moved) to \(lastCommitted)"
        }
        if let first = log.first, let last = log.last {
            guard last.ref == lastCommitted, first.txid &+ UInt64(log.count - 1) == lastCommitted.txid else {
                return "its log runs \(first.ref)...\(last.ref) (\(log.count) transactions) but it holds \(lastCommitted)"
            }
        }
        if lastCommitted.txid > 0, history.runs.last?.epoch != lastCommitted.epoch {
            return "its epoch history ends at \(history.runs.last.map { "\($0.epoch)" } ?? "nothing") but it holds \(lastCommitted)"
        }
        return nil
    }

    public static func == (l: Replica, r: Replica) -> Bool {
        l.lastCommitted == r.lastCommitted && l.store == r.store
    }
}

/// A full copy of a replica, with a checksum the receiver verifies before installing.
public struct Snapshot: Hashable, Sendable {
    public var lastCommitted: TxRef
    public var history: EpochHistory
    public var content: [SwarmMerge]
    /// The catalogue of registered torrents, by info hash.
    public var torrents: [RegisteredTorrent]
    public var access: AccessPolicy
    /// When each catalogue entry last changed (not covered by the checksum, which says
    /// what the repository holds, not when).
    public var stamps: CatalogueStamps
    /// Registered torrents' completions from before a full stop (`Catalogue.completedBase`).
    public var completedBase: [InfoHash: Int]
    public var digest: UInt64

    public init(lastCommitted: TxRef, history: EpochHistory, content: [SwarmMerge], torrents: [RegisteredTorrent] = [],
                access: AccessPolicy = AccessPolicy(), stamps: CatalogueStamps = CatalogueStamps(),
                completedBase: [InfoHash: Int] = [:], digest: UInt64) {
        self.lastCommitted = lastCommitted; self.history = history; self.content = content; self.torrents = torrents
        self.access = access; self.stamps = stamps; self.completedBase = completedBase; self.digest = digest
    }

    /// Recomputes the checksum from the content.
    public var isIntact: Bool { intactStore() != nil }

    /// The repository the content builds, if its checksum matches.
    public func intactStore() -> SwarmStore? {
        let store = SwarmStore(content: content, torrents: torrents, access: access, stamps: stamps, completedBase: completedBase)
        return Digest.of(store) == digest ? store : nil
    }

    /// A snapshot a node may install: a possible last transaction, and an epoch history
    /// whose runs are well formed, in order, and reach no further than that transaction.
    public var isWellFormed: Bool { lastCommitted.isWellFormed && history.isWellFormed(upTo: lastCommitted) }
}
