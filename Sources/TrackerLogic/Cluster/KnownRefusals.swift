/// A master refuses a request only once the others can know it did.
///
/// Why: a refusal (a BEP 15 error after an aborted transaction) is an answer. The next
/// master answers the requests it held that nobody answered, and it judges an announce
/// answered only by a COMMIT or ABORT it heard after the request (`HeldRequests`). A
/// master whose ABORT did not reach the broker (its own link cut in the sending
/// direction) refused announces that its successor then answered again: the nemesis saw
/// 546 requests answered with an error by node 3 and with OK by node 2 three seconds
/// later (`strict`, node 3's broker link cut one way).
///
/// The rule: the refusals of an aborted transaction wait until the broker carries back one
/// of our own keepalives sent after the ABORT (the ABORT and the keepalive travel in order
/// on one connection, so the echo proves the ABORT reached the broker), then go at once.
/// The echo is known by the number its keepalive carries (`Keepalive.sequence`): told by
/// its arrival time, the late echo of a keepalive from before the ABORT (a slow link, or a
/// broker's backlog) passed for the echo of one sent after it, which a cut that came
/// between the two never let through.
/// In a broker outage (nobody reaches it, so nobody else can lead) they go at once.
/// Otherwise they wait as long as the office lasts: a master that stays in office is not
/// cut off (`BrokerLink.swift`), so its echo comes, however slow or lossy its link; one
/// that is cut off leaves the office, and its refusals are never sent: the heir holds
/// those requests and answers them once it serves, and a request the master took from its
/// own held store is held again (`HeldRequests.taken`). Dropped after `downAfter`
/// instead, the refusal of a taken held request left it waiting for ever while its master
/// went on serving.
///
/// Cost: a refusal leaves one broker round trip later (a few milliseconds), and one that
/// cannot be shown to the others is never sent; its peer gets its answer from the next
/// master, or retries. The echo is asked for again each vote timeout (a lossy link loses
/// echoes too).
///
/// Bounded: at most `capacity` refusals wait; beyond that the oldest is never sent (its
/// request answered with nothing, as a dropped request is; its peer retransmits).
/// The BEP 15 error messages of an aborted transaction's announces.
public enum AbortRefusal {
    public static let noQuorum = "tracker cluster has no quorum; retry"
    public static let storeFailed = "tracker cluster could not store the announce; retry"

    /// Whether `message` refuses an announce because its transaction aborted.
    public static func refuses(_ message: String) -> Bool { message == noQuorum || message == storeFailed }
}

struct RefusalsAwaitingEcho: Sendable {
    struct Refusal: Sendable {
        var response: TrackerResponse
        var to: PeerEndpoint
        /// How many keepalives had left when its ABORT did: the echo of a later one shows
        /// the ABORT reached the broker.
        var abortedAfter: UInt64
    }

    static let capacity = 4096
    private(set) var waiting: [Refusal] = []
    /// When to ask for an echo again (an echo is lost like any frame).
    var askAgainAt: Instant?

    var isEmpty: Bool { waiting.isEmpty }
    var count: Int { waiting.count }

    /// When the next echo is asked for.
    var deadline: Instant? { waiting.isEmpty ? nil : askAgainAt }

    /// Adds one; returns the oldest it pushed out beyond `capacity`.
    mutating func add(_ response: TrackerResponse, to peer: PeerEndpoint, abortedAfter: UInt64) -> [Refusal] {
        var pushedOut: [Refusal] = []
        if waiting.count >= Self.capacity {
            let excess = waiting.count - Self.capacity + 1
            pushedOut = Array(waiting.prefix(excess))
            waiting.removeFirst(excess)
        }
        waiting.append(Refusal(response: response, to: peer, abortedAfter: abortedAfter))
        return pushedOut
    }

    /// The refusals whose ABORT is known to have reached the broker (the echo of keepalive
    /// number `echoed` left after it), or all of them in an outage.
    mutating func take(outage: Bool, echoed: UInt64) -> [Refusal] {
        var due: [Refusal] = [], kept: [Refusal] = []
        for r in waiting {
            if outage || echoed > r.abortedAfter { due.append(r) } else { kept.append(r) }
        }
        waiting = kept
        if waiting.isEmpty { askAgainAt = nil }
        return due
    }
}

extension Master {
    /// Refuses `pending` as the rule above says: at once in an outage, else once an echo
    /// shows the ABORT reached the broker.
    mutating func refuse(_ pending: PendingAnnounce, reason: String, in ctx: inout NodeContext, _ now: Instant) {
        let response = ctx.handler.refusal(pending, reason: reason)
        // An HTTP exchange is held by no other node: nobody else could answer it.
        if pending.exchange != nil || ctx.brokerOutage(now) {
            ctx.answer(pending, with: response)
            return
        }
        // Every keepalive sent so far left before the ABORT.
        let sent = ctx.liveness.keepalivesSent
        if refusals.isEmpty {
            ctx.askForBrokerEcho(after: sent, orEvery: nil, now)
            refusals.askAgainAt = now + ctx.config.voteTimeout
        }
        let pushedOut = refusals.add(response, to: pending.replyTo, abortedAfter: sent)
        if !pushedOut.isEmpty {
            // Answered with nothing: a held request among them waits no more.
            ctx.meters.paths.count(.refusalLeftToHeir)
            for r in pushedOut { ctx.held.settle(r.response.transactionID, from: r.to) }
        }
    }

    /// Each tick (an echo of ours ticks a serving master at once): sends the refusals now
    /// known to the others.
    mutating func sendKnownRefusals(in ctx: inout NodeContext, _ now: Instant) {
        guard !refusals.isEmpty else { return }
        for r in refusals.take(outage: ctx.brokerOutage(now), echoed: ctx.liveness.echoedKeepalive) { ctx.reply(r.response, to: r.to) }
        // Still waiting: ask again each vote timeout, as a master awaiting its echo to count
        // silent voters does (`Master.awaitedBrokerEcho`).
        if !refusals.isEmpty, let at = refusals.askAgainAt, now >= at {
            ctx.askForBrokerEcho(after: ctx.liveness.keepalivesSent, orEvery: nil, now)
            refusals.askAgainAt = now + ctx.config.voteTimeout
        }
    }
}
