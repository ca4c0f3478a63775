import TrackerLogic

/// The node as JSON (`GET /api/node`): what operators, scripts and the dashboard read.
/// Every field has a value when the tracker service is stopped too, so a reader never
/// has to tell "stopped" from "missing".
public struct NodeStatus: Codable, Sendable {
    public struct MemberStatus: Codable, Sendable {
        var id: UInt32
        var role: String
        var master: UInt32
        var epoch: String
        var lastCommitted: UInt64
        var inSync: Bool
        var address: String
        var lastKeepaliveMsAgo: Int64
        /// Since it was last heard on the broker (nil: never); a node heard only on the
        /// peer network is alive but takes no part in transactions.
        var lastBrokerMsAgo: Int64?
    }

    /// The cluster channel, as the STOMP client counted it.
    public struct BrokerStatus: Codable, Sendable {
        var connected = false
        /// The broker of the current (or last) connection, of the failover list.
        var connectedTo: String?
        /// Why it is not connected (nil while it is): a refused connection, a broker
        /// certificate that did not verify, an ERROR frame.
        var problem: String?
        var sent = 0
        var received = 0
        var bytesSent = 0
        var bytesReceived = 0
        var droppedWhileDown = 0
        var connectionsLost = 0
        var errorFrames = 0
        var badFrames = 0
        /// Every cluster frame the channel dropped, whatever the reason.
        var badClusterMessages = 0
        /// The same, per reason (every reason listed, zeros included).
        var rejectedClusterMessages: [String: Int] = [:]
        /// False with `--insecure-cluster`: anyone on the broker can forge messages.
        var authenticated = false
        /// How long ago the broker last carried one of this node's keepalives back to it
        /// (nil: not since it started). Over two intervals while others' are not: this
        /// node's own link is cut, and it neither leads nor claims (`BrokerLink.swift`).
        var echoMsAgo: Int64?
    }

    /// `running`, `stopped` (the Stop button: the process and its dashboard stay up) or
    /// `failed` (a provoked failure: the node is cut off from peers and the cluster).
    var service = "running"
    /// `cluster` or `standalone`.
    var mode = "cluster"
    var id: UInt32 = 0
    var role = "stopped"
    var epoch = Epoch.zero.description
    var term: UInt32 = 0
    var master: UInt32 = 0
    var serving = false
    var inSync = false
    var lastCommitted: UInt64 = 0
    var lastCommittedEpoch = Epoch.zero.description
    var digest = "0"
    var swarms = 0
    var peers = 0
    var storeHealthy = true
    var storeBacklog = 0
    var brokerConnected = false
    var cluster = ""
    var peerService = ""
    var replyFrom = ""
    /// What this node's keepalives advertise: its dashboard's URL, else its service address.
    var address = ""
    var database = ""
    var keepaliveMs: Int64 = 1000
    /// Since the process started (the service may have started later).
    var uptimeMs: Int64 = 0
    var datagrams = 0
    var replies = 0
    var errorReplies = 0
    var announces = 0
    /// Peer requests by BEP 15 action (`connect`, `announce`, `scrape`, `invalid`) and
    /// replies by type (`connect`, `announce`, `scrape`, `error`), each by family
    /// (`ipv4`, `ipv6`): type → family → count.
    var requestCounts: [String: [String: Int]] = [:]
    var replyCounts: [String: [String: Int]] = [:]
    /// The HTTP tracker's requests by outcome (`HTTPTrackerCounts.byOutcome`); empty
    /// without `--http-tracker`.
    var httpTracker: [String: Int] = [:]
    var commits = 0
    var aborts = 0
    /// Requests received while no master served that this node answered once it did.
    var heldAnswered = 0
    /// Keepalives heard on the peer network.
    var beacons = 0
    /// Peer datagrams dropped unread from its socket after a pause (another master's).
    var backlogDiscarded = 0
    /// Replies dropped unsent: decided before a pause, they would have left after it.
    var staleRepliesDropped = 0
    /// Whether its peer socket passes peer requests: false on a slave that is not the
    /// heir, whose kernel drops them unread, and on the heir within `receiveSkew` of its
    /// master's last decision (`NodeAction.readPeers`).
    var readsPeers = true
    /// How often that changed.
    var peerFilterChanges = 0
    /// Datagrams the kernel refused to send on the peer channel (keepalives, replies).
    var peerSendErrors = 0
    /// The last such refusal, while it is under two keepalive intervals old: the node
    /// cannot answer peers, and its health says so.
    var peerSendError: String?
    /// How often this node's process took each protocol branch (elections, aborts,
    /// catch-ups, snapshots, merges, …), by the branch's name.
    var protocolPaths: [String: UInt64] = [:]
    var broker = BrokerStatus()
    var members: [MemberStatus] = []
    /// Nodes that claimed master in their keepalives of the last two intervals (the
    /// down threshold), this node included: 1 in a healthy cluster, 2 or more in a
    /// split this node can see.
    var mastersHeard = 0
}

/// One row of the trackers tab: this node and every node it has heard.
public struct TrackerRow: Codable, Sendable {
    var id: UInt32
    var role: String
    var epoch: String
    var address: String
    /// Nil for this node itself.
    var lastKeepaliveMsAgo: Int64?
    var lastCommitted: UInt64
    var inSync: Bool
    var isSelf: Bool
    /// Missed two keepalives: shown grey until forgotten.
    var silent: Bool

    /// This node first, then the others by id.
    static func rows(_ s: NodeStatus) -> [TrackerRow] {
        var rows: [TrackerRow] = []
        if s.id != 0 {
            rows.append(TrackerRow(id: s.id, role: s.service == "running" ? s.role : s.service, epoch: s.epoch,
                                   address: s.address.isEmpty ? s.replyFrom : s.address, lastKeepaliveMsAgo: nil, lastCommitted: s.lastCommitted,
                                   inSync: s.inSync, isSelf: true, silent: s.service != "running"))
        }
        for m in s.members where m.id != s.id {
            rows.append(TrackerRow(id: m.id, role: m.role, epoch: m.epoch, address: m.address,
                                   lastKeepaliveMsAgo: m.lastKeepaliveMsAgo, lastCommitted: m.lastCommitted,
                                   inSync: m.inSync, isSelf: false, silent: m.lastKeepaliveMsAgo > 2 * s.keepaliveMs))
        }
        return rows
    }
}

/// One setting as the configuration tab shows it.
public struct SettingRow: Codable, Sendable, Equatable {
    public var key: String
    public var value: String
    /// For a configuration key: the layer that set it (a file, a drop-in, `environment
    /// TRACKER_KEY`, or `command line`).
    public var source: String?

    public init(key: String, value: String, source: String? = nil) { self.key = key; self.value = value; self.source = source }
}

extension Role {
    var jsonName: String {
        switch self {
        case .starting: "starting"
        case .slave: "slave"
        case .candidate: "candidate"
        case .master: "master"
        case .stopped: "stopped"
        }
    }
}
