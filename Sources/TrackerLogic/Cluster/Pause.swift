/// Time this node did not run is not silence of the others.
///
/// Why: a process that was stopped (SIGSTOP, a paused VM, a machine swapping) or whose
/// event loop was blocked wakes with every other node's keepalives "missed": the messages
/// it would have heard are still queued, or were dropped with its broker connection.
/// Judged naively, a slave starts an election the moment it wakes and, since it knows
/// its members, claims at once because every higher id looks down: two masters, and
/// requests answered twice.
///
/// A node is woken at `nextWake` at the latest, so running later than that by more than
/// half a keepalive interval means it was paused; the pause is taken off every member's
/// silence, as if the node had been there to hear them. A master paused long enough for
/// the others to have declared it down steps down before it handles anything else (an
/// election follows): the peer datagrams queued in its socket meanwhile were another
/// master's to answer.
///
/// Those queued datagrams are dropped unread by the host (`.discardPeerBacklog`), and so
/// are a paused slave's or candidate's: read later, nothing tells them from fresh ones,
/// and the broker's backlog (the commits that answered them) is read in another order: a
/// master that stepped down on waking and won the next election at once would answer its
/// socket's backlog a second time. Only a master that keeps its office keeps its backlog,
/// and only while nobody else can have answered it. If it learns on waking that it lost
/// the office meanwhile (a higher epoch in its broker backlog), the backlog goes as it
/// steps down: the newer master served it. If it hears any other master's word before
/// that backlog is read (a partition or a broker outage gave each side a master, of a
/// lower epoch as often as a higher one), the backlog goes too, though it stays master:
/// that master may have answered what queued here (`otherMasterHeard`).
///
/// A pause may also fall inside a step's work: after the node decided, before its host
/// sent what it decided. The COMMIT and the replies of a transaction then leave when the
/// process wakes, seconds late, while the heir, which never heard that COMMIT, has
/// answered the same requests as the next master. So a host sends no reply decided more
/// than `pauseThreshold` before it sends (`ClusterConfig.repliesStale`): such a reply is
/// dropped, as the network might have dropped it, and its client retransmits or has its
/// answer already. The late COMMIT is harmless: it names an epoch the others have left.
extension ClusterConfig {
    /// Whether replies decided at `decidedAt` are too old to send at `now`.
    public func repliesStale(decidedAt: Instant, now: Instant) -> Bool {
        now - decidedAt > pauseThreshold
    }
}

extension TrackerNode {
    /// Called first in every step with the time the node expected to run by.
    mutating func discountPause(due: Instant, _ now: Instant) {
        let late = now - due
        guard late > ctx.config.pauseThreshold else { return }
        ctx.liveness.membership.discount(pause: late, now: now)
        // Our own echo too: a pause is no evidence that our broker link broke.
        ctx.liveness.brokerEcho = ctx.liveness.brokerEcho.map { min($0 + late, now) }
        // So is the first sight of a process with our id: moved like its last, the span it
        // was heard for stays what it was (one keepalive before a pause is not an interval).
        if let c = idConflict { idConflict = (c.incarnation, min(c.firstHeard + late, now)) }
        let outOfOffice = late + ctx.config.keepaliveInterval >= ctx.config.downAfter
        if isMaster, !outOfOffice {
            pauseBacklogUntil = now + ctx.config.keepaliveInterval
            return
        }
        ctx.outbox.actions.append(.discardPeerBacklog)
        if isMaster {
            ctx.meters.paths.count(.pausedMasterSteppedDown)
            startElection(now)
            // The datagrams queued in its socket arrive now with nothing to tell their age:
            // whoever served meanwhile answered them (or they are too old) — not held.
            ctx.held.pauseDiscounted(until: now + ctx.config.keepaliveInterval)
        }
    }

    /// Called for every message heard from another node. While a master still owns the
    /// backlog of its pause (`pauseBacklogUntil`), a word from another master (its
    /// keepalive, COORDINATOR, PREPARE, COMMIT or ABORT, of any epoch) shows that someone
    /// else served meanwhile: the backlog is dropped unread (PauseTests).
    mutating func otherMasterHeard(_ env: ClusterEnvelope, _ now: Instant) {
        guard let until = pauseBacklogUntil, now < until, env.from != ctx.id, env.from == env.epoch.master else { return }
        switch env.message {
        case .keepalive(let k) where k.role == .master: break
        case .coordinator, .prepare, .commit, .abort: break
        default: return
        }
        pauseBacklogUntil = nil
        ctx.meters.paths.count(.pausedMasterHeardAnother)
        ctx.outbox.actions.append(.discardPeerBacklog)
    }
}
