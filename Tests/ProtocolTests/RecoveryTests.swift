import Testing
import TrackerLogic

/// What a new master proposes again while it recovers. Whatever a node prepared right
/// after the new master's last commit may have been committed by the old master, so it
/// is proposed again; a transaction prepared after another branch's commit of the same
/// number (a minority's own epoch) is not, since it would apply that branch's older
/// records over ours (seed 4851 rolled an acknowledged announce back so). A diverged
/// branch comes back by merge, which keeps the newer record.
@Suite("Recovery") struct RecoveryTests {
    let t0 = Instant(milliseconds: 9_000_000)
    let ours = Epoch(term: 2, master: NodeID(3))
    /// n1 led an epoch of its own in a minority and committed its #1 there.
    let minority = Epoch(term: 1, master: NodeID(1))
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func update(_ n: UInt32) -> SwarmUpdate {
        .announce(Announce(infoHash: InfoHash(a: 9, b: 9, c: 9), peerID: PeerID(a: 1, b: 1, c: n),
                           endpoint: PeerEndpoint(ip: .v4(0x0A00_0000 | n), port: 6881), uploaded: 0, downloaded: 0,
                           left: 10, event: .started, at: t0))
    }

    func env(from: UInt32, epoch: Epoch? = nil, _ m: ClusterMessage) -> NodeEvent {
        .cluster(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: epoch ?? ours, to: nil, message: m))
    }

    /// n3, restored at ours#1, elected over n1 and n2; the PREPAREs it sends once it
    /// serves, after n1 and n2 answered its COORDINATOR with what they prepared.
    func recover(n1: (last: TxRef, prepared: Transaction), n2: (last: TxRef, prepared: Transaction)) -> [Transaction] {
        let last = TxRef(epoch: ours, txid: 1)
        let snapshot = Snapshot(lastCommitted: last, history: EpochHistory(runs: [.init(epoch: ours, firstTxid: 1)]), content: [], digest: 0)
        var n3 = TrackerNode(id: NodeID(3), incarnation: 3000, config: ClusterConfig(),
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                             seed: 7, now: t0, restoring: DurableState(snapshot: snapshot, epoch: ours))
        var t = t0
        var actions: [NodeAction] = []
        for _ in 0..<200 where !n3.isServing {
            for (id, ref) in [(UInt32(1), n1.last), (2, n2.last)] {
                _ = n3.stepEchoing(env(from: id, .keepalive(Keepalive(role: .slave, master: .unassigned, lastCommitted: ref, inSync: false,
                                                               address: ""))), now: t)
            }
            let step = n3.stepEchoing(.tick, now: t)
            actions += step
            for case .persistEpoch(let e) in step { actions += n3.stepEchoing(.epochStored(e), now: t) }
            if n3.role == .master {
                // Answered in the new master's epoch, which the COORDINATOR made them adopt.
                actions += n3.stepEchoing(env(from: 1, epoch: n3.epoch, .coordinatorAck(lastCommitted: n1.last, prepared: n1.prepared)), now: t)
                actions += n3.stepEchoing(env(from: 2, epoch: n3.epoch, .coordinatorAck(lastCommitted: n2.last, prepared: n2.prepared)), now: t)
            }
            t = t + Milliseconds(50)
        }
        for _ in 0..<10 {
            actions += n3.stepEchoing(.tick, now: t)
            t = t + Milliseconds(50)
        }
        return actions.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { return tx } else { return nil } }
    }

    @Test func aTransactionPreparedOnAnotherBranchIsNotProposedAgain() throws {
        let onOurs = Transaction(ref: TxRef(epoch: ours, txid: 2), updates: [update(2)])
        let onTheirs = Transaction(ref: TxRef(epoch: minority, txid: 2), updates: [update(1)])
        let prepares = recover(n1: (TxRef(epoch: minority, txid: 1), onTheirs), n2: (TxRef(epoch: ours, txid: 1), onOurs))
        let first = try #require(prepares.first)
        #expect(first.updates.contains(update(2)), "prepared after our #1: it may have been committed")
        #expect(!prepares.contains { $0.updates.contains(update(1)) }, "prepared after the minority's #1")
    }

    /// Only an answer to this reign's COORDINATOR counts: one sent in another epoch (a
    /// delayed answer to an earlier recovery, or a replay) tells what its node held then,
    /// and counted it stood in for the node's real answer (fresh seed 59173201733146931: a
    /// strict master of two recovered empty on a replayed answer while the other node,
    /// still starting, held e2.2#2, and every transaction aborted after). A strict master
    /// of three that hears only such answers does not serve; answered in its epoch, it does.
    @Test(arguments: [false, true])
    func onlyAnswersSentInTheMastersEpochCount(inItsEpoch: Bool) {
        var config = ClusterConfig()
        config.quorum = .strict
        config.clusterSize = 3
        var n3 = TrackerNode(id: NodeID(3), incarnation: 3000, config: config,
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                             seed: 7, now: t0, restoring: DurableState(snapshot: nil, epoch: ours))
        var t = t0
        for _ in 0..<160 where !n3.isServing {
            for id in [UInt32(1), 2] {
                _ = n3.stepEchoing(env(from: id, .keepalive(Keepalive(role: .slave, master: .unassigned, lastCommitted: .zero, inSync: false,
                                                               address: ""))), now: t)
            }
            for case .persistEpoch(let e) in n3.stepEchoing(.tick, now: t) { _ = n3.stepEchoing(.epochStored(e), now: t) }
            if n3.role == .master {
                for id in [UInt32(1), 2] {
                    _ = n3.stepEchoing(env(from: id, epoch: inItsEpoch ? n3.epoch : ours, .coordinatorAck(lastCommitted: .zero, prepared: nil)),
                                now: t)
                }
            }
            t = t + Milliseconds(50)
        }
        #expect(n3.role == .master)
        #expect(n3.isServing == inItsEpoch)
    }

    /// A new master whose own state diverged from the one it fetched keeps that state on
    /// disk until the merge carrying it back has committed; a master that leaves office
    /// first goes back to it. Written over at once, a crash of both nodes before the merge
    /// committed lost a registration only that master held (fresh seed 7158042588230730:
    /// n2 committed it alone in a partition, then fetched n1's snapshot as master).
    @Test(arguments: [false, true])
    func aMastersDivergedStateStaysOnDiskUntilItsMergeCommits(leavesOfficeFirst: Bool) throws {
        let torrent = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: t0)
        // n3 committed the registration in a minority epoch of its own; n1 led e2.1 and
        // committed three transactions there that n3 never saw.
        let alone = Epoch(term: 1, master: NodeID(3)), theirs = Epoch(term: 2, master: NodeID(1))
        var mine = Replica()
        mine.commit(Transaction(ref: TxRef(epoch: alone, txid: 1), updates: [.catalogue(.register(torrent))]))
        var fetched = Replica()
        for txid in UInt64(1)...3 { fetched.commit(Transaction(ref: TxRef(epoch: theirs, txid: txid), updates: [update(UInt32(txid))])) }
        var n3 = TrackerNode(id: NodeID(3), incarnation: 3000, config: ClusterConfig(),
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                             seed: 7, now: t0, restoring: DurableState(snapshot: mine.snapshot(), epoch: theirs))
        var t = t0
        var writes: [NodeAction] = []
        func record(_ actions: [NodeAction]) {
            writes += actions.filter { if case .persist = $0 { true } else if case .persistSnapshot = $0 { true } else { false } }
        }
        var merge: Transaction?
        for _ in 0..<200 where merge == nil {
            _ = n3.stepEchoing(env(from: 1, epoch: theirs, .keepalive(Keepalive(role: .slave, master: .unassigned,
                                                                         lastCommitted: fetched.lastCommitted, inSync: false,
                                                                         address: ""))), now: t)
            var actions = n3.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in actions { actions += n3.stepEchoing(.epochStored(e), now: t) }
            if n3.role == .master {
                actions += n3.stepEchoing(env(from: 1, epoch: n3.epoch, .coordinatorAck(lastCommitted: fetched.lastCommitted, prepared: nil)),
                                   now: t)
                for case .send(let e) in actions where e.to == NodeID(1) {
                    if case .catchUpRequest = e.message { actions += n3.stepEchoing(env(from: 1, epoch: n3.epoch, .snapshot(fetched.snapshot())), now: t) }
                }
            }
            record(actions)
            merge = actions.lazy.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, _, _) = e.message { tx } else { nil } }.first
            t = t + Milliseconds(50)
        }
        let prepared = try #require(merge, "n3 serves and proposes its own registration back")
        #expect(prepared.updates.contains(.catalogue(.register(torrent))))
        #expect(n3.replica.lastCommitted == fetched.lastCommitted, "it serves from the state it fetched")
        #expect(writes.isEmpty, "the disk still holds the registration: nothing is written over it before the merge commits")
        if leavesOfficeFirst {
            let higher = Epoch(term: n3.epoch.term + 1, master: NodeID(4))
            record(n3.stepEchoing(env(from: 4, epoch: higher, .coordinator(lastCommitted: .zero)), now: t))
            #expect(n3.role == .slave)
            #expect(writes.isEmpty)
            #expect(n3.replica.lastCommitted == mine.lastCommitted, "back to what the disk holds, to be merged by the next master")
            #expect(n3.replica.store.catalogue.torrents[torrent.infoHash] != nil)
        } else {
            record(n3.stepEchoing(env(from: 1, epoch: n3.epoch, .vote(txid: prepared.txid, digest: prepared.digest, verdict: .ok)), now: t))
            #expect(n3.replica.lastCommitted == prepared.ref)
            let stored = writes.compactMap { if case .persistSnapshot(let s) = $0 { s } else { nil } }
            #expect(stored.map(\.lastCommitted) == [prepared.ref], "once merged, the whole replica is stored at once")
            #expect(stored.first?.torrents.map(\.infoHash) == [torrent.infoHash])
        }
    }

    /// A strict master of three recovered with n2 alone: n2 had only prepared old#2, which
    /// the old master committed with n1, cut off then. Serving, the master proposes old#2's
    /// update again under its own epoch; when n1 says hello holding old#2, merged as a
    /// diverged node it would stay out of every quorum until its merge committed, and the
    /// merge needed it (fresh seeds 57029967662539837 and 57029967662419115: no announce
    /// answered again). With nothing of its own committed, the master recovers again and
    /// fetches old#2 instead. A node that never answers sends it back once, not forever.
    @Test(arguments: [true, false])
    func aMasterWithNothingCommittedRecoversAgainForACommitItMissed(missedAnswers: Bool) throws {
        var config = ClusterConfig()
        config.quorum = .strict
        config.clusterSize = 3
        let old = Epoch(term: 1, master: NodeID(2))
        var base = Replica()
        base.commit(Transaction(ref: TxRef(epoch: old, txid: 1), updates: [update(1)]))
        let missed = Transaction(ref: TxRef(epoch: old, txid: 2), updates: [update(2)])
        var n3 = TrackerNode(id: NodeID(3), incarnation: 3000, config: config,
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                             seed: 7, now: t0, restoring: DurableState(snapshot: base.snapshot(), epoch: old))
        var t = t0
        func keepalive(_ id: UInt32, _ last: TxRef) -> NodeEvent {
            env(from: id, epoch: n3.epoch, .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: last, inSync: false,
                                                                address: "")))
        }
        // Recovery meets n2 only, which prepared old#2.
        for _ in 0..<200 where !n3.isServing {
            _ = n3.stepEchoing(keepalive(2, base.lastCommitted), now: t)
            for case .persistEpoch(let e) in n3.stepEchoing(.tick, now: t) { _ = n3.stepEchoing(.epochStored(e), now: t) }
            if n3.role == .master {
                _ = n3.stepEchoing(env(from: 2, epoch: n3.epoch, .coordinatorAck(lastCommitted: base.lastCommitted, prepared: missed)), now: t)
            }
            t = t + Milliseconds(50)
        }
        #expect(n3.isServing && n3.replica.lastCommitted == base.lastCommitted)
        // n1 comes back holding old#2 and says hello.
        _ = n3.stepEchoing(keepalive(1, missed.ref), now: t)
        let hello = n3.stepEchoing(env(from: 1, epoch: n3.epoch, .hello(Hello(lastCommitted: missed.ref, hasState: true))), now: t)
        #expect(!n3.isServing, "recovering again")
        #expect(!hello.contains { if case .send(let e) = $0, case .mergeRequest = e.message { true } else { false } })
        #expect(hello.contains { if case .broadcast(let e) = $0, case .coordinator = e.message { true } else { false } })
        var prepares: [(Transaction, TxRef)] = []
        for _ in 0..<200 where prepares.isEmpty {
            t = t + Milliseconds(50)
            for id in [UInt32(1), 2] { _ = n3.stepEchoing(keepalive(id, id == 1 ? missed.ref : base.lastCommitted), now: t) }
            var actions = n3.stepEchoing(.tick, now: t)
            if !n3.isServing {
                actions += n3.stepEchoing(env(from: 2, epoch: n3.epoch, .coordinatorAck(lastCommitted: base.lastCommitted, prepared: nil)), now: t)
                if !missedAnswers {
                    actions += n3.stepEchoing(env(from: 1, epoch: n3.epoch, .coordinatorAck(lastCommitted: missed.ref, prepared: nil)), now: t)
                }
            }
            for case .send(let e) in actions where e.to == NodeID(1) {
                if case .catchUpRequest(let after) = e.message {
                    #expect(after == base.lastCommitted)
                    actions += n3.stepEchoing(env(from: 1, epoch: n3.epoch, .catchUp(after: after, [missed])), now: t)
                }
            }
            prepares += actions.compactMap { if case .broadcast(let e) = $0, case .prepare(let tx, let previous, _) = e.message { (tx, previous) } else { nil } }
        }
        #expect(n3.isServing)
        if missedAnswers {
            // n1 never answered: the master serves as before, and n1's next hello is a merge.
            #expect(n3.replica.lastCommitted == base.lastCommitted)
            let again = n3.stepEchoing(env(from: 1, epoch: n3.epoch, .hello(Hello(lastCommitted: missed.ref, hasState: true))), now: t)
            #expect(n3.isServing, "one recovery for one missed commit")
            #expect(again.contains { if case .send(let e) = $0, case .mergeRequest = e.message { true } else { false } })
        } else {
            #expect(n3.replica.lastCommitted == missed.ref, "fetched from n1")
            #expect(prepares.allSatisfy { $0.1 == missed.ref }, "and everything it proposes follows it")
        }
    }

    /// A strict master serves from a branch a majority can vote on. n-top holds its own #1
    /// of a later epoch than the #1 two other nodes hold; serving its own, it would ask
    /// both to merge, and the merge needs the votes they give only once merged (fresh seed
    /// 80516490874771: every PREPARE aborted for 38 s). It fetches their branch instead and
    /// proposes its own state back as a merge. With five, a node ahead on a branch of its
    /// own is fetched first and merged back too, and not fetched again for being ahead.
    @Test(arguments: [false, true])
    func aStrictMasterServesFromTheBranchAMajorityHolds(withANodeAheadAlone: Bool) throws {
        var config = ClusterConfig()
        config.quorum = .strict
        config.clusterSize = withANodeAheadAlone ? 5 : 3
        let top = UInt32(config.clusterSize)
        let theirs = Epoch(term: 1, master: NodeID(1)), own = Epoch(term: 2, master: NodeID(top))
        let aloneEpoch = Epoch(term: 3, master: NodeID(4))
        var mine = Replica(), branch = Replica(), ahead = Replica()
        mine.commit(Transaction(ref: TxRef(epoch: own, txid: 1), updates: [update(7)]))
        branch.commit(Transaction(ref: TxRef(epoch: theirs, txid: 1), updates: [update(1)]))
        for txid in UInt64(1)...2 { ahead.commit(Transaction(ref: TxRef(epoch: aloneEpoch, txid: txid), updates: [update(UInt32(40 + txid))])) }
        var holders: [UInt32: Replica] = [1: branch, 2: branch]
        if withANodeAheadAlone { holders[4] = ahead }
        var node = TrackerNode(id: NodeID(top), incarnation: 9000, config: config,
                               handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                               seed: 7, now: t0, restoring: DurableState(snapshot: mine.snapshot(), epoch: withANodeAheadAlone ? aloneEpoch : own))
        var t = t0
        var fetchedFrom: [UInt32] = []
        var prepare: (tx: Transaction, previous: TxRef)?
        for _ in 0..<200 where prepare == nil {
            for (id, r) in holders {
                _ = node.stepEchoing(env(from: id, epoch: node.epoch, .keepalive(Keepalive(role: .slave, master: .unassigned, lastCommitted: r.lastCommitted,
                                                                 inSync: false, address: ""))), now: t)
            }
            var actions = node.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in actions { actions += node.stepEchoing(.epochStored(e), now: t) }
            if node.role == .master && !node.isServing {
                for (id, r) in holders.sorted(by: { $0.key < $1.key }) {
                    actions += node.stepEchoing(env(from: id, epoch: node.epoch, .coordinatorAck(lastCommitted: r.lastCommitted, prepared: nil)), now: t)
                }
            }
            var i = 0
            while i < actions.count {
                if case .send(let e) = actions[i], let to = e.to, case .catchUpRequest = e.message, let r = holders[to.rawValue] {
                    fetchedFrom.append(to.rawValue)
                    actions += node.stepEchoing(env(from: to.rawValue, epoch: node.epoch, .snapshot(r.snapshot())), now: t)
                }
                i += 1
            }
            prepare = actions.lazy.compactMap {
                if case .broadcast(let e) = $0, case .prepare(let tx, let previous, _) = e.message { (tx, previous) } else { nil }
            }.first
            t = t + Milliseconds(50)
        }
        let first = try #require(prepare, "the master serves")
        #expect(first.previous == branch.lastCommitted, "from the branch n1 and n2 hold")
        #expect(fetchedFrom.filter { $0 == 4 }.count == (withANodeAheadAlone ? 1 : 0), "the node ahead is fetched once, first")
        #expect(fetchedFrom.filter { $0 != 4 }.count == 1)
        let merged = Set(first.tx.updates.compactMap { if case .merge(let m) = $0 { m.peers.map(\.peerID.c) } else { nil } }.joined())
        #expect(merged == Set(withANodeAheadAlone ? [7, 41, 42] : [7]), "what the other branches hold comes back by merge")
        for voter in withANodeAheadAlone ? [UInt32(1), 2] : [1] {
            _ = node.stepEchoing(env(from: voter, epoch: node.epoch, .vote(txid: first.tx.txid, digest: first.tx.digest, verdict: .ok)), now: t)
        }
        #expect(node.replica.lastCommitted == first.tx.ref, "the branch's holders and the master make a majority")
    }
}
