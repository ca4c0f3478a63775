import TrackerLogic

/// Safety judged at the moment it could break, not at the end of a scenario.
///
/// Why: merges and recovery repair replicas before a scenario ends, so a violation that
/// is later repaired leaves no trace in the end state. Like TigerBeetle's state checker,
/// this looks at every step: (a) a commit had the quorum its mode demands, counted from
/// the OK votes that were actually sent; (b) a replica applies commits only from the
/// master of the epoch it follows; (c) two replicas whose last committed transaction is
/// the same hold the same store (the kept digest covers all the content); (d) an
/// acknowledged announce is in every replica that has committed past it, and an
/// acknowledged stop is not undone there; and at the end, (e) no acknowledged announce is
/// lost or stale and no acknowledged stop undone while a replica that held it survives. Each check
/// answers a violation in words, or nil; the simulator fails the seed with the step.
///
/// It keeps the one ledger of acknowledged announces both (d) and (e) read.
public struct StateChecker: Sendable {
    struct VoteKey: Hashable, Sendable {
        var master: NodeID
        var ref: TxRef
        var digest: UInt64
    }

    /// A peer's last acknowledged announce.
    struct Ack: Sendable {
        var infoHash: InfoHash
        /// The transaction that carried it, when the acknowledging replica's log still
        /// held it (else only its record is known).
        var ref: TxRef?
        /// The time the replicas' record of the peer must reach; for a stop, the time no
        /// record of the peer may be older than (the stop's own, as committed).
        var at: Instant
        /// A stop: nothing of the peer from before it may remain (judged only with `ref`).
        var stopped: Bool
        /// The peer sent a stop since (committed or not, the announce may be gone).
        var superseded = false
        /// The peer sent a stop after it sent the request this acknowledges, whether before
        /// or after the acknowledgement reached the ledger: the stop is its latest request
        /// and wins. Unlike `superseded`, a stop sent before that request does not count.
        /// Any master may commit the stop later, even one that recovered it from a
        /// predecessor's unanswered transaction, so the final master need not hold the peer.
        var stoppedSince = false
        /// The replicas that held it when it was acknowledged: slot → its generation then
        /// (a process that lost its disk since is another generation).
        var holders: [Int: Int]
        /// The request it answered.
        var request: RequestKey?
    }

    /// What tells a peer's announces apart in a record: the counters and the port it sent.
    struct AnnouncedValues: Hashable {
        var uploaded: Int64
        var downloaded: Int64
        var left: Int64
        var port: UInt16

        init(uploaded: Int64, downloaded: Int64, left: Int64, port: UInt16) {
            self.uploaded = uploaded; self.downloaded = downloaded; self.left = left; self.port = port
        }

        init(_ r: PeerRecord) { self.init(uploaded: r.uploaded, downloaded: r.downloaded, left: r.left, port: r.endpoint.port) }
        init(_ a: Announce) { self.init(uploaded: a.uploaded, downloaded: a.downloaded, left: a.left, port: a.endpoint.port) }
    }

    let quorum: QuorumMode
    let clusterSize: Int
    /// An insider holds the key and may forge votes the master rightly counts.
    let votesAreForgeable: Bool
    /// How far apart the nodes' clocks are: a later announce committed by another master
    /// may carry an earlier time than the acknowledged one by up to this much.
    let clockSpread: Milliseconds
    /// OK votes sent, by the master they went to and the transaction they approve.
    var okVotes: [VoteKey: Set<NodeID>] = [:]
    /// The store's digest some replica held at each last committed transaction.
    var stateAt: [TxRef: (digest: UInt64, slot: Int)] = [:]
    var acks: [PeerKey: Ack] = [:]
    /// The client's history, to judge a record's values: the latest request each peer sent
    /// with given values, and when the nodes first and last read each request.
    var requestByValues: [PeerKey: [AnnouncedValues: RequestKey]] = [:]
    var readTimes: [RequestKey: (first: Instant, last: Instant)] = [:]
    /// When each announce was first sent (a retransmission is the same request).
    var sentTimes: [RequestKey: Instant] = [:]
    /// When each peer last sent a stop.
    var stops: [PeerKey: Instant] = [:]

