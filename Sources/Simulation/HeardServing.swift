import TrackerLogic

/// The invariant "every peer request is answered at most once across all masters", in
/// the form a cluster can keep: a master never answers a request whose answer it knew of.
///
/// Two masters that cannot hear each other (live quorum across a partition or a broker
/// outage) each answer what reaches them, by design, and so do two masters that have not
/// yet heard each other's epochs. A copy of a request that reaches a serving master
/// within the network's spread of delays after another master answered it looks exactly
/// like the client's retransmission, and is answered. Everything else is a bug, whatever
/// path led to it:
/// - a request read while not serving (held, or from a socket backlog after a pause) is
///   never answered if the node had heard, before it came to serve, a serving master
///   say something after that master answered it (what it hears later, once the held
///   requests are in its own transaction, is the other side of a live partition);
/// - a request read while serving is never answered if the node had heard that before it
///   read the request, by more than `ClusterConfig.receiveSkew`.
///
/// "Say something" is what the node's rule (`HeldRequests`) may use, so this tests that
/// rule and not a stronger one: for a connect, answered the moment the master read it,
/// a keepalive, PREPARE, COMMIT or ABORT; for an announce, answered when its transaction
/// commits, a COMMIT or ABORT. The simulator sets `receiveSkew` to cover its delays, as
/// an operator sets it for a network; its socket backlogs drain within `backlogDrain`.
struct HeardServing {
    /// A node process: a node id and one run of it (an impostor shares the id).
    struct Process: Hashable {
        var id: NodeID
        var incarnation: UInt64
    }

    struct Heard {
        var sent: Instant
        var heard: Instant
        var decides: Bool
    }

    /// Whether the node's rule takes `env` as word from a master (`HeldRequests.heard(servingMaster:)`):
    /// the held requests it counts as answered are excused from being answered.
    static func isMasterWord(_ env: ClusterEnvelope) -> Bool {
        guard env.from == env.epoch.master else { return false }
        switch env.message {
        case .keepalive(let k): return k.role == .master && k.inSync
        case .prepare, .commit, .abort: return true
        default: return false
        }
    }

    /// What each serving process was heard to say, in the order heard.
    private var frames: [Process: [Heard]] = [:]

    mutating func note(_ env: ClusterEnvelope, sentAt: Instant, heardAt: Instant) {
        // Only what the node's rule takes as a master's word: a master's keepalive that
        // says "behind" (sent in the step it came to serve) shows nothing to the node, so
        // it shows nothing here either.
        guard Self.isMasterWord(env) else { return }
        let decides: Bool
        switch env.message {
        case .keepalive, .prepare: decides = false
        case .commit, .abort: decides = true
        default: return
        }
        frames[Process(id: env.from, incarnation: env.incarnation), default: []]
            .append(Heard(sent: sentAt, heard: heardAt, decides: decides))
    }

    /// When this process first heard `first` say, at or after `answeredAt`, what shows it
    /// answered (nil if it never did).
    func firstHeard(_ first: Process, after answeredAt: Instant, isConnect: Bool) -> Instant? {
        guard let list = frames[first] else { return nil }
        var earliest: Instant?
        // Heard in order, and nothing sent at `answeredAt` is heard before it.
        for f in list.reversed() {
            if f.heard < answeredAt { break }
            if f.sent >= answeredAt && (isConnect || f.decides) { earliest = f.heard }
        }
        return earliest
    }
}
