import Foundation
import GRDB
import TrackerLogic

/// The repository's schema as named migrations (GRDB's `DatabaseMigrator`), each
/// recorded in the file (`grdb_migrations`) as it is applied.
///
/// Why: a rolling upgrade needs to know what a file holds. Before the migrator, the
/// schema was found by inspecting table shapes; the first migration adopts such a file
/// (0.9.0's or older) as it stands. Every later change of the schema is a new migration
/// appended below, never an edit of one already shipped.
///
/// A file that records a migration this version does not know was written by a newer
/// one: it is refused with a clear error rather than read by rules that may no longer
/// hold, and nothing in it is changed (a downgrade goes through `tracker admin export`).
enum RepositorySchema {
    /// The migrations in the order they apply; the last one is the schema this version writes.
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("0.9.0 tables") { db in try adoptUnversioned(db) }
        // Users: their keys, password hashes and totals (their stamps are catalogue_stamps
        // of kind 4).
        migrator.registerMigration("users") { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS users(
                    name TEXT PRIMARY KEY NOT NULL,
                    role INTEGER NOT NULL,
                    tracker_key TEXT,
                    enabled INTEGER NOT NULL,
                    password BLOB,
                    announces INTEGER NOT NULL DEFAULT 0,
                    completed INTEGER NOT NULL DEFAULT 0,
                    uploaded INTEGER NOT NULL DEFAULT 0,
                    downloaded INTEGER NOT NULL DEFAULT 0)
                """)
        }
        return migrator
    }()

    /// Brings the file to this version's schema, or throws if a newer version wrote it.
    static func migrate(_ writer: some DatabaseWriter) throws {
        let unknown = try writer.read { db in
            try migrator.hasBeenSuperseded(db) ? try migrator.appliedIdentifiers(db).subtracting(migrator.migrations).sorted() : []
        }
        if !unknown.isEmpty {
            throw RepositoryError("it was written by a newer version (migrations \(unknown.joined(separator: ", ")) are unknown here); "
                                  + "export it with that version (tracker admin export) instead")
        }
        try migrator.migrate(writer)
    }

    /// 0.9.0's tables, made in an empty file or adopted from a file of 0.9.0 or older,
    /// whose shape (no record of migrations then) says what it needs: a `peers` table of
    /// hex keys, or a log of a row per peer, is folded into `peer_base`.
    static func adoptUnversioned(_ db: Database) throws {
        // A file written before the log had `peers` as its table, keyed by hex digits.
        let legacyPeers = try String.fetchOne(db, sql: "SELECT type FROM sqlite_master WHERE name = 'peers'") == "table"
        if legacyPeers { try db.execute(sql: "ALTER TABLE peers RENAME TO legacy_peers") }
        // Views over the log of a row per peer, from before `PeerLogRecord`.
        try db.execute(sql: "DROP VIEW IF EXISTS peers; DROP VIEW IF EXISTS peer_rows")
        let rowLog = try Bool.fetchOne(db, sql: "SELECT count(*) > 0 FROM pragma_table_info('peer_log') WHERE name = 'info_hash'") ?? false
        if rowLog { try db.execute(sql: "ALTER TABLE peer_log RENAME TO row_log") }
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS swarms(
                info_hash TEXT PRIMARY KEY NOT NULL,
                name TEXT,
                size INTEGER,
                completed INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS peer_base(
                info_hash BLOB NOT NULL,
                peer_id BLOB NOT NULL,
                ip TEXT NOT NULL,
                port INTEGER NOT NULL,
                uploaded INTEGER NOT NULL,
                downloaded INTEGER NOT NULL,
                "left" INTEGER NOT NULL,
                last_announce INTEGER NOT NULL,
                PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS peer_stops(
                info_hash BLOB NOT NULL,
                peer_id BLOB NOT NULL,
                ip TEXT NOT NULL,
                at INTEGER NOT NULL,
                PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS peer_log(
                seq INTEGER PRIMARY KEY,
                rows INTEGER NOT NULL,
                record BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS completions(
                info_hash TEXT NOT NULL,
                peer_id TEXT NOT NULL,
                ip TEXT NOT NULL,
                PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS cluster_meta(
                key TEXT PRIMARY KEY NOT NULL,
                value INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS torrents(
                info_hash TEXT PRIMARY KEY NOT NULL,
                name TEXT NOT NULL,
                file BLOB NOT NULL,
                registered_at INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS access_rules(
                info_hash TEXT PRIMARY KEY NOT NULL,
                rule INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS client_rules(
                prefix BLOB PRIMARY KEY NOT NULL,
                rule INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS completed_bases(
                info_hash TEXT PRIMARY KEY NOT NULL,
                count INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS kept_entries(
                seq INTEGER PRIMARY KEY,
                entry BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS set_aside_parts(
                seq INTEGER PRIMARY KEY,
                part BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS catalogue_stamps(
                kind INTEGER NOT NULL,
                info_hash TEXT NOT NULL,
                term INTEGER NOT NULL,
                master INTEGER NOT NULL,
                txid INTEGER NOT NULL,
                removed INTEGER NOT NULL,
                PRIMARY KEY(kind, info_hash)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS catalogue_tombstones ON catalogue_stamps(kind, removed, term, master, txid, info_hash);
            CREATE TABLE IF NOT EXISTS epoch_runs(
                term INTEGER NOT NULL,
                master INTEGER NOT NULL,
                first_txid INTEGER NOT NULL,
                PRIMARY KEY(term, master));
            """)
        if legacyPeers { try migrate(fromLegacyPeers: db) }
        if rowLog { try migrate(fromRowLog: db) }
    }

    /// Folds a log of a row per peer (a version before `PeerLogRecord`) into `peer_base`,
    /// each peer's latest row once (SQLite takes a bare column from the row that holds the
    /// group's max()), then drops it.
    static func migrate(fromRowLog db: Database) throws {
        try db.execute(sql: """
            INSERT INTO peer_base(info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce)
            SELECT info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce FROM (
                SELECT info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce, max(seq) FROM row_log
                GROUP BY info_hash, peer_id, ip)
            WHERE port IS NOT NULL
            ON CONFLICT DO UPDATE SET port = excluded.port, uploaded = excluded.uploaded, downloaded = excluded.downloaded,
                "left" = excluded."left", last_announce = excluded.last_announce;
            DELETE FROM peer_base WHERE (info_hash, peer_id, ip) IN (
                SELECT info_hash, peer_id, ip FROM (
                    SELECT info_hash, peer_id, ip, port, max(seq) FROM row_log GROUP BY info_hash, peer_id, ip)
                WHERE port IS NULL);
            DROP TABLE row_log;
            """)
    }

    /// Moves a legacy `peers` table into `peer_base`, hex keys turned into bytes. A key
    /// that is not forty hex digits fails the open, as a corrupt row fails a load.
    static func migrate(fromLegacyPeers db: Database) throws {
        db.add(function: unhex)
        defer { db.remove(function: unhex) }
        try db.execute(sql: """
            INSERT INTO peer_base(info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce)
            SELECT tracker_unhex(info_hash), tracker_unhex(peer_id), ip, port, uploaded, downloaded, "left", last_announce
            FROM legacy_peers;
            DROP TABLE legacy_peers;
            """)
    }

    /// Forty hex digits as their twenty bytes, or NULL. (SQLite has `unhex` from 3.41 only.)
    static let unhex = DatabaseFunction("tracker_unhex", argumentCount: 1, pure: true) { values in
        guard let text = String.fromDatabaseValue(values[0]), let bytes = Bytes20(hex: text) else { return nil }
        return Data(bytes.bytes)
    }
}
