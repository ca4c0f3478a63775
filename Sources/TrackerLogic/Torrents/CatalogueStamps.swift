/// When a catalogue entry last changed: the transaction that changed it, and whether
/// that change removed it (a tombstone).
///
/// Why a transaction and not a time: epochs only grow, across a full restart too (a
/// clean stop keeps the stored epoch), so a change committed after a restart is newer
/// than anything a node kept from before it, whatever the nodes' clocks say. Every replica
/// that applies a transaction stamps its entries alike; a snapshot and the store carry
/// the stamps (the digest does not cover them: they say when, not what).
public struct CatalogueStamp: Hashable, Sendable {
    public var ref: TxRef
    public var removed: Bool
    public init(ref: TxRef, removed: Bool) { self.ref = ref; self.removed = removed }
}

/// The stamps of a catalogue's entries: each registered or removed torrent, each rule or
/// removed rule, each client rule or removed client rule, each user or removed user, and
/// the mode.
///
/// Invariant: a live entry of a cluster's catalogue has a stamp that is not removed;
/// between changes, at most `maxTombstones` removed stamps of each kind are kept, the
/// newest (`pruneTombstones`).
public struct CatalogueStamps: Hashable, Sendable {
    public private(set) var torrents: [InfoHash: CatalogueStamp] = [:]
    public private(set) var rules: [InfoHash: CatalogueStamp] = [:]
    public private(set) var clients: [ClientPrefix: CatalogueStamp] = [:]
    public private(set) var users: [UserName: CatalogueStamp] = [:]
    /// Nil until the mode is first set.
    public internal(set) var mode: TxRef?
    /// How many of each table are tombstones.
    private var removedTorrents = 0, removedRules = 0, removedClients = 0, removedUsers = 0

    public static let maxTombstones = 10_000

    public init() {}

    public init(torrents: [InfoHash: CatalogueStamp], rules: [InfoHash: CatalogueStamp], mode: TxRef?,
                clients: [ClientPrefix: CatalogueStamp] = [:], users: [UserName: CatalogueStamp] = [:]) {
        self.mode = mode
        for (h, s) in torrents { setTorrent(h, s) }
        for (h, s) in rules { setRule(h, s) }
        for (p, s) in clients { setClient(p, s) }
        for (n, s) in users { setUser(n, s) }
    }

    public mutating func setUser(_ name: UserName, _ stamp: CatalogueStamp?) {
        if users[name]?.removed == true { removedUsers -= 1 }
        if stamp?.removed == true { removedUsers += 1 }
        users[name] = stamp
    }

    public mutating func setClient(_ prefix: ClientPrefix, _ stamp: CatalogueStamp?) {
        if clients[prefix]?.removed == true { removedClients -= 1 }
        if stamp?.removed == true { removedClients += 1 }
        clients[prefix] = stamp
    }

    public mutating func setTorrent(_ hash: InfoHash, _ stamp: CatalogueStamp?) {
        if torrents[hash]?.removed == true { removedTorrents -= 1 }
        if stamp?.removed == true { removedTorrents += 1 }
        torrents[hash] = stamp
    }

    public mutating func setRule(_ hash: InfoHash, _ stamp: CatalogueStamp?) {
        if rules[hash]?.removed == true { removedRules -= 1 }
        if stamp?.removed == true { removedRules += 1 }
        rules[hash] = stamp
    }

    /// After each catalogue change, on every replica and in every store alike: beyond
    /// `maxTombstones` tombstones of one kind, the oldest go, by (stamp, hash), down to
    /// nine tenths of it (so this sorts once per thousand removals, not at each).
    public mutating func pruneTombstones() {
        if removedTorrents > Self.maxTombstones { Self.prune(&torrents, &removedTorrents) }
        if removedRules > Self.maxTombstones { Self.prune(&rules, &removedRules) }
        if removedClients > Self.maxTombstones { Self.prune(&clients, &removedClients) }
        if removedUsers > Self.maxTombstones { Self.prune(&users, &removedUsers) }
    }

    /// What a pruned kind keeps of its tombstones.
    public static let tombstonesAfterPruning = maxTombstones - maxTombstones / 10

    private static func prune<Key: Comparable>(_ stamps: inout [Key: CatalogueStamp], _ removedCount: inout Int) {
        let removed = stamps.filter(\.value.removed).sorted { ($0.value.ref, $0.key) < ($1.value.ref, $1.key) }
        for (h, _) in removed.prefix(removed.count - tombstonesAfterPruning) {
            stamps[h] = nil
            removedCount -= 1
        }
    }
}

/// One entry of the operator data a node keeps through a clean stop, with its stamp: what
/// it offers back (`CatalogueChange.restore`) when it starts again.
public enum KeptEntry: Hashable, Sendable {
    case torrent(RegisteredTorrent, TxRef)
    case torrentRemoved(InfoHash, TxRef)
    case rule(InfoHash, AccessRule, TxRef)
    case ruleRemoved(InfoHash, TxRef)
    case mode(AccessMode, TxRef)
    case client(ClientPrefix, AccessRule, TxRef)
    case clientRemoved(ClientPrefix, TxRef)
    case user(User, TxRef)
    case userRemoved(UserName, TxRef)
    /// A registered torrent's swarm had been completed this many times: it stays the
    /// swarm's count at least (counts only grow, so the highest one kept wins).
    case completed(InfoHash, Int)

