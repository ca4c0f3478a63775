import NIOCore
import Testing
import TrackerLogic

/// The rules of `BrokerLink.swift`, driven event by event: a node whose own broker link is
/// cut while another node reaches the broker claims no epoch, a master so cut leaves the
/// office, and a live master commits alone or counts silent voters down only once the
/// broker carried its own keepalive back (or nobody reaches the broker). Each test has a
/// twin where every node's link is down (a broker outage), where the old rules hold.
@Suite("Broker link") struct BrokerLinkTests: MasterFixture {
    let t0 = Instant(milliseconds: 1_000_000)
    let ids = ConnectionIDPolicy(key: SipHash24(k0: 1, k1: 2))
    let peer = PeerEndpoint(ip: IPAddress("10.0.0.7")!, port: 6881)

    /// What node `from` says of itself on the peer network.
    func beacon(from: UInt32, role: Role, master: UInt32, epoch: Epoch, echo: BrokerEchoReport,
                lastCommitted: TxRef = .zero) -> NodeEvent {
        .beacon(ClusterEnvelope(from: NodeID(from), incarnation: UInt64(from) * 1000, epoch: epoch, to: nil,
                                message: .keepalive(Keepalive(role: role, master: NodeID(master), lastCommitted: lastCommitted,
                                                              inSync: true, address: "", brokerEcho: echo))))
    }

    /// The broker carries `node`'s own last keepalive back to it.
    func ownEcho(of node: TrackerNode) -> NodeEvent {
        .cluster(ClusterEnvelope(from: node.id, incarnation: node.incarnation, epoch: node.epoch, to: nil,
                                 message: .keepalive(Keepalive(role: node.role, master: node.master ?? .unassigned,
                                                               lastCommitted: node.replica.lastCommitted, inSync: true))))
    }

