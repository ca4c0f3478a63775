import Testing
import TrackerLogic

/// A diverged node sets its repository aside for the merge and follows its master at once
/// (`SetAside.swift`): a quorum that needs its vote is not left waiting for a merge that
/// needs that same vote. Seed 8267757876730308's core of two (strict, 3 nodes) stood still
/// for the whole liveness phase without it.
@Suite("A diverged state set aside") struct SetAsideTests {
    let t0 = Instant(milliseconds: 5_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let older = Epoch(term: 1, master: NodeID(2))

    /// What n2 committed alone under an earlier epoch of its own: one peer in hashA.
    func divergedSnapshot() -> Snapshot {
        var r = Replica()
        _ = r.commit(Transaction(ref: TxRef(epoch: older, txid: 1), updates: [.announce(Announce(
            infoHash: hashA, peerID: peerID(9), endpoint: PeerEndpoint(ip: .v4(9), port: 1), uploaded: 0, downloaded: 0,
            left: 1, event: .started, at: t0))]))
        return r.snapshot()
    }

    func fromN3(_ m: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: n3Epoch, to: NodeID(2), message: m))
    }

    func offers(_ actions: [NodeAction]) -> [MergeOffer] {
        actions.compactMap { if case .send(let e) = $0, e.to == NodeID(3), case .mergeOffer(let o) = e.message { o } else { nil } }
    }

    /// n2, restored with its diverged state (and `setAside`), following n3 until `t0 + 3 s`.
    func divergedN2(setAside: [MergeOffer] = []) -> (TrackerNode, Instant) {
        var n = TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0,
                            restoring: DurableState(snapshot: setAside.isEmpty ? divergedSnapshot() : nil, epoch: n3Epoch,
                                                    setAside: setAside))
        let t = follow(&n, hearing: n3Keepalive(), from: t0, until: t0 + Milliseconds(3000))
        return (n, t)
    }

    /// On MERGE-REQUEST: the offer reaches the disk before the repository is emptied, goes
    /// to the master, and the node asks for the master's state as a fresh node; in sync, it
    /// votes OK while its offer is still pending. It offers again each interval until the
    /// MERGE-DONE for its id, then drops the offer from its disk and offers no more.
    @Test func aDivergedSlaveSetsItsStateAsideFollowsItsMasterAndOffersUntilMerged() throws {
        var (n, t) = divergedN2()
        #expect(n.replica.lastCommitted == TxRef(epoch: older, txid: 1))
        t = t + Milliseconds(10)
        let actions = n.stepEchoing(fromN3(.mergeRequest), now: t)
        let setAt = try #require(actions.firstIndex { if case .setAside(let p) = $0 { !p.isEmpty } else { false } })
        let wipeAt = try #require(actions.firstIndex { if case .wipeStore = $0 { true } else { false } })
        #expect(setAt < wipeAt, "the offer is on disk before the repository goes")
        let offered = offers(actions)
        #expect(offered.count == 1 && offered[0].swarms.map(\.infoHash) == [hashA])
        #expect(actions.contains { if case .send(let e) = $0, case .hello(let h) = e.message { !h.hasState } else { false } })
        #expect(n.replica.lastCommitted == .zero && n.holdsSetAsideOffer)

        // The master's state (empty): in sync, n2 votes OK on the next transaction.
        _ = n.stepEchoing(fromN3(.catchUp(after: .zero, [])), now: t + Milliseconds(5))
        let tx = Transaction(ref: TxRef(epoch: n3Epoch, txid: 1), updates: [.expire(before: t0)])
        let vote = n.stepEchoing(fromN3(.prepare(tx, previous: .zero, previousDigest: 0)), now: t + Milliseconds(10))
        #expect(vote.contains { if case .send(let e) = $0, case .vote(_, _, .ok) = e.message { true } else { false } })

        var again: [MergeOffer] = []
        for step in 1...6 {
            let at = t + Milliseconds(250 * Int64(step))
            if step % 2 == 0 { _ = n.stepEchoing(n3Keepalive(), now: at) }
            again += offers(n.stepEchoing(.tick, now: at))
        }
        #expect(!again.isEmpty && again.allSatisfy { $0.offerID == offered[0].offerID }, "offered again until merged")
        let done = n.stepEchoing(fromN3(.mergeDone(offerID: offered[0].offerID)), now: t + Milliseconds(1600))
        #expect(done.contains { if case .setAside(let p) = $0 { p.isEmpty } else { false } })
        #expect(!n.holdsSetAsideOffer)
        for step in 1...8 {
            let at = t + Milliseconds(1600 + 250 * Int64(step))
            if step % 2 == 0 { _ = n.stepEchoing(n3Keepalive(), now: at) }
            #expect(offers(n.stepEchoing(.tick, now: at)).isEmpty)
        }
    }

    /// A MERGE-DONE for another offer id drops nothing.
    @Test func aMergeDoneForAnotherOfferDropsNothing() throws {
        var (n, t) = divergedN2()
        let offered = offers(n.stepEchoing(fromN3(.mergeRequest), now: t + Milliseconds(10)))
        let id = try #require(offered.first).offerID
        let done = n.stepEchoing(fromN3(.mergeDone(offerID: id &+ 1)), now: t + Milliseconds(20))
        #expect(!done.contains { if case .setAside = $0 { true } else { false } })
        #expect(n.holdsSetAsideOffer)
    }

    /// An offer set aside before a crash is read back and offered to the master followed.
    @Test func anOfferSetAsideIsOfferedAgainAfterARestart() {
        let parts = [MergeOffer(offerID: 77, part: 0, parts: 1, swarms: divergedSnapshot().content)]
        var n = TrackerNode(id: NodeID(2), incarnation: 2001, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0,
                            restoring: DurableState(snapshot: nil, epoch: n3Epoch, setAside: parts))
        #expect(n.holdsSetAsideOffer)
        var sent: [MergeOffer] = []
        var t = t0
        while t < t0 + Milliseconds(4000) {
            sent += offers(n.stepEchoing(n3Keepalive(), now: t)) + offers(n.stepEchoing(.tick, now: t))
            t = t + Milliseconds(500)
        }
        #expect(sent.contains(parts[0]))
        // Parts that are not one offer's, numbered in order, are not taken.
        let torn = TrackerNode(id: NodeID(2), incarnation: 2002, config: ClusterConfig(),
                               handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0,
                               restoring: DurableState(snapshot: nil, epoch: n3Epoch,
                                                       setAside: [MergeOffer(offerID: 77, part: 1, parts: 2, swarms: [])]))
        #expect(!torn.holdsSetAsideOffer)
    }
}

