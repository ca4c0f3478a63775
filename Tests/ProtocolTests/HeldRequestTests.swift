import NIOCore
import Testing
import TrackerLogic

/// Requests that arrive while no master serves are answered by the next master once it
/// serves — never during the election, never twice, never when too old.
@Suite("Held requests") struct HeldRequestTests {
    let t0 = Instant(milliseconds: 5_000_000)
    let e3 = Epoch(term: 1, master: NodeID(3))
    let early = PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)
    let late = PeerEndpoint(ip: .v4(0x0A00_0002), port: 6882)
    let announcer = PeerEndpoint(ip: .v4(0x0A00_0003), port: 6883)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))

    func node(_ config: ClusterConfig = ClusterConfig()) -> TrackerNode { n2(at: t0, ids: ids, config: config) }

    func masterKeepalive() -> NodeEvent { n3Keepalive() }

    func connect(_ tid: UInt32) -> ByteBuffer { BEP15Codec.encode(.connect(ConnectRequest(transactionID: tid))) }

    func announce(_ tid: UInt32, from source: PeerEndpoint, at now: Instant,
                  infoHash: InfoHash = InfoHash(a: 1, b: 2, c: 3)) -> ByteBuffer {
        BEP15Codec.encode(.announce(AnnounceRequest(
            connectionID: ids.issue(for: source.ip, now: now), transactionID: tid,
            infoHash: infoHash, peerID: PeerID(a: 4, b: 5, c: 6), downloaded: 0, left: 100, uploaded: 0,
            event: .started, key: 1, numWant: 10, port: source.port)))
    }

    /// n2 follows n3 until `t0 + 3 s`, when n3 falls silent. Returns n2 and n3's last keepalive.
    func slaveOfADeadMaster(_ config: ClusterConfig = ClusterConfig()) -> (TrackerNode, Instant) {
        n2FollowingN3(from: t0, ids: ids, config: config)
    }

    /// Steps n2 until it serves; every action of the way, the epoch written at once.
    func electUntilServing(_ n2: inout TrackerNode, from start: Instant) -> (actions: [NodeAction], at: Instant) {
        var t = start
        var all: [NodeAction] = []
        while !n2.isServing && t < start + Milliseconds(10_000) {
            t = t + Milliseconds(50)
            let actions = n2.stepEchoing(.tick, now: t)
            all += actions
            for case .persistEpoch(let e) in actions { all += n2.stepEchoing(.epochStored(e), now: t) }
        }
        return (all, t)
    }

    func replies(_ actions: [NodeAction]) -> [(TrackerResponse, PeerEndpoint)] {
        actions.compactMap { if case .reply(let r, let to) = $0 { return (r, to) } else { return nil } }
    }

    @Test func aNewMasterAnswersWhatNobodyAnsweredOnceItServes() throws {
        var (n2, lastHeard) = slaveOfADeadMaster()
        // Before n3's last keepalive: n3 was alive to answer it.
        #expect(n2.stepEchoing(.peer(connect(11), from: early), now: lastHeard - Milliseconds(200)) == [])
        // After it, n3 is gone: nobody answers, n2 holds it. A retransmission of the same
        // connect (same transaction id) is held once.
        let heldAt = lastHeard + Milliseconds(300)
        #expect(n2.stepEchoing(.peer(connect(22), from: late), now: heldAt) == [])
        #expect(n2.stepEchoing(.peer(connect(22), from: late), now: heldAt + Milliseconds(100)) == [])
        #expect(n2.stepEchoing(.peer(announce(33, from: announcer, at: heldAt), from: announcer), now: heldAt + Milliseconds(200)) == [])
        var (actions, servingAt) = electUntilServing(&n2, from: heldAt + Milliseconds(200))
        #expect(n2.isServing)
        // During the election nothing was answered: the first reply is in the serving step.
        let answered = replies(actions)
        #expect(answered.count == 1)
        let (reply, to) = try #require(answered.first)
        #expect(to == late && reply.transactionID == 22)
        guard case .connect = reply else { Issue.record("expected a connect reply, got \(reply)"); return }
        // The announce goes through two-phase commit (a one-node cluster commits alone).
        for _ in 0..<10 where !replies(actions).contains(where: { $0.0.transactionID == 33 }) {
            servingAt = servingAt + Milliseconds(10)
            actions += n2.stepEchoing(.tick, now: servingAt)
        }
        let announced = try #require(replies(actions).first { $0.0.transactionID == 33 })
        #expect(announced.1 == announcer)
        guard case .announce(let a) = announced.0 else { Issue.record("expected an announce reply, got \(announced.0)"); return }
        #expect(a.leechers == 1)
        #expect(n2.answeredHeld == 2)
        // Stamped with the time it arrived, not the time it was committed: a later request
        // of that peer another master committed meanwhile stays the later (`Swarm`).
        let record = n2.replica.store.peer(PeerKey(peerID: PeerID(a: 4, b: 5, c: 6), ip: announcer.ip), in: InfoHash(a: 1, b: 2, c: 3))
        #expect(record?.lastAnnounce == heldAt + Milliseconds(200))
    }

    /// A request its client sent again is taken by its latest copy: the window runs from
    /// the client's last send. Taken by the first copy, a request held again at the end of
    /// an office expired with it while the last send was young (seed 63311902774630077).
    /// Here n2 takes an announce sent twice, leaves office before its transaction decides,
    /// and serves again once the first copy is older than the window and the second not.
    @Test func aRequestSentAgainIsTakenByItsLatestCopy() throws {
        var config = ClusterConfig()
        config.heldRequestWindow = Milliseconds(5000)
        var (n2, lastHeard) = slaveOfADeadMaster(config)
        let first = lastHeard + Milliseconds(300), again = first + Milliseconds(1000)
        func keepalive(_ from: UInt32, _ role: Role, _ epoch: Epoch) -> NodeEvent {
            .cluster(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: epoch, to: nil,
                                     message: .keepalive(Keepalive(role: role, master: epoch.master, lastCommitted: .zero,
                                                                   inSync: true, address: ""))))
        }
        var t = first
        _ = n2.stepEchoing(.peer(announce(33, from: announcer, at: first), from: announcer), now: first)
        var actions: [NodeAction] = []
        while !n2.isServing && t < first + Milliseconds(10_000) {
            t = t + Milliseconds(50)
            if t == again { _ = n2.stepEchoing(.peer(announce(33, from: announcer, at: first), from: announcer), now: t) }
            actions = n2.stepEchoing(keepalive(1, .slave, n2.epoch), now: t) + n2.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in actions { actions += n2.stepEchoing(.epochStored(e), now: t) }
        }
        #expect(n2.isServing && t > again, "serving after the second copy")
        _ = n2.stepEchoing(keepalive(3, .master, Epoch(term: 9, master: NodeID(3))), now: t)
        #expect(!n2.isServing, "n2 left office before answering")
        var answeredAt: Instant?
        let back = t
        while answeredAt == nil && t < back + Milliseconds(10_000) {
            t = t + Milliseconds(50)
            var step = n2.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in step { step += n2.stepEchoing(.epochStored(e), now: t) }
            if replies(step).contains(where: { $0.0.transactionID == 33 && $0.1 == announcer }) { answeredAt = t }
        }
        let at = try #require(answeredAt, "the announce sent again was answered when n2 served again (\((t - first).value) ms)")
        #expect(at - first > config.heldRequestWindow, "the first copy had expired by then")
    }

    /// A request held again when the office ended is judged only by what was heard since
    /// this node took it: what came before was weighed then. Here n2 reads an announce
    /// while n3 serves, hears n3 alive after it (nothing decided), and takes it when it
    /// comes to serve; cut off from the broker, it leaves office before answering, and
    /// serves again deaf (its first echo after the cut), when an announce is judged by
    /// aliveness alone. Judged afresh, n3's keepalive made it look answered and it was
    /// dropped, though nobody answered it (seed 63311902774575945).
    @Test func aRequestHeldAgainIsJudgedOnlyByWhatCameAfterItWasTaken() throws {
        var n2 = node()
        var t = follow(&n2, hearing: masterKeepalive(), from: t0, until: t0 + Milliseconds(4000))
        t = t + Milliseconds(200)
        _ = n2.stepEchoing(.peer(announce(33, from: announcer, at: t), from: announcer), now: t)
        t = t + Milliseconds(300)
        _ = n2.stepEchoing(masterKeepalive(), now: t)
        _ = n2.stepEchoing(.tick, now: t)
        // n1 reaches the broker (its beacons say so): it counts as a no vote, and as the
        // witness that n2 is cut off once n2's echoes stop.
        func n1(_ epoch: Epoch) -> NodeEvent {
            .beacon(ClusterEnvelope(from: NodeID(1), incarnation: 1000, epoch: epoch, to: nil, message:
                .keepalive(Keepalive(role: .slave, master: epoch.master, lastCommitted: .zero, inSync: true, address: "",
                                     brokerEcho: .age(Milliseconds(10))))))
        }
        func run(echoing: Bool, until done: (TrackerNode) -> Bool) -> [NodeAction] {
            var actions: [NodeAction] = []
            let start = t
            while !done(n2) && t < start + Milliseconds(10_000) {
                t = t + Milliseconds(50)
                if t.milliseconds % 500 == 0 { actions += n2.step(n1(n2.epoch), now: t) }
                var step = echoing ? n2.stepEchoing(.tick, now: t) : n2.step(.tick, now: t)
                for case .persistEpoch(let e) in step {
                    step += echoing ? n2.stepEchoing(.epochStored(e), now: t) : n2.step(.epochStored(e), now: t)
                }
                actions += step
            }
            return actions
        }
        let firstOffice = run(echoing: true) { $0.isServing }
        #expect(n2.isServing && n2.heldAwaitingAnswer == 1, "n2 took the announce: \(replies(firstOffice)) \(n2.answeredHeld) \(n2.refusalsAwaitingEcho)")
        _ = run(echoing: false) { !$0.isServing }
        #expect(!n2.isServing, "cut off, n2 left office")
        var actions = run(echoing: true) { $0.isServing }
        #expect(n2.isServing)
        let servedAgain = t
        actions += run(echoing: true) { _ in t > servedAgain + Milliseconds(3000) }
        #expect(replies(actions).contains { $0.0.transactionID == 33 && $0.1 == announcer },
                "the announce nobody answered was answered when n2 served again")
    }

    /// A master that took held requests to answer and left office before answering them
    /// holds them again: the copy it took was its only one, and when it serves again it
    /// answers them (fresh seed 49742471286286476: a slow master cut off one step after
    /// it came to serve lost a held announce for good).
    @Test func heldRequestsAMasterTookAndDidNotAnswerAreHeldAgain() throws {
        var (n2, lastHeard) = slaveOfADeadMaster()
        let heldAt = lastHeard + Milliseconds(300)
        #expect(n2.stepEchoing(.peer(announce(33, from: announcer, at: heldAt), from: announcer), now: heldAt) == [])
        // n1 is alive: the announce's transaction waits (for n1's vote, or for n2's own
        // echo), and n2 leaves office meanwhile, hearing a master of a later epoch.
        let e9 = Epoch(term: 9, master: NodeID(3))
        func keepalive(_ from: UInt32, _ role: Role, _ epoch: Epoch) -> NodeEvent {
            .cluster(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: epoch, to: nil,
                                     message: .keepalive(Keepalive(role: role, master: epoch.master, lastCommitted: .zero,
                                                                   inSync: true, address: ""))))
        }
        var t = heldAt
        var actions: [NodeAction] = []
        while !n2.isServing && t < heldAt + Milliseconds(10_000) {
            t = t + Milliseconds(50)
            actions = n2.stepEchoing(keepalive(1, .slave, n2.epoch), now: t) + n2.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in actions { actions += n2.stepEchoing(.epochStored(e), now: t) }
        }
        #expect(n2.isServing)
        #expect(!replies(actions).contains { $0.0.transactionID == 33 }, "not answered yet: its transaction waits")
        _ = n2.stepEchoing(keepalive(3, .master, e9), now: t)
        #expect(!n2.isServing, "n2 left office")
        // n3 falls silent again; n2 serves again and answers the announce it took before.
        var answered = false
        let back = t
        while !answered && t < back + Milliseconds(10_000) {
            t = t + Milliseconds(50)
            var step = n2.stepEchoing(.tick, now: t)
            for case .persistEpoch(let e) in step { step += n2.stepEchoing(.epochStored(e), now: t) }
            answered = replies(step).contains { $0.0.transactionID == 33 && $0.1 == announcer }
        }
        #expect(answered, "the announce taken before the office ended was answered when n2 served again")
    }

    /// An insider's frame under n3's id and a higher incarnation, heard first, makes
    /// membership refuse the real n3's frames for `downAfter` as an older run's. n3 still
    /// serves: its keepalive shows it alive to answer the connect held before it, and n2,
    /// once it serves, must not answer that connect again (seeds from 3481609123426300828,
    /// whose adversary's incarnation outranked the nodes').
    @Test func aRefusedRunOfAServingMasterStillShowsWhatItAnswered() {
        var n2 = node()
        let forged = ClusterEnvelope(from: NodeID(3), incarnation: .max, epoch: e3, to: nil,
                                     message: .keepalive(Keepalive(role: .slave, master: .unassigned, lastCommitted: .zero, inSync: false, address: "")))
        _ = n2.stepEchoing(.cluster(forged), now: t0)
        #expect(n2.stepEchoing(.peer(connect(11), from: early), now: t0 + Milliseconds(100)) == [])
        _ = n2.stepEchoing(masterKeepalive(), now: t0 + Milliseconds(200))
        #expect(n2.membership[NodeID(3)]?.incarnation == .max, "the real run was refused")
        let (actions, _) = electUntilServing(&n2, from: t0 + Milliseconds(200))
        #expect(n2.isServing)
        #expect(replies(actions).isEmpty, "n3 was heard serving after the connect arrived")
    }

    /// Another process with n2's own id (a twin started by mistake) leads an epoch and
    /// commits while n2 holds a connect: its COMMIT shows that connect answered, though n2
    /// acts on nothing else a twin says. Once n2 serves it must not answer it again (seed
    /// 3164179121388181078, an impostor of s1).
    @Test func aTwinWithOurIDServingShowsWhatItAnswered() {
        var (n2, lastHeard) = slaveOfADeadMaster()
        let heldAt = lastHeard + Milliseconds(300)
        #expect(n2.stepEchoing(.peer(connect(11), from: early), now: heldAt) == [])
        let twinEpoch = Epoch(term: e3.term + 1, master: NodeID(2))
        let commit = ClusterEnvelope(from: NodeID(2), incarnation: 9999, epoch: twinEpoch, to: nil,
                                     message: .commit(TxRef(epoch: twinEpoch, txid: 1), digest: 0))
        _ = n2.stepEchoing(.cluster(commit), now: heldAt + Milliseconds(20))
        let (actions, _) = electUntilServing(&n2, from: heldAt + Milliseconds(20))
        #expect(n2.isServing)
        #expect(replies(actions).isEmpty, "the twin was heard deciding after the connect arrived")
    }

    @Test func nothingIsAnsweredDuringTheElectionAndOldRequestsAreLeft() {
        var config = ClusterConfig()
        config.heldRequestWindow = Milliseconds(1500)
        var (n2, lastHeard) = slaveOfADeadMaster(config)
        // Received after n3's death, but the election outlasts the window for this one.
        #expect(n2.stepEchoing(.peer(connect(44), from: late), now: lastHeard + Milliseconds(100)) == [])
        var t = lastHeard + Milliseconds(100)
        while n2.role != .candidate {
            t = t + Milliseconds(50)
            _ = n2.stepEchoing(.tick, now: t)
        }
        // A candidate stays silent, whatever it receives (its epoch is not on disk yet).
        t = t + Milliseconds(500)
        #expect(n2.stepEchoing(.peer(connect(55), from: early), now: t) == [])
        #expect(n2.role == .candidate)
        let (actions, _) = electUntilServing(&n2, from: t)
        #expect(n2.isServing)
        #expect(replies(actions).map(\.0.transactionID) == [55], "only the young request is answered")
    }

    @Test func theHoldIsBoundedOldestOut() {
        var config = ClusterConfig()
        config.heldRequests = 3
        var (n2, heard) = slaveOfADeadMaster(config)
        let lastHeard = heard + config.receiveSkew
        for tid in UInt32(1)...5 {
            _ = n2.stepEchoing(.peer(connect(tid), from: late), now: lastHeard + Milliseconds(Int64(tid) * 10))
        }
        // Scrapes and garbage are not held.
        _ = n2.stepEchoing(.peer(BEP15Codec.encode(.scrape(ScrapeRequest(connectionID: 1, transactionID: 9, infoHashes: [InfoHash(a: 1, b: 1, c: 1)]))),
                          from: early), now: lastHeard + Milliseconds(60))
        _ = n2.stepEchoing(.peer(ByteBuffer(bytes: [1, 2, 3]), from: early), now: lastHeard + Milliseconds(60))
        let (actions, _) = electUntilServing(&n2, from: lastHeard + Milliseconds(60))
        #expect(replies(actions).map(\.0.transactionID) == [3, 4, 5])
    }

    /// The ring grows as requests come (16, 32, then the capacity of 40) and, once full,
    /// drops the oldest: the newest 40 of 100, in order.
    @Test func theHoldGrowsToItsCapacityThenDropsTheOldest() {
        var config = ClusterConfig()
        config.heldRequests = 40
        var (n2, heard) = slaveOfADeadMaster(config)
        let lastHeard = heard + config.receiveSkew
        for tid in UInt32(1)...100 {
            _ = n2.stepEchoing(.peer(connect(tid), from: late), now: lastHeard + Milliseconds(Int64(tid)))
        }
        let (actions, _) = electUntilServing(&n2, from: lastHeard + Milliseconds(100))
        #expect(replies(actions).map(\.0.transactionID) == Array(61...100))
    }

    /// Held bytes stay with their request: through expiry that moves the ring's head,
    /// growth of a ring that has wrapped, and a request too long for its slot (an
    /// announce with BEP 41 options). Each reply answers the transaction its source sent.
    @Test func eachHeldRequestKeepsItsOwnBytesThroughWrapGrowthAndLongRequests() throws {
        var config = ClusterConfig()
        config.heldRequests = 64
        config.heldRequestWindow = Milliseconds(5000)
        var (n2, heard) = slaveOfADeadMaster(config)
        let start = heard + config.receiveSkew + Milliseconds(10)
        func source(_ tid: UInt32) -> PeerEndpoint { PeerEndpoint(ip: .v4(0x0A00_1000 + tid), port: UInt16(20000 + tid)) }
        func hold(_ tid: UInt32, at t: Instant) { _ = n2.stepEchoing(.peer(connect(tid), from: source(tid)), now: t) }
        // 10 that will expire, then 6: the ring's 16 slots are full.
        for tid in UInt32(1)...10 { hold(tid, at: start) }
        for tid in UInt32(11)...16 { hold(tid, at: start + Milliseconds(4000)) }
        // The first 10 expire as the next arrives: the head moves to slot 10, the ring wraps,
        // and at 16 held again it grows.
        let later = start + Milliseconds(5100)
        for tid in UInt32(17)...40 { hold(tid, at: later) }
        // Longer than a slot: kept whole.
        var long = announce(41, from: source(41), at: later)
        long.writeBytes([2, 60] + [UInt8](repeating: 0x61, count: 60))
        #expect(long.readableBytes > 128)
        _ = n2.stepEchoing(.peer(long, from: source(41)), now: later)
        hold(42, at: later)

        var (actions, t) = electUntilServing(&n2, from: later)
        #expect(n2.isServing)
        #expect(t < start + Milliseconds(9000), "the second ten must still be young")
        for _ in 0..<20 where !replies(actions).contains(where: { $0.0.transactionID == 41 }) {
            t = t + Milliseconds(10)
            actions += n2.stepEchoing(.tick, now: t)
        }
        let answered = replies(actions)
        #expect(answered.map(\.0.transactionID).sorted() == Array(11...42))
        for (reply, to) in answered { #expect(to == source(reply.transactionID)) }
        let announced = try #require(answered.first { $0.0.transactionID == 41 })
        guard case .announce = announced.0 else { Issue.record("expected an announce reply, got \(announced.0)"); return }
    }
}

