import NIOCore
import TrackerLogic

/// What a host does with a node's actions in the simulated world: frames sealed and handed
/// to the packet network, replies to peers (checked: one answer per request), store
/// actions to the node's disk, exits to the process model.
extension Simulator: NodeExecutor {
    /// A sealed frame reaches a node's channel; what opens is stepped.
    mutating func deliver(_ frame: ByteBuffer, to s: Int, fromAdversary: Bool, servingAt: Instant?, beacon: Bool, corrupted: Bool) {
        let nodeTime = nodeNow(s)
        // Opened in place: a copy would share the replay windows and copy them on write.
        guard let ownID = slots[s].nodeID,
              let opened = slots[s].channel?.open(frame, ownID: ownID, now: nodeTime) else { return }
        if fromAdversary {
            hostileDelivered += 1
            if case .failure = opened { hostileRejected += 1 }
        }
        if case .success = opened {
            // A frame is known by its tag: the HMAC covers every byte before it, so two
            // frames that opened with the same tag are the same frame (a replay). Only
            // membership is asked of the set: its per-process hashing seed cannot change a run.
            let tag = frame.getInteger(at: frame.writerIndex - ClusterChannel.tagBytes, as: UInt64.self) ?? 0
            if !slots[s].acceptedFrames.insert(tag).inserted {
                return fail("s\(s) accepted a frame it had accepted before: its replay window let a replay through")
            }
        }
        switch opened {
        case .success(nil):
            break
        case .success(let env?):
            if corrupted { return fail("s\(s) accepted a frame corrupted in transit: \(env.message.name) from n\(env.from.rawValue)") }
            if fromAdversary && adversary?.plan.kind == .outsider {
                return fail("s\(s) accepted a frame forged without the key: \(env.message.name) from n\(env.from.rawValue)")
            }
            // Its own keepalive, carried back by the broker, is no word from a serving master.
            let ownEcho = slots[s].inspect({ $0.id == env.from && $0.incarnation == env.incarnation }) ?? false
            if !ownEcho {
                if servingAt != nil || (!fromAdversary && HeardServing.isMasterWord(env)) { slots[s].held.lastHeardServing = now }
                if let sent = servingAt { slots[s].heardServing.note(env, sentAt: sent, heardAt: now) }
            }
            step(s, beacon ? .beacon(env) : .cluster(env),
                 label: "\(fromAdversary ? "HOSTILE " : "")\(beacon ? "beacon " : "")\(env.message.name) from n\(env.from.rawValue) \(env.epoch)")
        case .failure(let reason):
            rejections[reason, default: 0] += 1
            if corrupted { coverage.count(.corruptedFrameDropped) }
            if fromAdversary { coverage.count(.hostileFrameRejected) }
            if tracing && !fromAdversary { note(s, "dropped a frame: \(reason)") }
        }
    }

    /// A peer's datagram is read from a node's socket (`backlogOf`: it waited in the
    /// socket of that stopped process, and may be discarded by the runtime's rule).
    mutating func deliver(_ bytes: ByteBuffer, from: PeerEndpoint, to s: Int, backlogOf: UInt64?) {
        if let process = backlogOf {
            slots[s].peerBacklog -= 1
            slots[s].peerBacklogBytes -= bytes.readableBytes
            guard slots[s].inspect({ $0.incarnation }) == process else { return }
            if var discard = slots[s].backlogDiscard {
                if discard.drops(at: nodeNow(s)) {
                    slots[s].backlogDiscard = discard.isDrained(queuedBytes: slots[s].peerBacklogBytes) ? nil : discard
                    coverage.count(.pauseBacklogDiscarded)
                    return note(s, "backlog datagram from \(from) discarded")
                }
                slots[s].backlogDiscard = nil
            }
        }
        if let p = workload.peer(at: from), let header = BEP15Codec.peekHeader(bytes) {
            let key = RequestKey(peer: p, tid: header.transactionID)
            if header.action == .announce { checker.read(key, at: now) }
            if let serving = slots[s].inspect({ $0.isServing }) {
                slots[s].readAt[key] = (now, serving, slots[s].readAt[key]?.first ?? now)
                if !serving, checker.unservedSends[key] != nil { slots[s].held.receipts.append(HeldReceipt(request: key, at: now)) }
            }
        }
        step(s, .peer(bytes, from: from), label: "datagram from \(from)")
    }

