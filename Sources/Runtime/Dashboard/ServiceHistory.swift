import TrackerLogic

/// What the dashboard draws: one sample a second for the last five minutes (announces,
/// requests, commit latency) and the last events of the node's life (elections, master
/// changes, start, stop, provoked failures). Kept by the host, so it outlives a Stop.
public struct ServiceHistory: Sendable {
    public struct Sample: Codable, Sendable, Equatable {
        /// Wall-clock milliseconds at the end of the second.
        var at: Int64
        var announces: Int
        var requests: Int
        var errors: Int
        var commits: Int
        /// Mean and worst PREPARE→COMMIT of the second; nil when nothing committed.
        var commitMeanMs: Double?
        var commitMaxMs: Int64?
    }

    public struct Event: Codable, Sendable, Equatable {
        var at: Int64
        /// `master` (a new master, this node or another), `election`, `role`, `service`.
        var kind: String
        var text: String
        var epoch: String
    }

    public struct Snapshot: Codable, Sendable {
        var samples: [Sample]
        var events: [Event]
    }

    static let sampleLimit = 300
    static let eventLimit = 200

    private(set) var samples: [Sample] = []
    private(set) var events: [Event] = []
    /// Cumulative counters at the previous sample, to turn totals into rates.
    private var last: (announces: Int, requests: Int, errors: Int, commits: Int)?
    /// The last master seen, so a change of master is an event of its own.
    private var lastMaster: UInt32?

    public init() {}

    /// Takes one sample from cumulative counters (which restart from zero when the
    /// service does; a counter that went down counts from zero).
    mutating func sample(at: Instant, status: NodeStatus, latency: LatencyWindow) {
        let now = (announces: status.announces, requests: status.datagrams, errors: status.errorReplies, commits: status.commits)
        let before = last ?? now
        func delta(_ a: Int, _ b: Int) -> Int { a >= b ? a - b : a }
        append(Sample(at: at.milliseconds, announces: delta(now.announces, before.announces),
                      requests: delta(now.requests, before.requests), errors: delta(now.errors, before.errors),
                      commits: delta(now.commits, before.commits),
                      commitMeanMs: latency.count > 0 ? Double(latency.totalMs) / Double(latency.count) : nil,
                      commitMaxMs: latency.count > 0 ? latency.maxMs : nil))
        last = now
    }

    mutating func resetCounters() { last = nil }

    mutating func record(_ change: StandingChange, at: Instant) {
        let (now, before) = (change.current, change.previous)
        let epoch = now.epoch.description
        if now.role == .candidate && before.role != .candidate {
            note(at, kind: "election", text: "election started", epoch: epoch)
        }
        let master = now.master?.rawValue
        if let master, master != lastMaster, now.role == .master || now.role == .slave {
            note(at, kind: "master", text: now.role == .master ? "this node is master" : "master is n\(master)", epoch: epoch)
            lastMaster = master
        } else if now.role != before.role {
            note(at, kind: "role", text: "\(before.role.jsonName) → \(now.role.jsonName)", epoch: epoch)
        }
    }

    mutating func note(_ at: Instant, kind: String, text: String, epoch: String = "") {
        events.append(Event(at: at.milliseconds, kind: kind, text: text, epoch: epoch))
        if events.count > Self.eventLimit { events.removeFirst(events.count - Self.eventLimit) }
        if kind == "service" { lastMaster = nil }
    }

    private mutating func append(_ s: Sample) {
        samples.append(s)
        if samples.count > Self.sampleLimit { samples.removeFirst(samples.count - Self.sampleLimit) }
    }

    var snapshot: Snapshot { Snapshot(samples: samples, events: events) }
}