    // The ledgers of what the cluster committed and answered, kept here once; the
    // simulator's checks read them.
    /// Who led each epoch (one master per epoch).
    var epochMasters: [Epoch: NodeID] = [:]
    /// The content of each transaction some replica applied, and which replicas (slot →
    /// generation then) applied it.
    var appliedDigests: [TxRef: UInt64] = [:]
    var appliedBy: [TxRef: [Int: Int]] = [:]
    /// The latest expiry any replica committed: older acknowledged announces may be gone.
    var maxExpireCutoff = Instant(milliseconds: Int64.min)
    /// Registrations some replica committed: info hash → slot → generation then.
    var committedTorrents: [InfoHash: [Int: Int]] = [:]
    /// Access rules some replica committed: info hash → slot → generation then.
    var committedRules: [InfoHash: [Int: Int]] = [:]
    /// Client rules some replica committed: prefix → slot → generation then.
    var committedClientRules: [ClientPrefix: [Int: Int]] = [:]
    /// Requests sent while no node served (first such send), and when each request was
    /// last answered by anyone.
    var unservedSends: [RequestKey: Instant] = [:]
    /// The values each announce sent (`requestByValues` the other way).
    var valuesSent: [RequestKey: AnnouncedValues] = [:]
    var answeredAt: [RequestKey: Instant] = [:]
    /// Which node process last answered each request (errors aside), and when.
    var answeredBy: [RequestKey: Answerer] = [:]
    /// Requests a peer sent more than once (each copy may be answered).
    var retransmitted: Set<RequestKey> = []
    /// When each node process served peers (`to` nil while it still does): a held request
    /// that some master served after is that master's to answer (see `checkHeld`).
    var servingSpans: [(slot: Int, from: Instant, to: Instant?)] = []
    /// Since when two nodes serve at once during a broker outage (see the check).
    var twoServingSince: Instant?

    public init(quorum: QuorumMode, clusterSize: Int, votesAreForgeable: Bool, clockSpread: Milliseconds) {
        self.clockSpread = clockSpread
        self.quorum = quorum
        self.clusterSize = clusterSize
        self.votesAreForgeable = votesAreForgeable
    }

    /// A peer sent a stop: its acknowledged announce may go once that commits.
    public mutating func stopSent(by key: PeerKey, at now: Instant) {
        stops[key] = now
        acks[key]?.superseded = true
        acks[key]?.stoppedSince = true
    }

    /// A master answered an announce: carried in `ref` (nil: beyond the replica's log) and
    /// holding the peer's record at `at`, or a stop. A stop the peer sent shortly before may
    /// still be on its way (datagrams overtake each other) and supersede it.
    public mutating func acknowledged(_ key: PeerKey, infoHash: InfoHash, ref: TxRef?, at: Instant, stopped: Bool = false,
                                      holders: [Int: Int] = [:], request: RequestKey? = nil, now: Instant) {
        let recentStop = stops[key].map { now - $0 < Self.requestLifetime } ?? false
        var ack = Ack(infoHash: infoHash, ref: ref, at: at, stopped: stopped, superseded: recentStop, holders: holders, request: request)
        // An answer may arrive after the peer's next request, a stop, was sent.
        if let sent = request.flatMap({ sentTimes[$0] }), let stop = stops[key], stop > sent { ack.stoppedSince = true }
        acks[key] = ack
    }

    /// A peer sent an announce with these values.
    mutating func announceSent(by key: PeerKey, values: AnnouncedValues, request: RequestKey, at now: Instant) {
        requestByValues[key, default: [:]][values] = request
        valuesSent[request] = values
        if sentTimes[request] == nil { sentTimes[request] = now }
    }

