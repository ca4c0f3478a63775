import Testing
import TrackerLogic

/// The rows a commit writes are the whole of what a disk learns of it: applied in commit
/// order (with snapshots and wipes between), they read back as the replica that wrote them.
@Suite("Repository rows")
struct RepositoryRowsTests {
    func hash(_ n: UInt32) -> InfoHash { InfoHash(a: 0xF00D, b: UInt64(n), c: n) }

    func randomUpdate(_ rng: inout SeededGenerator, at t: Int64, torrents: [RegisteredTorrent]) -> SwarmUpdate {
        let key = PeerKey(peerID: PeerID(a: 7, b: 7, c: UInt32(rng.below(10))),
                          ip: rng.below(4) == 0 ? .v6(0x2001_0DB8_0000_0000, UInt64(rng.below(3))) : .v4(0x0A00_0000 | UInt32(rng.below(3))))
        switch rng.below(24) {
        case 0: return .expire(before: Instant(milliseconds: t - Int64(rng.below(300))))
        case 1:
            let record = PeerRecord(peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: 7000), uploaded: 1, downloaded: 2,
                                    left: Int64(rng.below(2)), lastAnnounce: Instant(milliseconds: t - Int64(rng.below(400))))
            return .merge(SwarmMerge(infoHash: hash(UInt32(rng.below(4))), peers: [record], completed: rng.below(2) == 0 ? [key] : []))
        case 2: return .catalogue(.register(torrents[rng.below(torrents.count)]))
        case 3: return .catalogue(.unregister(torrents[rng.below(torrents.count)].infoHash))
        default:
            let events: [AnnounceEvent] = [.none, .started, .completed, .stopped]
            return .announce(Announce(infoHash: hash(UInt32(rng.below(4))), peerID: key.peerID,
                                      endpoint: PeerEndpoint(ip: key.ip, port: UInt16(6881 + rng.below(3))),
                                      uploaded: Int64(rng.below(1000)), downloaded: Int64(rng.below(1000)),
                                      left: Int64(rng.below(3)) * 100, event: events[rng.below(4)], at: Instant(milliseconds: t)))
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func rowsAppliedInOrderReadBackAsTheReplica(seed: UInt64) throws {
        let torrents = try [Torrents.v1Single, Torrents.v1Multi, Torrents.hybrid].map {
            try RegisteredTorrent(file: $0, registeredAt: Instant(milliseconds: 77))
        }
        var rng = SeededGenerator(seed: seed)
        var replica = Replica()
        var rows = RepositoryRows()
        #expect(rows.snapshot == nil, "an empty disk restores nothing")
        var t: Int64 = 10_000
        for txid in 1...400 as ClosedRange<UInt64> {
            t += Int64(rng.below(30))
            let epoch = Epoch(term: UInt32(1 + txid / 150), master: NodeID(UInt32(1 + txid / 150)))
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid),
                                 updates: (0..<(1 + rng.below(8))).map { _ in randomUpdate(&rng, at: t, torrents: torrents) })
            let committed = replica.commit(tx)
            #expect(committed)
            rows.apply(CommitRows(tx, replica: replica))
            #expect(rows.snapshot == replica.snapshot(), "after \(tx.ref)")
            if txid == 200 {
                // A snapshot replaces every row; commits go on from it.
                rows.replace(with: replica.snapshot())
                #expect(rows.snapshot == replica.snapshot())
            }
        }
        #expect(replica.history.runs.count == 3)
        rows.wipe()
        #expect(rows.snapshot == nil && rows.peers.isEmpty && rows.torrents.isEmpty)
    }

    /// A transaction that holds more than announces is read from the replica after it:
    /// a merge or an expiry can change a peer after its announce, and a store writes the
    /// peer rows after the transaction's bulk changes (SQLite's log is appended last), so
    /// the announce's own record would outlive them there. Read before the commit, the
    /// rows miss it altogether.
    @Test func rowsOfAnnouncesBesideOtherChangesAreReadAfterTheCommit() {
        let key = PeerKey(peerID: PeerID(a: 1, b: 1, c: 1), ip: .v4(0x0A00_0001))
        let a = Announce(infoHash: hash(1), peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: 6881),
                         uploaded: 0, downloaded: 0, left: 5, event: .started, at: Instant(milliseconds: 10))
        let merged = PeerRecord(peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: 7000), uploaded: 9, downloaded: 9,
                                left: 0, lastAnnounce: Instant(milliseconds: 20))
        let merge = SwarmMerge(infoHash: hash(1), peers: [merged], completed: [])
        let epoch = Epoch(term: 1, master: NodeID(1))
        for (txid, update, after) in [(UInt64(1), SwarmUpdate.merge(merge), Optional(merged)),
                                      (2, .expire(before: Instant(milliseconds: 30)), nil)] {
            var replica = Replica()
            if txid == 2 { replica.commit(Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [])) }
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: txid), updates: [.announce(a), update])
            let early = CommitRows(tx, replica: replica)
            #expect(early.changes.first == .peer(hash(1), key, nil))
            replica.commit(tx)
            let rows = CommitRows(tx, replica: replica)
            #expect(rows.changes.first == .peer(hash(1), key, after), "\(update)")
            var disk = RepositoryRows()
            disk.apply(rows)
            #expect(disk.peers[hash(1)]?[key] == after)
        }
    }

    /// A transaction of announces alone is written from the announces: each row is what
    /// its announce left (a stop leaves none), the later row of a peer what memory holds.
    @Test func aPeerAnnouncingTwiceInATransactionOfAnnouncesGetsARowForEach() {
        var replica = Replica()
        let key = PeerKey(peerID: PeerID(a: 1, b: 1, c: 1), ip: .v4(0x0A00_0001))
        func announce(_ event: AnnounceEvent, port: UInt16, at t: Int64) -> Announce {
            Announce(infoHash: hash(1), peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: port),
                     uploaded: t, downloaded: 0, left: 5, event: event, at: Instant(milliseconds: t))
        }
        let first = announce(.started, port: 6881, at: 10), stop = announce(.stopped, port: 6881, at: 11)
        let again = announce(.started, port: 6882, at: 12)
        let tx = Transaction(ref: TxRef(epoch: Epoch(term: 1, master: NodeID(1)), txid: 1),
                             updates: [.announce(first), .announce(stop), .announce(again)])
        replica.commit(tx)
        let rows = CommitRows(tx, replica: replica)
        func record(_ a: Announce) -> PeerRecord {
            PeerRecord(peerID: a.peerID, endpoint: a.endpoint, uploaded: a.uploaded, downloaded: 0, left: 5, lastAnnounce: a.at)
        }
        #expect(rows.changes == [.peer(hash(1), key, record(first)), .peer(hash(1), key, nil), .stop(hash(1), key, stop.at),
                                 .peer(hash(1), key, record(again))])
        #expect(rows.swarms.map(\.infoHash) == [hash(1)], "a stop may have emptied the swarm: its row is set from memory")
        var disk = RepositoryRows()
        disk.apply(rows)
        #expect(disk.snapshot == replica.snapshot())
    }
}
