import Foundation
import GRDB
import TrackerLogic

/// The peer log and its fold: a commit's peers appended to `peer_log` as one record,
/// folded into `peer_base` in key order when the log is long, rewritten whole by a peer
/// image (see `SQLiteRepository`).
extension SQLiteRepository {
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
}