    /// Whether acknowledging `request` now is premature: the announce the peer sent in it
    /// is in none of the acknowledging master's last `recentCommits` transactions
    /// (`recent`, newest last), which hold the one that carried it (its answer is
    /// performed after the step that committed it, and a step commits few). An announce
    /// answered before the transaction carrying it committed fails here, over either
    /// protocol. Values not known (a request beyond this run's memory) are not judged.
    func prematureAck(of request: RequestKey, by key: PeerKey, in infoHash: InfoHash, recent: ArraySlice<Transaction>) -> Bool {
        guard let sent = valuesSent[request] else { return false }
        return !recent.contains { tx in
            tx.updates.contains { u in
                if case .announce(let a) = u { a.infoHash == infoHash && a.key == key && AnnouncedValues(a) == sent } else { false }
            }
        }
    }

    static let recentCommits = 16

    /// The announce that carried `request` of peer `key`: in the newest transaction of
    /// `log` up to `last` (the last commit performed before the reply: a later commit of
    /// the same step came after it) that announced the peer, the first announce with the
    /// values the peer sent (the last one when they are not known). A transaction may carry
    /// two requests of one peer, one applied and the other refused by an operator change
    /// between them: the reply acknowledges the one it answers, not the peer's last.
    func carrying(_ request: RequestKey, of key: PeerKey, in infoHash: InfoHash, log: [Transaction], through last: TxRef?)
        -> (ref: TxRef, index: Int, announce: Announce)? {
        let sent = valuesSent[request]
        for tx in log.reversed() where last.map({ tx.ref <= $0 }) ?? true {
            var found: (index: Int, announce: Announce)?
            for (i, u) in tx.updates.enumerated() {
                guard case .announce(let a) = u, a.infoHash == infoHash, a.key == key else { continue }
                if let sent {
                    if AnnouncedValues(a) == sent { found = (i, a); break }
                } else {
                    found = (i, a)
                }
            }
            if let found { return (tx.ref, found.index, found.announce) }
        }
        return nil
    }

    /// A node read a peer's request (a copy, a retransmission or a duplicate: the last read
    /// is the latest time a node may have stamped it with).
    mutating func read(_ request: RequestKey, at now: Instant) {
        let first = readTimes[request]?.first ?? now
        readTimes[request] = (first, now)
    }

    /// Why `record` holds older values than the acknowledged announce `a`, or nil: they
    /// are the values of another request that every node read before any node read the
    /// acknowledged one (by more than the clocks are apart), so no clock could have
    /// stamped it later. That is what a request stamped when committed rather than when
    /// read does, once held through an election (`Swarm`).
    func olderValues(_ record: PeerRecord, than a: Ack, of key: PeerKey) -> String? {
        guard let acked = a.request, let ackRead = readTimes[acked]?.first,
              let held = requestByValues[key]?[AnnouncedValues(record)], held != acked,
              let heldRead = readTimes[held]?.last, heldRead < ackRead - clockSpread else { return nil }
        return "it holds the values of the peer's transaction \(held.tid), last read at "
            + "\(heldRead.milliseconds - Scenario.start.milliseconds)ms, over transaction \(acked.tid)'s, first read at "
            + "\(ackRead.milliseconds - Scenario.start.milliseconds)ms"
    }