    /// n4 starts among n1..n3, which it hears only on the peer network, each saying `echo`;
    /// it never hears its own keepalive back. Returns whether it ever claimed an epoch.
    func n4StartingCutOff(othersSay echo: BrokerEchoReport) -> (claimed: Bool, node: TrackerNode) {
        var n4 = TrackerNode(id: NodeID(4), incarnation: 4000, config: ClusterConfig(),
                             handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
        var claimed = false
        var t = t0
        while t < t0 + Milliseconds(12_000) {
            for n in UInt32(1)...3 { _ = n4.step(beacon(from: n, role: .candidate, master: 0, epoch: .zero, echo: echo), now: t) }
            for case .persistEpoch(let e) in n4.step(.tick, now: t) where e.master == NodeID(4) {
                claimed = true
                _ = n4.step(.epochStored(e), now: t)
            }
            t = t + Milliseconds(250)
        }
        return (claimed, n4)
    }

    @Test func aNodeCutOffFromTheBrokerClaimsNoEpochWhileAnotherReachesIt() {
        let (claimed, n4) = n4StartingCutOff(othersSay: .age(Milliseconds(40)))
        #expect(!claimed, "n4 hears nobody on the broker, not even itself, while n1..n3 do: it must not lead")
        #expect(n4.paths[.claimLeftToLinkedNode] >= 1)
        #expect(n4.role != .master)
    }

    @Test func inABrokerOutageTheHighestIDStillClaims() {
        let (claimed, n4) = n4StartingCutOff(othersSay: .never)
        #expect(claimed, "nobody reaches the broker: the outage rules hold, and the highest id leads")
        #expect(n4.role == .master)
    }

    /// n3 serves (strict, 3 nodes); its slaves stop hearing it on the broker but their
    /// beacons keep coming, saying `slavesSay`. Returns n3 after `seconds`.
    func masterLosingItsLink(slavesSay echo: BrokerEchoReport, seconds: Int64) -> TrackerNode {
        var (n, t) = masterWithTwoSlaves()
        _ = n.step(ownEcho(of: n), now: t)
        let end = t + Milliseconds(seconds * 1000)
        while t < end {
            t = t + Milliseconds(250)
            for s in UInt32(1)...2 { _ = n.step(beacon(from: s, role: .slave, master: 3, epoch: n.epoch, echo: echo), now: t) }
            _ = n.step(.tick, now: t)
        }
        return n
    }

    @Test func aMasterCutOffFromTheBrokerLeavesTheOffice() {
        let n = masterLosingItsLink(slavesSay: .age(Milliseconds(30)), seconds: 5)
        #expect(!n.isServing, "its slaves reach the broker and it does not: it must hand over")
        #expect(n.paths[.cutMasterSteppedDown] >= 1)
    }

    @Test func inABrokerOutageTheMasterKeepsTheOffice() {
        let n = masterLosingItsLink(slavesSay: .never, seconds: 5)
        #expect(n.isServing)
        #expect(n.paths[.cutMasterSteppedDown] == 0)
    }

    /// n3 under a live quorum, ticked every 100 ms until it serves; `each` runs before
    /// each tick (what else it hears meanwhile).
    func liveN3Leading(_ each: (inout TrackerNode, Instant) -> Void) -> (TrackerNode, Instant) {
        var config = ClusterConfig()
        config.quorum = .live
        var n = TrackerNode(id: NodeID(3), incarnation: 3000, config: config,
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
        var t = t0
        for _ in 0..<100 where !n.isServing {
            t = t + Milliseconds(100)
            each(&n, t)
            for case .persistEpoch(let e) in n.step(.tick, now: t) { _ = n.step(.epochStored(e), now: t) }
        }
        return (n, t)
    }

    /// n3 under a live quorum, serving, its own echo just back, with n1 and n2 heard on
    /// the broker (reaching it) and confirmed at the empty repository.
    func liveN3ServingTwoSlaves() throws -> (TrackerNode, Instant) {
        var (n, t) = liveN3Leading { _, _ in }
        _ = n.step(ownEcho(of: n), now: t)
        for slave in [UInt32(1), 2] {
            _ = n.step(env(from: slave, epoch: n.epoch, .keepalive(Keepalive(role: .slave, master: NodeID(3), lastCommitted: .zero,
                                                                              inSync: true, address: "", brokerEcho: .age(Milliseconds(5))))), now: t)
            _ = n.step(env(from: slave, epoch: n.epoch, .coordinatorAck(lastCommitted: .zero, prepared: nil)), now: t)
        }
        _ = n.step(.tick, now: t)
        try #require(n.isServing)
        return (n, t)
    }

    /// A live master of three whose slaves go silent on the broker (their beacons still
    /// come, saying `slavesSay`): returns the replies to one announce within `seconds`,
    /// and the master, with `echoes` of its own keepalives carried back meanwhile.
    func liveMasterWithSilentSlaves(slavesSay echo: BrokerEchoReport, echoes: Bool, seconds: Int64,
                                    slavesBeacon: Bool = true, againAfter: Int64? = nil) throws -> ([TrackerResponse], TrackerNode) {
        var (n, t) = try liveN3ServingTwoSlaves()
        var replies: [TrackerResponse] = []
        var actions = n.step(announceDatagram(1, at: t), now: t)
        let end = t + Milliseconds(seconds * 1000)
        let again = againAfter.map { t + Milliseconds($0) }
        // The echo carries the keepalive that left last: the one the broker would carry back.
        var lastKeepalive: ClusterEnvelope?
        while t < end {
            replies += answers(actions)
            lastKeepalive = keepalives(in: actions).last ?? lastKeepalive
            t = t + Milliseconds(50)
            actions = []
            if t == again { actions += n.step(announceDatagram(2, at: t), now: t) }
            if t.milliseconds % 500 == 0 {
                for s in UInt32(1)...2 where slavesBeacon {
                    actions += n.step(beacon(from: s, role: .slave, master: 3, epoch: n.epoch, echo: echo), now: t)
                }
                if echoes, let k = lastKeepalive { actions += n.step(.cluster(k), now: t) }
            }
            actions += n.step(.tick, now: t)
        }
        replies += answers(actions)
        return (replies, n)
    }

    @Test func aLiveMasterCountsSilentVotersDownOnlyOnceTheBrokerEchoes() throws {
        let (cut, n) = try liveMasterWithSilentSlaves(slavesSay: .age(Milliseconds(20)), echoes: false, seconds: 2)
        #expect(!cut.contains(where: isAnnounce), "no echo, slaves that reach the broker: the silence may be its own link")
        #expect(n.paths[.silentVotersAwaitedEcho] >= 1)
        // Its own link works and the slaves fell silent everywhere: once the failure
        // detector calls them down (`downAfter`), live commits without them.
        let (dead, _) = try liveMasterWithSilentSlaves(slavesSay: .age(Milliseconds(20)), echoes: true, seconds: 5,
                                                       slavesBeacon: false, againAfter: 3000)
        #expect(dead.contains(where: isAnnounce), "the announce sent again once they are down is committed alone")
    }

    /// Slaves silent on the broker that still beacon on the peer network, saying they
    /// reach the broker, are cut from us, not dead (the link between two brokers): their
    /// votes count as no, and a live master commits nothing alone while the failure
    /// detector still hears them.
    @Test func aLiveMasterCountsSilentVotersStillLinkedToABrokerAsNo() throws {
        let (linked, n) = try liveMasterWithSilentSlaves(slavesSay: .age(Milliseconds(20)), echoes: true, seconds: 4)
        #expect(!linked.contains(where: isAnnounce), "two of three reach their broker and each other: no commit alone")
        #expect(linked.contains(where: isError), "the announce is refused")
        #expect(n.paths[.silentLinkedVoterCountedNo] >= 1)
    }

    /// A node's report of its echo is an interval late by construction (a keepalive
    /// carries the echo of the one before it): a reported echo counts for `downAfter` and
    /// an interval. Slaves whose reports say 1.8 s still reach the broker, so a master
    /// without its own echo commits nothing alone; reports of 3.1 s are a broker outage.
    /// With `downAfter` alone the master took the moments between two late reports for an
    /// outage (seed 8267757876648754).
    @Test func aReportedEchoCountsForAnIntervalLongerThanOneHeardHere() throws {
        let (late, _) = try liveMasterWithSilentSlaves(slavesSay: .age(Milliseconds(1800)), echoes: false, seconds: 4)
        #expect(!late.contains(where: isAnnounce), "slaves that still reach the broker: no commit alone")
        let (gone, _) = try liveMasterWithSilentSlaves(slavesSay: .age(Milliseconds(3100)), echoes: false, seconds: 4)
        #expect(gone.contains(where: isAnnounce), "echoes older than downAfter and an interval: an outage")
    }

    @Test func inABrokerOutageALiveMasterCommitsAlone() throws {
        let (replies, _) = try liveMasterWithSilentSlaves(slavesSay: .never, echoes: false, seconds: 4)
        #expect(replies.contains(where: isAnnounce), "nobody reaches the broker: live commits alone")
    }

    /// A live master hearing a node only on the peer network, which says it reaches the
    /// broker, counts it as a vote that cannot reach it: it commits nothing alone.
    @Test func aLiveQuorumCountsANodeThatReachesTheBrokerButNotUs() throws {
        var (n, t) = liveN3Leading { n, t in
            _ = n.step(ownEcho(of: n), now: t)
            _ = n.step(beacon(from: 1, role: .slave, master: 3, epoch: n.epoch, echo: .age(Milliseconds(10))), now: t)
        }
        try #require(n.isServing)
        var replies: [TrackerResponse] = []
        replies += answers(n.step(announceDatagram(1, at: t), now: t))
        for _ in 0..<20 {
            t = t + Milliseconds(100)
            replies += answers(n.step(ownEcho(of: n), now: t))
            replies += answers(n.step(beacon(from: 1, role: .slave, master: 3, epoch: n.epoch, echo: .age(Milliseconds(10))), now: t))
            replies += answers(n.step(.tick, now: t))
        }
        #expect(!replies.contains(where: isAnnounce), "n1 reaches the broker but not n3 through it: one vote of two is no majority")
    }

    /// A node following n4 (epoch e1.4), hearing it on both channels and its own echoes,
    /// and n3 beside it if `withN3` (on the peer network only, its link cut). From
    /// `t0 + 3 s` n4 is heard on the peer network only, its link cut too.
    func following(_ id: UInt32, withN3: Bool) -> (TrackerNode, Instant, readsPeers: Bool) {
        let e = Epoch(term: 1, master: NodeID(4))
        var n = TrackerNode(id: NodeID(id), incarnation: UInt64(id) * 1000, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0,
                            restoring: DurableState(snapshot: nil, epoch: e))
        var t = t0
        var reads = true  // a host reads peer datagrams until told otherwise
        func note(_ actions: [NodeAction]) { for case .readPeers(let r) in actions { reads = r } }
        while t < t0 + Milliseconds(6_000) {
            let n4 = beacon(from: 4, role: .master, master: 4, epoch: e, echo: t < t0 + Milliseconds(3_000) ? .age(Milliseconds(5)) : .age(t - (t0 + Milliseconds(3_000))))
            if t < t0 + Milliseconds(3_000), case .beacon(let env) = n4 { note(n.stepEchoing(.cluster(env), now: t)) }
            note(n.stepEchoing(n4, now: t))
            if withN3 { note(n.stepEchoing(beacon(from: 3, role: .slave, master: 4, epoch: e, echo: .never), now: t)) }
            note(n.stepEchoing(.tick, now: t))
            t = t + Milliseconds(250)
        }
        return (n, t, reads)
    }

    /// n4 cut off leaves the office; n3, which reaches the broker, need not wait out an
    /// answer timeout for n4, which cannot win.
    @Test func aCandidateDoesNotWaitForAHigherNodeCutOffFromTheBroker() {
        var (n3, t, _) = following(3, withN3: false)
        let e = Epoch(term: 1, master: NodeID(4))
        var claimedAt: Instant?
        let steppedDown = t
        var actions = n3.stepEchoing(beacon(from: 4, role: .slave, master: 0, epoch: e, echo: .age(Milliseconds(3_500))), now: t)
        while claimedAt == nil && t < steppedDown + Milliseconds(2_000) {
            for case .persistEpoch(let claimed) in actions where claimed.master == NodeID(3) { claimedAt = t }
            t = t + Milliseconds(10)
            actions = n3.stepEchoing(.tick, now: t)
        }
        #expect(claimedAt.map { $0 - steppedDown < ClusterConfig().answerTimeout } == true,
                "n4 cannot reach the broker: n3 claims at once rather than after \(ClusterConfig().answerTimeout)")
    }

    /// n2 follows n4; n3 above it is cut off from the broker and cannot lead: n2 is the
    /// heir, and reads the peers' requests to hold them.
    @Test func theHeirIsTheHighestNodeThatCouldLead() {
        var (n2, t, reads) = following(2, withN3: true)
        var told = [reads]
        for _ in 0..<20 {
            t = t + Milliseconds(100)
            _ = n2.stepEchoing(beacon(from: 4, role: .master, master: 4, epoch: n2.epoch, echo: .age(Milliseconds(5))), now: t)
            for case .readPeers(let reads) in n2.stepEchoing(beacon(from: 3, role: .slave, master: 4, epoch: n2.epoch, echo: .never), now: t) {
                told.append(reads)
            }
            for case .readPeers(let reads) in n2.stepEchoing(.tick, now: t) { told.append(reads) }
        }
        #expect(n2.master == NodeID(4))
        #expect(told.last == true,
                "n3 cannot win an election while n2 reaches the broker: n2 is the heir, and reads")
    }

