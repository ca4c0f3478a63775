import Foundation
import GRDB
import GRDBSQLite
import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// The SQLite repository must hold exactly what the in-memory replica holds, after any
/// sequence of commits, snapshots and wipes, and must fail loudly but harmlessly.
@Suite struct SQLiteRepositoryTests {
    let epoch = Epoch(term: 1, master: NodeID(3))

    func tempPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("repo-\(UUID().uuidString).sqlite").path
    }

    /// Peer rows in the log, read from the file (each record says how many it holds).
    func logRows(_ path: String) throws -> Int {
        try DatabaseQueue(path: path).read { try Int.fetchOne($0, sql: "SELECT coalesce(sum(rows), 0) FROM peer_log") ?? -1 }
    }

    func baseRows(_ path: String) throws -> Int {
        try DatabaseQueue(path: path).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM peer_base") ?? -1 }
    }

    func hash(_ n: UInt32) -> InfoHash { InfoHash(a: 0xABCD, b: UInt64(n), c: n) }

    func torrent(_ name: String) throws -> RegisteredTorrent {
        let file = Array("d4:infod6:lengthi100e4:name\(name.utf8.count):\(name)12:piece lengthi16384e6:pieces20:abcdefghijklmnopqrstee".utf8)
        return try RegisteredTorrent(file: file, registeredAt: Instant(milliseconds: 1_700_000_000_000))
    }

    func randomUpdate(_ rng: inout SeededGenerator, at t: Int64) -> SwarmUpdate {
        let roll = rng.below(20)
        if roll == 0 { return .expire(before: Instant(milliseconds: t - Int64(rng.below(200)))) }
        if roll == 1 {
            let key = PeerKey(peerID: PeerID(a: 1, b: 2, c: UInt32(rng.below(12))), ip: .v4(0x0A00_0000 | UInt32(rng.below(3))))
            let record = PeerRecord(peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: 7000), uploaded: 1,
                                    downloaded: 2, left: Int64(rng.below(2)), lastAnnounce: Instant(milliseconds: t - 50))
            return .merge(SwarmMerge(infoHash: hash(UInt32(rng.below(4))), peers: [record], completed: [key]))
        }
        return randomAnnounce(&rng, at: t)
    }

    func randomAnnounce(_ rng: inout SeededGenerator, at t: Int64) -> SwarmUpdate {
        let key = PeerKey(peerID: PeerID(a: 1, b: 2, c: UInt32(rng.below(12))), ip: .v4(0x0A00_0000 | UInt32(rng.below(3))))
        let events: [AnnounceEvent] = [.none, .started, .completed, .stopped]
        return .announce(Announce(infoHash: hash(UInt32(rng.below(4))), peerID: key.peerID,
                                  endpoint: PeerEndpoint(ip: key.ip, port: UInt16(6881 + rng.below(3))),
                                  uploaded: Int64(rng.below(1000)), downloaded: Int64(rng.below(1000)),
                                  left: Int64(rng.below(3)) * 100, event: events[rng.below(4)],
                                  at: Instant(milliseconds: t)))
    }

    /// 3,000 new peers: more than a repository capped with `limitSize(extraPages: 0)` takes.
    func moreThanAFullDiskTakes(at t: Int64) -> [SwarmUpdate] {
        (0..<3000).map { i in
            .announce(Announce(infoHash: hash(UInt32(100 + i)), peerID: PeerID(a: 9, b: 9, c: UInt32(i)),
                               endpoint: PeerEndpoint(ip: .v4(0x0B00_0001), port: 1), uploaded: 0, downloaded: 0,
                               left: 1, event: .started, at: Instant(milliseconds: t)))
        }
    }

    func expectSame(_ repo: SQLiteRepository, _ replica: Replica, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let loaded = try repo.load()
        let expected = replica.snapshot()
        #expect(loaded.snapshot?.content == expected.content, sourceLocation: sourceLocation)
        #expect(loaded.snapshot?.lastCommitted == expected.lastCommitted, sourceLocation: sourceLocation)
        #expect(loaded.snapshot?.history == expected.history, sourceLocation: sourceLocation)
        #expect(loaded.snapshot?.digest == expected.digest, sourceLocation: sourceLocation)
        var expectedSwarms: [InfoHash: Int] = [:]
        for hash in replica.store.sortedInfoHashes { expectedSwarms[hash] = replica.store[hash]!.completed }
        #expect(try repo.swarmRows() == expectedSwarms, "one swarms row per swarm, with its completion count", sourceLocation: sourceLocation)
        let counts = try repo.counts()
        #expect(counts.swarms == replica.store.swarmCount && counts.peers == replica.store.peerCount, sourceLocation: sourceLocation)
    }

    /// Commits `count` transactions (txids 1...count) of 1...`maxUpdates` random updates
    /// each into `repo` and `replica`, `perWrite` of them a write as the store writer
    /// groups them; every `checkEvery` transactions, the file reads back as the replica and
    /// as the simulator's disk holding the same rows.
    /// Returns the generator and the clock as they end, for more commits to follow.
    @discardableResult
    func commitRandomly(_ count: UInt64, ofUpTo maxUpdates: Int, checkingEvery checkEvery: UInt64, seed: UInt64,
                        into repo: SQLiteRepository, _ replica: inout Replica, perWrite: UInt64 = 1,
                        epoch: (UInt64) -> Epoch) throws -> (rng: SeededGenerator, t: Int64) {
        // The simulator's disk: the same rows, kept as values.
        var model = RepositoryRows()
        var rng = SeededGenerator(seed: seed)
        var t: Int64 = 1_000_000
        var group: [StoreWrite] = []
        for txid in 1...count {
            t += Int64(rng.below(20))
            let tx = Transaction(ref: TxRef(epoch: epoch(txid), txid: txid),
                                 updates: (0..<(1 + rng.below(maxUpdates))).map { _ in randomUpdate(&rng, at: t) })
            replica.commit(tx)
            let rows = CommitRows(tx, replica: replica)
            group.append(.commit(rows))
            if txid % perWrite == 0 || txid % checkEvery == 0 || txid == count {
                try repo.perform(group)
                group = []
            }
            model.apply(rows)
            if txid % checkEvery == 0 {
                try expectSame(repo, replica)
                #expect(try repo.load().snapshot == model.snapshot, "SQLite and the simulator's disk read back alike")
            }
        }
        return (rng, t)
    }

    /// Folding after every row, every few rows and (almost) never: the log, the base and
    /// the merge of the two read back the same peers.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64], [1, 7, SQLiteRepository.defaultFoldThreshold])
    func commitsLandAsTheReplicaHoldsThem(seed: UInt64, foldThreshold: Int) throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path, foldThreshold: foldThreshold, foldRatio: 0)
        var replica = Replica()
        var (rng, t) = try commitRandomly(300, ofUpTo: 6, checkingEvery: 50, seed: seed, into: repo, &replica) { txid in
            txid > 150 ? Epoch(term: 2, master: NodeID(2)) : epoch
        }
        #expect(replica.history.runs.count == 2)
        try expectSame(repo, replica)
        // A process that restarts on the file reads the log it left and goes on from it.
        let reopened = try SQLiteRepository(path: path, foldThreshold: foldThreshold, foldRatio: 0)
        try expectSame(reopened, replica)
        for txid in 301...330 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: Epoch(term: 2, master: NodeID(2)), txid: txid),
                                 updates: (0..<(1 + rng.below(6))).map { _ in randomUpdate(&rng, at: t + Int64(txid)) })
            replica.commit(tx)
            try reopened.perform(.commit(CommitRows(tx, replica: replica)))
        }
        try expectSame(reopened, replica)
    }

    /// Commits written several at a time, as the store writer takes them: one peer log
    /// record and one commit point for the run, yet the file reads back as the replica
    /// after each write, epoch changes, merges and expiries (which fold the log) among them.
    @Test(arguments: [21, 22, 23] as [UInt64], [4, 64])
    func commitsWrittenTogetherLandAsTheReplicaHoldsThem(seed: UInt64, perWrite: UInt64) throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path, foldThreshold: SQLiteRepository.defaultFoldThreshold, foldRatio: 0)
        var replica = Replica()
        try commitRandomly(300, ofUpTo: 8, checkingEvery: 50, seed: seed, into: repo, &replica, perWrite: perWrite) { txid in
            Epoch(term: UInt32(1 + txid / 70), master: NodeID(UInt32(1 + txid / 70)))
        }
        #expect(replica.history.runs.count == 5)
        try expectSame(try SQLiteRepository(path: path), replica)
    }

    /// Commits of up to 80 updates: their peer rows go into the log 16 to a statement, the
    /// rest one by one, merges and expiries between them (which fold the log) in their
    /// place; a peer's rows in one commit may straddle two statements.
    @Test(arguments: [11, 12, 13] as [UInt64], [7, SQLiteRepository.defaultFoldThreshold])
    func largeCommitsLandInTheirOrder(seed: UInt64, foldThreshold: Int) throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path, foldThreshold: foldThreshold, foldRatio: 0)
        var replica = Replica()
        try commitRandomly(60, ofUpTo: 80, checkingEvery: 20, seed: seed, into: repo, &replica) { _ in epoch }
        try expectSame(try SQLiteRepository(path: path, foldThreshold: foldThreshold, foldRatio: 0), replica)
    }

    /// A peer's rows in the log in every order of removal and return, folded at once or
    /// left in the log: its latest row decides.
    @Test(arguments: [1, 2, 3, 100])
    func theLatestLoggedRowOfAPeerWins(foldThreshold: Int) throws {
        let repo = try SQLiteRepository(path: tempPath(), foldThreshold: foldThreshold, foldRatio: 0)
        var replica = Replica()
        var txid: UInt64 = 0
        func announce(_ n: UInt32, _ event: AnnounceEvent, at t: Int64) -> SwarmUpdate {
            .announce(Announce(infoHash: hash(1), peerID: PeerID(a: 1, b: 1, c: n), endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881),
                               uploaded: t, downloaded: 0, left: 10, event: event, at: Instant(milliseconds: t)))
        }
        func commit(_ updates: [SwarmUpdate]) throws {
            txid += 1
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: updates)
            replica.commit(tx)
            try repo.perform(.commit(CommitRows(tx, replica: replica)))
        }
        try commit([announce(1, .started, at: 10), announce(2, .started, at: 10), announce(3, .started, at: 10)])
        try commit([announce(1, .none, at: 20), announce(2, .stopped, at: 20), announce(3, .stopped, at: 20)])
        try commit([announce(3, .started, at: 30), announce(4, .started, at: 30), announce(4, .stopped, at: 30)])
        try commit([announce(1, .none, at: 40)])
        try expectSame(repo, replica)
        #expect(try repo.counts() == (1, 2))
    }

    /// An IPv4 address goes in as the text `IPAddress.description` gives (formatted on the
    /// stack, not by it), every octet width included. A fold after every write puts the
    /// rows in the base.
    /// A diverged repository's offer set aside (`NodeAction.setAside`): read back in part
    /// order, left by the wipe that follows it, dropped by an empty one; a part that does
    /// not decode fails the load rather than being skipped.
    @Test func anOfferSetAsideOutlivesTheWipeAndIsReadBack() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let repo = try SQLiteRepository(path: path)
        let record = PeerRecord(peerID: PeerID(a: 1, b: 2, c: 3), endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 7000), uploaded: 1,
                                downloaded: 2, left: 3, lastAnnounce: Instant(milliseconds: 42))
        let parts = [MergeOffer(offerID: 9, part: 0, parts: 2, swarms: [SwarmMerge(infoHash: hash(1), peers: [record], completed: [])],
                                torrents: [try torrent("aside")], access: []),
                     MergeOffer(offerID: 9, part: 1, parts: 2, swarms: [SwarmMerge(infoHash: hash(2), peers: [record], completed: [record.key])])]
        try repo.perform([.setAside(parts), .wipe])
        #expect(try SQLiteRepository(path: path).load().setAside == parts)
        try repo.perform(.setAside([]))
        #expect(try repo.load().setAside.isEmpty)
        try repo.perform(.setAside(parts))
        try GRDB.DatabaseQueue(path: path).write { try $0.execute(sql: "UPDATE set_aside_parts SET part = x'00' WHERE seq = 1") }
        #expect(throws: RepositoryError.self) { try SQLiteRepository(path: path).load() }
    }

    @Test func addressesAreStoredAsTheirText() throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path, foldThreshold: 1, foldRatio: 0)
        var replica = Replica()
        let ips: [IPAddress] = [.v4(0), .v4(0xFFFF_FFFF), .v4(0x0A00_6409), .v4(0x0102_0304), .v4(0x6463_0A01), .v6(0x2001_0DB8_0000_0000, 1)]
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: ips.enumerated().map { i, ip in .announce(Announce(
            infoHash: hash(1), peerID: PeerID(a: 1, b: 1, c: UInt32(i)), endpoint: PeerEndpoint(ip: ip, port: 6881),
            uploaded: 0, downloaded: 0, left: 10, event: .started, at: Instant(milliseconds: 5))) })
        replica.commit(tx)
        try repo.perform(.commit(CommitRows(tx, replica: replica)))
        let stored = try DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT ip FROM peer_base ORDER BY peer_id") }
        #expect(stored == ips.map(\.description))
        #expect(stored.prefix(5) == ["0.0.0.0", "255.255.255.255", "10.0.100.9", "1.2.3.4", "100.99.10.1"])
        try expectSame(repo, replica)
    }

    /// A peer image rewrites the peers from memory, in the log's place and the base's, over
    /// the commit it is of only; the rows read back are the replica's.
    @Test func aPeerImageRewritesThePeersOverItsCommitOnly() throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path)
        var replica = Replica()
        var rng = SeededGenerator(seed: 77)
        for txid in 1...40 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: (0..<5).map { _ in randomUpdate(&rng, at: 1000 + Int64(txid)) })
            replica.commit(tx)
            try repo.perform(.commit(CommitRows(tx, replica: replica)))
        }
        // An image of an earlier commit than the file holds changes nothing.
        let stale = PeerImage(lastCommitted: TxRef(epoch: epoch, txid: 39), store: replica.store)
        let before = try logRows(path)
        try repo.perform(.peerImage(stale))
        #expect(try logRows(path) == before && before > 0)
        try repo.perform(.peerImage(PeerImage(lastCommitted: replica.lastCommitted, store: replica.store)))
        #expect(try logRows(path) == replica.store.peerCount, "the log holds the image's peers alone")
        #expect(try baseRows(path) == 0)
        try expectSame(repo, replica)
        // Commits after it log again, over the image's rows.
        for txid in 41...50 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: (0..<5).map { _ in randomUpdate(&rng, at: 1000 + Int64(txid)) })
            replica.commit(tx)
            try repo.perform(.commit(CommitRows(tx, replica: replica)))
        }
        try expectSame(repo, replica)
        try expectSame(try SQLiteRepository(path: path), replica)
        // Written together, as the store writer takes them: the image of the commit before
        // it lands between the runs of commits around it (announces only: a merge or an
        // expiry would fold the log).
        var group: [StoreWrite] = []
        var after = 0
        for txid in 51...60 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: (0..<5).map { _ in randomAnnounce(&rng, at: 1000 + Int64(txid)) })
            replica.commit(tx)
            let rows = CommitRows(tx, replica: replica)
            group.append(.commit(rows))
            if txid == 55 {
                group.append(.peerImage(PeerImage(lastCommitted: replica.lastCommitted, store: replica.store)))
                after = replica.store.peerCount
            }
            if txid > 55 { after += rows.peerRows }
        }
        try repo.perform(group)
        #expect(try logRows(path) == after, "only the image and the commits after it are logged")
        try expectSame(repo, replica)
        try expectSame(try SQLiteRepository(path: path), replica)
    }

    /// A fold comes due by the repository's size: the log grows to `foldRatio` times the
    /// rows the base held after the last fold or the peers the replica holds, whichever is
    /// more (a fold costs what the base's pages cost, so a longer log pays for it over more
    /// announces), and never below the threshold. While peers arrive the log is mostly
    /// new peers and no fold comes due; the node's peer image (`PeerImage.isDue`, at a
    /// smaller ratio) writes them instead.
    @Test func theNextFoldIsDueAtARatioOfTheRepository() throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path, foldThreshold: 2, foldRatio: 4)
        var replica = Replica()
        var seen: [Int] = []
        for n in 1...15 as ClosedRange<UInt32> {
            // Three new peers, then the same three again and again.
            let peer = (n - 1) % 3 + 1
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: UInt64(n)), updates: [.announce(Announce(
                infoHash: hash(1), peerID: PeerID(a: 1, b: 1, c: peer), endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881),
                uploaded: 0, downloaded: 0, left: 10, event: .started, at: Instant(milliseconds: Int64(n))))])
            replica.commit(tx)
            try repo.perform(.commit(CommitRows(tx, replica: replica)))
            seen.append(try logRows(path))
        }
        // Never folded while the base was empty and peers arrived; folded at 4 × 3 = 12.
        #expect(seen == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3])
        try expectSame(repo, replica)
    }

    @Test func severalCommitsOfOneStepConvergeOnTheLastState() throws {
        // Rows built later than their commit (after several commits) may carry later
        // values; every row is whole, so the repository still lands on the last state.
        let repo = try SQLiteRepository(path: tempPath())
        var replica = Replica()
        var rng = SeededGenerator(seed: 9)
        var pending: [Transaction] = []
        for txid in 1...60 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [randomUpdate(&rng, at: 5000 + Int64(txid))])
            replica.commit(tx)
            pending.append(tx)
            if txid % 6 == 0 {
                for p in pending { try repo.perform(.commit(CommitRows(p, replica: replica))) }
                pending = []
                try expectSame(repo, replica)
            }
        }
    }

    /// The writer remembers which swarms rows exist and skips inserting them again; a
    /// swarm that emptied (its last peer stopped, or expired) loses its row and must get
    /// it back on its next announce, in a later write, in the same one, or in the same
    /// commit.
    @Test func aSwarmThatEmptiedGetsItsRowBack() throws {
        let repo = try SQLiteRepository(path: tempPath())
        var replica = Replica()
        var txid: UInt64 = 0
        func announce(_ event: AnnounceEvent, at t: Int64) -> SwarmUpdate {
            .announce(Announce(infoHash: hash(1), peerID: PeerID(a: 1, b: 1, c: 1), endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881),
                               uploaded: 0, downloaded: 0, left: 10, event: event, at: Instant(milliseconds: t)))
        }
        func commit(_ groups: [[SwarmUpdate]]) throws {
            var writes: [StoreWrite] = []
            for updates in groups {
                txid += 1
                let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: updates)
                replica.commit(tx)
                writes.append(.commit(CommitRows(tx, replica: replica)))
            }
            try repo.perform(writes)
        }
        try commit([[announce(.started, at: 100)]])
        #expect(try repo.counts() == (1, 1))
        try commit([[announce(.stopped, at: 200)]])
        #expect(try repo.counts() == (0, 0))
        try commit([[announce(.started, at: 300)]])
        try expectSame(repo, replica)
        try commit([[.expire(before: Instant(milliseconds: 1000))]])
        #expect(try repo.counts() == (0, 0))
        try commit([[announce(.none, at: 2000)]])
        try expectSame(repo, replica)
        try commit([[announce(.stopped, at: 2100)], [announce(.started, at: 2200)]])
        try expectSame(repo, replica)
        try commit([[.expire(before: Instant(milliseconds: 5000))], [announce(.started, at: 5100)]])
        try expectSame(repo, replica)
        // In one commit: the expiry recounts every row, the announce after it among them.
        try commit([[.expire(before: Instant(milliseconds: 9000)), announce(.started, at: 9100)]])
        try expectSame(repo, replica)
    }

    @Test func snapshotWipeAndEpoch() throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path)
        var source = Replica()
        var rng = SeededGenerator(seed: 4)
        for txid in 1...40 as ClosedRange<UInt64> {
            source.commit(Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [randomUpdate(&rng, at: 9000)]))
        }
        try repo.perform(.epoch(Epoch(term: 7, master: NodeID(1))))
        try repo.perform(.epoch(Epoch(term: 5, master: NodeID(9))))  // lower: ignored
        try repo.perform(.snapshot(source.snapshot()))
        try expectSame(repo, source)
        // A second process sees the same file.
        try expectSame(try SQLiteRepository(path: path), source)
        try repo.perform(.wipe)
        let wiped = try repo.load()
        #expect(wiped.snapshot == nil)
        #expect(try repo.counts() == (0, 0))
        #expect(wiped.epoch == Epoch(term: 7, master: NodeID(1)), "the epoch survives a wipe: a restarted node never reuses one")
    }

    /// What a wipe deleted is gone from the disk, not only from the tables: the file and
    /// its WAL hold no byte of a peer id that was stored, though peer images, folds and
    /// the wipe itself freed the pages that held them (`secure_delete = FAST` leaves a
    /// freed page as it was; the wipe's scrub rewrites the file without them).
    @Test func aWipeLeavesNoPeerBytesOnTheDisk() throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path, foldThreshold: 1_500, foldRatio: 1)
        var replica = Replica()
        let marker: UInt64 = 0x5345_4352_4554_5045  // "SECRETPE"
        for txid in 1...30 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: (0..<200).map { i in
                .announce(Announce(infoHash: hash(UInt32(i % 40)), peerID: PeerID(a: marker, b: 7, c: UInt32(i)),
                                   endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881), uploaded: Int64(txid),
                                   downloaded: 0, left: 1, event: .none, at: Instant(milliseconds: 1000 + Int64(txid))))
            })
            replica.commit(tx)
            var writes: [StoreWrite] = [.commit(CommitRows(tx, replica: replica))]
            if txid % 10 == 0 { writes.append(.peerImage(PeerImage(lastCommitted: tx.ref, store: replica.store))) }
            try repo.perform(writes)
        }
        let needle = withUnsafeBytes(of: marker.bigEndian) { Array($0) }
        func onDisk() -> Bool {
            ["", "-wal"].contains { suffix in
                guard let data = FileManager.default.contents(atPath: path + suffix) else { return false }
                return data.withUnsafeBytes { raw in
                    guard raw.count >= needle.count else { return false }
                    return (0...(raw.count - needle.count)).contains { i in
                        raw[i] == needle[0] && needle.indices.allSatisfy { raw[i + $0] == needle[$0] }
                    }
                }
            }
        }
        #expect(onDisk(), "the marker is what the peers' rows hold")
        try repo.perform(.wipe)
        #expect(!onDisk())
        #expect(try repo.load().snapshot == nil)
        try repo.perform(.epoch(Epoch(term: 2, master: NodeID(1))))
        #expect(try repo.load().epoch == Epoch(term: 2, master: NodeID(1)), "the scrubbed file takes writes")
    }

    /// A forged term that once reached the disk (cluster_meta held -1) is not a ceiling
    /// forever: the node resets it on start and its next epoch is written over it.
    @Test func anImpossibleStoredEpochIsOverwritten() throws {
        let repo = try SQLiteRepository(path: tempPath())
        try repo.perform(.epoch(Epoch(packed: UInt64.max)))
        #expect(!(try repo.load().epoch.isWellFormed))
        try repo.perform(.epoch(Epoch(term: 3, master: NodeID(2))))
        #expect(try repo.load().epoch == Epoch(term: 3, master: NodeID(2)))
    }

    @Test func fullDiskFailsTheWriteAndKeepsCommittedRows() throws {
        let repo = try SQLiteRepository(path: tempPath())
        var replica = Replica()
        var rng = SeededGenerator(seed: 5)
        for txid in 1...5 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [randomUpdate(&rng, at: 100)])
            replica.commit(tx)
            try repo.perform(.commit(CommitRows(tx, replica: replica)))
        }
        let before = try repo.load()
        try repo.limitSize(extraPages: 0)
        var big = replica
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 6), updates: moreThanAFullDiskTakes(at: 200))
        big.commit(tx)
        #expect(throws: RepositoryError.self) { try repo.perform(.commit(CommitRows(tx, replica: big))) }
        #expect(try repo.load() == before, "a failed write leaves the committed rows as they were")
        try repo.limitSize(extraPages: 1 << 20)
        try repo.perform(.probe)
        try repo.perform(.commit(CommitRows(tx, replica: big)))
        try expectSame(repo, big)
    }

    /// Commits that queued up go to SQLite in one transaction: all of them land, in
    /// order, or (a full disk) none of them does.
    /// The epoch write is committed synced (it must survive a power loss); the
    /// connection goes back to unsynced commits afterwards, and a batch holding an
    /// epoch lands whole like any other.
    @Test func epochWritesAreSyncedAndLandWithTheirBatch() throws {
        #expect(SQLiteRepository.needsFullSync(.epoch(epoch)))
        #expect(!SQLiteRepository.needsFullSync(.wipe) && !SQLiteRepository.needsFullSync(.probe))
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let repo = try SQLiteRepository(path: path)
        var replica = Replica()
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [])
        _ = replica.commit(tx)
        let later = Epoch(term: 2, master: NodeID(3))
        try repo.perform([.epoch(later), .commit(CommitRows(tx, replica: replica))])
        try repo.perform(.epoch(Epoch(term: 3, master: NodeID(1))))
        let reopened = try SQLiteRepository(path: path).load()
        #expect(reopened.epoch == Epoch(term: 3, master: NodeID(1)))
        #expect(reopened.snapshot?.lastCommitted == tx.ref)
    }

    @Test func aBatchOfCommitsLandsWholeOrNotAtAll() throws {
        let repo = try SQLiteRepository(path: tempPath())
        var replica = Replica()
        var rng = SeededGenerator(seed: 11)
        var batch: [StoreWrite] = []
        for txid in 1...40 as ClosedRange<UInt64> {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: (0..<4).map { _ in randomUpdate(&rng, at: 9000 + Int64(txid)) })
            replica.commit(tx)
            batch.append(.commit(CommitRows(tx, replica: replica)))
            if txid % 10 == 0 {
                try repo.perform(batch)
                batch = []
            }
        }
        try expectSame(repo, replica)
        let before = try repo.load()
        try repo.limitSize(extraPages: 0)
        var big = replica
        // The commit that fits opens a swarm no row holds yet: after the rollback the
        // writer must not believe that row exists.
        let small = Transaction(ref: TxRef(epoch: epoch, txid: 41), updates: [
            .announce(Announce(infoHash: hash(50), peerID: PeerID(a: 5, b: 5, c: 5), endpoint: PeerEndpoint(ip: .v4(0x0A00_0005), port: 5),
                               uploaded: 0, downloaded: 0, left: 1, event: .started, at: Instant(milliseconds: 9100)))])
        big.commit(small)
        let first = StoreWrite.commit(CommitRows(small, replica: big))
        let huge = Transaction(ref: TxRef(epoch: epoch, txid: 42), updates: moreThanAFullDiskTakes(at: 9200))
        big.commit(huge)
        let failing = [first, StoreWrite.commit(CommitRows(huge, replica: big))]
        #expect(throws: RepositoryError.self) { try repo.perform(failing) }
        #expect(try repo.load() == before, "the commit that fitted was not kept without the one that did not")
        try repo.limitSize(extraPages: 1 << 20)
        try repo.perform(failing)
        try expectSame(repo, big)
    }

    /// A file left by a version without the log (a node killed before the upgrade) keeps
    /// its peers: its hex-keyed `peers` table moves into the base, and commits go on from it.
    @Test func aFileFromBeforeThePeerLogKeepsItsPeers() throws {
        let path = tempPath()
        let peerID = PeerID(a: 7, b: 7, c: 7)
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: """
                CREATE TABLE swarms(info_hash TEXT PRIMARY KEY NOT NULL, name TEXT, size INTEGER, completed INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE peers(info_hash TEXT NOT NULL, peer_id TEXT NOT NULL, ip TEXT NOT NULL, port INTEGER NOT NULL,
                    uploaded INTEGER NOT NULL, downloaded INTEGER NOT NULL, "left" INTEGER NOT NULL, last_announce INTEGER NOT NULL,
                    PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
                CREATE INDEX peers_by_age ON peers(last_announce);
                CREATE TABLE cluster_meta(key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
                """)
            try db.execute(sql: "INSERT INTO swarms(info_hash, completed) VALUES (?, 0)", arguments: [hash(1).hex])
            try db.execute(sql: "INSERT INTO peers VALUES (?, ?, '10.0.0.7', 6881, 1, 2, 3, 500)", arguments: [hash(1).hex, peerID.hex])
            try db.execute(sql: "INSERT INTO cluster_meta VALUES ('last_epoch', ?), ('last_txid', 9)", arguments: [Int64(bitPattern: epoch.packed)])
        }
        let repo = try SQLiteRepository(path: path)
        let loaded = try #require(try repo.load().snapshot)
        var replica = Replica()
        replica.install(loaded)
        #expect(replica.store.peerCount == 1)
        #expect(replica.store[hash(1)]?.peer(PeerKey(peerID: peerID, ip: .v4(0x0A00_0007)))?.uploaded == 1)
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 10), updates: [
            .announce(Announce(infoHash: hash(1), peerID: peerID, endpoint: PeerEndpoint(ip: .v4(0x0A00_0007), port: 6881),
                               uploaded: 50, downloaded: 2, left: 0, event: .completed, at: Instant(milliseconds: 900)))])
        replica.commit(tx)
        try repo.perform(.commit(CommitRows(tx, replica: replica)))
        try expectSame(repo, replica)
        try expectSame(try SQLiteRepository(path: path), replica)
    }

    /// A file whose log holds a row per peer (before `PeerLogRecord`) keeps its peers: the
    /// log's latest row of each peer lands in the base (a later row over an earlier one,
    /// a removal taking a base row), and commits go on in the log of records.
    @Test func aFileWithALogOfRowsKeepsItsPeers() throws {
        let path = tempPath()
        _ = try SQLiteRepository(path: path)
        let (a, b, c) = (PeerID(a: 1, b: 1, c: 1), PeerID(a: 2, b: 2, c: 2), PeerID(a: 3, b: 3, c: 3))
        try DatabaseQueue(path: path).write { db in
            // Such a version recorded no migrations (`RepositorySchema`).
            try db.execute(sql: """
                DROP TABLE grdb_migrations;
                DROP TABLE peer_log;
                CREATE TABLE peer_log(seq INTEGER PRIMARY KEY, info_hash BLOB NOT NULL, peer_id BLOB NOT NULL, ip TEXT NOT NULL,
                    port INTEGER, uploaded INTEGER, downloaded INTEGER, "left" INTEGER, last_announce INTEGER);
                CREATE VIEW peer_rows AS SELECT * FROM peer_log;
                CREATE VIEW peers AS SELECT * FROM peer_rows;
                """)
            let h = Data(hash(1).bytes)
            for (id, uploaded) in [(a, 1), (b, 1)] as [(PeerID, Int64)] {
                try db.execute(sql: "INSERT INTO peer_base VALUES (?, ?, '10.0.0.7', 6881, ?, 0, 5, 500)",
                               arguments: [h, Data(id.bytes), uploaded])
            }
            try db.execute(sql: """
                INSERT INTO peer_log(info_hash, peer_id, ip, port, uploaded, downloaded, "left", last_announce) VALUES
                    (?1, ?2, '10.0.0.7', 6881, 10, 0, 5, 600), (?1, ?2, '10.0.0.7', 6881, 20, 0, 5, 700),
                    (?1, ?3, '10.0.0.7', NULL, NULL, NULL, NULL, NULL), (?1, ?4, '10.0.0.7', 6881, 30, 0, 0, 800)
                """, arguments: [h, Data(a.bytes), Data(b.bytes), Data(c.bytes)])
            try db.execute(sql: "INSERT INTO swarms(info_hash, completed) VALUES (?, 0)", arguments: [hash(1).hex])
            try db.execute(sql: "INSERT INTO cluster_meta VALUES ('last_epoch', ?), ('last_txid', 9)", arguments: [Int64(bitPattern: epoch.packed)])
        }
        let repo = try SQLiteRepository(path: path)
        let loaded = try #require(try repo.load().snapshot)
        var replica = Replica()
        replica.install(loaded)
        let swarm = try #require(replica.store[hash(1)])
        #expect(replica.store.peerCount == 2)
        #expect(swarm.peer(PeerKey(peerID: a, ip: .v4(0x0A00_0007)))?.uploaded == 20)
        #expect(swarm.peer(PeerKey(peerID: b, ip: .v4(0x0A00_0007))) == nil)
        #expect(swarm.peer(PeerKey(peerID: c, ip: .v4(0x0A00_0007)))?.uploaded == 30)
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 10), updates: [
            .announce(Announce(infoHash: hash(1), peerID: b, endpoint: PeerEndpoint(ip: .v4(0x0A00_0007), port: 6881),
                               uploaded: 40, downloaded: 2, left: 0, event: .started, at: Instant(milliseconds: 900)))])
        replica.commit(tx)
        try repo.perform(.commit(CommitRows(tx, replica: replica)))
        #expect(try logRows(path) == 1)
        try expectSame(try SQLiteRepository(path: path), replica)
    }

    @Test func aLegacyPeerRowWithABadKeyFailsTheOpenNotTheProcess() throws {
        let path = tempPath()
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: """
                CREATE TABLE peers(info_hash TEXT NOT NULL, peer_id TEXT NOT NULL, ip TEXT NOT NULL, port INTEGER NOT NULL,
                    uploaded INTEGER NOT NULL, downloaded INTEGER NOT NULL, "left" INTEGER NOT NULL, last_announce INTEGER NOT NULL,
                    PRIMARY KEY(info_hash, peer_id, ip)) WITHOUT ROWID;
                INSERT INTO peers VALUES ('not hex', 'x', '10.0.0.7', 6881, 1, 2, 3, 500);
                """)
        }
        #expect(throws: RepositoryError.self) { _ = try SQLiteRepository(path: path) }
    }

    /// Values no writer of ours leaves (a truncated log record, one of another format or
    /// of text, a port out of range, a key of the wrong length or type): the load fails
    /// with an error, the process goes on.
    @Test(arguments: [
        "INSERT INTO peer_log(rows, record) VALUES (1, x'0101' || zeroblob(30))",
        "INSERT INTO peer_log(rows, record) VALUES (1, x'02')",
        "INSERT INTO peer_log(rows, record) VALUES (1, 'text')",
        "INSERT INTO peer_base VALUES (zeroblob(20), zeroblob(20), '10.0.0.1', 70000, 0, 0, 0, 0)",
        "INSERT INTO peer_base VALUES (zeroblob(20), zeroblob(19), '10.0.0.1', 6881, 0, 0, 0, 0)",
        "INSERT INTO completions VALUES ('ab', x'00', '10.0.0.1')",
        "INSERT INTO epoch_runs VALUES (x'01', 1, 1)",
    ])
    func hostileValuesFailTheLoadNotTheProcess(statement: String) throws {
        let path = tempPath()
        let repo = try SQLiteRepository(path: path)
        var replica = Replica()
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [
            .announce(Announce(infoHash: hash(1), peerID: PeerID(a: 1, b: 1, c: 1), endpoint: PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881),
                               uploaded: 0, downloaded: 0, left: 10, event: .started, at: Instant(milliseconds: 100)))])
        replica.commit(tx)
        try repo.perform(.commit(CommitRows(tx, replica: replica)))
        try DatabaseQueue(path: path).write { db in try db.execute(sql: statement) }
        #expect(throws: RepositoryError.self) { _ = try repo.load() }
    }

    @Test func corruptFileIsAnErrorNotACrash() throws {
        let path = tempPath()
        try Data((0..<8192).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: path))
        #expect(throws: RepositoryError.self) { _ = try SQLiteRepository(path: path) }
        #expect(throws: RepositoryError.self) { _ = try SQLiteRepository(path: "/nonexistent-dir/x/repo.sqlite") }
    }

    /// The catalogue's stamps and tombstones reach the file as memory holds them (the
    /// oldest tombstones pruned alike), a snapshot carries them, and what a clean stop
    /// keeps survives the wipe and comes back at the next load, until dropped.
    @Test func stampsAndKeptOperatorDataReachTheFile() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let repo = try SQLiteRepository(path: path)
        var replica = Replica()
        var txid: UInt64 = 0
        func commit(_ change: CatalogueChange) throws {
            txid += 1
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [.catalogue(change)])
            _ = replica.commit(tx)
            try repo.perform(.commit(CommitRows(tx, replica: replica)))
        }
        let many = (0..<UInt32(CatalogueStamps.maxTombstones + 500)).map { hash(1000 + $0) }
        for chunk in stride(from: 0, to: many.count, by: AccessPolicy.maxHashesPerChange) {
            let part = Array(many[chunk..<min(chunk + AccessPolicy.maxHashesPerChange, many.count)])
            try commit(.setAccessRule(.allow, part))
            try commit(.removeAccessRules(part))
        }
        // Client prefixes of every length from 2 to 6 bytes: the file orders their
        // tombstones as memory does (hex of the bytes sorts as the bytes do).
        let clients = (0..<(CatalogueStamps.maxTombstones + 500)).map { ClientPrefix("c\($0)")! }
        for chunk in stride(from: 0, to: clients.count, by: AccessPolicy.maxHashesPerChange) {
            let part = Array(clients[chunk..<min(chunk + AccessPolicy.maxHashesPerChange, clients.count)])
            try commit(.setClientRule(.deny, part))
            try commit(.removeClientRules(part))
        }
        try commit(.setClientRule(.allow, [ClientPrefix("-UT")!, ClientPrefix(bytes: [0, 0xFF])!]))
        // Users: a key, a password hash, a disabled one, a removed one (a tombstone).
        let key = TrackerKey(String(repeating: "k", count: 32))!, password = PasswordHash(encoded: [1, 15, 8, 1] + Array(repeating: 9, count: 48))!
        try commit(.addUser(User(name: UserName("alice")!, role: .peer, key: key)))
        try commit(.addUser(User(name: UserName("bob")!, role: .admin, password: password)))
        try commit(.addUser(User(name: UserName("carol")!, role: .viewer)))
        try commit(.editUser(UserName("bob")!, .enabled(false)))
        try commit(.removeUser(UserName("carol")!))
        #expect(try repo.load().snapshot?.access.users == replica.store.catalogue.access.users, "users reach the file")
        try commit(.setAccessRule(.deny, [hash(1), hash(2)]))
        try commit(.setAccessMode(.deny))
        let t = try torrent("counted")
        try commit(.register(t))
        try commit(.restore([.completed(t.infoHash, 12)]))
        #expect(try repo.load().snapshot?.completedBase == [t.infoHash: 12])
        try commit(.restore([.ruleRemoved(hash(1), TxRef(epoch: Epoch(term: 9, master: NodeID(1)), txid: 1)),
                             .rule(hash(3), .allow, TxRef(epoch: Epoch(term: 9, master: NodeID(1)), txid: 2))]))
        let stamps = replica.store.catalogue.stamps
        #expect(stamps.rules.filter(\.value.removed).count <= CatalogueStamps.maxTombstones)
        #expect((CatalogueStamps.tombstonesAfterPruning...CatalogueStamps.maxTombstones).contains(stamps.clients.filter(\.value.removed).count),
                "client tombstones were pruned")
        #expect(try repo.load().snapshot?.stamps == stamps)
        #expect(try repo.load().snapshot?.access == replica.store.catalogue.access, "client rules reach the file")
        let fresh = try SQLiteRepository(path: tempPath())
        try fresh.perform(.snapshot(replica.snapshot()))
        #expect(try fresh.load().snapshot?.stamps == stamps, "a snapshot carries the stamps")

        let kept = replica.store.catalogue.keptEntries
        try repo.perform([.keep(kept), .wipe])
        let stopped = try repo.load()
        #expect(stopped.snapshot == nil && stopped.kept == kept, "the wipe of a clean stop leaves what it kept")
        try repo.perform(.keep([]))
        #expect(try repo.load().kept.isEmpty)
    }

    /// A standalone node's operator data: each change written as made, read back whole
    /// from the reopened file, and rebuilt into a fresh catalogue by its changes.
    @Test func aStandaloneNodesOperatorDataOutlivesTheProcess() throws {
        let path = tempPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let kept = try torrent("kept"), gone = try torrent("gone")
        let changes: [CatalogueChange] = [.register(kept), .register(gone), .setAccessRule(.allow, [hash(1), hash(2)]),
                                          .setAccessRule(.deny, [hash(3)]), .setAccessMode(.allow), .removeAccessRules([hash(2)]),
                                          .unregister(gone.infoHash), .setAccessRule(.deny, [hash(1)]),
                                          .setClientRule(.allow, [ClientPrefix("-UT")!, ClientPrefix("-TR")!]),
                                          .setClientRule(.deny, [ClientPrefix("-UT2210")!]), .removeClientRules([ClientPrefix("-TR")!]),
                                          .addUser(User(name: UserName("alice")!, role: .peer, key: TrackerKey(String(repeating: "k", count: 32))!)),
                                          .addUser(User(name: UserName("bob")!, role: .peer)), .editUser(UserName("alice")!, .enabled(false)),
                                          .removeUser(UserName("bob")!), .setAccessMode(.private)]
        var catalogue = Catalogue()
        do {
            let repo = try SQLiteRepository(path: path)
            #expect(try repo.operatorData() == Catalogue(), "a new file holds nothing")
            for change in changes {
                catalogue.apply(change)
                try repo.record(change, in: catalogue)
            }
        }
        let read = try SQLiteRepository(path: path).operatorData()
        #expect(read == catalogue)
        #expect(read.torrents.keys.sorted() == [kept.infoHash] && read.access.mode == .private)
        #expect(read.access.users.sorted.map(\.name.text) == ["alice"] && read.access.users[UserName("alice")!]?.enabled == false)
        let expectedRules: [InfoHash: AccessRule] = [hash(1): .deny, hash(3): .deny]
        #expect(read.access.rules == expectedRules)
        #expect(read.access.clients.rules == [ClientPrefix("-UT")!: .allow, ClientPrefix("-UT2210")!: .deny])

        var rebuilt = Catalogue()
        for change in read.rebuildingChanges { rebuilt.apply(change) }
        #expect(rebuilt == read)
    }
}
