import TrackerLogic

/// What the simulator itself did to the cluster that the nodes cannot count: faults it
/// injected and the defences they met.
public enum SimPath: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// A broker frame was corrupted in transit and the receiving channel dropped it.
    case corruptedFrameDropped
    /// A snapshot was corrupted before it was sealed (only its checksum can tell).
    case snapshotCorrupted
    /// A node crashed and its disk lost writes (or everything).
    case diskLost
    /// A node that lost its disk came back into the cluster's history.
    case diskLossRejoined
    /// A hostile participant's frame reached a node and was dropped.
    case hostileFrameRejected
    /// A message crossed the broker in fragments.
    case fragmentedMessage
    /// A node that woke from a pause dropped a peer datagram queued in its socket.
    case pauseBacklogDiscarded
    /// A node crashed while the broker was down and the network partitioned.
    case crashInBrokerOutageAndPartition
    /// A node was paused within a second of its start.
    case pauseRightAfterStart
    /// A cluster of 6 or more under a strict quorum was partitioned.
    case largeStrictClusterPartitioned
    /// Every node was down at once, the last of them stopped cleanly.
    case clusterStopped
    /// A node handed its disk an image of its peers, and it held exactly what the disk did.
    case peerImageWritten
    /// A peer datagram reached a slave's socket whose filter dropped it (not the heir).
    case peerDatagramFiltered
    /// A serving master was lost with its heir settled: the check that the heir reads
    /// peer datagrams applied (`checkHeirReads`).
    case settledMasterLost
    /// A serving master's own broker link was cut (the peer network still joined it).
    case masterBrokerLinkCut
    /// Another node's own broker link was cut.
    case otherBrokerLinkCut
    /// The broker channel was cut between two sides (the link between two brokers).
    case brokersPartitioned
    /// Single links of the peer network cut, one way or both.
    case peerNetworkLinksCut
    /// A bridge on both channels: two nodes that do not hear each other both hear a third.
    case bridgeCut
    /// A majorities ring of five on both channels: each node hears only its neighbours.
    case ringCut
    /// A serving master's sends on the peer channel failed for a while.
    case mutedMaster
    /// Another node's sends on the peer channel failed for a while.
    case mutedOther
    /// The broker delivered a message again under a fresh frame.
    case messageRedelivered
    /// The liveness phase's core settled within its bound: how long it took, in buckets
    /// (the rows show how close to the bound sweeps come).
    case livenessUnder3s, liveness3To6s, liveness6To10s, liveness10To15s

    public var description: String {
        switch self {
        case .corruptedFrameDropped: return "corrupted frame dropped"
        case .snapshotCorrupted: return "snapshot corrupted before sealing"
        case .diskLost: return "disk lost writes"
        case .diskLossRejoined: return "disk-loss rejoin"
        case .hostileFrameRejected: return "hostile frame rejected"
        case .fragmentedMessage: return "message sent in fragments"
        case .pauseBacklogDiscarded: return "pause backlog discarded"
        case .crashInBrokerOutageAndPartition: return "crash in a broker outage and a partition"
        case .pauseRightAfterStart: return "pause within a second of a start"
        case .largeStrictClusterPartitioned: return "strict cluster of 6+ partitioned"
        case .clusterStopped: return "whole cluster stopped, then restarted"
        case .peerImageWritten: return "peer image written"
        case .peerDatagramFiltered: return "peer datagram filtered at a slave"
        case .settledMasterLost: return "master lost with its heir settled"
        case .masterBrokerLinkCut: return "broker link of a serving master cut"
        case .otherBrokerLinkCut: return "broker link of another node cut"
        case .brokersPartitioned: return "link between two brokers cut"
        case .peerNetworkLinksCut: return "peer-network links cut one way"
        case .bridgeCut: return "bridge on both channels"
        case .ringCut: return "majorities ring of five on both channels"
        case .mutedMaster: return "peer sends of a serving master failed"
        case .mutedOther: return "peer sends of another node failed"
        case .messageRedelivered: return "message redelivered under a fresh frame"
        case .livenessUnder3s: return "liveness phase: core settled in under 3 s"
        case .liveness3To6s: return "liveness phase: core settled in 3-6 s"
        case .liveness6To10s: return "liveness phase: core settled in 6-10 s"
        case .liveness10To15s: return "liveness phase: core settled in 10-15 s"
        }
    }
}