    /// The report travels at the end of a keepalive; an older node's keepalive ends
    /// before it and reads as `unknown`.
    @Test func theBrokerEchoReportIsEncodedAtTheKeepalivesEnd() throws {
        func encoded(_ report: BrokerEchoReport) -> [UInt8] {
            ClusterCodec.encode(ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: .zero, to: nil,
                                                message: .keepalive(Keepalive(role: .slave, master: NodeID(2), lastCommitted: .zero,
                                                                              inSync: true, address: "", brokerEcho: report)))).allBytes
        }
        let old = encoded(.unknown)
        #expect(encoded(.age(Milliseconds(1234))) == old + [0x00, 0x00, 0x04, 0xD2])
        #expect(encoded(.never) == old + [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(encoded(.age(Milliseconds(Int64.max))) == old + [0xFF, 0xFF, 0xFF, 0xFE], "an age saturates below never")
        for report in [BrokerEchoReport.unknown, .never, .age(Milliseconds(0)), .age(Milliseconds(7))] {
            let decoded = try ClusterCodec.decode(ByteBuffer(bytes: encoded(report))).get()
            guard case .keepalive(let k) = decoded.message else { Issue.record("not a keepalive"); continue }
            #expect(k.brokerEcho == report)
        }
        #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: old + [0x00, 0x00])).get() }
    }

    /// The keepalive's number follows the peer-sends byte as a big-endian u64; a keepalive
    /// without that byte carries none, and a short number is refused.
    @Test func theKeepalivesNumberFollowsThePeerSendsReport() throws {
        func encoded(_ failing: Bool?, _ sequence: UInt64?) -> [UInt8] {
            ClusterCodec.encode(ClusterEnvelope(from: NodeID(1), incarnation: 1, epoch: .zero, to: nil,
                                                message: .keepalive(Keepalive(role: .slave, master: NodeID(2), lastCommitted: .zero,
                                                                              inSync: true, address: "", brokerEcho: .never,
                                                                              peerSendsFailing: failing, sequence: sequence)))).allBytes
        }
        let old = encoded(false, nil)
        #expect(encoded(false, 0x0102_0304_0506_0708) == old + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08])
        #expect(encoded(nil, 9) == encoded(nil, nil), "no number without the byte before it")
        let decoded = try ClusterCodec.decode(ByteBuffer(bytes: encoded(true, 42))).get()
        guard case .keepalive(let k) = decoded.message else { Issue.record("not a keepalive"); return }
        #expect(k.sequence == 42 && k.peerSendsFailing == true)
        #expect(throws: ClusterDecodingError.self) { try ClusterCodec.decode(ByteBuffer(bytes: old + [0x00, 0x00, 0x00])).get() }
    }

    /// Each keepalive a node publishes carries the next number, from 1 in each incarnation.
    @Test func eachKeepaliveCarriesTheNextNumber() {
        var (n, t) = liveN3Leading { _, _ in }
        var numbers: [UInt64] = []
        for _ in 0..<40 {
            t = t + Milliseconds(100)
            for e in keepalives(in: n.step(.tick, now: t)) {
                if case .keepalive(let k) = e.message, let s = k.sequence { numbers.append(s) }
            }
        }
        #expect(numbers.count >= 3)
        #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $1 == $0 + 1 }, "\(numbers)")
    }

    /// n3 serves (strict, 3 nodes). Its broker connection drops 500 ms after a keepalive's
    /// echo and comes back (to the other broker of a pair, say) 800 ms later, so the
    /// keepalive due meanwhile is lost; `reconnected` says whether the host tells it of
    /// the new connection. Its echoes then take 40 ms, and the slaves' keepalives reach
    /// it on the broker 20 ms after each of its own leaves (fresher evidence than its
    /// echo). Returns n3 after four seconds.
    func masterReconnecting(reconnected: Bool) -> TrackerNode {
        var (n, t) = masterWithTwoSlaves()
        let start = t
        var pending: [(at: Instant, event: NodeEvent)] = []
        func handle(_ actions: [NodeAction], at t: Instant) {
            let down = t >= start + Milliseconds(500) && t < start + Milliseconds(1300)
            for k in keepalives(in: actions) where !down {
                let rtt = Milliseconds(t < start + Milliseconds(500) ? 5 : 40)
                pending.append((t + rtt, .cluster(k)))
                for s in UInt32(1)...2 {
                    pending.append((t + Milliseconds(20), env(from: s, epoch: n.epoch, .keepalive(Keepalive(
                        role: .slave, master: NodeID(3), lastCommitted: .zero, inSync: true, address: "",
                        brokerEcho: .age(Milliseconds(5)))))))
                }
            }
        }
        handle(n.step(.tick, now: t), at: t)
        while t < start + Milliseconds(4000) {
            t = t + Milliseconds(5)
            for p in pending where p.at <= t { handle(n.step(p.event, now: t), at: t) }
            pending.removeAll { $0.at <= t }
            if reconnected && t == start + Milliseconds(1300) { handle(n.step(.brokerConnected, now: t), at: t) }
            if t.milliseconds % 250 == 0 {
                for s in UInt32(1)...2 { _ = n.step(beacon(from: s, role: .slave, master: 3, epoch: n.epoch, echo: .age(Milliseconds(5))), now: t) }
            }
            handle(n.step(.tick, now: t), at: t)
        }
        return n
    }

    /// A new broker connection sends a keepalive at once: its echo proves the link a round
    /// trip later. Waiting for the next interval left the master one lost keepalive from
    /// the `downAfter` edge, and the slaves' keepalives heard on the new connection before
    /// its own echo made it look cut off (`broker_network.py`, a broker of a pair killed).
    @Test func aMasterReconnectedToTheBrokerProvesItsLinkAtOnce() {
        let n = masterReconnecting(reconnected: true)
        #expect(n.isServing, "its link came back within a second: it must keep the office")
        #expect(n.paths[.cutMasterSteppedDown] == 0)
        let silent = masterReconnecting(reconnected: false)
        #expect(silent.paths[.cutMasterSteppedDown] >= 1, "the scenario must reach the edge the rule keeps the master from")
    }

    /// A starting node keeps its first keepalive for the end of startup, when it has
    /// listened for a live twin of its id; a connection during startup does not send one.
    @Test func aStartingNodeSendsNoKeepaliveWhenItsBrokerConnects() {
        var n = TrackerNode(id: NodeID(2), incarnation: 2000, config: ClusterConfig(),
                            handler: PeerRequestHandler(config: TrackerConfig(), connectionIDs: ids), seed: 7, now: t0)
        #expect(keepalives(in: n.step(.brokerConnected, now: t0 + Milliseconds(10))).isEmpty)
        #expect(n.role == .starting)
    }

    /// A live master whose slaves' votes never come keeps re-sending its PREPARE while it
    /// waits for the echo that would let it count them down: a voter all of whose
    /// PREPAREs were lost answers the next one. It used to fall silent after
    /// `voteRetries`, and the transaction waited for the echo only to abort.
    @Test func aLiveMasterWaitingForItsEchoKeepsAskingSilentVoters() throws {
        var (n, t) = try liveN3ServingTwoSlaves()
        var prepares = 0
        func count(_ actions: [NodeAction]) {
            for case .broadcast(let e) in actions { if case .prepare = e.message { prepares += 1 } }
        }
        count(n.step(announceDatagram(1, at: t), now: t))
        // Under `downAfter` from its last echo: it is not cut off yet, only waiting.
        let end = t + Milliseconds(1900)
        while t < end {
            t = t + Milliseconds(50)
            if t.milliseconds % 500 == 0 {
                for s in UInt32(1)...2 {
                    _ = n.step(beacon(from: s, role: .slave, master: 3, epoch: n.epoch, echo: .age(Milliseconds(5))), now: t)
                }
            }
            count(n.step(.tick, now: t))
        }
        let retries = ClusterConfig().voteRetries
        #expect(prepares > retries + 3, "\(prepares) PREPAREs in 1.9 s without an echo: it must keep asking after its \(retries) retries")
        let serving = n.isServing
        #expect(serving)
    }
}
