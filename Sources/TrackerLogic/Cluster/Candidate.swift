/// A node running a bully election: it announces itself; any live higher id answers and
/// runs itself; a candidate nobody answers within the timeout claims an epoch above every
/// epoch it has seen, and leads once that epoch is on disk. No peer is served meanwhile.
///
/// Invariant: it leads only an epoch it claimed, named after itself and durable, so no
/// later process with its id can claim the same epoch again.
enum Candidate: NodeRole, Sendable, Equatable {
    /// ELECTION sent; waiting for an ANSWER from a higher id until the deadline.
    /// `knowsMembers`: the node was following a master, so it has heard the cluster's
    /// keepalives and the higher ids it knows are all there are; it claims as soon as
    /// every one of them has missed its keepalives, without waiting for the deadline.
    case awaitingAnswers(deadline: Instant, knowsMembers: Bool)
    /// A higher id answered; waiting for its COORDINATOR until the deadline.
    case awaitingCoordinator(deadline: Instant)
    /// Nobody higher answered; waiting for the new epoch to be on disk before leading.
    case claiming(Epoch, deadline: Instant)

    var deadline: Instant {
        switch self {
        case .awaitingAnswers(let d, _), .awaitingCoordinator(let d), .claiming(_, let d): return d
        }
    }

    /// Announces the election and claims at once when nobody higher can answer.
    static func start(knowsMembers: Bool, in ctx: inout NodeContext, _ now: Instant) -> Candidate {
        var candidate = Candidate.awaitingAnswers(deadline: now + ctx.config.answerTimeout, knowsMembers: knowsMembers)
        ctx.broadcast(.election(lastCommitted: ctx.repo.replica.lastCommitted))
        candidate.claimIfNoHigherLive(in: &ctx, now)
        return candidate
    }

    mutating func epochStored(_ stored: Epoch, in ctx: inout NodeContext) -> RoleChange? {
        guard case .claiming(let claimed, _) = self, claimed == stored, ctx.repo.epoch == claimed else { return nil }
        return .lead
    }

    mutating func receive(_ env: ClusterEnvelope, in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        switch env.message {
        case .keepalive(let k):
            // A higher master makes our election moot; a lower one is what we are replacing.
            if k.role == .master, env.epoch == ctx.repo.epoch, env.from == ctx.repo.epoch.master, env.from > ctx.id { return .follow(env.from) }
        case .election:
            // A lower candidate waits for us; a higher one will win and we wait for it.
            _ = ctx.answerElection(from: env.from, now)
        case .answer:
            self = .awaitingCoordinator(deadline: now + ctx.config.coordinatorTimeout)
        case .coordinator:
            return .acknowledgeCoordinator(env.from)
        case .abort(let ref, let digest):
            ctx.repo.abortReceived(ref, digest: digest)
        case .prepare, .commit:
            // A candidate is replacing this (lower) master: it stays out of its transactions.
            break
        case .coordinatorAck, .vote, .hello, .idAssigned, .catchUpRequest, .catchUp, .snapshot, .snapshotAck,
             .mergeRequest, .mergeOffer, .mergeDone, .leaving, .submit:
            break
        }
        return nil
    }

    mutating func tick(in ctx: inout NodeContext, _ now: Instant) -> RoleChange? {
        claimIfNoHigherLive(in: &ctx, now)
        guard now >= deadline else { return nil }
        switch self {
        case .awaitingAnswers:
            claim(in: &ctx, now)
            return nil
        case .awaitingCoordinator:
            return .runElection
        case .claiming:
            // The disk did not take the epoch: try again (with a higher one).
            ctx.meters.paths.count(.epochClaimLapsed)
            return .runElection
        }
    }

    /// Bully waits for answers only from higher ids; when every higher id this node knows
    /// of has missed its keepalives, nobody can answer and waiting out the answer timeout
    /// only lengthens the failover. (A higher node that is in fact alive still takes
    /// over: it answers the ELECTION or bullies the COORDINATOR.) Only a node that was
    /// following a master knows its members: just after start-up a node has heard no
    /// keepalives (starting nodes send none), and claiming at once there crowned a lower
    /// id for a moment whenever nodes started together.
    mutating func claimIfNoHigherLive(in ctx: inout NodeContext, _ now: Instant) {
        guard case .awaitingAnswers(_, knowsMembers: true) = self,
              !ctx.liveMembers(now).contains(where: { $0.id > ctx.id && ctx.couldLead($0, now) }) else { return }
        claim(in: &ctx, now)
    }

    /// Nobody higher answered: take the next epoch, and lead once it is durable. At the
    /// top of the term space there is no next epoch: the node waits for a master
    /// instead (only a corrupt history gets there; decoders refuse such terms).
    ///
    /// Nor does a node that heard an older run of its own id lately: that run is the one
    /// that stays (the newer yields once it is sure), and it may claim the very epoch we
    /// would. Two processes of one id both leading one epoch split the repository under
    /// one transaction id (the newer, having heard the older just before its election,
    /// claimed the same epoch beside it). It waits as for a
    /// coordinator, then runs again; the older run leads, or falls silent and the
    /// sighting lapses after `downAfter`.
    ///
    /// Nor does a node cut off from the broker while another node reaches it: it could
    /// commit nothing any other node holds; nor one that cannot tell yet (`BrokerLink.swift`);
    /// nor one whose peer sends fail while another's work (`PeerSends.swift`).
    mutating func claim(in ctx: inout NodeContext, _ now: Instant) {
        if ctx.cutFromBroker(now) || ctx.brokerLinkUnproven(now) || ctx.mutedOnPeerChannel(now) {
            ctx.meters.paths.count(.claimLeftToLinkedNode)
            self = .awaitingCoordinator(deadline: now + ctx.config.coordinatorTimeout)
            return
        }
        if ctx.olderRunOfOwnIDHeard(now) {
            ctx.meters.paths.count(.claimLeftToOlderRun)
            self = .awaitingCoordinator(deadline: now + ctx.config.coordinatorTimeout)
            return
        }
        guard let next = ctx.repo.epoch.successor(for: ctx.id) else {
            self = .awaitingCoordinator(deadline: now + ctx.config.coordinatorTimeout)
            return
        }
        ctx.adopt(epoch: next)
        self = .claiming(next, deadline: now + ctx.config.answerTimeout)
    }
}