/// The kinds of fault, for the fault × role rows: what a fault hit matters as much as
/// that it happened (a crash of a slave and a crash of the serving master test different
/// rules).
public enum FaultKind: String, CaseIterable, Sendable {
    case crash, shutdown = "clean shutdown", diskLoss = "disk loss", pause, slow, storeFails = "store fails",
         brokerLink = "broker link cut", impostor, peerSendsFail = "peer sends fail"
    case partition, peerNetworkPartition = "peer-network partition", brokerPartition = "broker partition",
         oneWay = "one-way cut", links = "links cut"

    /// A fault that names one node hits a role; one that names sides or links hits the
    /// serving master's side or the other.
    var namesSides: Bool {
        switch self {
        case .partition, .peerNetworkPartition, .brokerPartition, .oneWay, .links: return true
        default: return false
        }
    }
}

/// What a fault hit: the role of the node it names, or, for a cut between sides or of
/// links, whether the serving master was among the nodes it names.
public enum RoleHit: String, CaseIterable, Sendable {
    case servingMaster = "serving master", recoveringMaster = "recovering master", slave, candidate, down
    case withMaster = "the serving master's side", withoutMaster = "not the serving master's side",
         noMaster = "no master serving"

    var forSides: Bool { self == .withMaster || self == .withoutMaster || self == .noMaster }
}

/// How often each protocol branch (`ProtocolPath`, counted by the nodes) and each
/// simulator path (`SimPath`) was taken, and each kind of fault hit each role, over one
/// scenario or a sweep.
public struct Coverage: Sendable, Equatable {
    public var nodes = PathCounts()
    var sim = [UInt64](repeating: 0, count: SimPath.allCases.count)
    var faultRoles = [UInt64](repeating: 0, count: FaultKind.allCases.count * RoleHit.allCases.count)

    /// The fault × role pairs that can happen, in table order.
    static let faultRolePairs: [(FaultKind, RoleHit)] = FaultKind.allCases.flatMap { k in
        RoleHit.allCases.filter { $0.forSides == k.namesSides }.map { (k, $0) }
    }
    static func index(_ k: FaultKind, _ r: RoleHit) -> Int {
        (FaultKind.allCases.firstIndex(of: k) ?? 0) * RoleHit.allCases.count + (RoleHit.allCases.firstIndex(of: r) ?? 0)
    }
    static func name(_ k: FaultKind, _ r: RoleHit) -> String { "fault \(k.rawValue) × \(r.rawValue)" }

    mutating func count(_ kind: FaultKind, hit: RoleHit) { faultRoles[Self.index(kind, hit)] &+= 1 }

    public init() {}

    public subscript(_ path: SimPath) -> UInt64 { sim[path.rawValue] }
    public subscript(_ path: ProtocolPath) -> UInt64 { nodes[path] }

    mutating func count(_ path: SimPath) { sim[path.rawValue] &+= 1 }

    public mutating func add(_ other: Coverage) {
        nodes.add(other.nodes)
        for i in sim.indices { sim[i] &+= other.sim[i] }
        for i in faultRoles.indices { faultRoles[i] &+= other.faultRoles[i] }
    }

    /// Every counted path with its name, node paths first.
    public var rows: [(name: String, count: UInt64)] {
        ProtocolPath.allCases.map { ($0.description, nodes[$0]) } + SimPath.allCases.map { ($0.description, sim[$0.rawValue]) }
            + Self.faultRolePairs.map { (Self.name($0.0, $0.1), faultRoles[Self.index($0.0, $0.1)]) }
    }