    /// (e) Once faults are over, the serving master holds each peer's last acknowledged
    /// request, as Jepsen's set-full judges a set: every acknowledged announce not expired
    /// (`cutoff`) is present (else lost) with a record at least as recent (else stale), and
    /// no acknowledged stop is undone (resurrected: a record from before the stop is back).
    /// Only while some replica that held it still holds it: one whose slot is still at the
    /// generation it had then (`generations`, by slot). An announce is not judged once the
    /// peer sent a stop after it (`Ack.stoppedSince`): a peer the policy refuses since never
    /// announces again, so its last acknowledgement stays in the ledger after its stop
    /// committed.
    public func lostAcknowledged(master: Replica, expiredBefore cutoff: Instant, generations: [Int]) -> String? {
        for key in acks.keys.sorted() {
            guard let a = acks[key] else { continue }
            let survivors = a.holders.filter { $0.key < generations.count && generations[$0.key] == $0.value }
            guard !survivors.isEmpty else { continue }
            let record = master.store[a.infoHash]?.peer(key)
            let when = "at \(a.at.milliseconds - Scenario.start.milliseconds)ms"
            if a.stopped {
                guard a.ref != nil, let record, let undone = resurrected(record, by: a, expiredBefore: cutoff) else { continue }
                return "acknowledged stop of \(key.ip) \(when) was undone: \(undone) (holders \(survivors.keys.sorted()))"
            }
            guard !a.stoppedSince, a.at >= cutoff else { continue }
            guard let record else { return "acknowledged announce of \(key.ip) \(when) was lost (holders \(survivors.keys.sorted()))" }
            guard record.lastAnnounce >= a.at else {
                return "acknowledged announce of \(key.ip) \(when) is stale: the master holds its record of "
                    + "\(record.lastAnnounce.milliseconds - Scenario.start.milliseconds)ms (holders \(survivors.keys.sorted()))"
            }
            if !a.superseded, let older = olderValues(record, than: a, of: key) {
                return "acknowledged announce of \(key.ip) \(when) is stale: \(older) (holders \(survivors.keys.sorted()))"
            }
        }
        return nil
    }

    /// Why `record` undoes the acknowledged stop `a`, or nil: it is older than the stop by
    /// more than the clocks are apart, and not so old that an expiry would drop it.
    func resurrected(_ record: PeerRecord, by a: Ack, expiredBefore cutoff: Instant) -> String? {
        guard record.lastAnnounce >= cutoff, record.lastAnnounce < a.at - clockSpread else { return nil }
        return "its record of \(record.lastAnnounce.milliseconds - Scenario.start.milliseconds)ms is back"
    }

    /// Longer than any request of a scenario stays in flight (BEP 15 retransmits after 15 s).
    static let requestLifetime = Milliseconds(20_000)

    /// A node sent a message: OK votes are remembered for (a). An OK vouches for one
    /// transaction: a voter (`slot` at `generation`) that applied another one under that
    /// ref would commit the one it applied, so its OK for this one lets a second master of
    /// that epoch commit what no replica holding the first can follow, counted or not. (A
    /// replica that has not applied the first may well approve a stale PREPARE of an
    /// aborted one: the master counts only its own transaction's votes.)
    public mutating func sent(_ env: ClusterEnvelope, slot: Int, generation: Int) -> String? {
        guard case .vote(let txid, let digest, .ok) = env.message, let to = env.to else { return nil }
        let ref = TxRef(epoch: env.epoch, txid: txid)
        okVotes[VoteKey(master: to, ref: ref, digest: digest), default: []].insert(env.from)
        if let applied = appliedDigests[ref], applied != digest, appliedBy[ref]?[slot] == generation {
            return "s\(slot) voted OK for a transaction \(ref) other than the one it applied under that ref"
        }
        return nil
    }

    /// (a) A master committed: the OK votes it counted were sent to it, by voters it asked,
    /// and with its own (only while its store works) reach the quorum of its mode.
    public mutating func committed(_ q: CommitQuorum, by master: NodeID) -> String? {
        let key = VoteKey(master: master, ref: q.ref, digest: q.digest)
        let sent = okVotes.removeValue(forKey: key) ?? []
        guard !votesAreForgeable else { return nil }
        if let phantom = q.okVoters.first(where: { !sent.contains($0) }) {
            return "n\(master.rawValue) committed \(q.ref) counting an OK vote from n\(phantom.rawValue) that was never sent"
        }
        let counted = q.okVoters.filter { q.voters.contains($0) }.count + (q.ownVote ? 1 : 0)
        let demanded = quorum == .strict ? clusterSize / 2 + 1 : (q.voters.count + 1) / 2 + 1
        if counted < demanded {
            return "n\(master.rawValue) committed \(q.ref) with \(counted) OK votes (voters \(q.voters.map(\.rawValue)), "
                + "own \(q.ownVote)); \(quorum.rawValue) quorum demands \(demanded)"
        }
        return nil
    }