    public var ref: TxRef {
        switch self {
        case .torrent(_, let r), .torrentRemoved(_, let r), .rule(_, _, let r), .ruleRemoved(_, let r), .mode(_, let r),
             .client(_, _, let r), .clientRemoved(_, let r), .user(_, let r), .userRemoved(_, let r): r
        case .completed: .zero
        }
    }

    /// Completion counts by swarm hash as kept entries, in hash order.
    public static func completions(_ counts: [InfoHash: Int]) -> [KeptEntry] {
        counts.sorted { $0.key < $1.key }.map { .completed($0.key, $0.value) }
    }

    /// The bytes of the torrent file it carries, if any (what bounds a change's size).
    var fileBytes: Int { if case .torrent(let t, _) = self { t.file.count } else { 0 } }
}

extension Catalogue {
    /// Everything a node keeps through a clean stop: every entry and tombstone with its
    /// stamp, and the mode unless it was never set. In a canonical order.
    public var keptEntries: [KeptEntry] {
        var out: [KeptEntry] = []
        for (hash, stamp) in stamps.torrents.sorted(by: { $0.key < $1.key }) {
            if stamp.removed { out.append(.torrentRemoved(hash, stamp.ref)) } else if let t = torrents[hash] { out.append(.torrent(t, stamp.ref)) }
        }
        for (hash, stamp) in stamps.rules.sorted(by: { $0.key < $1.key }) {
            if stamp.removed { out.append(.ruleRemoved(hash, stamp.ref)) } else if let r = access.rules[hash] { out.append(.rule(hash, r, stamp.ref)) }
        }
        if stamps.mode != nil || access.mode != .open { out.append(.mode(access.mode, stamps.mode ?? .zero)) }
        for (prefix, stamp) in stamps.clients.sorted(by: { $0.key < $1.key }) {
            if stamp.removed { out.append(.clientRemoved(prefix, stamp.ref)) } else if let r = access.clients.rules[prefix] { out.append(.client(prefix, r, stamp.ref)) }
        }
        for (name, stamp) in stamps.users.sorted(by: { $0.key < $1.key }) {
            if stamp.removed { out.append(.userRemoved(name, stamp.ref)) } else if let u = access.users[name] { out.append(.user(u, stamp.ref)) }
        }
        return out
    }

    /// The stamp of the entry `entry` would replace (nil: that entry was never stamped).
    func currentStamp(of entry: KeptEntry) -> TxRef? {
        switch entry {
        case .torrent(let t, _): stamps.torrents[t.infoHash]?.ref
        case .torrentRemoved(let hash, _): stamps.torrents[hash]?.ref
        case .rule(let hash, _, _), .ruleRemoved(let hash, _): stamps.rules[hash]?.ref
        case .mode: stamps.mode
        case .client(let p, _, _), .clientRemoved(let p, _): stamps.clients[p]?.ref
        case .user(let u, _): stamps.users[u.name]?.ref
        case .userRemoved(let n, _): stamps.users[n]?.ref
        case .completed: nil
        }
    }

    /// Whether this catalogue already holds `entry` or something newer in its place: what
    /// a restore leaves alone, and what lets a node drop the data it kept. A count is held
    /// once the base is at least as high, or moot once its swarm is no registered torrent's.
    public func dominates(_ entry: KeptEntry) -> Bool {
        if case .completed(let hash, let count) = entry { return !isRegistered(hash) || (completedBase[hash] ?? 0) >= count }
        // A user kept at the stamp the replica holds may still bring higher totals.
        if case .user(let u, let ref) = entry, let held = access.users[u.name], stamps.users[u.name]?.ref == ref {
            return held.totals.merged(with: u.totals) == held.totals
        }
        return currentStamp(of: entry).map { $0 >= entry.ref } ?? false
    }

    /// The changes that offer `entries` back, at most `AccessPolicy.maxHashesPerChange`
    /// entries and `Catalogue.maxRestoreBytes` of torrent files each.
    public static func restoring(_ entries: [KeptEntry]) -> [CatalogueChange] {
        var out: [CatalogueChange] = []
        var batch: [KeptEntry] = [], bytes = 0
        for e in entries {
            if !batch.isEmpty && (batch.count == AccessPolicy.maxHashesPerChange || bytes + e.fileBytes > maxRestoreBytes) {
                out.append(.restore(batch))
                batch = []; bytes = 0
            }
            batch.append(e); bytes += e.fileBytes
        }
        if !batch.isEmpty { out.append(.restore(batch)) }
        return out
    }

    /// One restore change carries at most this much of torrent files (one cluster message).
    public static let maxRestoreBytes = 4 << 20
}