extension HeldRequestTests {
    /// A request read just after the message that answered it may have arrived before it
    /// (fresh seed 25277421324769278: after a pause right after its start, a node read
    /// the broker's backlog, with the COMMIT, 2 ms before the peer socket's, with the
    /// announce, then came to serve and answered it again). Within `receiveSkew` of a
    /// master's word a request counts as answered; and within `backlogDrain` if it was read
    /// in the same run of steps, with no wait between them (a backlog is read so).
    @Test func aRequestReadSoonAfterAMastersWordCountsAsAnswered() {
        var (n2, lastHeard) = slaveOfADeadMaster()
        let skew = n2.config.receiveSkew, drain = n2.config.backlogDrain
        #expect(skew == Milliseconds(10) && drain == Milliseconds(50))
        // Read within the skew: answered by the master.
        #expect(n2.stepEchoing(.peer(connect(1), from: early), now: lastHeard + Milliseconds(1)) == [])
        // Read in one run of steps a millisecond apart from the master's word: a backlog.
        var t = lastHeard + Milliseconds(1)
        while t < lastHeard + Milliseconds(40) {
            t = t + Milliseconds(1)
            _ = n2.stepEchoing(.tick, now: t)
        }
        #expect(n2.stepEchoing(.peer(connect(2), from: early), now: t + Milliseconds(1)) == [])
        // Read after a wait, past the skew: it arrived after the master's word.
        #expect(n2.stepEchoing(.peer(connect(3), from: late), now: t + Milliseconds(10)) == [])
        let (actions, _) = electUntilServing(&n2, from: t + Milliseconds(10))
        #expect(replies(actions).map(\.0.transactionID) == [3])
    }

