import Foundation
import GRDB
import TrackerLogic

public struct RepositoryError: Error, CustomStringConvertible {
    public var description: String
    package init(_ description: String) { self.description = description }
}

/// A node's repository in SQLite: swarms, peers, completions and the cluster metadata
/// (highest epoch, last committed transaction, epoch history). Not thread-safe on
/// purpose: one serial writer owns it.
///
/// Peers live in two tables. A commit appends the peers it writes or removes to
/// `peer_log`, in order, as one row per commit, or per run of commits written together
/// (`PeerLogRecord`: a blob of their peer rows); `peer_base` holds everything older, a
/// row per peer keyed by the bytes of the info hash and peer id. An announce replacing its row in place dirtied a random B-tree
/// page of `peer_base`, and every dirty page went to the WAL whole at each commit; a row
/// appended per announce cost a bind, a VM step and a B-tree insert each. A fold moves
/// the log into `peer_base` in key order, each peer's latest row once, when the log is
/// long (or before a write that rewrites peers in bulk: a merge, an expiry, a snapshot);
/// a peer image (`PeerImage`) rewrites the base and empties the log.
///
/// Reading the two together (a restart's load) costs time linear in their rows: each
/// logged peer's latest row is found in one pass over the log, and each base row is looked
/// up in those (a dictionary), never the log scanned per base row. A reader outside the
/// process reads `peer_base` and lays the log's records over it
/// (`tests/cluster/_harness.py` does).
///
/// One concern per file, as extensions: the schema and its migrations
/// (`RepositorySchema`), the commit writer (`CommitWriter.swift`), the peer log and its
/// fold (`PeerLog.swift`), the operator's data (`OperatorDataRows.swift`) and restore
/// (`Restore.swift`); this file opens the file and runs each write in its transaction.
public final class SQLiteRepository {
    let db: DatabaseQueue
    public let path: String
    /// What the writer remembers about the file between writes. Replaced only when a
    /// SQLite transaction commits: a rolled-back one leaves the rows, and this, as before.
    struct WriterState {
        /// Info hashes whose `swarms` row this writer knows exists, so an announce into a
        /// known swarm skips its `INSERT OR IGNORE` (a B-tree descent per announce, ~10 %
        /// of the writer's CPU). Only ever a subset of the rows: it learns a row after
        /// writing it, forgets it when deleting it, and starts empty.
        var knownSwarms = Set<InfoHash>()
        /// Rows in `peer_log`.
        var logRows = 0
        /// Rows `peer_base` held after the last fold or image (0 until this writer writes one).
        var baseRows = 0
        /// The replica's peers at the last commit or image written (`CommitRows.peerCount`).
        var peers = 0
    }
    private var state = WriterState()
    /// The log is folded once it holds this many rows, and `foldRatio` times the base's
    /// rows or the replica's peers, whichever is more.
    let foldThreshold: Int
    let foldRatio: Int
    /// About 10 MB of log: long enough that most of `peer_base`'s pages take several rows
    /// per fold, short enough that a fold takes a fraction of a second and a reader's merge
    /// of the two stays cheap.
    public static let defaultFoldThreshold = 65_536
    /// A fold rewrites every page of the base its rows land on, and the log's rows
    /// spread over all of them: its cost grows with the base, not with the log. A log
    /// four times the base folds each page once per four re-announces of its peers, and
    /// a peer's rows once however often it announced (docs/benchmarks.md, "Design
    /// choices"). A restart reads at most that much more log, linearly. The node's peer
    /// images (`PeerImage.logRatio`) come first, so a fold is a backstop for a node whose
    /// images failed: measured against the peers as well as the base, it stays one while
    /// peers arrive and the base is still small (against the base alone, a filling
    /// cluster folded before its first image, at a cost to its writers).
    public static let defaultFoldRatio = 8