    mutating func deliverCluster(_ frame: ByteBuffer, from: Int, to: Int, beacon: Bool = false) {
        guard slots[to].isRunning, !(beacon ? network.peerNetworkBlocked(from, to) : network.blocked(from, to)) else { return }
        if network.lost() { return }
        let serving = slots[from].isServing ? now : nil
        if network.corrupted() {
            // The damaged copy arrives; the channel must drop it (the checker fails the seed
            // if it does not). Nothing else about the delivery changes.
            queue.push(now + network.delay(from, to), .cluster(to, network.damage(frame), fromAdversary: false, servingAt: serving,
                                                      beacon: beacon, corrupted: true))
            return
        }
        queue.push(now + network.delay(from, to), .cluster(to, frame, fromAdversary: false, servingAt: serving, beacon: beacon))
        // A duplicate is dropped by the receiver's replay window.
        if network.duplicated() { queue.push(now + network.delay(from, to), .cluster(to, frame, fromAdversary: false, servingAt: serving, beacon: beacon)) }
    }

    /// A send of the node on the peer channel failed: the host tells it, once for every
    /// failure up to then.
    mutating func peerSendFailed(_ slot: Int) {
        guard !slots[slot].sendFailureReported, let process = slots[slot].inspect({ $0.incarnation }) else { return }
        slots[slot].sendFailureReported = true
        queue.push(now, .peerSendFailed(slot, process: process))
    }

    /// The broker delivers a message again under a fresh frame: sealed anew by its
    /// sender's channel (the same process, else nothing comes), to the same receivers.
    mutating func redeliver(_ encoded: ByteBuffer, from slot: Int, process: UInt64, sender: NodeID, incarnation: UInt64,
                            to targets: [Int]) {
        guard slots[slot].inspect({ $0.incarnation }) == process,
              let frames = slots[slot].channel?.sealFragments(encoded: encoded, from: sender, incarnation: incarnation,
                                                               now: nodeNow(slot)) else { return }
        coverage.count(.messageRedelivered)
        note(slot, "broker delivers a message again under a fresh frame")
        for frame in frames {
            for s in targets { deliverCluster(frame, from: slot, to: s) }
        }
    }

    mutating func multicast(_ bytes: ByteBuffer, from peer: Int) {
        // Connects and announces (scrapes are not held: they are cheap to resend).
        if !slots.contains(where: { $0.isServing }), let header = BEP15Codec.peekHeader(bytes),
           header.action == .connect || header.action == .announce {
            let key = RequestKey(peer: peer, tid: header.transactionID)
            if checker.unservedSends[key] == nil { checker.unservedSends[key] = now }
        }
        for s in slots.indices where slots[s].isRunning && !network.isolated.contains(s) {
            if network.lost() { continue }
            queue.push(now + network.delay(s), .peerDatagram(s, bytes, workload.peers[peer].endpoint))
        }
    }


    /// Performs a node's action (`NodeExecutor.run` maps it to one of the executors below).
    mutating func perform(_ action: NodeAction, from slot: Int) {
        actingSlot = slot
        run(action)
    }

    package mutating func publish(_ env: ClusterEnvelope, to node: NodeID?) {
        sendCluster(env, isSend: node != nil, beacon: false)
    }

    package mutating func beacon(_ env: ClusterEnvelope) {
        sendCluster(env, isSend: false, beacon: true)
    }

