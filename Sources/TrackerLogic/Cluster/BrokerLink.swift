/// Who reaches the broker: the one rule that ties leadership to the channel commits
/// travel on.
///
/// Nodes hear each other on two channels, the broker and the peer network, and a node
/// heard on either is alive (a dead broker must not look like dead nodes). But PREPAREs,
/// votes and COMMITs travel on the broker alone. A node whose own broker link is broken
/// while the peer network still carries its keepalives looked like a broker outage to
/// itself: it led, or kept leading, and committed alone what no other node holds.
///
/// How a node knows its own link works: the broker carries every keepalive it publishes
/// back to it (the runtime also publishes each keepalive to a topic only its process
/// reads, since the cluster topics are subscribed without its own messages), so an echo
/// within `downAfter` proves both directions of its link. Each keepalive says how long ago the
/// last echo came (`Keepalive.brokerEcho`), on the broker and on the peer network, so
/// every node learns who else reaches the broker even when it cannot.
///
/// The rules, each applied where the role acts on it:
/// - **Cut off** (`cutFromBroker`): no echo for `downAfter`, while a live node reached
///   the broker more than `downAfter` after our last echo and still does. A node cut off
///   claims no epoch (`Candidate.claim`); nor does one whose link is not proven yet (no
///   echo since its first keepalive, which left under `downAfter` ago). A master or
///   recovering master cut off leaves the office (`TrackerNode.tick`), and a slave cut
///   off does not run to take over from a lower master (`Slave.tick`). The margin of `downAfter` tells a broken link
///   from a broker outage: when the broker dies every node's echoes stop within one
///   keepalive interval of each other, so nobody is cut off and the outage rules hold.
/// - **Could lead** (`couldLead`): while this node reaches the broker, a node that does
///   not (by its own report) cannot win an election, so a candidate does not wait for
///   it, and the heir is the highest node that could lead.
/// - **Live quorum** (`Master.tryPrepare`, `Master.voteTimedOut`): a node heard alive on
///   the peer network that reaches the broker, but not heard on it here, counts in the
///   quorum as a voter that says no. And a silent voter counts as down only once the
///   broker has carried one of the master's own keepalives back after the last vote
///   window closed, or nobody reaches the broker (a true outage, where `live` commits
///   alone): until then the master cannot tell a dead voter from its own cut link, and an
///   echo from before the votes were due shows only that the link worked then.
///
/// An older node's keepalive says nothing of its link: such a node counts as reaching
/// the broker (never a reason to commit alone), and only hearing it on the broker here is
/// evidence that someone does (a reason to leave office).
extension NodeContext {
    /// The broker carried one of our own keepalives back within `downAfter`.
    func brokerLinked(_ now: Instant) -> Bool {
        liveness.brokerEcho.map { now - $0 <= config.downAfter } ?? false
    }

    /// What the next keepalive says of our link.
    func brokerEchoReport(_ now: Instant) -> BrokerEchoReport {
        guard let echo = liveness.brokerEcho else { return .never }
        return .age(min(max(now - echo, Milliseconds(0)), BrokerEchoReport.maxAge))
    }

    /// The latest instant `m` is known to have reached the broker: heard on it here, or
    /// its own last echo as it reported it.
    func brokerEvidence(of m: Member) -> Instant? {
        let heard = m.lastHeardOnBroker == .zero ? nil : m.lastHeardOnBroker
        switch (heard, m.brokerEcho) {
        case let (h?, e?): return max(h, e)
        case let (h, e): return h ?? e
        }
    }

    /// Whether `m` reaches the broker as far as this node knows; an older node that does
    /// not say is taken to.
    ///
    /// Its own report is a keepalive interval late by construction: a keepalive carries
    /// the echo of the one before it, and the next report leaves an interval later. So a
    /// reported echo counts for `downAfter` and an interval, one heard here for `downAfter`.
    /// With `downAfter` alone, a node that reaches the broker dropped out of this view for
    /// a moment each interval its report took longer than its echo, and a master cut off
    /// took that moment for a broker outage and committed alone.
    func reachesBroker(_ m: Member, _ now: Instant) -> Bool {
        if !m.brokerEchoReported && m.lastHeardOnBroker == .zero { return true }
        if m.lastHeardOnBroker != .zero && now - m.lastHeardOnBroker <= config.downAfter { return true }
        if let echo = m.brokerEcho { return now - echo <= config.downAfter + config.keepaliveInterval }
        return !m.brokerEchoReported
    }

