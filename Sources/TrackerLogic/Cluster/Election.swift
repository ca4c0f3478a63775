/// Bully election: a candidate announces itself; any live higher id answers and runs
/// itself; a candidate nobody answers within the timeout becomes master with an epoch
/// above every epoch it has seen. No peer is served while this runs.
enum ElectionPhase: Sendable, Equatable {
    /// ELECTION sent; waiting for an ANSWER from a higher id until the deadline.
    /// `knowsMembers`: the node was following a master, so it has heard the cluster's
    /// keepalives and the higher ids it knows are all there are; it claims as soon as
    /// every one of them has missed its keepalives, without waiting for the deadline.
    case awaitingAnswers(deadline: Instant, knowsMembers: Bool)
    /// A higher id answered; waiting for its COORDINATOR until the deadline.
    case awaitingCoordinator(deadline: Instant)
    /// Nobody higher answered; waiting for the new epoch to be on disk before leading.
    case claiming(Epoch, deadline: Instant)

    var claimed: Epoch? { if case .claiming(let e, _) = self { return e } else { return nil } }

    var deadline: Instant {
        switch self {
        case .awaitingAnswers(let d, _), .awaitingCoordinator(let d), .claiming(_, let d): return d
        }
    }
}

extension TrackerNode {
    mutating func startElection(_ now: Instant) {
        guard id.isAssigned else { return }
        var knowsMembers = false
        switch state {
        case .starting, .stopped, .modifying: return
        case .recovering, .master: stepDown(now)
        case .slave(let f): knowsMembers = f.master != nil
        case .candidate: break
        }
        state = .candidate(.awaitingAnswers(deadline: now + config.answerTimeout, knowsMembers: knowsMembers))
        broadcast(.election(lastCommitted: replica.lastCommitted))
        claimIfNoHigherLive(now)
    }

    /// Bully waits for answers only from higher ids; when every higher id this node knows
    /// of has missed its keepalives, nobody can answer and waiting out the answer timeout
    /// only lengthens the failover. (A higher node that is in fact alive still takes
    /// over: it answers the ELECTION or bullies the COORDINATOR.) Only a node that was
    /// following a master knows its members: just after start-up a node has heard no
    /// keepalives (starting nodes send none), and claiming at once there crowned a lower
    /// id for a moment whenever nodes started together.
    mutating func claimIfNoHigherLive(_ now: Instant) {
        guard case .candidate(.awaitingAnswers(_, knowsMembers: true)) = state,
              !liveMembers(now).contains(where: { $0.id > id }) else { return }
        claim(now)
    }

    mutating func electionTick(_ now: Instant) {
        claimIfNoHigherLive(now)
        guard let phase = election, now >= phase.deadline else { return }
        switch phase {
        case .awaitingAnswers: claim(now)
        case .awaitingCoordinator: startElection(now)
        case .claiming:
            // The disk did not take the epoch: try again (with a higher one).
            paths.count(.epochClaimLapsed)
            startElection(now)
        }
    }

    /// Nobody higher answered: take the next epoch, and lead once it is durable. At the
    /// top of the term space there is no next epoch: the node waits for a master
    /// instead (only a corrupt history gets there; decoders refuse such terms).
    mutating func claim(_ now: Instant) {
        guard let next = epoch.successor(for: id) else {
            state = .candidate(.awaitingCoordinator(deadline: now + config.coordinatorTimeout))
            return
        }
        adopt(epoch: next)
        state = .candidate(.claiming(next, deadline: now + config.answerTimeout))
    }

    mutating func epochStored(_ stored: Epoch, _ now: Instant) {
        guard let claimed = election?.claimed, claimed == stored, epoch == claimed else { return }
        becomeMaster(now)
    }

    mutating func electionReceived(from candidate: NodeID, _ now: Instant) {
        guard candidate < id else { return }  // a higher candidate will win; wait for it
        // A node that cannot record an epoch cannot lead: let the lower candidate.
        guard storeHealthy else { return }
        send(.answer, to: candidate)
        switch state {
        case .recovering, .master:
            // Still here: remind everyone who leads.
            broadcast(.coordinator(lastCommitted: replica.lastCommitted))
        case .slave:
            startElection(now)
        case .candidate, .starting, .stopped, .modifying:
            break
        }
    }

    mutating func answerReceived(_ now: Instant) {
        guard case .candidate = state else { return }
        state = .candidate(.awaitingCoordinator(deadline: now + config.coordinatorTimeout))
    }

    mutating func coordinatorReceived(_ env: ClusterEnvelope, _ now: Instant) {
        // The epoch check in `receive` already made this the master of our epoch (and a
        // message from our own id never gets here).
        if master != env.from { follow(env.from, now) }
        send(.coordinatorAck(lastCommitted: replica.lastCommitted, prepared: prepared), to: env.from)
    }

    /// Lead the claimed (and stored) epoch. The master first recovers every transaction
    /// a majority may have committed, then serves.
    mutating func becomeMaster(_ now: Instant) {
        guard epoch.master == id else { return }
        paths.count(.electionWon)
        membership.forgetConfirmations()
        state = .recovering(RecoveryState(deadline: now + config.recoveryTimeout, resendAt: now + Milliseconds(500),
                                          expiryDue: now + expiryPeriod))
        broadcast(.coordinator(lastCommitted: replica.lastCommitted))
        nextKeepalive = now  // tell everyone at once
        recoveryTick(now)
    }

    var expiryPeriod: Milliseconds {
        Milliseconds(max(handler.config.effectivePeerTimeout.value / 10, 1000))
    }
}