    /// A frame to the broker's subscribers (`isSend`: to one node's topic) or, as a
    /// `beacon`, to every other node over the peer network.
    mutating func sendCluster(_ env: ClusterEnvelope, isSend: Bool, beacon: Bool) {
        let slot = actingSlot
        var env = env
        if isSend, let violation = checker.sent(env, slot: slot, generation: slots[slot].generation) {
            return fail(violation)
        }
        if case .snapshot(let s) = env.message, let damaged = corruptedSnapshot(s) {
            env.message = .snapshot(damaged)
            coverage.count(.snapshotCorrupted)
        }
        // Every message crosses the wire format, so the codec is exercised all the time.
        let bytes = ClusterCodec.encode(env)
        traceDigest.add(UInt64(bytes.readableBytes), UInt64(env.message.name.utf8.count))
        guard case .success(let decoded) = ClusterCodec.decode(bytes), decoded == env else {
            return fail("cluster codec does not round-trip \(env.message.name)")
        }
        let nodeTime = nodeNow(slot)
        // A keepalive on the peer network is one datagram; the broker carries fragments.
        // Sealed in place (a copy of the channel would copy its counters on write).
        guard let frames = beacon ? (slots[slot].channel?.seal(env, now: nodeTime)).map({ [$0] })
                : slots[slot].channel?.sealFragments(encoded: bytes, from: env.from, incarnation: env.incarnation, now: nodeTime)
        else { return }
        if frames.count > 1 { coverage.count(.fragmentedMessage) }
        let targets: [Int]
        if beacon {
            targets = slots.indices.filter { $0 != slot }
        } else if case .keepalive = env.message {
            // The broker carries a keepalive to every subscriber of the topic, its
            // sender included: that echo is how a node knows its link works.
            targets = Array(slots.indices)
        } else if isSend, let to = env.to {
            // Unicast reaches every live node holding that id (an impostor too).
            targets = slots.indices.filter { $0 != slot && slots[$0].nodeID == to }
        } else {
            targets = slots.indices.filter { $0 != slot }
        }
        if beacon && network.peerSendsFail(slot, at: now) { return peerSendFailed(slot) }
        if case .abort = env.message {
            let carried = network.brokerLinkCut[slot]?.blocksSending != true && !network.brokerDown
            slots[slot].abortsSent.append((now, carried))
            if slots[slot].abortsSent.count > SimSlot.abortsKept { slots[slot].abortsSent.removeFirst() }
        }
        for frame in frames {
            adversary?.capture(frame)
            for s in targets { deliverCluster(frame, from: slot, to: s, beacon: beacon) }
        }
        var isKeepalive = false
        if case .keepalive = env.message { isKeepalive = true }
        if !beacon, !isKeepalive, let after = network.redeliveredAfter(),
           let process = slots[slot].inspect({ $0.incarnation }) {
            queue.push(now + after, .redeliver(from: slot, process: process, encoded: bytes, sender: env.from,
                                               incarnation: env.incarnation, to: targets))
        }
    }

    package mutating func reply(_ response: TrackerResponse, to: PeerEndpoint) {
        let slot = actingSlot
        guard slots[slot].isServing else {
            return fail("s\(slot) answered a peer while not a serving master")
        }
        guard let p = workload.peer(at: to) else { return }
        let key = RequestKey(peer: p, tid: response.transactionID)
        guard let me = slots[slot].inspect({ HeardServing.Process(id: $0.id, incarnation: $0.incarnation) }) else { return }
        // Answered at most once, however (a refusal is an answer too: the client acts
        // on the first reply it gets), unless this process could not have known of the
        // first answer (see `HeardServing`), the peer sent the request again, or the
        // first answerer still serves beside this one (two masters of live quorum that
        // have not yet heard each other's epochs each answer what reaches them). One
        // process reads a datagram once, so it never answers one twice.
        var isError = false, isConnect = false
        if case .error(let e) = response {
            isError = true
            // A refusal is an answer the next master must know of: its ABORT has to
            // reach the broker first (`KnownRefusals.swift`), unless this master can
            // take it for a broker outage (nobody it hears reaches the broker: a node
            // whose reports have had time to reach it would be a witness). Its ABORT
            // left after the request was first read; if every ABORT since then was
            // lost on the way to the broker, so was its. Judged, as `checkCutOffMaster` is,
            // where no report can be lost.
            if AbortRefusal.refuses(e.message), network.brokerLinkCut[slot]?.blocksSending == true, !network.brokerDown,
               scenario.lossRate == 0, scenario.corruptRate == 0, scenario.adversary == nil,
               let read = slots[slot].readAt[key]?.first,
               case let aborts = slots[slot].abortsSent.filter({ $0.at >= read }),
               !aborts.isEmpty, !aborts.contains(where: \.carried),
               let n = settledWitness(of: slot, drain: Milliseconds(2 * (scenario.maxDelay + network.slowest) + 1)) {
                return fail("s\(slot) refused p\(p)'s transaction \(response.transactionID) while its broker link was cut for "
                            + "sending and s\(n) reached the broker: its ABORT reached nobody, and the next master answers again")
            }
        }
        if case .connect = response { isConnect = true }
        if let first = checker.answeredBy[key], first.process == me, !checker.retransmitted.contains(key) {
            return fail("s\(slot) answered p\(p)'s transaction \(key.tid) twice (first at "
                        + "\(first.at.milliseconds - Scenario.start.milliseconds)ms)")
        }
        if let first = checker.answeredBy[key], first.process != me, !checker.retransmitted.contains(key),
           !(slots[first.slot].isServing && slots[first.slot].inspect({ $0.incarnation }) == first.process.incarnation),
           let read = slots[slot].readAt[key],
           let heard = slots[slot].heardServing.firstHeard(first.process, after: first.at, isConnect: isConnect),
           read.serving ? heard < read.at - config.receiveSkew : heard < (slots[slot].held.servingSince ?? now) {
            return fail("s\(slot) answered p\(p)'s transaction \(key.tid) a second time: s\(first.slot) had answered it at "
                        + "\(first.at.milliseconds - Scenario.start.milliseconds)ms, s\(slot) heard so at "
                        + "\(heard.milliseconds - Scenario.start.milliseconds)ms and read the request at "
                        + "\(read.at.milliseconds - Scenario.start.milliseconds)ms \(read.serving ? "serving" : "not serving")")
        }
        checker.answeredBy[key] = Answerer(slot: slot, process: me, at: now)
        checker.answeredAt[key] = now
        replies.append((now, slot, isError))
        if case .announce(let r) = response {
            // A reload applies from the step it reaches on: every announce answered
            // after it carries an interval of the band it set, none before it does.
            let band = trackerConfig(of: slot).intervalBand
            if !band.contains(r.interval) {
                return fail("s\(slot) told p\(p) to announce every \(r.interval)s; its configuration says \(band.lowerBound)...\(band.upperBound)s")
            }
            recordAck(peer: p, request: key, by: slot)
        }
        let bytes = BEP15Codec.encode(response)
        if network.peerSendsFail(slot, at: now) { return peerSendFailed(slot) }
        if network.lost() || network.isolated.contains(slot) { return }
        queue.push(now + network.delay(slot), .reply(p, bytes))
    }