    public init(path: String, foldThreshold: Int = defaultFoldThreshold, foldRatio: Int = defaultFoldRatio) throws {
        self.path = path
        self.foldThreshold = max(1, foldThreshold)
        self.foldRatio = max(0, foldRatio)
        var config = Configuration()
        config.journalMode = .wal
        config.busyMode = .timeout(2)
        config.label = "tracker-repository"
        config.prepareDatabase { db in
            // WAL + NORMAL: a commit is durable against a process crash (kill -9) without
            // an fsync per transaction; a power loss may drop the last commits, which the
            // other replicas hold. A larger page cache keeps the B-trees out of pread.
            // secure_delete FAST (Debian builds SQLite with it ON): deleted rows are zeroed
            // in the pages that hold them, but a freed page is not rewritten with zeros, which
            // made a peer image's `DELETE FROM peer_log` write the whole log again through
            // the WAL. A wipe scrubs the free pages itself (`scrub`).
            try db.execute(sql: "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -32768; PRAGMA mmap_size = 268435456; PRAGMA secure_delete = FAST")
        }
        do {
            db = try DatabaseQueue(path: path, configuration: config)
            try RepositorySchema.migrate(db)
            state.logRows = try db.read { db in
                try Int.fetchOne(db, sql: "SELECT coalesce(sum(rows), 0) FROM peer_log") ?? 0
            }
        } catch {
            throw RepositoryError("cannot open repository \(path): \(error)")
        }
    }

    // MARK: writes

    /// Several writes in one SQLite transaction: commits that queued up while the writer
    /// was busy share one WAL commit (and the pages they both touch are written once).
    /// All or nothing: on an error none of them is kept.
    public func perform(_ writes: [StoreWrite]) throws {
        guard writes.count > 1 else {
            if let write = writes.first { try perform(write) }
            return
        }
        do {
            try performInOneTransaction(writes)
        } catch {
            throw RepositoryError("\(writes.count) writes (\(writes.map(\.name).joined(separator: ", "))) failed on \(path): \(error)")
        }
        if writes.contains(where: \.isWipe) { try scrub() }
    }

    public func perform(_ write: StoreWrite) throws {
        do {
            try performInOneTransaction([write])
        } catch {
            throw RepositoryError("\(write.name) failed on \(path): \(error)")
        }
        if write.isWipe { try scrub() }
    }

    /// After a wipe: the file and its WAL rewritten without their free pages, where
    /// `secure_delete = FAST` leaves what deleted rows held (peer ids and addresses). A
    /// clean stop's empty repository is empty on the disk too. Cheap: what is left to copy
    /// is the epoch and what the stop kept.
    func scrub() throws {
        do {
            try db.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            throw RepositoryError("scrubbing \(path) after its wipe failed: \(error)")
        }
    }

    /// `writes` in one SQL transaction, with a fold when they leave the log long; the
    /// writer's state follows only when it commits.
    ///
    /// A run of commits costs its statements once, not once a commit: nothing reads the
    /// rows between them, so their peer rows go into `peer_log` as one record (in order;
    /// any other write, and anything that reads the log, comes after the rows before it),
    /// and only the run's last commit writes the commit point and the epoch history (a
    /// later commit's history holds an earlier one's). A write after the run reads the
    /// commit point it left: a peer image is of the commit before it, and is dropped as
    /// stale against any other.
    private func performInOneTransaction(_ writes: [StoreWrite]) throws {
        var next = state
        func isCommit(_ i: Int) -> Bool { if i < writes.count, case .commit = writes[i] { true } else { false } }
        let peerRows = writes.reduce(0) { if case .commit(let rows) = $1 { $0 + rows.peerRows } else { $0 } }
        try transaction(syncing: writes.contains(where: Self.needsFullSync)) { db in
            var log = PeerLogRecord(capacity: peerRows)
            for (i, write) in writes.enumerated() {
                if case .commit(let rows) = write {
                    try Self.apply(rows, db, &next, log: &log, recordsCommitPoint: !isCommit(i + 1))
                } else {
                    try Self.append(&log, db)
                    try Self.perform(write, db, &next)
                }
            }
            try Self.append(&log, db)
            let scaled = max(next.baseRows, next.peers).multipliedReportingOverflow(by: foldRatio)
            if next.logRows >= max(foldThreshold, scaled.overflow ? Int.max : scaled.partialValue) {
                try Self.fold(db, &next)
            }
        }
        state = next
    }