    /// (b) Transactions a node just applied came from the master of the epoch it follows:
    /// a slave's from that master's messages of that epoch; a master's own from its
    /// epoch, older ones only as recovery fetched from a node of its epoch.
    public static func applied(_ txs: [Transaction], by node: TrackerNode, during event: NodeEvent, wasSlave: Bool) -> String? {
        guard !txs.isEmpty else { return nil }
        let source: ClusterEnvelope?
        if case .cluster(let env) = event { source = env } else { source = nil }
        let first = txs[0].ref, last = txs[txs.count - 1].ref
        if let newer = txs.first(where: { $0.ref.epoch > node.epoch }) {
            return "n\(node.id.rawValue) in epoch \(node.epoch) applied \(newer.ref) of a later epoch"
        }
        if node.role == .master {
            for tx in txs where tx.ref.epoch == node.epoch && tx.ref.epoch.master != node.id {
                return "n\(node.id.rawValue) leads \(node.epoch) yet applied \(tx.ref) it did not create"
            }
            if txs.contains(where: { $0.ref.epoch != node.epoch }), source?.epoch != node.epoch {
                return "n\(node.id.rawValue) master of \(node.epoch) applied \(first)…\(last) from "
                    + (source.map { "n\($0.from.rawValue) in \($0.epoch)" } ?? "no message")
            }
            return nil
        }
        guard node.role == .slave || wasSlave else {
            return "n\(node.id.rawValue) applied \(first)…\(last) as \(node.role)"
        }
        guard let env = source, env.from == node.epoch.master, env.epoch == node.epoch else {
            return "n\(node.id.rawValue) following \(node.epoch) applied \(first)…\(last) from "
                + (source.map { "n\($0.from.rawValue) in \($0.epoch)" } ?? "no message")
        }
        return nil
    }

    /// (c) and (d), after a replica's last committed transaction changed.
    public mutating func reached(_ replica: Replica, slot: Int, expiredBefore cutoff: Instant) -> String? {
        let last = replica.lastCommitted
        guard last.txid > 0 else { return nil }
        let digest = replica.digest
        if let seen = stateAt[last] {
            if seen.digest != digest {
                return "s\(slot) and s\(seen.slot) both hold \(last) with different stores (digest \(digest) vs \(seen.digest))"
            }
        } else {
            stateAt[last] = (digest, slot)
        }
        // A stop's own `superseded` says it was sent just now: it is judged all the same.
        for (key, ack) in acks where ack.stopped || (!ack.superseded && ack.at >= cutoff) {
            // Only a replica whose history holds that transaction has committed past it.
            guard let ref = ack.ref, ref.txid <= last.txid, replica.history.epoch(of: ref.txid) == ref.epoch else { continue }
            let record = replica.store[ack.infoHash]?.peer(key)
            if ack.stopped {
                guard let record, let undone = resurrected(record, by: ack, expiredBefore: cutoff) else { continue }
                return "s\(slot) holds \(last) but undid the stop of \(key.ip) acknowledged in \(ref) "
                    + "at \(ack.at.milliseconds - Scenario.start.milliseconds)ms: \(undone)"
            }
            guard let record, record.lastAnnounce >= ack.at - clockSpread else {
                let held = record.map { "only its record of \($0.lastAnnounce.milliseconds - Scenario.start.milliseconds)ms" } ?? "no record of it"
                return "s\(slot) holds \(last) but not the announce of \(key.ip) acknowledged in \(ref) "
                    + "at \(ack.at.milliseconds - Scenario.start.milliseconds)ms (\(held))"
            }
            if let older = olderValues(record, than: ack, of: key) {
                return "s\(slot) holds \(last) but a stale record of \(key.ip) acknowledged in \(ref): \(older)"
            }
        }
        return nil
    }

    // MARK: the ledgers

