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
/// An echo is taken for that keepalive's when it arrives after the keepalive left (an
/// echo carries no sequence number: one of an earlier keepalive slower than the spacing
/// between the two would pass for it).
/// In a broker outage (nobody reaches it, so nobody else can lead) they go at once. If no
/// such echo comes within `downAfter`, or the office ends first, they are dropped: the
/// heir holds those requests and answers them once it serves, and a request the master
/// took from its own held store is held again when its office ends (`NodeContext.takenHeld`).
///
/// Cost: a refusal leaves one broker round trip later (a few milliseconds), and one that
/// cannot be shown to the others is never sent; its peer gets its answer from the next
/// master, or retries. The echo is asked for again each vote timeout (a lossy link loses
/// echoes too).
///
/// Bounded: at most `capacity` refusals wait; beyond that the oldest is dropped (its
/// request stays with the heir, as above).
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
        /// When the ABORT that decided it left.
        var abortedAt: Instant
        /// When it is dropped if no echo showed that ABORT reaching the broker.
        var giveUpAt: Instant
    }

    static let capacity = 4096
    private(set) var waiting: [Refusal] = []
    /// When to ask for an echo again (an echo is lost like any frame).
    var askAgainAt: Instant?
    /// When the first keepalive after the newest ABORT left, as seen at a check.
    var keepaliveAfter: Instant?

    var isEmpty: Bool { waiting.isEmpty }

    /// When the oldest gives up waiting, or the next echo is asked for.
    var deadline: Instant? {
        guard let first = waiting.first else { return nil }
        return min(first.giveUpAt, askAgainAt ?? first.giveUpAt)
    }

    mutating func add(_ response: TrackerResponse, to peer: PeerEndpoint, abortedAt: Instant, giveUpAt: Instant) {
        if waiting.count >= Self.capacity { waiting.removeFirst(waiting.count - Self.capacity + 1) }
        // A keepalive seen before this ABORT does not cover it.
        if let k = keepaliveAfter, k < abortedAt { keepaliveAfter = nil }
        waiting.append(Refusal(response: response, to: peer, abortedAt: abortedAt, giveUpAt: giveUpAt))
    }

    /// The refusals whose ABORT is known to have reached the broker (an echo after a
    /// keepalive that left after it), or all of them in an outage; those that waited
    /// `downAfter` in vain are dropped. Returns what is due and how many were dropped.
    mutating func take(now: Instant, outage: Bool, lastKeepaliveSent: Instant, echo: Instant?) -> (due: [Refusal], dropped: Int) {
        guard let newest = waiting.last else { return ([], 0) }
        if keepaliveAfter == nil, lastKeepaliveSent > newest.abortedAt { keepaliveAfter = lastKeepaliveSent }
        var due: [Refusal] = [], kept: [Refusal] = [], dropped = 0
        let proven = keepaliveAfter.flatMap { k in echo.map { $0 >= k } } ?? false
        for r in waiting {
            // Every refusal waiting left before the newest's ABORT: one echo covers all.
            if outage || proven {
                due.append(r)
            } else if now >= r.giveUpAt {
                dropped += 1
            } else {
                kept.append(r)
            }
        }
        waiting = kept
        if waiting.isEmpty { askAgainAt = nil; keepaliveAfter = nil }
        return (due, dropped)
    }
}

extension Master {
    /// Refuses `pending` as the rule above says: at once in an outage, else once an echo
    /// shows the ABORT reached the broker.
    mutating func refuse(_ pending: PendingAnnounce, reason: String, in ctx: inout NodeContext, _ now: Instant) {
        let response = ctx.handler.refusal(pending, reason: reason)
        if ctx.brokerOutage(now) {
            ctx.reply(response, to: pending.replyTo)
            return
        }
        if refusals.isEmpty {
            // A keepalive that left earlier in this step went before the ABORT.
            ctx.askForBrokerEcho(since: now + Milliseconds(1), orEvery: nil, now)
            refusals.askAgainAt = now + ctx.config.voteTimeout
        }
        refusals.add(response, to: pending.replyTo, abortedAt: now, giveUpAt: now + ctx.config.downAfter)
    }

    /// Each tick (an echo of ours ticks a serving master at once): sends the refusals now
    /// known to the others, drops those that waited in vain.
    mutating func sendKnownRefusals(in ctx: inout NodeContext, _ now: Instant) {
        guard !refusals.isEmpty else { return }
        let (due, dropped) = refusals.take(now: now, outage: ctx.brokerOutage(now), lastKeepaliveSent: ctx.lastKeepaliveSent,
                                           echo: ctx.brokerEcho)
        for r in due { ctx.reply(r.response, to: r.to) }
        if dropped > 0 { ctx.paths.count(.refusalLeftToHeir) }
        // Still waiting: ask again each vote timeout, as a master awaiting its echo to count
        // silent voters does (`Master.awaitedBrokerEcho`).
        if !refusals.isEmpty, let at = refusals.askAgainAt, now >= at {
            ctx.askForBrokerEcho(since: now + Milliseconds(1), orEvery: nil, now)
            refusals.askAgainAt = now + ctx.config.voteTimeout
        }
    }
}
