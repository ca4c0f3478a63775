import Foundation
import GRDB
import TrackerLogic

/// What the node asks of its disk, in the order it asked.
public enum StoreWrite: Sendable {
    case commit(CommitRows)
    case snapshot(Snapshot)
    /// The peer rows written afresh from memory, the log dropped (`NodeAction.persistPeerImage`).
    case peerImage(PeerImage)
    case epoch(Epoch)
    case wipe
    /// Replaces the operator data kept through a clean stop (`NodeAction.keepOperatorData`).
    case keep([KeptEntry])
    /// Replaces the diverged repository's offer set aside (`NodeAction.setAside`).
    case setAside([MergeOffer])
    case probe
}

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

    static func perform(_ write: StoreWrite, _ db: Database, _ state: inout WriterState) throws {
        switch write {
        case .commit(let rows):
            var log = PeerLogRecord(capacity: rows.peerRows)
            try apply(rows, db, &state, log: &log, recordsCommitPoint: true)
            try append(&log, db)
        case .snapshot(let s): try replace(with: s, db, &state)
        case .peerImage(let image): try writePeers(of: image, db, &state)
        case .epoch(let e):
            let stored = try meta("epoch", db).map { Epoch(packed: UInt64(bitPattern: $0)) } ?? .zero
            // Only ever upwards — except over an impossible stored value (a forged
            // term that once reached the disk), which the node has reported and reset.
            if e > stored || !stored.isWellFormed { try setMeta("epoch", Int64(bitPattern: e.packed), db) }
        case .wipe:
            try wipe(db, keepEpoch: true)
            state = WriterState()
        case .keep(let entries):
            try db.execute(sql: "DELETE FROM kept_entries")
            for (i, e) in entries.enumerated() {
                try run(db, "INSERT INTO kept_entries(seq, entry) VALUES (?, ?)", [Int64(i), Data(ClusterCodec.encode(e))])
            }
        case .setAside(let parts):
            try db.execute(sql: "DELETE FROM set_aside_parts")
            for (i, part) in parts.enumerated() {
                try run(db, "INSERT INTO set_aside_parts(seq, part) VALUES (?, ?)", [Int64(i), Data(ClusterCodec.encode(part))])
            }
        case .probe:
            // A real write: a read-only or full disk fails here, not on the next commit.
            try setMeta("probe", Int64(try meta("probe", db) ?? 0) &+ 1, db)
        }
    }

    /// Writes `rows`, their peer rows added to `log` (appended to `peer_log` before any
    /// other change, and left for the caller to append after the last of them); with
    /// `recordsCommitPoint`, the commit point and the epoch history too.
    static func apply(_ rows: CommitRows, _ db: Database, _ state: inout WriterState,
                      log: inout PeerLogRecord, recordsCommitPoint: Bool) throws {
        // A peer written needs its swarm's row to exist; rows.swarms says how the others stand.
        var unknown: [InfoHash] = []
        state.peers = rows.peerCount
        for change in rows.changes {
            if case .peer = change {} else { try append(&log, db) }
            switch change {
            case .peer(let hash, let key, let record):
                log.append(hash, key, record)
                state.logRows += 1
                if record != nil && !state.knownSwarms.contains(hash) { unknown.append(hash) }
            case .completion(let hash, let key):
                try run(db, "INSERT OR IGNORE INTO completions(info_hash, peer_id, ip) VALUES (?, ?, ?)", [hash.hex, key.peerID.hex, key.ip.description])
            case .stop(let hash, let key, let at):
                try writeStop(hash, key, at, db)
            case .swarm(let hash, let content):
                try fold(db, &state)
                try run(db, "DELETE FROM peer_base WHERE info_hash = ?", [Data(hash.bytes)])
                try run(db, "DELETE FROM completions WHERE info_hash = ?", [hash.hex])
                try run(db, "DELETE FROM peer_stops WHERE info_hash = ?", [Data(hash.bytes)])
                if let content { try insert(content, db) }
            case .expire(let before):
                try fold(db, &state)
                try run(db, "DELETE FROM peer_base WHERE last_announce < ?", [before.milliseconds])
                try run(db, "DELETE FROM peer_stops WHERE at < ?", [before.milliseconds])
            case .torrent, .accessMode, .accessRule, .torrentStamp, .ruleStamp, .modeStamp, .pruneTombstones, .completedBase,
                 .clientRule, .clientStamp:
                try writeCatalogue(change, db)
            }
        }
        if !rows.expires {
            for row in rows.swarms { try setSwarm(row.infoHash, completed: row.completed, db, &state) }
            for hash in unknown where !state.knownSwarms.contains(hash) {
                try run(db, "INSERT OR IGNORE INTO swarms(info_hash, completed) VALUES (?, 0)", [hash.hex])
                state.knownSwarms.insert(hash)
            }
        } else {
            // Rows come and go in bulk here: count them all, and forget which exist.
            try append(&log, db)
            try fold(db, &state)
            state.knownSwarms = []
            try db.execute(sql: """
                INSERT OR IGNORE INTO swarms(info_hash) SELECT DISTINCT lower(hex(info_hash)) FROM peer_base
                UNION SELECT DISTINCT info_hash FROM completions
                """)
            try db.execute(sql: """
                UPDATE swarms SET completed = (SELECT count(*) FROM completions c WHERE c.info_hash = swarms.info_hash)
                """)
            try db.execute(sql: """
                DELETE FROM swarms WHERE completed = 0
                AND info_hash NOT IN (SELECT DISTINCT lower(hex(info_hash)) FROM peer_base)
                """)
        }
        if recordsCommitPoint { try setLastCommitted(rows.lastCommitted, history: rows.history, db) }
    }

    /// Appends the record's rows to `peer_log` as one row, and starts the next record
    /// (a run of commits' rows is split only where another kind of change comes between
    /// them, so the log keeps the transactions' order).
    static func append(_ log: inout PeerLogRecord, _ db: Database) throws {
        guard !log.isEmpty else { return }
        let sql = "INSERT INTO peer_log(rows, record) VALUES (?, ?)"
        var row = StatementBinder(try db.cachedStatement(sql: sql), in: db)
        row.bind(Int64(log.rows))
        row.bind(log.bytes)
        try row.step(sql: sql)
        log = PeerLogRecord()
    }

    /// A peer's place in the repository: what a later row of the log replaces.
    struct PeerSlot: Hashable, Comparable {
        var infoHash: InfoHash
        var key: PeerKey
        static func < (l: PeerSlot, r: PeerSlot) -> Bool {
            (l.infoHash, l.key.peerID, l.key.ip) < (r.infoHash, r.key.peerID, r.key.ip)
        }
    }

    /// Each logged peer's latest row (nil: removed), read in the log's order: one
    /// dictionary insert per row, so a restart reads the log in time linear in it. A
    /// record no writer of ours leaves is corruption.
    static func latestLogRows(_ db: Database) throws -> [PeerSlot: PeerRecord?] {
        var latest: [PeerSlot: PeerRecord?] = [:]
        let records = try Row.fetchCursor(db, sql: "SELECT seq, record FROM peer_log ORDER BY seq")
        while let row = try records.next() {
            let seq = try row.decode(Int64?.self, forColumn: "seq")
            guard let bytes = try row.decode(Data?.self, forColumn: "record") else {
                throw RepositoryError("corrupt peer log record \(seq ?? -1): no bytes")
            }
            switch bytes.withUnsafeBytes({ PeerLogRecord.decode($0) }) {
            case .success(let rows):
                for r in rows { latest.updateValue(r.record, forKey: PeerSlot(infoHash: r.infoHash, key: r.key)) }
            case .failure(let error):
                throw RepositoryError("corrupt peer log record \(seq ?? -1): \(error)")
            }
        }
        return latest
    }

    /// Moves the log into `peer_base`: each peer's latest row, in key order so the base's
    /// pages are visited in order, written once however many rows the peer has in the
    /// log; a peer whose latest row is a removal goes. Learns the base's size, which sets
    /// when the next fold is due.
    static func fold(_ db: Database, _ state: inout WriterState) throws {
        guard state.logRows > 0 else { return }
        let latest = try latestLogRows(db)
        var base = try PeerRowAppender(db)
        let remove = "DELETE FROM peer_base WHERE info_hash = ? AND peer_id = ? AND ip = ?"
        let removal = try db.cachedStatement(sql: remove)
        for (slot, latest) in latest.sorted(by: { $0.key < $1.key }) {
            if let record = latest {
                try base.append(slot.infoHash, record)
            } else {
                var row = StatementBinder(removal, in: db)
                row.bind(slot.infoHash, slot.key)
                try row.step(sql: remove)
            }
        }
        try base.flush()
        try db.execute(sql: "DELETE FROM peer_log")
        state.logRows = 0
        state.baseRows = try Int.fetchOne(db, sql: "SELECT count(*) FROM peer_base") ?? 0
    }

    /// `PeerImage`: the log and the base emptied, then every peer of the image written
    /// into the log, `imageRowsPerRecord` to a record, swarm by swarm in info hash order.
    /// Only over the commit the image is of: the node asks for it right after that
    /// commit's rows, so the file holds exactly its peers then; a file that holds another
    /// (a write lost before it) keeps its rows and its log.
    ///
    /// Into the log, not the base: a base row is a B-tree insert of eight bound values,
    /// and a large image written that way cost its writer more than all the commits'
    /// rows logged before it. A reader lays the log over the base whatever it holds, so
    /// the image's rows read back as the commits' do; a fold (a backstop now) moves them
    /// to the base.
    static func writePeers(of image: PeerImage, _ db: Database, _ state: inout WriterState) throws {
        let stored = TxRef(epoch: Epoch(packed: UInt64(bitPattern: try meta("last_epoch", db) ?? 0)),
                           txid: UInt64(bitPattern: try meta("last_txid", db) ?? 0))
        guard stored == image.lastCommitted else { return }
        try db.execute(sql: "DELETE FROM peer_log; DELETE FROM peer_base")
        var rows = 0
        var log = PeerLogRecord(capacity: imageRowsPerRecord)
        // Swarm by swarm, not `content()`: that would hold every peer a second time.
        let swarms = image.store.swarms
        for hash in swarms.keys.sorted() {
            guard let swarm = swarms[hash] else { continue }
            for record in swarm.peers {
                log.append(hash, record.key, record)
                rows += 1
                if log.rows == imageRowsPerRecord { try append(&log, db) }
            }
        }
        try append(&log, db)
        state.logRows = rows
        state.baseRows = 0
        state.peers = rows
    }

    /// Peers per log record of an image: about 80 KB, a few dozen pages of one B-tree
    /// cell's overflow chain, written in order.
    static let imageRowsPerRecord = 1024

    /// The swarms row as memory holds it: gone with the swarm, else its completion count.
    static func setSwarm(_ infoHash: InfoHash, completed: Int?, _ db: Database, _ state: inout WriterState) throws {
        if let completed {
            try run(db, """
                INSERT INTO swarms(info_hash, completed) VALUES (?, ?)
                ON CONFLICT(info_hash) DO UPDATE SET completed = excluded.completed
                """, [infoHash.hex, completed])
            state.knownSwarms.insert(infoHash)
        } else {
            try run(db, "DELETE FROM swarms WHERE info_hash = ?", [infoHash.hex])
            state.knownSwarms.remove(infoHash)
        }
    }

    /// One statement that writes `rows` peers into the base (a later row of the same key
    /// wins). Only after a fold, an image or a wipe, or for a swarm rewritten whole after
    /// a fold: when the log holds nothing that a later fold would lay over it.
    static func baseSQL(rows: Int) -> String {
        let values = Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?)", count: max(rows, 1)).joined(separator: ", ")
        return #"INSERT OR REPLACE INTO peer_base(info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce) VALUES "#
            + values
    }

    /// Writes peers into the base, `batch` rows per statement: one statement per row spent
    /// as much CPU in stepping, resetting and clearing it as in the row (`tracker bench
    /// --store`). What is held back is written by `flush`.
    struct PeerRowAppender {
        static let batch = 16
        static let sql = (single: baseSQL(rows: 1), batch: baseSQL(rows: batch))
        private let db: Database
        // Looked up once: GRDB's cache finds a statement by hashing its SQL text.
        private let single: Statement
        private let many: Statement
        private var held: [(InfoHash, PeerRecord)] = []

        init(_ db: Database) throws {
            self.db = db
            single = try db.cachedStatement(sql: Self.sql.single)
            many = try db.cachedStatement(sql: Self.sql.batch)
            held.reserveCapacity(Self.batch)
        }

        mutating func append(_ hash: InfoHash, _ record: PeerRecord) throws {
            held.append((hash, record))
            guard held.count == Self.batch else { return }
            var rows = StatementBinder(many, in: db)
            for (hash, record) in held { rows.bind(hash, record) }
            try rows.step(sql: Self.sql.batch)
            held.removeAll(keepingCapacity: true)
        }

        mutating func flush() throws {
            for (hash, record) in held {
                var row = StatementBinder(single, in: db)
                row.bind(hash, record)
                try row.step(sql: Self.sql.single)
            }
            held.removeAll(keepingCapacity: true)
        }
    }

    /// A swarm written whole into `peer_base`, `completions` and `peer_stops`; its swarms
    /// row follows from the content (memory keeps a swarm while it has a peer, a
    /// completion or a stop).
    static func insert(_ content: SwarmMerge, _ db: Database) throws {
        let hash = content.infoHash.hex
        var base = try PeerRowAppender(db)
        for r in content.peers { try base.append(content.infoHash, r) }
        try base.flush()
        for key in content.completed {
            try run(db, "INSERT OR IGNORE INTO completions(info_hash, peer_id, ip) VALUES (?, ?, ?)", [hash, key.peerID.hex, key.ip.description])
        }
        for stop in content.stops { try writeStop(content.infoHash, stop.key, stop.at, db) }
    }

    /// A peer's stop as memory holds it (`PeerStops`; nil: none).
    static func writeStop(_ hash: InfoHash, _ key: PeerKey, _ at: Instant?, _ db: Database) throws {
        let sql = at == nil ? "DELETE FROM peer_stops WHERE info_hash = ? AND peer_id = ? AND ip = ?"
            : "INSERT OR REPLACE INTO peer_stops(info_hash, peer_id, ip, at) VALUES (?, ?, ?, ?)"
        var row = StatementBinder(try db.cachedStatement(sql: sql), in: db)
        row.bind(hash, key)
        if let at { row.bind(at.milliseconds) }
        try row.step(sql: sql)
    }

    /// A catalogue row as memory holds it after the change (the other kinds are not
    /// catalogue rows: nothing to write).
    static func writeCatalogue(_ change: CommitRows.Change, _ db: Database) throws {
        switch change {
        case .torrent(let hash, let t):
            try run(db, "DELETE FROM torrents WHERE info_hash = ?", [hash.hex])
            if let t { try insert(t, db) }
        case .accessMode(let mode):
            try setMeta("access_mode", Int64(mode.rawValue), db)
        case .accessRule(let hash, let rule):
            if let rule {
                try run(db, "INSERT OR REPLACE INTO access_rules(info_hash, rule) VALUES (?, ?)", [hash.hex, Int64(rule.rawValue)])
            } else {
                try run(db, "DELETE FROM access_rules WHERE info_hash = ?", [hash.hex])
            }
        case .torrentStamp(let hash, let stamp):
            try writeStamp(kind: torrentStamps, hash, stamp, db)
        case .ruleStamp(let hash, let stamp):
            try writeStamp(kind: ruleStamps, hash, stamp, db)
        case .modeStamp(let ref):
            if let ref {
                try setMeta("access_mode_term", Int64(ref.epoch.term), db)
                try setMeta("access_mode_master", Int64(ref.epoch.master.rawValue), db)
                try setMeta("access_mode_txid", Int64(bitPattern: ref.txid), db)
            } else {
                try run(db, "DELETE FROM cluster_meta WHERE key IN ('access_mode_term', 'access_mode_master', 'access_mode_txid')", [])
            }
        case .clientRule(let prefix, let rule):
            if let rule {
                try run(db, "INSERT OR REPLACE INTO client_rules(prefix, rule) VALUES (?, ?)", [Data(prefix.bytes), Int64(rule.rawValue)])
            } else {
                try run(db, "DELETE FROM client_rules WHERE prefix = ?", [Data(prefix.bytes)])
            }
        case .clientStamp(let prefix, let stamp):
            try writeStamp(kind: clientStamps, key: hex(prefix.bytes), stamp, db)
        case .pruneTombstones:
            for kind in [torrentStamps, ruleStamps, clientStamps] { try pruneTombstones(kind: kind, db) }
        case .completedBase(let hash, let count):
            if let count {
                try run(db, "INSERT OR REPLACE INTO completed_bases(info_hash, count) VALUES (?, ?)", [hash.hex, Int64(count)])
            } else {
                try run(db, "DELETE FROM completed_bases WHERE info_hash = ?", [hash.hex])
            }
        case .peer, .completion, .stop, .swarm, .expire:
            break
        }
    }

    /// A client rule's stamp is keyed by its prefix in hex, which sorts as the bytes do
    /// (two digits a byte), so pruning drops the tombstones memory drops.
    static let torrentStamps: Int64 = 1, ruleStamps: Int64 = 2, clientStamps: Int64 = 3

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func writeStamp(kind: Int64, _ hash: InfoHash, _ stamp: CatalogueStamp?, _ db: Database) throws {
        try writeStamp(kind: kind, key: hash.hex, stamp, db)
    }

    static func writeStamp(kind: Int64, key: String, _ stamp: CatalogueStamp?, _ db: Database) throws {
        guard let stamp else { return try run(db, "DELETE FROM catalogue_stamps WHERE kind = ? AND info_hash = ?", [kind, key]) }
        try run(db, "INSERT OR REPLACE INTO catalogue_stamps(kind, info_hash, term, master, txid, removed) VALUES (?, ?, ?, ?, ?, ?)",
                [kind, key, Int64(stamp.ref.epoch.term), Int64(stamp.ref.epoch.master.rawValue), Int64(bitPattern: stamp.ref.txid),
                 stamp.removed ? 1 : 0])
    }

    /// `CatalogueStamps.pruneTombstones` on the rows: the same tombstones go, in the same
    /// order (stamp, then hash: hex digits sort as the bytes do).
    static func pruneTombstones(kind: Int64, _ db: Database) throws {
        let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM catalogue_stamps WHERE kind = ? AND removed = 1"),
                                     arguments: [kind]) ?? 0
        guard count > CatalogueStamps.maxTombstones else { return }
        try run(db, """
            DELETE FROM catalogue_stamps WHERE kind = ? AND removed = 1 AND info_hash IN (
                SELECT info_hash FROM catalogue_stamps WHERE kind = ? AND removed = 1
                ORDER BY term, master, txid, info_hash LIMIT ?)
            """, [kind, kind, count - CatalogueStamps.tombstonesAfterPruning])
    }

    static func insert(_ t: RegisteredTorrent, _ db: Database) throws {
        try run(db, "INSERT OR REPLACE INTO torrents(info_hash, name, file, registered_at) VALUES (?, ?, ?, ?)",
                [t.infoHash.hex, t.metadata.name, Data(t.file), t.registeredAt.milliseconds])
    }

    static func replace(with snapshot: Snapshot, _ db: Database, _ state: inout WriterState) throws {
        try wipe(db, keepEpoch: true)
        state = WriterState()
        for content in snapshot.content {
            try insert(content, db)
            state.baseRows += content.peers.count
            let empty = content.peers.isEmpty && content.completed.isEmpty && content.stops.isEmpty
            try setSwarm(content.infoHash, completed: empty ? nil : Set(content.completed).count, db, &state)
        }
        state.peers = state.baseRows
        for t in snapshot.torrents { try insert(t, db) }
        try setMeta("access_mode", Int64(snapshot.access.mode.rawValue), db)
        for e in snapshot.access.sortedRules {
            try run(db, "INSERT INTO access_rules(info_hash, rule) VALUES (?, ?)", [e.infoHash.hex, Int64(e.rule.rawValue)])
        }
        for (hash, stamp) in snapshot.stamps.torrents { try writeStamp(kind: torrentStamps, hash, stamp, db) }
        for (hash, stamp) in snapshot.stamps.rules { try writeStamp(kind: ruleStamps, hash, stamp, db) }
        for e in snapshot.access.clients.sortedRules { try writeCatalogue(.clientRule(e.prefix, e.rule), db) }
        for (prefix, stamp) in snapshot.stamps.clients { try writeCatalogue(.clientStamp(prefix, stamp), db) }
        try writeCatalogue(.modeStamp(snapshot.stamps.mode), db)
        for (hash, count) in snapshot.completedBase { try writeCatalogue(.completedBase(hash, count), db) }
        try setLastCommitted(snapshot.lastCommitted, history: snapshot.history, db)
    }

    static func wipe(_ db: Database, keepEpoch: Bool) throws {
        let epoch = try meta("epoch", db)
        try db.execute(sql: "DELETE FROM peer_base; DELETE FROM peer_log; DELETE FROM completions; DELETE FROM peer_stops; DELETE FROM swarms; DELETE FROM torrents; DELETE FROM access_rules; DELETE FROM client_rules; DELETE FROM catalogue_stamps; DELETE FROM completed_bases; DELETE FROM epoch_runs; DELETE FROM cluster_meta;")
        if keepEpoch, let epoch { try setMeta("epoch", epoch, db) }
    }

    static func setLastCommitted(_ ref: TxRef, history: EpochHistory, _ db: Database) throws {
        try setMeta("last_epoch", Int64(bitPattern: ref.epoch.packed), db)
        try setMeta("last_txid", Int64(bitPattern: ref.txid), db)
        let stored = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM epoch_runs")) ?? 0
        guard stored != history.runs.count else { return }
        try db.execute(sql: "DELETE FROM epoch_runs")
        for run in history.runs {
            try db.execute(sql: "INSERT INTO epoch_runs(term, master, first_txid) VALUES (?, ?, ?)",
                           arguments: [Int64(run.epoch.term), Int64(run.epoch.master.rawValue), Int64(bitPattern: run.firstTxid)])
        }
    }

    static func meta(_ key: String, _ db: Database) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM cluster_meta WHERE key = ?"), arguments: [key])
    }

    static func setMeta(_ key: String, _ value: Int64, _ db: Database) throws {
        try run(db, "INSERT OR REPLACE INTO cluster_meta(key, value) VALUES (?, ?)", [key, value])
    }

    /// Hot statements are compiled once per connection, not once per row.
    static func run(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws {
        try db.cachedStatement(sql: sql).execute(arguments: arguments)
    }

    // MARK: a standalone node's operator data

    /// A standalone node keeps only its operator data here (registered torrents and the
    /// access policy, in the tables a cluster node's repository uses): its swarms are soft
    /// state its peers announce again. Each change is written as it is made, in one SQL
    /// transaction, synced (the operator was told it is done).
    public func record(_ change: CatalogueChange, in catalogue: Catalogue) throws {
        do {
            try transaction(syncing: true) { db in
                for row in CommitRows.rows(of: change, in: catalogue) { try Self.writeCatalogue(row, db) }
            }
        } catch {
            throw RepositoryError("cannot write operator data to \(path): \(error)")
        }
    }

    /// The operator data a standalone node kept (a corrupt row fails the read, as it fails
    /// a cluster node's load).
    public func operatorData() throws -> Catalogue {
        do {
            let (torrents, access, bases) = try db.read { db in (try Self.torrents(db), try Self.access(db), try Self.completedBases(db)) }
            var catalogue = Catalogue()
            for t in torrents where catalogue.refusal(t) == nil { catalogue.apply(.register(t)) }
            for change in AccessPolicy().missing(access.sortedRules) + ClientFilter().missing(access.clients.sortedRules) {
                catalogue.apply(change)
            }
            catalogue.apply(.setAccessMode(access.mode))
            for change in Catalogue.restoring(KeptEntry.completions(bases)) { catalogue.apply(change) }
            return catalogue
        } catch {
            throw RepositoryError("cannot read operator data from \(path): \(error)")
        }
    }

    // MARK: reads

    /// What the disk holds after a crash: the repository (verified against its own
    /// checksum by construction) and the highest epoch ever accepted.
    public func load() throws -> DurableState {
        do {
            return try db.read { db in
                let epoch = try Self.meta("epoch", db).map { Epoch(packed: UInt64(bitPattern: $0)) } ?? .zero
                let kept = try Self.kept(db)
                let setAside = try Self.setAside(db)
                guard let lastTxid = try Self.meta("last_txid", db), lastTxid > 0,
                      let lastEpoch = try Self.meta("last_epoch", db) else {
                    return DurableState(snapshot: nil, epoch: epoch, kept: kept, setAside: setAside)
                }
                let content = try Self.content(db)
                let runs = try Row.fetchAll(db, sql: "SELECT term, master, first_txid FROM epoch_runs ORDER BY first_txid, term, master").map {
                    EpochHistory.Run(epoch: Epoch(term: UInt32(truncatingIfNeeded: try $0.decode(Int64.self, forColumn: "term")),
                                                  master: NodeID(UInt32(truncatingIfNeeded: try $0.decode(Int64.self, forColumn: "master")))),
                                     firstTxid: UInt64(bitPattern: try $0.decode(Int64.self, forColumn: "first_txid")))
                }
                let snapshot = Snapshot(restoredAt: TxRef(epoch: Epoch(packed: UInt64(bitPattern: lastEpoch)), txid: UInt64(bitPattern: lastTxid)),
                                        history: EpochHistory(runs: runs), content: content, torrents: try Self.torrents(db),
                                        access: try Self.access(db), stamps: try Self.stamps(db),
                                        completedBase: try Self.completedBases(db))
                return DurableState(snapshot: snapshot, epoch: epoch, kept: kept, setAside: setAside)
            }
        } catch {
            throw RepositoryError("cannot read repository \(path): \(error)")
        }
    }

    /// Each file is parsed again: a row whose file is no torrent (or whose key is not its
    /// hash) is corruption, reported like a corrupt peer row.
    ///
    /// Every column is read with GRDB's throwing `decode`, never its subscript (a `try!`):
    /// the file is input like any other, and a NULL or a blob where a number belongs must
    /// fail the load, not the process.
    static func torrents(_ db: Database) throws -> [RegisteredTorrent] {
        try Row.fetchAll(db, sql: "SELECT info_hash, file, registered_at FROM torrents ORDER BY info_hash").map { row in
            let key = try row.decode(String?.self, forColumn: "info_hash")
            guard let file = try row.decode(Data?.self, forColumn: "file"),
                  let registeredAt = try row.decode(Int64?.self, forColumn: "registered_at"),
                  let t = try? RegisteredTorrent(file: Array(file), registeredAt: Instant(milliseconds: registeredAt)),
                  t.infoHash.hex == key else {
                throw RepositoryError("corrupt torrent row \(key ?? "?")")
            }
            return t
        }
    }

    /// Registered torrents' completions from before a full stop.
    static func completedBases(_ db: Database) throws -> [InfoHash: Int] {
        var out: [InfoHash: Int] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT info_hash, count FROM completed_bases") {
            let key = try row.decode(String?.self, forColumn: "info_hash")
            guard let hash = key.flatMap({ InfoHash(hex: $0) }), let count = try row.decode(Int64?.self, forColumn: "count"),
                  let n = Int(exactly: count), n >= 0, n <= Int(UInt32.max) else {
                throw RepositoryError("corrupt completion count \(key ?? "?")")
            }
            out[hash] = n
        }
        return out
    }

    /// The operator data a clean stop kept, in the order it was written.
    static func kept(_ db: Database) throws -> [KeptEntry] {
        try encodedRows(db, table: "kept_entries", column: "entry", what: "kept entry", decode: ClusterCodec.decodeKeptEntry)
    }

    /// The diverged repository's offer set aside, in part order.
    static func setAside(_ db: Database) throws -> [MergeOffer] {
        try encodedRows(db, table: "set_aside_parts", column: "part", what: "set-aside offer part", decode: ClusterCodec.decodeMergeOffer)
    }

    /// A table of codec-encoded values in `seq` order; one that does not decode fails the
    /// read, naming `what`.
    static func encodedRows<T>(_ db: Database, table: String, column: String, what: String,
                               decode: ([UInt8]) -> Result<T, ClusterDecodingError>) throws -> [T] {
        try Row.fetchAll(db, sql: "SELECT seq, \(column) FROM \(table) ORDER BY seq").map { row in
            guard let data = try row.decode(Data?.self, forColumn: column) else { throw RepositoryError("corrupt \(what)") }
            switch decode(Array(data)) {
            case .success(let value): return value
            case .failure(let error): throw RepositoryError("corrupt \(what): \(error)")
            }
        }
    }

    /// The catalogue's stamps; an impossible transaction or flag is corruption.
    static func stamps(_ db: Database) throws -> CatalogueStamps {
        func ref(_ term: Int64?, _ master: Int64?, _ txid: Int64?) -> TxRef? {
            guard let term = term.flatMap(UInt32.init(exactly:)), let master = master.flatMap(UInt32.init(exactly:)),
                  let txid else { return nil }
            let r = TxRef(epoch: Epoch(term: term, master: NodeID(master)), txid: UInt64(bitPattern: txid))
            return r.isWellFormed ? r : nil
        }
        var torrents: [InfoHash: CatalogueStamp] = [:], rules: [InfoHash: CatalogueStamp] = [:]
        var clients: [ClientPrefix: CatalogueStamp] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT kind, info_hash, term, master, txid, removed FROM catalogue_stamps") {
            let key = try row.decode(String?.self, forColumn: "info_hash")
            if try row.decode(Int64?.self, forColumn: "kind") == clientStamps {
                guard let prefix = key.flatMap({ ClientPrefix("0x" + $0) }),
                      let r = ref(try row.decode(Int64?.self, forColumn: "term"), try row.decode(Int64?.self, forColumn: "master"),
                                  try row.decode(Int64?.self, forColumn: "txid")),
                      let removed = try row.decode(Int64?.self, forColumn: "removed"), removed == 0 || removed == 1 else {
                    throw RepositoryError("corrupt client rule stamp \(key ?? "?")")
                }
                clients[prefix] = CatalogueStamp(ref: r, removed: removed == 1)
                continue
            }
            guard let hash = key.flatMap({ InfoHash(hex: $0) }), let kind = try row.decode(Int64?.self, forColumn: "kind"),
                  let r = ref(try row.decode(Int64?.self, forColumn: "term"), try row.decode(Int64?.self, forColumn: "master"),
                              try row.decode(Int64?.self, forColumn: "txid")),
                  let removed = try row.decode(Int64?.self, forColumn: "removed"), removed == 0 || removed == 1 else {
                throw RepositoryError("corrupt catalogue stamp \(key ?? "?")")
            }
            let stamp = CatalogueStamp(ref: r, removed: removed == 1)
            switch kind {
            case torrentStamps: torrents[hash] = stamp
            case ruleStamps: rules[hash] = stamp
            default: throw RepositoryError("corrupt catalogue stamp kind \(kind)")
            }
        }
        var mode: TxRef?
        if let term = try meta("access_mode_term", db) {
            guard let r = ref(term, try meta("access_mode_master", db), try meta("access_mode_txid", db)) else {
                throw RepositoryError("corrupt access mode stamp")
            }
            mode = r
        }
        return CatalogueStamps(torrents: torrents, rules: rules, mode: mode, clients: clients)
    }

    /// The access mode, rules and client rules; a mode or rule no version wrote, a key that
    /// is not forty hex digits, or a prefix of no peer id's length, is corruption.
    static func access(_ db: Database) throws -> AccessPolicy {
        let rawMode = try meta("access_mode", db) ?? 0
        guard let mode = UInt8(exactly: rawMode).flatMap(AccessMode.init(rawValue:)) else {
            throw RepositoryError("corrupt access mode \(rawMode)")
        }
        let rules = try Row.fetchAll(db, sql: "SELECT info_hash, rule FROM access_rules ORDER BY info_hash").map { row in
            let key = try row.decode(String?.self, forColumn: "info_hash")
            guard let hash = key.flatMap({ InfoHash(hex: $0) }), let raw = try row.decode(Int64?.self, forColumn: "rule"),
                  let rule = UInt8(exactly: raw).flatMap(AccessRule.init(rawValue:)) else {
                throw RepositoryError("corrupt access rule \(key ?? "?")")
            }
            return AccessEntry(infoHash: hash, rule: rule)
        }
        let clients = try Row.fetchAll(db, sql: "SELECT prefix, rule FROM client_rules ORDER BY prefix").map { row in
            let bytes = try row.decode(Data?.self, forColumn: "prefix")
            guard let prefix = bytes.flatMap({ ClientPrefix(bytes: Array($0)) }), let raw = try row.decode(Int64?.self, forColumn: "rule"),
                  let rule = UInt8(exactly: raw).flatMap(AccessRule.init(rawValue:)) else {
                throw RepositoryError("corrupt client rule \(bytes.map { hex(Array($0)) } ?? "?")")
            }
            return ClientRuleEntry(prefix: prefix, rule: rule)
        }
        guard clients.count <= ClientFilter.maxRules else { throw RepositoryError("corrupt client list of \(clients.count) rules") }
        return AccessPolicy(mode: mode, rules: rules, clients: clients)
    }

    static func content(_ db: Database) throws -> [SwarmMerge] {
        var peers: [InfoHash: [PeerRecord]] = [:]
        var completed: [InfoHash: [PeerKey]] = [:]
        // The log's latest rows replace the base's: a base row the log holds is skipped.
        let latest = try latestLogRows(db)
        let peerRows = try Row.fetchCursor(db, sql: """
            SELECT info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce FROM peer_base
            """)
        while let row = try peerRows.next() {
            guard let hash = try row.decode(Data?.self, forColumn: "info_hash").flatMap(InfoHash.init(bytes:)),
                  let id = try row.decode(Data?.self, forColumn: "peer_id").flatMap(PeerID.init(bytes:)),
                  let ip = try row.decode(String?.self, forColumn: "ip").flatMap(IPAddress.init),
                  let port = try row.decode(Int64?.self, forColumn: "port").flatMap(UInt16.init(exactly:)),
                  let uploaded = try row.decode(Int64?.self, forColumn: "uploaded"),
                  let downloaded = try row.decode(Int64?.self, forColumn: "downloaded"),
                  let left = try row.decode(Int64?.self, forColumn: "left"),
                  let lastAnnounce = try row.decode(Int64?.self, forColumn: "last_announce") else {
                throw RepositoryError("corrupt peer row \(row)")
            }
            if !latest.isEmpty, latest[PeerSlot(infoHash: hash, key: PeerKey(peerID: id, ip: ip))] != nil { continue }
            peers[hash, default: []].append(PeerRecord(peerID: id, endpoint: PeerEndpoint(ip: ip, port: port),
                                                       uploaded: uploaded, downloaded: downloaded,
                                                       left: left, lastAnnounce: Instant(milliseconds: lastAnnounce)))
        }
        for (slot, record) in latest {
            if let record { peers[slot.infoHash, default: []].append(record) }
        }
        let completionRows = try Row.fetchCursor(db, sql: "SELECT info_hash, peer_id, ip FROM completions")
        while let row = try completionRows.next() {
            guard let hash = try row.decode(String?.self, forColumn: "info_hash").flatMap(InfoHash.init(hex:)),
                  let id = try row.decode(String?.self, forColumn: "peer_id").flatMap(PeerID.init(hex:)),
                  let ip = try row.decode(String?.self, forColumn: "ip").flatMap(IPAddress.init) else {
                throw RepositoryError("corrupt completion row \(row)")
            }
            completed[hash, default: []].append(PeerKey(peerID: id, ip: ip))
        }
        var stops: [InfoHash: [PeerStop]] = [:]
        let stopRows = try Row.fetchCursor(db, sql: "SELECT info_hash, peer_id, ip, at FROM peer_stops")
        while let row = try stopRows.next() {
            guard let hash = try row.decode(Data?.self, forColumn: "info_hash").flatMap(InfoHash.init(bytes:)),
                  let id = try row.decode(Data?.self, forColumn: "peer_id").flatMap(PeerID.init(bytes:)),
                  let ip = try row.decode(String?.self, forColumn: "ip").flatMap(IPAddress.init),
                  let at = try row.decode(Int64?.self, forColumn: "at") else {
                throw RepositoryError("corrupt peer stop row \(row)")
            }
            stops[hash, default: []].append(PeerStop(key: PeerKey(peerID: id, ip: ip), at: Instant(milliseconds: at)))
        }
        return Set(peers.keys).union(completed.keys).union(stops.keys).sorted().map {
            SwarmMerge(infoHash: $0, peers: peers[$0] ?? [], completed: completed[$0] ?? [], stops: stops[$0] ?? [])
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