    /// A replica applied `tx` (its slot at `generation`): one transaction id, one content.
    public mutating func applied(_ tx: Transaction, slot: Int, generation: Int, operatorGeneration: Int) -> String? {
        let digest = tx.digest
        if let known = appliedDigests[tx.ref], known != digest { return "two different transactions committed as \(tx.ref)" }
        appliedDigests[tx.ref] = digest
        appliedBy[tx.ref, default: [:]][slot] = generation
        for case .expire(let before) in tx.updates where before > maxExpireCutoff { maxExpireCutoff = before }
        for case .catalogue(.register(let t)) in tx.updates { committedTorrents[t.infoHash, default: [:]][slot] = operatorGeneration }
        for case .catalogue(.setAccessRule(_, let hashes)) in tx.updates {
            for h in hashes { committedRules[h, default: [:]][slot] = operatorGeneration }
        }
        for case .catalogue(.setClientRule(_, let prefixes)) in tx.updates {
            for p in prefixes { committedClientRules[p, default: [:]][slot] = operatorGeneration }
        }
        return nil
    }

    /// A node holds the master's office in `epoch`: the only one that ever does.
    mutating func leads(_ epoch: Epoch, id: NodeID) -> String? {
        if let other = epochMasters[epoch], other != id {
            return "two masters in epoch \(epoch): n\(other.rawValue) and n\(id.rawValue)"
        }
        epochMasters[epoch] = id
        return nil
    }

    mutating func servingStarted(_ slot: Int, at now: Instant) { servingSpans.append((slot, now, nil)) }

    mutating func servingEnded(_ slot: Int, at now: Instant) {
        if let i = servingSpans.lastIndex(where: { $0.slot == slot && $0.to == nil }) { servingSpans[i].to = now }
    }

    /// Whether a master other than `slot` served at some instant after `after` and before
    /// `before`: what reached the nodes meanwhile was that master's to answer, whether or
    /// not `slot` could hear it (across a partition, say).
    func anotherServed(than slot: Int, after: Instant, before: Instant, now: Instant) -> Bool {
        servingSpans.contains { $0.slot != slot && $0.from < before && ($0.to ?? now) > after }
    }

    /// A registration a surviving replica committed is in the final master's catalogue,
    /// unless the operator removed that torrent at some point (`removed`: a union merge
    /// may then legitimately keep or drop it).
    func lostRegistration(catalogue: Catalogue, removed: Set<InfoHash>, generations: [Int]) -> String? {
        for (hash, holders) in committedTorrents.sorted(by: { $0.key < $1.key }) where !removed.contains(hash) {
            let survivors = holders.filter { generations[$0.key] == $0.value }
            guard !survivors.isEmpty else { continue }
            if catalogue.torrents[hash] == nil {
                return "registered torrent \(hash.hex) committed on \(survivors.keys.sorted().map { "s\($0)" }) was lost"
            }
        }
        return nil
    }

    /// The same for access rules: a hash the operator only ever gave `rules[hash]` (never
    /// removed, never the other rule) keeps it while a replica that committed it survives.
    func lostAccessRule(access: AccessPolicy, rules: [InfoHash: AccessRule], generations: [Int]) -> String? {
        Self.lostRule("access rule", held: access.rules, given: rules, committed: committedRules, generations: generations, name: \.hex)
    }

    /// The same for client rules.
    func lostClientRule(clients: ClientFilter, rules: [ClientPrefix: AccessRule], generations: [Int]) -> String? {
        Self.lostRule("client rule", held: clients.rules, given: rules, committed: committedClientRules, generations: generations,
                      name: \.description)
    }

    static func lostRule<Key: Comparable>(_ kind: String, held: [Key: AccessRule], given: [Key: AccessRule], committed: [Key: [Int: Int]],
                                          generations: [Int], name: (Key) -> String) -> String? {
        for (key, rule) in given.sorted(by: { $0.key < $1.key }) {
            let survivors = (committed[key] ?? [:]).filter { generations[$0.key] == $0.value }
            guard !survivors.isEmpty, held[key] != rule else { continue }
            return "\(kind) \(rule) for \(name(key)) committed on \(survivors.keys.sorted().map { "s\($0)" }) was lost"
        }
        return nil
    }


}
