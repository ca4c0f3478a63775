import NIOConcurrencyHelpers
import Prometheus
import TrackerLogic

/// `GET /metrics`: the node's counters and gauges in the Prometheus text format.
/// Counters and gauges are read from the node's status at scrape time (so nothing on the
/// hot path touches a lock); only commit latencies are observed one by one, into a
/// histogram. A service restarted from the dashboard starts its own counts at zero: the
/// exported counters keep rising across it, as Prometheus expects of one process.
public final class NodeMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let commitLatency: DurationHistogram
    let lastCounts = NIOLockedValueBox<[String: Int]>([:])
    /// How many users' totals `/metrics` exports (`MonitoringSettings.metricsUsers`).
    let topUsers: Int

    public init(version: String, commit: String, topUsers: Int = 0) {
        self.topUsers = topUsers
        registry.makeGauge(descriptor: Self.metric("tracker_build_info", "1, labelled with this binary's version and commit"),
                           labels: [("version", version), ("commit", commit)]).set(to: 1)
        commitLatency = registry.makeDurationHistogram(
            descriptor: Self.metric("tracker_commit_latency_seconds", "PREPARE sent to COMMIT decided, on the master"),
            buckets: [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                      .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2)])
    }

    /// Our names are whole already (unit included): no namespace or unit is appended.
    static func metric(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    func observeCommit(_ latency: Milliseconds) {
        commitLatency.record(.milliseconds(max(0, latency.value)))
    }

    /// Renders the exposition text for `status`.
    func render(_ status: NodeStatus, torrents: Int, users: [User] = []) -> [UInt8] {
        let cluster = status.mode == "cluster"
        var counters: [(String, [(String, String)], Int, String)] = [
            ("tracker_datagrams_total", [], status.datagrams, "Peer datagrams received"),
            ("tracker_error_replies_total", [], status.errorReplies, "BEP 15 error replies sent to peers"),
            ("tracker_announces_total", [], status.announces, "Announces answered"),
            ("tracker_peer_send_errors_total", [], status.peerSendErrors, "Datagrams the kernel refused to send on the peer channel"),
        ]
        counters += Self.byTypeAndFamily(status.requestCounts).map {
            ("tracker_requests_total", $0.labels, $0.count, "Peer requests received, by BEP 15 action (invalid: none) and address family")
        }
        counters += Self.byTypeAndFamily(status.replyCounts).map {
            ("tracker_replies_total", $0.labels, $0.count, "Replies sent to peers, by type and address family")
        }
        counters += status.httpTracker.sorted { $0.key < $1.key }.map {
            ("tracker_http_requests_total", [("outcome", $0.key)], $0.value,
             "HTTP tracker requests by outcome (closed connections included: idle-closed, flood-closed)")
        }
        for u in users {
            let label = [("user", u.name.text)]
            counters += [
                ("tracker_user_announces_total", label, Int(clamping: u.totals.announces), "Committed announces with the user's key (private mode)"),
                ("tracker_user_completed_total", label, Int(clamping: u.totals.completed), "Completed events the user's peers announced"),
                ("tracker_user_uploaded_bytes_total", label, Int(clamping: u.totals.uploaded), "Bytes the user's peers reported uploading"),
                ("tracker_user_downloaded_bytes_total", label, Int(clamping: u.totals.downloaded), "Bytes the user's peers reported downloading"),
            ]
        }
        if cluster {
            counters += [
                ("tracker_commits_total", [], status.commits, "Transactions committed as master"),
                ("tracker_aborts_total", [], status.aborts, "Transactions aborted as master"),
                ("tracker_held_requests_answered_total", [], status.heldAnswered, "Requests received while no master served, answered after the election"),
                ("tracker_broker_frames_sent_total", [], status.broker.sent, "Frames sent to the broker"),
                ("tracker_broker_frames_received_total", [], status.broker.received, "Frames received from the broker"),
                ("tracker_broker_bytes_sent_total", [], status.broker.bytesSent, "Bytes of the bodies of frames sent to the broker"),
                ("tracker_broker_bytes_received_total", [], status.broker.bytesReceived, "Bytes of the bodies of frames received from the broker"),
                ("tracker_broker_connections_lost_total", [], status.broker.connectionsLost, "Broker connections lost"),
            ]
            counters += status.broker.rejectedClusterMessages.sorted { $0.key < $1.key }.map {
                ("tracker_cluster_rejected_messages_total", [("reason", $0.key)], $0.value, "Cluster messages dropped by the channel")
            }
            counters += status.protocolPaths.sorted { $0.key < $1.key }.map {
                ("tracker_protocol_path_total", [("path", $0.key)], Int(clamping: $0.value), "Protocol branches this node took")
            }
        }
        lastCounts.withLockedValue { last in
            for (name, labels, value, help) in counters {
                let key = name + labels.map { "|\($0.0)=\($0.1)" }.joined()
                let delta = value - (last[key] ?? 0)
                last[key] = value
                let counter = registry.makeCounter(descriptor: Self.metric(name, help), labels: labels)
                // A count below the last one means the service restarted and counts from zero.
                counter.increment(by: Int64(delta >= 0 ? delta : value))
            }
        }
        let roles = cluster ? ["starting", "slave", "candidate", "master", "stopped"] : ["standalone", "stopped"]
        for role in roles {
            registry.makeGauge(descriptor: Self.metric("tracker_role", "1 for the node's current role"), labels: [("role", role)])
                .set(to: status.role == role ? 1.0 : 0.0)
        }
        var gauges: [(String, Double, String)] = [
            ("tracker_swarms", Double(status.swarms), "Swarms in this node's repository"),
            ("tracker_peers", Double(status.peers), "Peers in this node's repository"),
            ("tracker_registered_torrents", Double(torrents), "Torrents in the catalogue"),
            ("tracker_serving", status.serving ? 1 : 0, "1 while this node answers peers"),
            ("tracker_service_running", status.service == "running" ? 1 : 0, "0 when stopped or failed from the dashboard"),
        ]
        if cluster {
            gauges += [
                ("tracker_epoch_term", Double(status.term), "Term of the epoch this node knows"),
                ("tracker_last_committed_txid", Double(status.lastCommitted), "Last committed transaction"),
                ("tracker_in_sync", status.inSync ? 1 : 0, "1 while this replica holds the master's last commit"),
                ("tracker_broker_connected", status.broker.connected ? 1 : 0, "1 while the broker link is up"),
                ("tracker_store_backlog", Double(status.storeBacklog), "Commits not yet on disk"),
                ("tracker_store_healthy", status.storeHealthy ? 1 : 0, "0 while the disk refuses writes"),
                ("tracker_cluster_members", Double(status.members.count), "Nodes this node has heard"),
                ("tracker_masters_heard", Double(status.mastersHeard),
                 "Nodes claiming master in the last two keepalive intervals, this one included: 1 in a healthy cluster"),
            ]
        }
        for (name, value, help) in gauges { registry.makeGauge(descriptor: Self.metric(name, help)).set(to: value) }
        return registry.emitToBuffer()
    }

    /// `type → family → count` as label sets, in a stable order.
    static func byTypeAndFamily(_ counts: [String: [String: Int]]) -> [(labels: [(String, String)], count: Int)] {
        counts.sorted { $0.key < $1.key }.flatMap { type, families in
            families.sorted { $0.key < $1.key }.map { (labels: [("type", type), ("family", $0.key)], count: $0.value) }
        }
    }
}
