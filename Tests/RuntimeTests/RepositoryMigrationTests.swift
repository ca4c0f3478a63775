import Foundation
import GRDB
import Testing
import TrackerLogic
import TrackerRuntime

/// A repository file written by 0.9.0, the last version whose schema was found by
/// inspecting table shapes, migrates to the recorded schema with every row kept, and a
/// node's restore reads it back whole.
///
/// `Fixtures/repository-0.9.0.sqlite` was written by 0.9.0's `SQLiteRepository` (commit
/// c3cce01) performing `fixtureWrites()`: the same writes rebuild, in memory, the replica
/// and the operator data the file must read back as.
@Suite struct RepositoryMigrationTests {
    static let fixtureName = "repository-0.9.0"

    /// What 0.9.0 wrote: 160 transactions of announces, merges and expiries over two
    /// epochs (seed 90), catalogue changes (a registered torrent with completions kept
    /// through a full stop, access and client rules, the access mode), the highest epoch,
    /// and operator data kept through a clean stop. Returns the replica the commits build.
    static func fixtureWrites() throws -> (writes: [StoreWrite], replica: Replica) {
        let helpers = SQLiteRepositoryTests()
        var replica = Replica()
        var writes: [StoreWrite] = []
        var rng = SeededGenerator(seed: 90)
        var t: Int64 = 1_000_000
        func commit(_ updates: [SwarmUpdate]) {
            let txid = replica.lastCommitted.txid + 1
            let epoch = txid > 100 ? Epoch(term: 2, master: NodeID(2)) : Epoch(term: 1, master: NodeID(3))
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: updates)
            replica.commit(tx)
            writes.append(.commit(CommitRows(tx, replica: replica)))
        }
        for _ in 0..<150 {
            t += Int64(rng.below(20))
            commit((0..<(1 + rng.below(6))).map { _ in helpers.randomUpdate(&rng, at: t) })
        }
        let torrent = try helpers.torrent("fixture")
        commit([.catalogue(.register(torrent))])
        commit([.catalogue(.restore([.completed(torrent.infoHash, 12)]))])
        commit([.catalogue(.setAccessRule(.allow, [helpers.hash(1), helpers.hash(2)]))])
        commit([.catalogue(.removeAccessRules([helpers.hash(2)]))])
        commit([.catalogue(.setClientRule(.deny, [ClientPrefix("-XX")!]))])
        commit([.catalogue(.setAccessMode(.deny))])
        for _ in 0..<4 {
            t += Int64(rng.below(20))
            commit((0..<(1 + rng.below(6))).map { _ in helpers.randomAnnounce(&rng, at: t) })
        }
        writes.append(.epoch(Epoch(term: 3, master: NodeID(1))))
        writes.append(.keep(replica.store.catalogue.keptEntries))
        return (writes, replica)
    }

    /// A copy of the committed fixture in a temporary directory: no test changes the file.
    func fixtureCopy() throws -> String {
        guard let url = Bundle.module.url(forResource: Self.fixtureName, withExtension: "sqlite", subdirectory: "Fixtures") else {
            throw RepositoryError("no fixture \(Self.fixtureName).sqlite among the test resources")
        }
        let path = SQLiteRepositoryTests().tempPath()
        try FileManager.default.copyItem(atPath: url.path, toPath: path)
        return path
    }

    /// Every table's rows, as a file holds them.
    func contents(_ path: String) throws -> [String: [Row]] {
        try DatabaseQueue(path: path).read { db in
            var tables: [String: [Row]] = [:]
            for name in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") {
                tables[name] = try Row.fetchAll(db, sql: "SELECT * FROM \"\(name)\" ORDER BY 1")
            }
            return tables
        }
    }

    func migrationsRecorded(_ path: String) throws -> [String] {
        try DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid") }
    }

    @Test func aFileOf090MigratesWithEveryRowKeptAndANodeRestoresIt() throws {
        let path = try fixtureCopy()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (_, replica) = try Self.fixtureWrites()
        #expect(replica.lastCommitted.txid == 160 && replica.store.peerCount > 0 && replica.history.runs.count == 2)
        let repo = try SQLiteRepository(path: path)
        #expect(try migrationsRecorded(path) == ["0.9.0 tables", "users"])
        try SQLiteRepositoryTests().expectSame(repo, replica)
        let state = try repo.load()
        let catalogue = replica.store.catalogue
        #expect(state.epoch == Epoch(term: 3, master: NodeID(1)))
        #expect(state.kept == catalogue.keptEntries && !state.kept.isEmpty)
        #expect(state.snapshot?.torrents == catalogue.sorted && state.snapshot?.torrents.count == 1)
        #expect(state.snapshot?.access == catalogue.access)
        #expect(state.snapshot?.stamps == catalogue.stamps)
        #expect(state.snapshot?.completedBase == catalogue.completedBase)
        // A node started on the file holds what the replica held, and claims no epoch it
        // already recorded.
        let node = TrackerNode(id: NodeID(1), incarnation: 1, config: ClusterConfig(),
                               handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))),
                               seed: 1, now: Instant(milliseconds: 2_000_000), restoring: state)
        #expect(node.replica == replica)
        #expect(node.replica.digest == replica.digest)
        #expect(node.epoch == Epoch(term: 3, master: NodeID(1)))
        // Opened again, nothing is migrated twice and nothing changes.
        let again = try SQLiteRepository(path: path)
        #expect(try migrationsRecorded(path) == ["0.9.0 tables", "users"])
        try SQLiteRepositoryTests().expectSame(again, replica)
    }

    /// A file that records a migration this version does not know was written by a newer
    /// one: refused with an error that says so, and left as it was.
    @Test func aFileOfANewerVersionIsRefusedAndLeftAsItWas() throws {
        let path = try fixtureCopy()
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try SQLiteRepository(path: path)
        try DatabaseQueue(path: path).write { try $0.execute(sql: "INSERT INTO grdb_migrations(identifier) VALUES ('9.9.9 tables')") }
        let before = try contents(path)
        #expect(before["peer_base"]?.isEmpty == false)
        #expect {
            _ = try SQLiteRepository(path: path)
        } throws: { error in
            "\(error)".contains("newer version") && "\(error)".contains("9.9.9 tables")
        }
        #expect(try contents(path) == before)
    }

    /// An empty file gets the same schema, recorded the same way.
    /// A file the previous version wrote (its migrations recorded, no users table: the
    /// 0.9.0 tables are not edited, a later schema is a migration of its own) gets the
    /// users table when it opens, and stores users. Found by the README's cluster, whose
    /// files an older version had written: every node voted ERROR until it was recreated.
    @Test func aFileOfThePreviousVersionGetsTheUsersTable() throws {
        let path = SQLiteRepositoryTests().tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try SQLiteRepository(path: path)
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "DROP TABLE users; DELETE FROM grdb_migrations WHERE identifier = 'users'")
        }
        #expect(try migrationsRecorded(path) == ["0.9.0 tables"])
        let repo = try SQLiteRepository(path: path)
        #expect(try migrationsRecorded(path) == ["0.9.0 tables", "users"])
        var catalogue = Catalogue()
        let change = CatalogueChange.addUser(User(name: UserName("alice")!, role: .peer))
        catalogue.apply(change)
        try repo.record(change, in: catalogue)
        #expect(try repo.operatorData().access.users.count == 1)
    }

    @Test func aNewFileRecordsItsMigrations() throws {
        let path = SQLiteRepositoryTests().tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let repo = try SQLiteRepository(path: path)
        #expect(try migrationsRecorded(path) == ["0.9.0 tables", "users"])
        #expect(try repo.load().snapshot == nil)
    }
}
