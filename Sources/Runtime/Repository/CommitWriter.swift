import Foundation
import GRDB
import TrackerLogic

/// The commit writer: what the node asks of its disk (`StoreWrite`), each write in the
/// SQL transaction the writer opened — a commit's rows, the swarms it touched and the
/// commit point, a snapshot, a wipe, the epoch.
extension SQLiteRepository {
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
        case .dropKept:
            try db.execute(sql: "DELETE FROM kept_entries")
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
                 .clientRule, .clientStamp, .user, .userStamp:
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
        for u in snapshot.access.users.sorted { try writeCatalogue(.user(u.name, u), db) }
        for (name, stamp) in snapshot.stamps.users { try writeCatalogue(.userStamp(name, stamp), db) }
        try writeCatalogue(.modeStamp(snapshot.stamps.mode), db)
        for (hash, count) in snapshot.completedBase { try writeCatalogue(.completedBase(hash, count), db) }
        try setLastCommitted(snapshot.lastCommitted, history: snapshot.history, db)
    }

    static func wipe(_ db: Database, keepEpoch: Bool) throws {
        let epoch = try meta("epoch", db)
        try db.execute(sql: "DELETE FROM peer_base; DELETE FROM peer_log; DELETE FROM completions; DELETE FROM peer_stops; DELETE FROM swarms; DELETE FROM torrents; DELETE FROM access_rules; DELETE FROM client_rules; DELETE FROM users; DELETE FROM catalogue_stamps; DELETE FROM completed_bases; DELETE FROM epoch_runs; DELETE FROM cluster_meta;")
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
}