    /// The paths a 10,000-scenario sweep must reach, with the least count each must have:
    /// a generator change that stops exercising one fails the test suite. Twenty each
    /// (a 10,000-seed sweep reaches the rarest of them 34 times and most thousands of
    /// times), but one for a not-in-sync vote from a node the master counted as a voter:
    /// that needs a master that believes a slave in sync while it is not, which only
    /// an empty master repository or a slave restarting between its keepalive and the
    /// PREPARE produce (13–20 per 10,000 while every commit sent a COMMIT; 3–6 since the
    /// next PREPARE carries it: seeds 1..10,000 reached it 3 times, 10,001..30,000 11;
    /// since the insider adversary forges later runs too, 1..30,000 reach it 12 times, and
    /// 1..10,000 once).
    public static let required: [(path: String, atLeast: UInt64)] = {
        let node: [ProtocolPath] = [.electionWon, .epochClaimLapsed, .pausedMasterSteppedDown, .masterSteppedDown,
                                    .recoveryFetched, .preparedReproposed, .recoveredAgain, .recoveryMergedOwnState, .divergedStateMerged, .strictRecoveryHalted,
                                    .transactionCommitted, .transactionAborted, .commitCarriedByPrepare, .prepareResent, .silentVotersDropped,
                                    .voteNotInSync, .voteStoreFailed, .unconfirmedVoteCounted, .uncountedVoteCounted, .missedCommitApplied, .catchUpSent,
                                    .catchUpApplied, .staleCatchUpIgnored, .snapshotSent, .snapshotInstalled, .snapshotRefused,
                                    .mergeRequested, .mergeCompleted, .duplicateIDRefused, .storeRewritten, .heldRequestAnswered, .peersLeftToHeir,
                                    .staleRecoveryAnswerIgnored, .reconfigured, .keptDataOffered, .olderRunRefused,
                                    .cutMasterSteppedDown, .claimLeftToLinkedNode, .silentVotersAwaitedEcho,
                                    .undecidedVoteRepeated, .lateVoteAnswered, .latePreparedReproposed, .mutedMasterSteppedDown,
                                    .silentLinkedVoterCountedNo, .divergedStateSetAside, .mergeSwarmsAlreadyHeld, .answeredWhileStartingRan,
                                    .httpRequestServed, .httpRefusedNotServing, .httpRefusedLeavingOffice, .userRefusedAtCommit]
        return node.map { ($0.description, 20) } + [(ProtocolPath.notInSyncVoteCounted.description, 1)]
            + SimPath.allCases.filter { ![.liveness3To6s, .liveness6To10s, .liveness10To15s].contains($0) }.map { ($0.description, 20) }
            + faultRolePairs.filter { required($0.0, $0.1) }.map { (name($0.0, $0.1), rare($0.0, $0.1) ? 5 : 20) }
    }()

    /// Rows a 10,000-seed sweep reaches under 40 times: an impostor of the serving master
    /// (18) and a recovering master's peer sends failing (19–47: recovery lasts a moment).
    static func rare(_ k: FaultKind, _ r: RoleHit) -> Bool {
        (k == .impostor && r == .servingMaster) || (k == .peerSendsFail && r == .recoveringMaster)
    }

    /// The fault × role rows a sweep must reach: every kind of fault against the serving
    /// master, a recovering master, a slave and a candidate (a fault aimed at a node that
    /// is down changes nothing), or on the serving master's side, the other and with no
    /// master; an impostor of a recovering master or a candidate is rare by design (it is
    /// placed only where nothing else happens).
    static func required(_ k: FaultKind, _ r: RoleHit) -> Bool {
        r != .down && k != .impostor
            || k == .impostor && (r == .slave || r == .servingMaster)
    }

    /// Required paths reached fewer times than they must be.
    public var shortfalls: [String] {
        let counts = Dictionary(rows.map { ($0.name, $0.count) }, uniquingKeysWith: +)
        return Self.required.compactMap { r in
            let n = counts[r.path] ?? 0
            return n < r.atLeast ? "\(r.path): \(n) (at least \(r.atLeast))" : nil
        }
    }

    /// The table `tracker simulate --coverage` prints.
    public var table: String {
        let width = rows.map(\.name.count).max() ?? 0
        let required = Set(Self.required.map(\.path))
        return rows.map { row in
            row.name + String(repeating: " ", count: width - row.name.count) + "  " + String(row.count)
                + (required.contains(row.name) ? "" : "  (not required)")
        }.joined(separator: "\n")
    }

    /// One line per path, `name=count`, for a child process to hand its counts over.
    public var encoded: String { rows.map { "\($0.name)=\($0.count)" }.joined(separator: ";") }

    public init?(encoded: String) {
        var c = Coverage()
        let byName = Dictionary(uniqueKeysWithValues: ProtocolPath.allCases.map { ($0.description, $0) })
        let simByName = Dictionary(uniqueKeysWithValues: SimPath.allCases.map { ($0.description, $0) })
        let pairByName = Dictionary(uniqueKeysWithValues: Self.faultRolePairs.map { (Self.name($0.0, $0.1), Self.index($0.0, $0.1)) })
        for field in encoded.split(separator: ";") {
            let kv = field.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, let n = UInt64(kv[1]) else { return nil }
            let name = String(kv[0])
            if let p = byName[name] {
                c.nodes[p] = n
            } else if let p = simByName[name] {
                c.sim[p.rawValue] = n
            } else if let i = pairByName[name] {
                c.faultRoles[i] = n
            } else {
                return nil
            }
        }
        self = c
    }
}