    /// What a node read after it stopped serving, it did not answer itself, even in the
    /// very millisecond it stopped: its own serving is no evidence, no skew (a master
    /// deposed by a higher epoch whose master was not yet in sync, which then fell silent,
    /// left a connect read 1 ms later, or in the same millisecond, to nobody).
    @Test(arguments: [0, 1])
    func whatANodeReadAfterItStoppedServingIsNotCountedAsItsOwnAnswer(readAfter: Int64) {
        var (n2, lastHeard) = slaveOfADeadMaster()
        let (_, servingAt) = electUntilServing(&n2, from: lastHeard + Milliseconds(100))
        #expect(n2.isServing)
        let deposedAt = servingAt + Milliseconds(100)
        let newer = Epoch(term: 9, master: NodeID(3))
        _ = n2.stepEchoing(.cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3001, epoch: newer, to: nil, message: .keepalive(
            Keepalive(role: .master, master: NodeID(3), lastCommitted: .zero, inSync: false, address: "")))), now: deposedAt)
        #expect(!n2.isServing)
        #expect(n2.stepEchoing(.peer(connect(7), from: late), now: deposedAt + Milliseconds(readAfter)) == [])
        let (actions, _) = electUntilServing(&n2, from: deposedAt + Milliseconds(readAfter))
        #expect(replies(actions).map(\.0.transactionID) == [7])
    }
    /// A serving master's keepalive that names commits this slave never saw decided
    /// (their COMMITs were lost, or it was cut off) shows decisions made since what it
    /// holds: an announce held before is not answered again once this node serves.
    @Test(arguments: [false, true])
    func newsOfUnseenCommitsCountsAsADecision(masterNamesUnseenCommits: Bool) {
        var (n2, lastHeard) = slaveOfADeadMaster()
        let heldAt = lastHeard + Milliseconds(100)
        _ = n2.stepEchoing(.peer(announce(33, from: announcer, at: heldAt), from: announcer), now: heldAt)
        let named = masterNamesUnseenCommits ? TxRef(epoch: e3, txid: 5) : .zero
        let news = ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
                                   message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: named,
                                                                 inSync: true, address: "")))
        _ = n2.stepEchoing(.cluster(news), now: heldAt + Milliseconds(50))
        var (actions, t) = electUntilServing(&n2, from: heldAt + Milliseconds(50) + ClusterConfig().downAfter)
        for _ in 0..<20 {
            t = t + Milliseconds(10)
            actions += n2.stepEchoing(.tick, now: t)
        }
        #expect(replies(actions).contains { $0.0.transactionID == 33 } == !masterNamesUnseenCommits)
    }

    /// A request read while this node could not hear the broker (no echo of its own yet,
    /// here) is judged by the master's aliveness: a COMMIT or ABORT may have passed it
    /// by, and an ABORT leaves no trace on the peer network. The master was heard alive
    /// after the request, so the next master does not answer it (the nemesis, seed
    /// 3088537812: 54 requests refused, then acknowledged by an heir that had been
    /// reconnecting to the broker). A node that heard the broker throughout answers it:
    /// no decision came after it.
    @Test(arguments: [false, true])
    func aRequestReadWhileDeafToTheBrokerIsJudgedByAliveness(deaf: Bool) {
        var n2 = node()
        var t = t0
        func step(_ e: NodeEvent) { _ = deaf ? n2.step(e, now: t) : n2.stepEchoing(e, now: t) }
        while t < t0 + Milliseconds(3800) {
            step(masterKeepalive())
            step(.tick)
            t = t + Milliseconds(500)
        }
        t = t0 + Milliseconds(3800)
        step(.peer(announce(33, from: announcer, at: t), from: announcer))
        t = t0 + Milliseconds(4000)
        step(masterKeepalive())
        // The broker comes back to n2 (its first echo), then n3 is gone.
        t = t0 + Milliseconds(4100)
        _ = n2.step(.cluster(ClusterEnvelope(from: NodeID(2), incarnation: 2000, epoch: n2.epoch, to: nil, message:
            .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true)))), now: t)
        var (actions, serving) = electUntilServing(&n2, from: t0 + Milliseconds(4000) + ClusterConfig().downAfter)
        for _ in 0..<20 {
            serving = serving + Milliseconds(10)
            actions += n2.stepEchoing(.tick, now: serving)
        }
        #expect(n2.isServing)
        #expect(replies(actions).contains { $0.0.transactionID == 33 } == !deaf)
    }

    /// A PREPARE whose `previous` commits the transaction before it (a busy master sends no
    /// COMMIT for it) decides that transaction's announces as its COMMIT would: a new
    /// master does not answer them a second time.
    @Test func aPrepareCarryingTheCommitPointIsTheDecision() {
        var (n2, lastHeard) = slaveOfADeadMaster()
        let heldAt = lastHeard + Milliseconds(100)
        _ = n2.stepEchoing(.peer(announce(33, from: announcer, at: heldAt), from: announcer), now: heldAt)
        func update(_ source: PeerEndpoint, _ c: UInt32) -> SwarmUpdate {
            .announce(Announce(infoHash: InfoHash(a: 1, b: 2, c: 3), peerID: PeerID(a: 4, b: 5, c: c), endpoint: source,
                               uploaded: 0, downloaded: 0, left: 100, event: .started, at: heldAt))
        }
        let tx1 = Transaction(ref: TxRef(epoch: e3, txid: 1), updates: [update(announcer, 6)])
        let tx2 = Transaction(ref: TxRef(epoch: e3, txid: 2), updates: [update(late, 7)])
        func fromMaster(_ m: ClusterMessage) -> NodeEvent {
            .cluster(ClusterEnvelope(from: NodeID(3), incarnation: 3000, epoch: e3, to: nil, message: m))
        }
        _ = n2.stepEchoing(fromMaster(.prepare(tx1, previous: .zero, previousDigest: 0)), now: heldAt + Milliseconds(10))
        _ = n2.stepEchoing(fromMaster(.prepare(tx2, previous: tx1.ref, previousDigest: tx1.digest)), now: heldAt + Milliseconds(20))
        #expect(n2.replica.lastCommitted == tx1.ref, "the PREPARE of tx2 committed tx1")
        var (actions, t) = electUntilServing(&n2, from: heldAt + Milliseconds(20) + ClusterConfig().downAfter)
        #expect(n2.isServing)
        for _ in 0..<20 {
            t = t + Milliseconds(10)
            actions += n2.stepEchoing(.tick, now: t)
        }
        #expect(!replies(actions).contains { $0.0.transactionID == 33 })
    }

    /// An announce the master refuses at once (here by the access policy) was answered the
    /// moment it was read, as a connect is: any word of the master after it shows that, a
    /// keepalive as much as a COMMIT. Fresh seeds 57029967662365281 and 57029967662418143:
    /// in allow mode a new master answered held announces the old one had already refused,
    /// and the peers got replies to transactions they had finished.
    @Test func anAnnounceRefusedAtOnceIsJudgedLikeAConnect() throws {
        let allowed = InfoHash(a: 9, b: 9, c: 9)
        var policy = Replica()
        let ref = TxRef(epoch: e3, txid: 1)
        let committed = policy.commit(Transaction(ref: ref, updates: [.catalogue(.setAccessRule(.allow, [allowed])),
                                                                      .catalogue(.setAccessMode(.allow))]))
        #expect(committed)
        var n2 = TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids),
                             seed: 7, now: t0, restoring: DurableState(snapshot: policy.snapshot(), epoch: e3))
        let keepalive = NodeEvent.cluster(ClusterEnvelope(
            from: NodeID(3), incarnation: 3000, epoch: e3, to: nil,
            message: .keepalive(Keepalive(role: .master, master: NodeID(3), lastCommitted: ref, inSync: true, address: ""))))
        let lastHeard = follow(&n2, hearing: keepalive, from: t0, until: t0 + Milliseconds(3000))
        let heldAt = lastHeard + Milliseconds(100)
        #expect(n2.stepEchoing(.peer(announce(33, from: announcer, at: heldAt), from: announcer), now: heldAt) == [])
        #expect(n2.stepEchoing(.peer(announce(34, from: late, at: heldAt, infoHash: allowed), from: late), now: heldAt) == [])
        // The master's last word: alive after both, but no decision.
        _ = n2.stepEchoing(keepalive, now: heldAt + Milliseconds(50))
        var (actions, t) = electUntilServing(&n2, from: heldAt + Milliseconds(50) + ClusterConfig().downAfter)
        #expect(n2.isServing)
        for _ in 0..<20 {
            t = t + Milliseconds(10)
            actions += n2.stepEchoing(.tick, now: t)
        }
        #expect(replies(actions).map(\.0.transactionID) == [34], "the refused announce was answered; the admitted one waits on a commit")
        let answer = try #require(replies(actions).first)
        guard case .announce = answer.0 else { Issue.record("expected an announce reply, got \(answer.0)"); return }
    }
}
