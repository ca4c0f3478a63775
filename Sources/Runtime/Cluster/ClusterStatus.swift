import Foundation
import TrackerLogic

extension ClusterService {
    /// Read on the loop.
    func status() -> NodeStatus {
        let now = WallClock.now()
        var s = NodeStatus()
        s.service = silenced ? "failed" : "running"
        s.id = node.id.rawValue
        s.role = node.role.jsonName
        s.epoch = node.epoch.description
        s.term = node.epoch.term
        s.master = node.master?.rawValue ?? 0
        s.serving = node.isServing
        s.inSync = node.inSync
        s.lastCommitted = node.replica.lastCommitted.txid
        s.lastCommittedEpoch = node.replica.lastCommitted.epoch.description
        s.digest = String(node.replica.digest, radix: 16)
        s.swarms = node.replica.store.swarmCount
        s.peers = node.replica.store.peerCount
        s.storeHealthy = node.storeHealthy
        s.storeBacklog = stats.storeBacklog
        s.brokerConnected = stomp?.isReady ?? false
        s.cluster = settings.clusterName
        s.peerService = settings.peers.description
        s.replyFrom = sockets?.unicast ?? ""
        s.address = node.address
        s.database = settings.database
        s.keepaliveMs = settings.cluster.keepaliveInterval.value
        s.datagrams = stats.datagrams
        s.replies = stats.replies
        s.errorReplies = stats.errorReplies
        s.announces = stats.announces
        s.requestCounts = stats.traffic.requestCounts
        s.replyCounts = stats.traffic.replyCounts
        s.commits = stats.commits
        s.aborts = stats.aborts
        s.heldAnswered = Int(clamping: node.answeredHeld)
        s.beacons = stats.beacons
        s.backlogDiscarded = stats.backlogDiscarded
        s.staleRepliesDropped = stats.staleRepliesDropped
        s.readsPeers = stats.readsPeers
        s.peerFilterChanges = stats.peerFilterChanges
        s.peerSendErrors = peerSendFailures.count
        s.peerSendError = peerSendFailures.failing(now: now, within: settings.cluster.downAfter)
        s.protocolPaths = Dictionary(uniqueKeysWithValues: ProtocolPath.allCases.map { ($0.description, node.paths[$0]) })
        s.broker = NodeStatus.BrokerStatus(
            connected: stomp?.isReady ?? false, connectedTo: stomp?.connectedTo?.url, problem: stomp?.problem, sent: stomp?.stats.sent ?? 0, received: stomp?.stats.received ?? 0,
            bytesSent: stomp?.stats.bodyBytesSent ?? 0, bytesReceived: stomp?.stats.bodyBytesReceived ?? 0,
            droppedWhileDown: stomp?.stats.droppedWhileDown ?? 0, connectionsLost: stomp?.stats.connectionsLost ?? 0,
            errorFrames: stomp?.stats.errorFrames ?? 0, badFrames: stomp?.stats.badFrames ?? 0,
            badClusterMessages: stats.rejected.values.reduce(0, +),
            rejectedClusterMessages: Dictionary(uniqueKeysWithValues: ClusterRejection.allCases.map { ($0.rawValue, stats.rejected[$0] ?? 0) }),
            authenticated: !settings.keys.isEmpty, echoMsAgo: node.brokerEcho.map { (now - $0).value })
        s.members = node.membership.members.values.sorted { $0.id < $1.id }.map {
            NodeStatus.MemberStatus(id: $0.id.rawValue, role: $0.role.jsonName, master: $0.master.rawValue, epoch: $0.epoch.description,
                                    lastCommitted: $0.lastCommitted.txid, inSync: $0.inSync, address: $0.address,
                                    lastKeepaliveMsAgo: (now - $0.lastHeard).value,
                                    lastBrokerMsAgo: $0.lastHeardOnBroker == .zero ? nil : (now - $0.lastHeardOnBroker).value)
        }
        let downAfter = settings.cluster.keepaliveInterval.value * 2
        s.mastersHeard = node.membership.members.values.filter {
            $0.id != node.id && $0.role == .master && (now - $0.lastHeard).value <= downAfter
        }.count + (node.role == .master ? 1 : 0)
        return s
    }
}

extension ClusterNodeSettings {
    /// The configuration tab's rows (secrets are named, never shown).
    var settingRows: [SettingRow] {
        var rows = [
            SettingRow(key: "id", value: id.isAssigned ? "\(id.rawValue)" : "auto"),
            SettingRow(key: "peer channel", value: peers.description),
            SettingRow(key: "broker", value: broker.brokers.map(\.url).joined(separator: ",")),
            SettingRow(key: "broker user", value: broker.login ?? "(none)"),
            SettingRow(key: "cluster", value: clusterName),
            SettingRow(key: "cluster keys", value: keys.isEmpty ? "none (--insecure-cluster)" : keys.map { String(format: "%08x", $0.id) }.joined(separator: ", ")),
            SettingRow(key: "keepalive", value: "\(cluster.keepaliveInterval.value) ms"),
            SettingRow(key: "quorum", value: cluster.quorum == .strict ? "strict (of \(cluster.clusterSize))" : "live"),
            SettingRow(key: "database", value: database),
        ]
        rows += tracker.settingRows
        return rows
    }
}

extension TrackerConfig {
    var settingRows: [SettingRow] {
        func limit(_ l: SourceRateLimiter.Limit) -> String { l.isOff ? "off" : "\(l.perSecond)/s burst \(l.burst)" }
        return [
            SettingRow(key: "announce interval", value: "\(announceInterval) s"),
            SettingRow(key: "interval jitter", value: "± \(intervalJitterPercent) % (\(intervalBand.lowerBound)-\(intervalBand.upperBound) s)"),
            SettingRow(key: "peer timeout", value: "\(effectivePeerTimeout.value / 1000) s"),
            SettingRow(key: "numwant default / max", value: "\(numWantDefault) / \(numWantMax)"),
            SettingRow(key: "connect limit", value: limit(connectLimit)),
            SettingRow(key: "announce limit", value: limit(announceLimit)),
            SettingRow(key: "error limit", value: limit(errorLimit)),
            SettingRow(key: "max swarms", value: "\(maxSwarms)"),
            SettingRow(key: "max peers per swarm", value: "\(maxPeersPerSwarm)"),
            SettingRow(key: "max peers", value: "\(maxPeers)"),
        ]
    }
}
