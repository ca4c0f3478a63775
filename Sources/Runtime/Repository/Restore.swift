import Foundation
import GRDB
import TrackerLogic

/// Restore: the file read back as the node's durable state (`DurableState`) when it
/// starts, every value validated where it is decoded (a hostile or corrupt row fails the
/// load with an error, never the process).
extension SQLiteRepository {
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
        var clients: [ClientPrefix: CatalogueStamp] = [:], users: [UserName: CatalogueStamp] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT kind, info_hash, term, master, txid, removed FROM catalogue_stamps") {
            let key = try row.decode(String?.self, forColumn: "info_hash")
            guard let kind = try row.decode(Int64?.self, forColumn: "kind"),
                  let r = ref(try row.decode(Int64?.self, forColumn: "term"), try row.decode(Int64?.self, forColumn: "master"),
                              try row.decode(Int64?.self, forColumn: "txid")),
                  let removed = try row.decode(Int64?.self, forColumn: "removed"), removed == 0 || removed == 1 else {
                throw RepositoryError("corrupt catalogue stamp \(key ?? "?")")
            }
            let stamp = CatalogueStamp(ref: r, removed: removed == 1)
            // Each kind's key as `OperatorDataRows.writeStamp` wrote it.
            func corrupt() -> RepositoryError { RepositoryError("corrupt catalogue stamp of kind \(kind): \(key ?? "?")") }
            switch kind {
            case torrentStamps, ruleStamps:
                guard let hash = key.flatMap({ InfoHash(hex: $0) }) else { throw corrupt() }
                if kind == torrentStamps { torrents[hash] = stamp } else { rules[hash] = stamp }
            case clientStamps:
                guard let prefix = key.flatMap({ ClientPrefix("0x" + $0) }) else { throw corrupt() }
                clients[prefix] = stamp
            case userStamps:
                guard let name = key.flatMap(UserName.init) else { throw corrupt() }
                users[name] = stamp
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
        return CatalogueStamps(torrents: torrents, rules: rules, mode: mode, clients: clients, users: users)
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
        let users = try Row.fetchAll(db, sql: "SELECT name, role, tracker_key, enabled, password, announces, completed, uploaded, downloaded "
                                     + "FROM users ORDER BY name").map { row in
            let text = try row.decode(String?.self, forColumn: "name")
            let keyText = try row.decode(String?.self, forColumn: "tracker_key")
            let password = try row.decode(Data?.self, forColumn: "password")
            guard let name = text.flatMap(UserName.init), let raw = try row.decode(Int64?.self, forColumn: "role"),
                  let role = UInt8(exactly: raw).flatMap(UserRole.init(rawValue:)),
                  let enabled = try row.decode(Int64?.self, forColumn: "enabled"), enabled == 0 || enabled == 1 else {
                throw RepositoryError("corrupt user \(text ?? "?")")
            }
            let key = try keyText.map { text in
                guard let k = TrackerKey(text) else { throw RepositoryError("corrupt key of user \(name)") }
                return k
            }
            let hash = try password.map { bytes in
                guard let p = PasswordHash(encoded: Array(bytes)) else { throw RepositoryError("corrupt password hash of user \(name)") }
                return p
            }
            func total(_ column: String) throws -> UInt64 {
                guard let v = try row.decode(Int64?.self, forColumn: column) else { throw RepositoryError("corrupt \(column) of user \(name)") }
                return UInt64(bitPattern: v)
            }
            let totals = UserTotals(announces: try total("announces"), completed: try total("completed"), uploaded: try total("uploaded"),
                                    downloaded: try total("downloaded"))
            return User(name: name, role: role, key: key, enabled: enabled == 1, password: hash, totals: totals)
        }
        guard users.count <= UserDirectory.maxUsers else { throw RepositoryError("corrupt user list of \(users.count) users") }
        return AccessPolicy(mode: mode, rules: rules, clients: clients, users: users)
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
}
