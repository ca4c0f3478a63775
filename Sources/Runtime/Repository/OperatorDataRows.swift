import Foundation
import GRDB
import TrackerLogic

/// The operator's data as rows: the catalogue (registered torrents, access and client
/// rules, the access mode) with the stamps and tombstones that order its changes, and a
/// standalone node's record of each change as it is made.
extension SQLiteRepository {
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
        case .user(let name, let user):
            if let user {
                // Totals are unsigned 64-bit: stored as their bit pattern.
                let t = user.totals
                try run(db, "INSERT OR REPLACE INTO users(name, role, tracker_key, enabled, password, announces, completed, uploaded, downloaded) "
                        + "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [name.text, Int64(user.role.rawValue), user.key?.description, user.enabled ? 1 : 0, user.password.map { Data($0.encoded) },
                         Int64(bitPattern: t.announces), Int64(bitPattern: t.completed), Int64(bitPattern: t.uploaded),
                         Int64(bitPattern: t.downloaded)])
            } else {
                try run(db, "DELETE FROM users WHERE name = ?", [name.text])
            }
        case .userStamp(let name, let stamp):
            try writeStamp(kind: userStamps, key: name.text, stamp, db)
        case .pruneTombstones:
            for kind in [torrentStamps, ruleStamps, clientStamps, userStamps] { try pruneTombstones(kind: kind, db) }
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
    /// (two digits a byte), so pruning drops the tombstones memory drops; a user's by its
    /// name, whose ASCII sorts in SQLite as in memory.
    static let torrentStamps: Int64 = 1, ruleStamps: Int64 = 2, clientStamps: Int64 = 3, userStamps: Int64 = 4

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
            for change in AccessPolicy().missing(access.sortedRules) + ClientFilter().missing(access.clients.sortedRules)
                + UserDirectory().missing(access.users.sorted) {
                catalogue.apply(change)
            }
            catalogue.apply(.setAccessMode(access.mode))
            for change in Catalogue.restoring(KeptEntry.completions(bases)) { catalogue.apply(change) }
            return catalogue
        } catch {
            throw RepositoryError("cannot read operator data from \(path): \(error)")
        }
    }
}