    /// Our own broker link is broken while another node's works: a live node reached
    /// the broker lately, and more than `downAfter` after we last did.
    func cutFromBroker(_ now: Instant) -> Bool {
        guard !brokerLinked(now) else { return false }
        let downAfter = config.downAfter
        return liveMembers(now).contains { m in
            guard let theirs = brokerEvidence(of: m), now - theirs <= downAfter else { return false }
            return liveness.brokerEcho.map { theirs - $0 > downAfter } ?? true
        }
    }

    /// No echo yet, and too soon to say there will be none: the node's first keepalive
    /// left less than `downAfter` ago. Every node's first keepalive says "never" (its echo
    /// comes after it), so until then nobody can tell a cut link from a cluster starting.
    func brokerLinkUnproven(_ now: Instant) -> Bool {
        liveness.brokerEcho == nil && (liveness.firstKeepaliveSent.map { now - $0 <= config.downAfter } ?? true)
    }

    /// Whether `m` could win an election: while we reach the broker, only a node that
    /// does too (the other one's claim waits for us). While we do not, anyone could.
    /// Nor a node muted on the peer channel while we are not (`PeerSends.swift`).
    func couldLead(_ m: Member, _ now: Instant) -> Bool {
        (!brokerLinked(now) || reachesBroker(m, now)) && answersPeers(m, now)
    }

    /// Live nodes that reach the broker but that this node does not hear on it: votes
    /// that cannot reach us, which a live quorum counts as no.
    ///
    /// Also a live node that went silent through a vote (`suspect`) while it still reaches
    /// the broker: a voter whose votes stopped reaching us is dead or cut from us (the
    /// link between two brokers, say), and only the failure detector tells which, once it
    /// has not heard it for `downAfter` on either channel. Until then it counts as a no.
    /// Without this a live master counted such a voter down at its first silent vote and
    /// committed alone for the `downAfter` it took to stop hearing it on the broker, while
    /// it and the rest of a majority were connected through their own broker
    /// (`broker_pair.py`: 147 announces acknowledged by node 3 alone).
    func unreachableOnBroker(_ now: Instant) -> Int {
        liveMembers(now).filter { m in
            guard m.role != .starting, reachesBroker(m, now) else { return false }
            return now - m.lastHeardOnBroker > config.downAfter || m.suspect
        }.count
    }

    /// Whether nobody reaches the broker, as far as this node knows: a true outage.
    func brokerOutage(_ now: Instant) -> Bool {
        !brokerLinked(now) && !liveMembers(now).contains { reachesBroker($0, now) }
    }

    /// Whether the broker carried back a keepalive that left after our keepalive number
    /// `sent` (`keepalivesSent` when we sent something): what we sent then got through,
    /// and the broker's way back to us worked after it. The echo is known by the number it
    /// carries, not by when it arrives: an echo of an earlier keepalive, slower than the
    /// spacing between the two, arrives after the later one left too.
    func brokerEchoed(after sent: UInt64) -> Bool {
        liveness.echoedKeepalive > sent
    }

    /// Sends the next keepalive now, so that its echo comes one broker round trip later:
    /// unless one left after our keepalive number `sent` (and, with `every`, less than
    /// that long ago).
    mutating func askForBrokerEcho(after sent: UInt64, orEvery every: Milliseconds?, _ now: Instant) {
        let sentSince = liveness.keepalivesSent > sent
        guard !sentSince || every.map({ now - liveness.lastKeepaliveSent >= $0 }) == true else { return }
        liveness.nextKeepalive = min(liveness.nextKeepalive, now)
    }
}
