/// A host of a node: it performs the node's actions through one executor per thing it
/// drives (the broker, the peer network, the replies, the store, the peer socket's
/// intake, and what it reports or waits on). Both hosts conform: the runtime's
/// `ClusterService` with sockets, STOMP and SQLite, the simulator's `SimHost` with its
/// network, disks and checker.
///
/// `run` is the one map from `NodeAction` to an executor. It switches over every action,
/// so an action added to `NodeAction` is routed here once, and a new executor is a
/// requirement neither host can leave out: no host can forget an action the other
/// performs.
package protocol NodeExecutor {
    /// The broker: to every node's topic (`to` nil), or to one node's.
    mutating func publish(_ env: ClusterEnvelope, to node: NodeID?)
    /// The peer network: a keepalive to every other node there too.
    mutating func beacon(_ env: ClusterEnvelope)
    /// A reply to a peer, from the node's unicast (or shared service) address.
    mutating func reply(_ response: TrackerResponse, to peer: PeerEndpoint)
    /// The answer to an HTTP tracker request, on the connection that sent it.
    mutating func answerHTTP(_ response: TrackerResponse, exchange: HTTPExchangeID)
    /// The store: a write, whose outcome the host reports back as `write.outcome` says.
    mutating func store(_ write: StoreWrite)
    /// The peer socket's intake: read the peers' datagrams or leave them unread
    /// (`NodeAction.readPeers`), or drop what it queued during a pause
    /// (`NodeAction.discardPeerBacklog`).
    mutating func readPeers(_ reads: Bool)
    mutating func discardPeerBacklog()
    /// The broker: listen on this node's own topic.
    mutating func subscribe(_ id: NodeID)
    /// What the host reports or waits on; no effect on the cluster.
    mutating func report(_ report: NodeReport)
    /// The node stopped.
    mutating func exited(_ reason: ExitReason)
}

/// What a node tells its host of itself (`NodeExecutor.report`).
package enum NodeReport: Sendable {
    case standingChanged(StandingChange)
    case committed(CommitQuorum, latency: Milliseconds)
    case aborted(TxRef)
    case catalogueChanged(Catalogue)
    case submitRefused(CatalogueChange, reason: String)
}

extension NodeExecutor {
    /// Performs one action by the executor it belongs to.
    @inlinable package mutating func run(_ action: NodeAction) {
        switch action {
        case .broadcast(let env): publish(env, to: nil)
        case .send(let env): publish(env, to: env.to ?? .unassigned)
        case .beacon(let env): beacon(env)
        case .reply(let response, let peer): reply(response, to: peer)
        case .answerHTTP(let response, let exchange): answerHTTP(response, exchange: exchange)
        case .persist(let rows): store(.commit(rows))
        case .persistSnapshot(let snapshot): store(.snapshot(snapshot))
        case .persistPeerImage(let image): store(.peerImage(image))
        case .persistEpoch(let epoch): store(.epoch(epoch))
        case .wipeStore: store(.wipe)
        case .keepOperatorData(let entries): store(.keep(entries))
        case .dropKeptOperatorData: store(.dropKept)
        case .setAside(let parts): store(.setAside(parts))
        case .probeStore: store(.probe)
        case .discardPeerBacklog: discardPeerBacklog()
        case .readPeers(let reads): readPeers(reads)
        case .exit(let reason): exited(reason)
        case .subscribe(let id): subscribe(id)
        case .standingChanged(let change): report(.standingChanged(change))
        case .committed(let quorum, let latency): report(.committed(quorum, latency: latency))
        case .aborted(let ref): report(.aborted(ref))
        case .catalogueChanged(let catalogue): report(.catalogueChanged(catalogue))
        case .submitRefused(let change, let reason): report(.submitRefused(change, reason: reason))
        }
    }
}

/// What the node asks of its disk, in the order it asked (`NodeExecutor.store`).
public enum StoreWrite: Sendable {
    case commit(CommitRows)
    case snapshot(Snapshot)
    /// The peer rows written afresh from memory, the log dropped (`NodeAction.persistPeerImage`).
    case peerImage(PeerImage)
    case epoch(Epoch)
    case wipe
    /// Replaces the operator data kept through a clean stop (`NodeAction.keepOperatorData`).
    case keep([KeptEntry])
    /// Drops it: the replica holds all of it (`NodeAction.dropKeptOperatorData`).
    case dropKept
    /// Replaces the diverged repository's offer set aside (`NodeAction.setAside`).
    case setAside([MergeOffer])
    case probe

    /// What the host reports back once this write is done — the one rule both hosts
    /// follow. Any failed write is reported (the node votes ERROR and probes until the
    /// store heals); of the successes, only the epoch's (a candidate leads once its epoch
    /// is durable) and a probe's: a committed transaction's write needs no answer.
    public func outcome(ok: Bool, detail: String = "") -> NodeEvent? {
        switch self {
        case .commit, .snapshot, .peerImage, .wipe, .keep, .dropKept, .setAside:
            return ok ? nil : .storeResult(ok: false, detail: detail)
        case .epoch(let epoch): return ok ? .epochStored(epoch) : .storeResult(ok: false, detail: detail)
        case .probe: return .storeResult(ok: ok, detail: detail)
        }
    }
}
