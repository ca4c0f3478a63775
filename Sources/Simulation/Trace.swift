import NIOCore
import TrackerLogic

extension Simulator {
    mutating func note(_ slot: Int, _ text: @autoclosure () -> String) {
        if tracing { trace.append("\(now.milliseconds - Scenario.start.milliseconds)ms \(slot >= 0 ? "s\(slot)" : "--") \(text())") }
    }

    func describe(_ action: NodeAction) -> String {
        switch action {
        case .broadcast(let e): return "broadcast \(describe(e.message))"
        case .send(let e): return "send \(describe(e.message)) to n\(e.to?.rawValue ?? 0)"
        case .beacon(let e): return "beacon \(describe(e.message))"
        case .reply(let r, let to):
            switch r {
            case .connect: return "reply connect to \(to)"
            case .announce(let a): return "reply announce(\(a.seeders)s/\(a.leechers)l, \(a.peers.count) peers) to \(to)"
            case .scrape: return "reply scrape to \(to)"
            case .error(let e): return "reply error '\(e.message)' to \(to)"
            }
        case .answerHTTP(let r, let exchange): return "answer \(exchange): \(r)"
        case .persist(let rows): return "persist \(rows.lastCommitted)"
        case .persistSnapshot(let s): return "persist snapshot \(s.lastCommitted)"
        case .persistPeerImage(let image): return "persist peer image \(image.lastCommitted) (\(image.store.peerCount) peers)"
        case .persistEpoch(let e): return "persist epoch \(e)"
        case .wipeStore: return "wipe store"
        case .keepOperatorData(let entries): return "keep \(entries.count) operator entries"
        case .dropKeptOperatorData: return "drop kept operator entries"
        case .setAside(let parts): return parts.isEmpty ? "drop the set-aside offer" : "set aside an offer of \(parts.reduce(0) { $0 + $1.swarms.count }) swarms"
        case .probeStore: return "probe store"
        case .discardPeerBacklog: return "discard peer backlog"
        case .readPeers(let reads): return reads ? "read peer datagrams" : "leave peer datagrams to the heir"
        case .exit(let r): return "exit (\(r))"
        case .subscribe(let id): return "subscribe n\(id.rawValue)"
        case .standingChanged(let c): return "status \(c.current.role) \(c.current.epoch)\(c.current.serving ? " serving" : "")"
        case .committed(let q, let latency): return "committed \(q.ref) in \(latency.value) ms"
        case .aborted(let ref): return "aborted \(ref)"
        case .catalogueChanged(let c): return "catalogue changed (\(c.torrents.count) torrents)"
        case .submitRefused(_, let reason): return "submit refused: \(reason)"
        }
    }

    func describe(_ m: ClusterMessage) -> String {
        switch m {
        case .keepalive(let k): return "KEEPALIVE(\(k.role), last \(k.lastCommitted)\(k.inSync ? "" : ", behind"))"
        case .prepare(let tx, let prev, _): return "PREPARE(\(tx.ref), \(tx.updates.count) updates, after \(prev))"
        case .vote(let txid, _, let verdict): return "VOTE(#\(txid) \(verdict))"
        case .commit(let ref, _): return "COMMIT(\(ref))"
        case .abort(let ref, _): return "ABORT(\(ref))"
        case .coordinatorAck(let last, let p): return "COORDINATOR-ACK(last \(last)\(p.map { ", prepared \($0.ref)" } ?? ""))"
        case .catchUp(let after, let txs): return "CATCHUP(\(txs.count) txs after \(after))"
        case .snapshot(let s): return "SNAPSHOT(\(s.lastCommitted), \(s.content.count) swarms)"
        case .hello(let h): return "HELLO(last \(h.lastCommitted))"
        default: return m.name
        }
    }
}