    package mutating func answerHTTP(_ response: TrackerResponse, exchange: HTTPExchangeID) {
        answerHTTPExchange(response, exchange: exchange, from: actingSlot)
    }

    package mutating func store(_ write: StoreWrite) {
        performStore(write, from: actingSlot)
    }

    package mutating func discardPeerBacklog() {
        let slot = actingSlot
        if slots[slot].peerBacklog > 0 {
            slots[slot].backlogDiscard = PeerBacklogDiscard(now: nodeNow(slot), for: config.keepaliveInterval, drainedBytes: 0)
        }
    }

    package mutating func readPeers(_ reads: Bool) {
        let slot = actingSlot
        slots[slot].peersFiltered = !reads
    }

    /// The broker's topics are modelled by node id.
    package mutating func subscribe(_ id: NodeID) {}

    /// Status is read by the checker; a commit is checked as it is reported.
    package mutating func report(_ report: NodeReport) {
        let slot = actingSlot
        switch report {
        case .committed(let quorum, _):
            committedSoFar = quorum.ref
            if let id = slots[slot].nodeID, let v = checker.committed(quorum, by: id) { return fail(v) }
            if quorum.okVoters.isEmpty { checkCutOffMaster(slot, committedAlone: true) }
            checkDroppedVoters(slot, quorum)
        case .standingChanged, .aborted, .catalogueChanged, .submitRefused:
            break
        }
    }

    package mutating func exited(_ reason: ExitReason) {
        let slot = actingSlot
        exits.append((slot, reason))
        if !reason.isClean && slot < scenario.nodes { fail("s\(slot) exited: \(reason)") }
        retire(slot)
        // An impostor that yielded is gone for good (nothing restarts it).
        if slot >= scenario.nodes { slots[slot].exists = false }
        slots[slot].node = nil
    }

    /// A snapshot damaged on the sender before it is sealed (memory, a re-encoding
    /// relay): one peer's port flipped, the checksum left as it was — only the receiver's
    /// check of the content against it can tell.
    mutating func corruptedSnapshot(_ snapshot: Snapshot) -> Snapshot? {
        // Snapshots are few: in a scenario with corruption, a third of them are hit.
        guard !faultsOver, scenario.corruptRate > 0, network.corruption.chance(0.33),
              let i = snapshot.content.indices.first(where: { !snapshot.content[$0].peers.isEmpty }) else { return nil }
        var s = snapshot
        let j = network.corruption.below(s.content[i].peers.count)
        s.content[i].peers[j].endpoint.port ^= UInt16(1) << UInt16(network.corruption.below(16))
        return s
    }
}
