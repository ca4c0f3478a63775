/// Who can answer peers: the rule that ties the master's office to the channel its
/// replies leave on, as `BrokerLink.swift` ties it to the channel commits travel on.
///
/// A master whose sends on the peer channel fail (a firewall rule that rejects them, a
/// route gone, a link down) answers nobody, while it still holds the office and the
/// others still hear it on the broker: no peer is served until the fault goes. The host
/// reports each failure (`NodeEvent.peerSendFailed`), and each keepalive says whether the
/// sender's own sends fail lately (`Keepalive.peerSendsFailing`), on the broker and on
/// the peer network.
///
/// The rules:
/// - **Muted** (`mutedOnPeerChannel`): our sends failed within `failingFor`, while a live
///   node that reaches the broker says its own do not. A master or recovering master
///   muted leaves the office (`TrackerNode.tick`); a candidate muted claims no epoch
///   (`Candidate.claim`); a slave muted does not run to take over from a lower master.
/// - **Could lead** (`couldLead`): while our sends work, a node that says its own fail
///   cannot win an election, so a candidate does not wait for it.
/// - Only against a node whose sends work: when every node's fail (a multicast route
///   missing on every host), none is muted and the cluster keeps its master: leaving
///   would serve nobody better, and an election meanwhile would serve nobody at all.
///
/// An older node's keepalive says nothing of its sends: it is never a reason to leave.
extension NodeContext {
    /// How long one failed send counts: two keepalive intervals, so that a node whose
    /// keepalives on the peer network fail (one each interval) stays failing.
    var failingFor: Milliseconds { config.keepaliveInterval * 2 }

    /// Our own sends on the peer channel failed lately.
    func peerSendsFailing(_ now: Instant) -> Bool {
        liveness.peerSendFailedAt.map { now - $0 <= failingFor } ?? false
    }

    /// Our sends fail while a live node that reaches the broker says its own work.
    func mutedOnPeerChannel(_ now: Instant) -> Bool {
        peerSendsFailing(now) && liveMembers(now).contains { $0.peerSendsFailing == false && reachesBroker($0, now) }
    }

    /// Whether `m` could answer peers as master, as far as we know: while our sends
    /// work, not a node that says its own fail.
    func answersPeers(_ m: Member, _ now: Instant) -> Bool {
        peerSendsFailing(now) || m.peerSendsFailing != true
    }
}