/// A master commits only the swarms of an offer its repository does not hold already
/// (`Master.mergeOfferReceived`): an offer of what it holds is done at once, with no
/// transaction a quorum would have to carry.
@Suite("Merge offers of what the master holds") struct HeldOfferTests: MasterFixture {
    let t0 = Instant(milliseconds: 6_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: IPAddress("10.0.0.9")!, port: 6881)

    @Test func anOfferOfSwarmsTheMasterHoldsIsDoneWithoutACommit() throws {
        var (n, t) = masterWithTwoSlaves()
        let tx = try announce(1, &n, at: &t)
        _ = vote(1, tx, .ok, &n, at: t)
        _ = vote(2, tx, .ok, &n, at: t)
        try #require(n.replica.lastCommitted == tx.ref)
        let held = n.replica.store.content()
        try #require(!held.isEmpty)
        t = t + Milliseconds(10)
        let actions = n.stepEchoing(env(from: 1, epoch: n.epoch, .mergeOffer(MergeOffer(offerID: 5, part: 0, parts: 1, swarms: held))), now: t)
        #expect(actions.contains { if case .send(let e) = $0, e.to == NodeID(1), case .mergeDone(5) = e.message { true } else { false } })
        #expect(!actions.contains { if case .broadcast(let e) = $0, case .prepare = e.message { true } else { false } })
        #expect(n.paths[.mergeSwarmsAlreadyHeld] == 1)
    }
}
