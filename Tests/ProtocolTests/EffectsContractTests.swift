import Testing
import TrackerLogic

/// The contract both hosts follow when they perform a node's store actions and exits.
@Suite("Effects contract")
struct EffectsContractTests: MasterFixture {
    let t0 = Instant(milliseconds: 9_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 3, k1: 4))
    let peer = PeerEndpoint(ip: .v4(0x0A00_0011), port: 6881)
    let epoch = Epoch(term: 4, master: NodeID(2))
    let snapshot = Snapshot(lastCommitted: .zero, history: EpochHistory(), content: [], digest: 0)

    @Test func onlyFailuresEpochsAndProbesAreReportedBack() {
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [])
        for write: StoreWrite in [.commit(CommitRows(tx, replica: Replica())), .snapshot(snapshot), .wipe, .keep([]), .dropKept, .setAside([])] {
            #expect(write.outcome(ok: true) == nil, "\(write)")
            #expect(write.outcome(ok: false, detail: "full")?.isStoreFailure == true, "\(write)")
        }
        #expect(StoreWrite.epoch(epoch).outcome(ok: true)?.storedEpoch == epoch)
        #expect(StoreWrite.epoch(epoch).outcome(ok: false)?.isStoreFailure == true)
        #expect(StoreWrite.probe.outcome(ok: true)?.isStoreSuccess == true)
        #expect(StoreWrite.probe.outcome(ok: false)?.isStoreFailure == true)
    }

    /// Every action reaches exactly one executor, the one of what it drives: the map both
    /// hosts run (`NodeExecutor.run`).
    @Test func everyActionReachesItsExecutor() {
        struct Recorder: NodeExecutor {
            var calls: [String] = []
            mutating func publish(_ env: ClusterEnvelope, to node: NodeID?) { calls.append("publish \(node.map { "\($0.rawValue)" } ?? "all")") }
            mutating func beacon(_ env: ClusterEnvelope) { calls.append("beacon") }
            mutating func reply(_ response: TrackerResponse, to peer: PeerEndpoint) { calls.append("reply") }
            mutating func answerHTTP(_ response: TrackerResponse, exchange: HTTPExchangeID) { calls.append("answerHTTP") }
            mutating func store(_ write: StoreWrite) { calls.append("store " + String(describing: write).prefix { $0 != "(" }) }
            mutating func readPeers(_ reads: Bool) { calls.append("readPeers \(reads)") }
            mutating func discardPeerBacklog() { calls.append("discard") }
            mutating func subscribe(_ id: NodeID) { calls.append("subscribe \(id.rawValue)") }
            mutating func report(_ report: NodeReport) { calls.append("report") }
            mutating func exited(_ reason: ExitReason) { calls.append("exit") }
        }
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [])
        let all = ClusterEnvelope(from: NodeID(2), incarnation: 1, epoch: epoch, to: nil, message: .answer)
        let one = ClusterEnvelope(from: NodeID(2), incarnation: 1, epoch: epoch, to: NodeID(5), message: .answer)
        let cases: [(NodeAction, String)] = [
            (.broadcast(all), "publish all"), (.send(one), "publish 5"), (.beacon(all), "beacon"),
            (.reply(.error(ErrorResponse(transactionID: 1, message: "x")), to: peer), "reply"),
            (.answerHTTP(.error(ErrorResponse(transactionID: 1, message: "x")), exchange: HTTPExchangeID(1)), "answerHTTP"),
            (.persist(CommitRows(tx, replica: Replica())), "store commit"), (.persistSnapshot(snapshot), "store snapshot"),
            (.persistEpoch(epoch), "store epoch"), (.wipeStore, "store wipe"), (.keepOperatorData([]), "store keep"),
            (.dropKeptOperatorData, "store dropKept"), (.setAside([]), "store setAside"), (.probeStore, "store probe"),
            (.discardPeerBacklog, "discard"), (.readPeers(false), "readPeers false"), (.subscribe(NodeID(3)), "subscribe 3"),
            (.aborted(tx.ref), "report"), (.exit(reason: .leftCluster), "exit"),
        ]
        for (action, expected) in cases {
            var r = Recorder()
            r.run(action)
            #expect(r.calls == [expected], "\(action)")
        }
    }

    /// A master with more to propose lets its next PREPARE carry the commit point (its
    /// `previous`): no COMMIT goes alone. With nothing queued, the COMMIT goes.
    @Test func theNextPrepareCarriesTheCommitPointWhenTheMasterIsBusy() throws {
        var (n, t) = masterWithTwoSlaves()
        let first = try announce(1, &n, at: &t)
        // A second announce arrives while the first is voted on: it waits in the queue.
        let second = BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: peer.ip, now: t), transactionID: 2, infoHash: InfoHash(a: 1, b: 2, c: 3),
            peerID: PeerID(a: 4, b: 5, c: 2), downloaded: 0, left: 100, uploaded: 0, event: .started, key: 1, numWant: 10,
            port: peer.port)))
        #expect(n.stepEchoing(.peer(second, from: peer), now: t).isEmpty)
        func broadcasts(_ actions: [NodeAction]) -> [ClusterMessage] {
            actions.compactMap { if case .broadcast(let e) = $0 { e.message } else { nil } }
        }
        let afterFirst = broadcasts(vote(1, first, .ok, &n, at: t))
        #expect(!afterFirst.contains { if case .commit = $0 { true } else { false } }, "\(afterFirst)")
        let next = try #require(afterFirst.compactMap { m -> (Transaction, TxRef, UInt64)? in
            if case .prepare(let tx, let previous, let digest) = m { (tx, previous, digest) } else { nil }
        }.first)
        #expect(next.1 == first.ref && next.2 == first.digest)
        #expect(n.paths[.commitCarriedByPrepare] == 1)
        let afterSecond = broadcasts(vote(1, next.0, .ok, &n, at: t + Milliseconds(1)))
        #expect(afterSecond.contains { $0 == .commit(next.0.ref, digest: next.0.digest) }, "idle: the COMMIT goes alone")
        #expect(n.paths[.commitCarriedByPrepare] == 1)
    }

    /// A node asks its store for a peer image right after the rows of the commit that made
    /// its log long enough (`PeerImage.isDue`), and then counts again from zero.
    @Test func aPeerImageFollowsTheRowsOfTheCommitThatMadeTheLogLong() throws {
        var (n, t) = masterWithTwoSlaves(peerImageMinimumRows: 3)
        var persisted: [TxRef] = [], images: [PeerImage] = []
        for tid in 1...9 as ClosedRange<UInt32> {
            let tx = try announce(tid, peerNumber: 1, &n, at: &t)
            for action in vote(1, tx, .ok, &n, at: t) {
                switch action {
                case .persist(let rows): persisted.append(rows.lastCommitted)
                case .persistPeerImage(let image):
                    #expect(persisted.last == image.lastCommitted, "right after the rows of the commit it is of")
                    #expect(image.lastCommitted == n.replica.lastCommitted && image.store.peerCount == 1)
                    images.append(image)
                default: break
                }
            }
        }
        // One peer: due at 4 logged rows (four times the peers, over the minimum of 3), then 4 more.
        #expect(persisted.count == 9)
        #expect(images.map { persisted.firstIndex(of: $0.lastCommitted) } == [3, 7])
        #expect(PeerImage.isDue(loggedRows: 399, peerCount: 100, minimumRows: 10) == false)
        #expect(PeerImage.isDue(loggedRows: 400, peerCount: 100, minimumRows: 10))
        #expect(PeerImage.isDue(loggedRows: 10, peerCount: 1, minimumRows: 10), "never before the minimum")
        #expect(PeerImage.isDue(loggedRows: Int.max - 1, peerCount: Int.max, minimumRows: 10) == false, "no overflow")
    }

    /// A host learns the node's status and its topic from the actions alone: each change
    /// is said once, in order, each starting where the last one ended, and the topic once.
    @Test func statusChangesAndTheTopicAreSaidOnce() {
        var n = TrackerNode(id: NodeID(3), incarnation: 3000, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
        var told = NodeStanding(role: .starting, epoch: .zero, master: nil, serving: false)
        var changes = 0
        var topics: [NodeID] = []
        var t = t0
        // Like a host, every action of a step is performed before the node hears back.
        func perform(_ actions: [NodeAction]) {
            var stored: [Epoch] = []
            for action in actions {
                switch action {
                case .subscribe(let id): topics.append(id)
                case .standingChanged(let change):
                    #expect(change.previous == told && change.current != told, "each change starts where the last ended")
                    told = change.current
                    changes += 1
                case .persistEpoch(let e): stored.append(e)
                default: break
                }
            }
            for e in stored { perform(n.stepEchoing(.epochStored(e), now: t)) }
        }
        for _ in 0..<60 {
            perform(n.stepEchoing(.tick, now: t))
            #expect(told == n.standing, "the host knows the status without reading the node")
            t = t + Milliseconds(100)
        }
        #expect(topics == [NodeID(3)])
        #expect(told == NodeStanding(role: .master, epoch: n.epoch, master: NodeID(3), serving: true))
        #expect(changes >= 2, "a candidate, then a serving master")
        perform(n.stepEchoing(.shutdown, now: t))
        #expect(topics == [NodeID(3)], "never twice")
    }

    /// What the host counts and times comes with the decision: the quorum and the time
    /// since the first PREPARE (a re-sent one does not restart it); an abort says which.
    @Test func decisionsSayTheirQuorumAndLatency() throws {
        var (n, t) = masterWithTwoSlaves()
        let tx1 = try announce(1, &n, at: &t)
        var actions = vote(1, tx1, .ok, &n, at: t + Milliseconds(7))
        let decided = actions.compactMap { if case .committed(let q, let latency) = $0 { return (q, latency) } else { return nil } }
        #expect(decided.count == 1)
        #expect(decided.first?.0.ref == tx1.ref && decided.first?.0.okVoters == [NodeID(1)] && decided.first?.0.ownVote == true)
        #expect(decided.first?.1 == Milliseconds(7))
        #expect(!actions.contains { if case .aborted = $0 { return true } else { return false } })
        t = t + Milliseconds(7)
        _ = vote(2, tx1, .ok, &n, at: t)
        let tx2 = try announce(2, &n, at: &t)
        actions = n.stepEchoing(.tick, now: t + Milliseconds(300))
        #expect(actions.contains { if case .broadcast(let e) = $0, case .prepare = e.message { return true } else { return false } },
                "the vote timed out: PREPARE again")
        actions = vote(1, tx2, .ok, &n, at: t + Milliseconds(320))
        let second = actions.compactMap { if case .committed(let q, let latency) = $0 { return (q.ref, latency) } else { return nil } }
        #expect(second.first?.0 == tx2.ref && second.first?.1 == Milliseconds(320))
        let tx3 = try announce(3, &n, at: &t)
        _ = vote(1, tx3, .storeFailed, &n, at: t + Milliseconds(1))
        actions = vote(2, tx3, .storeFailed, &n, at: t + Milliseconds(2))
        #expect(actions.contains(.aborted(tx3.ref)))
        #expect(!actions.contains { if case .committed = $0 { return true } else { return false } })
    }

    /// An operator's change is refused at once when it cannot land, and its landing is
    /// said with the catalogue it landed in: a host waits on neither by reading the node.
    @Test func catalogueChangesAreRefusedOrSaidDone() throws {
        let torrent = try RegisteredTorrent(file: Torrents.v1Single, registeredAt: t0)
        var starting = TrackerNode(id: NodeID(3), incarnation: 3000, config: ClusterConfig(),
                                   handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
        #expect(starting.stepEchoing(.submit(.unregister(torrent.infoHash)), now: t0)
            .contains(.submitRefused(.unregister(torrent.infoHash), reason: "\(torrent.infoHash.hex) is not registered")))
        #expect(starting.stepEchoing(.submit(.register(torrent)), now: t0)
            .contains(.submitRefused(.register(torrent), reason: "no master to commit it (the cluster is electing); try again")))

        var (n, t) = masterWithTwoSlaves()
        var actions = n.stepEchoing(.submit(.register(torrent)), now: t)
        t = t + Milliseconds(5)
        actions += n.stepEchoing(.tick, now: t)
        let tx = try #require(actions.compactMap { a -> Transaction? in
            if case .broadcast(let e) = a, case .prepare(let tx, _, _) = e.message { return tx } else { return nil }
        }.first)
        #expect(!actions.contains { if case .catalogueChanged = $0 { true } else { false } }, "prepared is not done")
        actions = vote(1, tx, .ok, &n, at: t)
        let said = actions.compactMap { if case .catalogueChanged(let c) = $0 { return c } else { return nil } }
        #expect(said.count == 1 && said.first?.torrents[torrent.infoHash] == torrent)
        #expect(n.stepEchoing(.submit(.register(torrent)), now: t).contains { if case .submitRefused = $0 { true } else { false } },
                "registered already")
    }

    @Test func onlyLeavingIsACleanExit() {
        #expect(ExitReason.leftCluster.isClean && ExitReason.leftCluster.exitCode == 0)
        #expect(!ExitReason.idInUse(NodeID(3)).isClean && ExitReason.idInUse(NodeID(3)).exitCode == 2)
        #expect(ExitReason.noFreeID.exitCode == 2)
        #expect("\(ExitReason.idInUse(NodeID(3)))".contains("already used"))
    }
}

extension NodeEvent {
    var isStoreFailure: Bool { if case .storeResult(false, _) = self { return true } else { return false } }
    var isStoreSuccess: Bool { if case .storeResult(true, _) = self { return true } else { return false } }
    var storedEpoch: Epoch? { if case .epochStored(let e) = self { return e } else { return nil } }
}
