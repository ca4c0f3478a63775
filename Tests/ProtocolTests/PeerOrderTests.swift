import Testing
import TrackerLogic

/// A replica holds each peer as its latest request left it, wherever that request was
/// committed (`Swarm`, `PeerStops`): the rule that keeps a merge or a request held
/// through an election from undoing an acknowledged stop or bringing back older values
/// (a `kill -9` loop once undid 300 of 982 acknowledged stops).
@Suite("A peer's latest request wins") struct PeerOrderTests {
    let key = PeerKey(peerID: peerID(1), ip: v4("10.0.0.1"))

    func announce(_ event: AnnounceEvent = .started, at ms: Int64, left: Int64 = 10, port: UInt16 = 6881) -> SwarmUpdate {
        .announce(Announce(infoHash: hashA, peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: port), uploaded: ms,
                           downloaded: 0, left: left, event: event, at: Instant(milliseconds: ms)))
    }

    func record(at ms: Int64, port: UInt16 = 6881) -> PeerRecord {
        PeerRecord(peerID: key.peerID, endpoint: PeerEndpoint(ip: key.ip, port: port), uploaded: ms, downloaded: 0, left: 10,
                   lastAnnounce: Instant(milliseconds: ms))
    }

    /// What branch `updates` leave, as a merge of its whole content.
    func content(_ updates: [SwarmUpdate]) -> [SwarmMerge] {
        var store = SwarmStore()
        store.apply(updates)
        return store.content()
    }

    @Test func anOlderAnnounceCommittedLaterLeavesTheNewerRecord() {
        var store = SwarmStore()
        store.apply(announce(at: 20_000, port: 2))
        store.apply(announce(at: 10_000, port: 1))
        #expect(store.peer(key, in: hashA) == record(at: 20_000, port: 2))
        #expect(store.superseded == 1, "counted, so a commit's rows read the store")
    }

    @Test func anOlderAnnounceDoesNotBringBackAStoppedPeer() {
        var store = SwarmStore()
        store.apply([announce(at: 10_000), announce(.stopped, at: 20_000), announce(at: 15_000)])
        #expect(store.peer(key, in: hashA) == nil)
        store.apply(announce(at: 25_000))
        #expect(store.peer(key, in: hashA) == record(at: 25_000), "a later announce comes back")
    }

    @Test func aStopOlderThanTheRecordLeavesIt() {
        var store = SwarmStore()
        store.apply([announce(at: 20_000), announce(.stopped, at: 10_000)])
        #expect(store.peer(key, in: hashA) == record(at: 20_000))
    }

    /// Both branches' removals hold after a merge either way round, and the later record
    /// wins whichever branch holds it.
    @Test func aMergeKeepsRemovalsCommittedOnEitherSide() {
        let forked = announce(at: 10_000)
        let stoppedHere = [forked, announce(.stopped, at: 20_000)]
        var here = SwarmStore()
        here.apply(stoppedHere)
        for m in content([forked]) { here.apply(.merge(m)) }
        #expect(here.peer(key, in: hashA) == nil, "the branch that diverged before the stop does not bring the peer back")

        var other = SwarmStore()
        other.apply([forked, announce(at: 15_000)])
        for m in content(stoppedHere) { other.apply(.merge(m)) }
        #expect(other.peer(key, in: hashA) == nil, "the merged branch's later stop removes the older record")

        var later = SwarmStore()
        later.apply([forked, announce(at: 25_000)])
        for m in content(stoppedHere) { later.apply(.merge(m)) }
        #expect(later.peer(key, in: hashA) == record(at: 25_000), "a record later than the stop stays")
    }

    /// A stop for a swarm this replica never held is kept too: the other branch may hold
    /// the peer's older record.
    @Test func aStopForAnUnknownSwarmIsKept() {
        var store = SwarmStore()
        store.apply(announce(.stopped, at: 20_000))
        #expect(store.swarmCount == 0, "no swarm for it")
        for m in content([announce(at: 10_000)]) { store.apply(.merge(m)) }
        #expect(store.peer(key, in: hashA) == nil)
    }

    @Test func stopsTravelInContentAndRows() {
        var replica = Replica()
        let ref = TxRef(epoch: Epoch(term: 1, master: NodeID(1)), txid: 1)
        let tx = Transaction(ref: ref, updates: [announce(at: 10_000), announce(.stopped, at: 20_000)])
        replica.commit(tx)
        #expect(SwarmStore(content: replica.store.content()) == replica.store, "a snapshot carries the stop")
        var disk = RepositoryRows()
        disk.apply(CommitRows(tx, replica: replica))
        #expect(disk.snapshot?.intactStore() == replica.store, "a restart reads the stop back")
    }

    /// A transaction whose announce a later record superseded: its row is the store's
    /// record, not the announce (which memory never held).
    @Test func aSupersededAnnouncesRowIsTheRecordMemoryHolds() {
        var replica = Replica()
        var disk = RepositoryRows()
        let epoch = Epoch(term: 1, master: NodeID(1))
        for (txid, update) in [announce(at: 20_000), announce(at: 10_000)].enumerated() {
            let tx = Transaction(ref: TxRef(epoch: epoch, txid: UInt64(txid + 1)), updates: [update])
            replica.commit(tx)
            disk.apply(CommitRows(tx, replica: replica))
        }
        #expect(disk.snapshot?.intactStore() == replica.store)
    }

    @Test func anExpiryDropsStopsWithRecords() {
        var store = SwarmStore()
        store.apply([announce(at: 10_000), announce(.stopped, at: 20_000)])
        store.apply(.expire(before: Instant(milliseconds: 20_000)))
        #expect(store.stops.at(key, in: hashA) != nil, "not older than the cutoff")
        store.apply(.expire(before: Instant(milliseconds: 20_001)))
        #expect(store.stops.at(key, in: hashA) == nil)
        #expect(Digest.of(store) == Digest.recomputed(store))
        #expect(Digest.of(store) == Digest.of(SwarmStore()))
    }

    /// What an expiry would remove is not merged: a stop it dropped can no longer hold
    /// back the record from before it.
    @Test func aMergeCarriesNothingOlderThanTheExpiryCutoff() {
        let m = SwarmMerge(infoHash: hashA, peers: [record(at: 10_000), record(at: 30_000, port: 2)], completed: [key],
                           stops: [PeerStop(key: key, at: Instant(milliseconds: 15_000))])
        let kept = m.dropping(olderThan: Instant(milliseconds: 20_000))
        #expect(kept.peers == [record(at: 30_000, port: 2)])
        #expect(kept.stops.isEmpty)
        #expect(kept.completed == [key], "completions do not expire")
    }

    /// A standalone tracker has one log and no merges: its order is the log's, whatever
    /// its clock did.
    @Test func aStandaloneTrackerKeepsItsLogsOrder() {
        var store = SwarmStore(keepsDigest: false)
        store.apply([announce(at: 20_000, port: 2), announce(at: 10_000, port: 1)])
        #expect(store.peer(key, in: hashA) == record(at: 10_000, port: 1))
        store.apply(announce(.stopped, at: 5_000))
        #expect(store.peer(key, in: hashA) == nil)
        #expect(store.stops == PeerStops())
    }
}