    /// Whether a write must survive a power loss, not only a killed process. A candidate
    /// leads once its epoch write is done; under `synchronous = NORMAL` a power loss may
    /// roll that write back, and the restarted node could claim the same epoch a second
    /// time. One fsync per election is cheap; commits stay unsynced (the other replicas
    /// hold them).
    public static func needsFullSync(_ write: StoreWrite) -> Bool {
        if case .epoch = write { return true } else { return false }
    }

    /// One SQL transaction; with `syncing`, committed under `synchronous = FULL` (the WAL
    /// is synced before the commit returns), then back to NORMAL.
    func transaction(syncing: Bool, _ body: (Database) throws -> Void) throws {
        guard syncing else { return try db.write(body) }
        try db.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            defer { try? db.execute(sql: "PRAGMA synchronous = NORMAL") }
            try db.inTransaction {
                try body(db)
                return .commit
            }
        }
    }

    /// Caps the file at `pages` pages, as a full disk would: writes beyond it fail with
    /// SQLITE_FULL. Lets tests exercise the full-disk path without filling a disk.
    public func limitSize(extraPages: Int) throws {
        try db.write { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            _ = try Int.fetchOne(db, sql: "PRAGMA max_page_count = \(pages + extraPages)")
        }
    }

    /// The swarms table: info hash → completed, as stored (the dashboard reads it).
    public func swarmRows() throws -> [InfoHash: Int] {
        try db.read { db in
            var out: [InfoHash: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT info_hash, completed FROM swarms") {
                if let hash = try row.decode(String?.self, forColumn: "info_hash").flatMap(InfoHash.init(hex:)),
                   let completed = try row.decode(Int?.self, forColumn: "completed") {
                    out[hash] = completed
                }
            }
            return out
        }
    }

    /// Row counts, for logs and tests: the swarms, and the peers the base and the log
    /// hold together.
    public func counts() throws -> (swarms: Int, peers: Int) {
        try db.read { db in
            var peers = try Int.fetchOne(db, sql: "SELECT count(*) FROM peer_base") ?? 0
            let inBase = try db.makeStatement(sql: "SELECT count(*) FROM peer_base WHERE info_hash = ? AND peer_id = ? AND ip = ?")
            for (slot, record) in try Self.latestLogRows(db) {
                var key = StatementBinder(inBase, in: db)
                key.bind(slot.infoHash, slot.key)
                peers += (record == nil ? 0 : 1) - (try key.count())
            }
            return (try Int.fetchOne(db, sql: "SELECT count(*) FROM swarms") ?? 0, peers)
        }
    }
}

extension StoreWrite {
    var isWipe: Bool { if case .wipe = self { true } else { false } }

    var name: String {
        switch self {
        case .commit(let rows): "commit \(rows.lastCommitted)"
        case .snapshot(let s): "snapshot \(s.lastCommitted)"
        case .peerImage(let image): "peer image \(image.lastCommitted)"
        case .epoch(let e): "epoch \(e)"
        case .wipe: "wipe"
        case .keep(let entries): "keep \(entries.count) operator entries"
        case .dropKept: "drop kept operator entries"
        case .setAside(let parts): "set aside \(parts.count) offer parts"
        case .probe: "probe"
        }
    }
}

extension SQLiteRepository {
    /// A repository in a file of its own under `directory`, removed with its WAL after
    /// `body`: the benches' scratch disk.
    package static func scratch<T>(in directory: String, named name: String, _ body: (SQLiteRepository) throws -> T) throws -> T {
        let path = directory + "/\(name)-\(getpid()).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        return try body(try SQLiteRepository(path: path))
    }
}
