/// What a node knows of one other node, from its keepalives and messages.
public struct Member: Hashable, Sendable {
    public var id: NodeID
    public var incarnation: UInt64
    public var role: Role
    public var master: NodeID
    public var lastCommitted: TxRef
    public var inSync: Bool
    /// As the node advertises itself in keepalives.
    public var address: String = ""
    /// The epoch its last message carried (the trackers tab shows it).
    public var epoch: Epoch = .zero
    /// Heard on either channel: the broker or the peer network.
    public var lastHeard: Instant
    /// Heard on the broker: only such a node takes part in transactions (the peer network
    /// carries keepalives only).
    public var lastHeardOnBroker: Instant = .zero
    /// The last transaction the master knows this node holds (master's bookkeeping).
    public var confirmed: TxRef
    /// Set when it stayed silent through a vote; cleared when heard again on the broker.
    public var suspect: Bool = false
    /// The run heard before this one (`Membership.heard`).
    public var previousIncarnation: UInt64?
    /// Whether its keepalives say anything of its broker link (an older node's do not).
    public var brokerEchoReported = false
    /// When, by its last keepalive, the broker last carried one of its own keepalives
    /// back to it (nil: not since it started, or not reported).
    public var brokerEcho: Instant?
    /// Whether, by its last keepalive, its sends on the peer channel fail (nil: it does
    /// not say).
    public var peerSendsFailing: Bool?
}

/// The live-node table (the dashboard's trackers tab). Iteration is by id, so a
/// seed replays identically.
public struct Membership: Sendable {
    public private(set) var members: [NodeID: Member] = [:]
    /// Nodes seen with a new incarnation since the caller last looked (they restarted).
    var restarted: [NodeID] = []

    public init() {}

    /// Records a message; false (and nothing recorded) when it comes from an older run of
    /// its sender than the live one we hear, and not from the run heard just before it.
    ///
    /// Runs draw their incarnation from their start time, so an older run is a process that
    /// is gone — its frames are replays or stragglers and must not stand for the node — or a
    /// twin: a second process given a taken id, which is the newer one and yields. The run
    /// heard before the newer one is therefore still heard (the twin case: the original
    /// must not go unheard while the newcomer yields), and so is any run once the newer one
    /// has been silent for `downAfter`; anything else older is refused.
    @discardableResult
    public mutating func heard(_ env: ClusterEnvelope, now: Instant, onBroker: Bool = true,
                               downAfter: Milliseconds = Milliseconds(Int64.max)) -> Bool {
        guard env.from.isAssigned else { return true }
        var m = members[env.from] ?? Member(id: env.from, incarnation: env.incarnation, role: .slave, master: .unassigned,
                                            lastCommitted: .zero, inSync: false, lastHeard: now, confirmed: .zero)
        if env.incarnation < m.incarnation, env.incarnation != m.previousIncarnation, now - m.lastHeard <= downAfter {
            return false
        }
        if m.incarnation != env.incarnation {
            restarted.append(env.from)
            // A new run of that node: what we knew of the old one is void.
            let previous = m.incarnation
            m = Member(id: env.from, incarnation: env.incarnation, role: .slave, master: .unassigned,
                       lastCommitted: .zero, inSync: false, lastHeard: now, confirmed: .zero)
            m.previousIncarnation = previous
        }
        m.lastHeard = now
        if onBroker {
            m.lastHeardOnBroker = now
            // Silent through a vote: only the broker, where votes travel, clears that.
            m.suspect = false
        }
        m.epoch = env.epoch
        if case .keepalive(let k) = env.message {
            m.role = k.role
            m.master = k.master
            m.lastCommitted = k.lastCommitted
            m.inSync = k.inSync
            m.address = k.address
            switch k.brokerEcho {
            case .unknown: (m.brokerEchoReported, m.brokerEcho) = (false, nil)
            case .never: (m.brokerEchoReported, m.brokerEcho) = (true, nil)
            case .age(let age): (m.brokerEchoReported, m.brokerEcho) = (true, now - Milliseconds(max(age.value, 0)))
            }
            m.peerSendsFailing = k.peerSendsFailing
        }
        members[env.from] = m
        return true
    }

    /// - Parameter onBroker: heard on the broker, not just on the peer network.
    public func isLive(_ id: NodeID, now: Instant, downAfter: Milliseconds, onBroker: Bool = false) -> Bool {
        guard let m = members[id] else { return false }
        return now - (onBroker ? m.lastHeardOnBroker : m.lastHeard) <= downAfter
    }

    /// Live nodes other than the caller, by id.
    /// - Parameter onBroker: heard on the broker, not just on the peer network.
    public func live(now: Instant, downAfter: Milliseconds, onBroker: Bool = false) -> [Member] {
        members.values.filter { now - (onBroker ? $0.lastHeardOnBroker : $0.lastHeard) <= downAfter }.sorted { $0.id < $1.id }
    }

    public mutating func remove(_ id: NodeID) { members[id] = nil }

    /// A new master trusts nothing it heard before about who is in sync.
    public mutating func forgetConfirmations() {
        for id in members.keys.sorted() { members[id]?.confirmed = .zero }
    }

    public mutating func update(_ id: NodeID, _ change: (inout Member) -> Void) {
        guard var m = members[id] else { return }
        change(&m)
        members[id] = m
    }

    /// The id an `--id auto` node gets: one above every id known (members and `taken`),
    /// or, when a (forged) member sits at the top of the range, the lowest free one. Nil
    /// only when no id is free.
    public func nextFreeID(after taken: [NodeID]) -> NodeID? {
        let used = Set(members.keys).union(taken)
        let highest = used.max() ?? .unassigned
        if highest.rawValue < UInt32.max { return NodeID(highest.rawValue + 1) }
        var candidate: UInt32 = 1
        while used.contains(NodeID(candidate)) {
            guard candidate < UInt32.max else { return nil }
            candidate += 1
        }
        return NodeID(candidate)
    }

    public subscript(id: NodeID) -> Member? { members[id] }

    /// Drops nodes not heard from for a long time, so the table does not grow forever.
    public mutating func forget(before: Instant) {
        members = members.filter { $0.value.lastHeard >= before }
    }

    /// Takes `pause` (time this node did not run) off every member's silence, never
    /// placing a last-heard time after `now` (see `TrackerNode.discountPause`).
    public mutating func discount(pause: Milliseconds, now: Instant) {
        members = members.mapValues { m in
            var m = m
            m.lastHeard = min(m.lastHeard + pause, now)
            if m.lastHeardOnBroker != .zero { m.lastHeardOnBroker = min(m.lastHeardOnBroker + pause, now) }
            m.brokerEcho = m.brokerEcho.map { min($0 + pause, now) }
            return m
        }
    }

    /// When the next member would be declared down, for arming a timer.
    public func nextExpiry(after now: Instant, downAfter: Milliseconds) -> Instant? {
        // Asked after every step of every node: one pass, no intermediate arrays.
        var soonest: Instant?
        for member in members.values {
            let expiry = member.lastHeard + downAfter + Milliseconds(1)
            if expiry > now, soonest.map({ expiry < $0 }) ?? true { soonest = expiry }
        }
        return soonest
    }
}
