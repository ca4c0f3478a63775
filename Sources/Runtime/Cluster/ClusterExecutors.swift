import Logging
import NIOCore
import TrackerLogic

/// The runtime's executors (`NodeExecutor`): `run` maps each of the node's actions to one
/// of these, each handing its work to the part that owns it — the broker client, the
/// peer sockets, the reply outbox, the store writer (`store`, in `ClusterService.swift`),
/// the log and the dashboard's waiters.
extension ClusterService {
    package func publish(_ env: ClusterEnvelope, to node: NodeID?) {
        publish(env, to: node.map { settings.topic(for: $0) } ?? settings.topic)
    }

    package func beacon(_ env: ClusterEnvelope) {
        guard output.speaks, let sockets else { return }
        let now = WallClock.now()
        let frame = channel.seal(env, now: now)
        for family in sockets.families {
            guard let target = family.beaconTarget, let fd = family.beaconDescriptor, family.beaconSender?.isActive == true else { continue }
            let code = sendDatagram(frame, to: target, on: fd)
            if code != 0 {
                peerSendFailures.failed("keepalive", code: code, now: now)
                peerSendFailureUnreported = true
            }
        }
    }

    package func reply(_ response: TrackerResponse, to peer: PeerEndpoint) {
        guard output.speaks, let sockets else { return }
        let family = sockets.replyFamily(to: peer)
        if replies.isFull(family) { sendReplies(family) }
        replies.append(response, to: peer, family: family, decidedAt: stepNow)
        switch response {
        case .error: stats.errorReplies += 1
        case .announce: stats.replies += 1; stats.announces += 1
        default: stats.replies += 1
        }
        stats.traffic.replied(response, to: peer)
    }

    package func discardPeerBacklog() {
        backlogDiscard = PeerBacklogDiscard(now: WallClock.now(), for: settings.cluster.keepaliveInterval,
                                            drainedBytes: Self.drainedQueueBytes)
        logger.notice("woke from a pause; dropping the peer datagrams queued meanwhile (another master answers them)",
                      metadata: ["queued-bytes": "\(sockets?.receiveQueueBytes().map { "\($0)" } ?? "unknown")"])
    }

    package func readPeers(_ reads: Bool) {
        guard let sockets else { return }
        let problems = sockets.passOnlyFrames(!reads)
        if problems.isEmpty {
            stats.readsPeers = reads
            stats.peerFilterChanges += 1
            // The heir changes its filter at each pause of its master's decisions, up
            // to hundreds of times a second under load: no line of its own at info.
            logger.debug(reads ? "reading peer requests (this node may serve or hold them next)"
                               : "leaving peer requests unread (another node holds them, or a master decided just now)")
        } else {
            // Reading them all is correct, only dearer.
            logger.warning("peer socket filter not changed; reading every datagram", metadata: ["error": "\(problems.joined(separator: "; "))"])
        }
    }

    package func exited(_ reason: ExitReason) {
        logger.notice("node stopped", metadata: ["reason": "\(reason)"])
        teardown(code: reason.exitCode)
    }

    package func subscribe(_ id: NodeID) {
        ownTopic = id
        stomp?.subscribe(settings.topic(for: id))
    }

    package func report(_ report: NodeReport) {
        switch report {
        case .standingChanged(let change):
            let s = change.current
            onRoleChange?(change, WallClock.now())
            logContext?.set(node: node.id.rawValue, role: s.role.jsonName)
            var metadata: Logger.Metadata = ["id": "\(node.id.rawValue)", "role": "\(s.role.jsonName)",
                                             "epoch": "\(s.epoch)", "master": "\(s.master?.rawValue ?? 0)",
                                             "serving": "\(s.serving)", "last-committed": "\(node.replica.lastCommitted)"]
            let why = node.paths.taken(ProtocolPath.leavingOffice, since: pathsAtRoleChange)
            if !why.isEmpty { metadata["why"] = "\(why.map(\.description).joined(separator: "; "))" }
            pathsAtRoleChange = node.paths
            logger.notice("cluster role", metadata: metadata)
        case .committed(_, let latency):
            stats.commits += 1
            stats.commitLatency.record(latency)
            metrics?.observeCommit(latency)
        case .aborted:
            stats.aborts += 1
        case .catalogueChanged(let catalogue):
            catalogueWaiters.settle(catalogue)
        case .submitRefused(let change, let reason):
            catalogueWaiters.refuse(change, reason: reason)
        }
    }
}
