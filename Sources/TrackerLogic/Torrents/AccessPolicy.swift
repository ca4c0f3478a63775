/// Which swarms the tracker serves: cluster state, committed like any update, so no two
/// nodes can disagree on it (a per-node flag could, after a failover).
///
/// - `open`: every info hash.
/// - `allow`: registered torrents and hashes with an `allow` rule; other announces get
///   a BEP 15 error.
/// - `deny`: every info hash but those with a `deny` rule.
/// - `private`: the swarms `allow` serves, and only to announces that carry an enabled
///   user's key (`UserDirectory`); scrapes need one too.
///
/// The mode picks which rules count: `deny` rules mean nothing in `allow` mode and the
/// reverse, so switching modes never needs the list rewritten.
public enum AccessMode: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case open = 0, allow = 1, deny = 2, `private` = 3

    public var description: String {
        switch self {
        case .open: "open"
        case .allow: "allow"
        case .deny: "deny"
        case .private: "private"
        }
    }

    public init?(_ text: String) {
        guard let mode = Self.allCases.first(where: { $0.description == text }) else { return nil }
        self = mode
    }
}

/// One bare info hash's entry in the access list.
public enum AccessRule: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case allow = 1, deny = 2

    public var description: String { self == .allow ? "allow" : "deny" }
}

/// One rule of the access list.
public struct AccessEntry: Hashable, Sendable {
    public var infoHash: InfoHash
    public var rule: AccessRule
    public init(infoHash: InfoHash, rule: AccessRule) { self.infoHash = infoHash; self.rule = rule }
}

/// The access mode and the rules of bare info hashes (registered torrents are allowed by
/// being registered, `Catalogue`).
///
/// Invariant: at most `maxRules` rules; a hash has at most one.
public struct AccessPolicy: Hashable, Sendable {
    public private(set) var mode: AccessMode = .open
    public private(set) var rules: [InfoHash: AccessRule] = [:]
    /// Which clients are served (`ClientFilter`): replicated, stamped and kept with the rest.
    public private(set) var clients = ClientFilter()
    /// Who may announce in `private` mode, and who may sign in: replicated, stamped and
    /// kept with the rest.
    public private(set) var users = UserDirectory()

    /// Bounds what a snapshot carries (about 21 bytes a rule: 2 MiB at most).
    public static let maxRules = 100_000
    /// One change names at most this many hashes (one cluster message carries it; the
    /// admin command splits a longer list).
    public static let maxHashesPerChange = 1_000

    public init() {}

    /// As a snapshot or a store carries it; rules beyond `maxRules` are not kept.
    public init(mode: AccessMode, rules: [AccessEntry], clients: [ClientRuleEntry] = [], users: [User] = []) {
        self.mode = mode
        for e in rules.prefix(Self.maxRules) { self.rules[e.infoHash] = e.rule }
        self.clients = ClientFilter(clients)
        self.users = UserDirectory(users)
    }

    /// Whether an announce for `hash` is served; `registered`: a registered torrent's swarm.
    public func admits(_ hash: InfoHash, registered: Bool) -> Bool {
        switch mode {
        case .open: true
        case .allow, .private: registered || rules[hash] == .allow
        case .deny: rules[hash] != .deny
        }
    }

    /// Why a request carrying `key` (nil: none) is refused for want of a user, if it is:
    /// only in `private` mode.
    public func userRefusal(key: TrackerKey?) -> String? {
        mode == .private ? users.refusal(ofKey: key) : nil
    }

    /// The BEP 15 error for an announce this policy refuses.
    public var refusalMessage: String {
        mode == .deny ? Self.deniedMessage : Self.notAllowedMessage
    }

    public static let notAllowedMessage = "torrent not registered with this tracker"
    public static let deniedMessage = "torrent is denied by this tracker"

    mutating func set(_ mode: AccessMode) { self.mode = mode }

    mutating func set(_ rule: AccessRule?, forClients prefixes: [ClientPrefix]) { clients.set(rule, for: prefixes) }

    mutating func put(_ user: User) { users.put(user) }

    mutating func count(_ a: Announce, previous: PeerRecord?, key: TrackerKey) -> (before: User, after: User)? {
        users.count(a, previous: previous, key: key)
    }

    mutating func removeUser(_ name: UserName) { users.remove(name) }

    mutating func set(_ rule: AccessRule?, for hashes: [InfoHash]) {
        for hash in hashes {
            if let rule {
                guard rules[hash] != nil || rules.count < Self.maxRules else { continue }
                rules[hash] = rule
            } else {
                rules[hash] = nil
            }
        }
    }

    /// The changes that give the hashes of `entries` we hold no rule for theirs, at most
    /// `maxHashesPerChange` hashes each: what a merge brings back from a diverged replica.
    public func missing(_ entries: [AccessEntry]) -> [CatalogueChange] {
        AccessRule.allCases.flatMap { rule in
            Self.perChange(entries.filter { $0.rule == rule && rules[$0.infoHash] == nil }.map(\.infoHash)).map { .setAccessRule(rule, $0) }
        }
    }

    /// `items` in lists of at most `maxHashesPerChange`, in order: what one change (of
    /// rules or client rules) may name.
    public static func perChange<T>(_ items: [T]) -> [[T]] {
        stride(from: 0, to: items.count, by: maxHashesPerChange).map { Array(items[$0..<min($0 + maxHashesPerChange, items.count)]) }
    }


    /// In a canonical order: what snapshots and stores carry.
    public var sortedRules: [AccessEntry] {
        rules.sorted { $0.key < $1.key }.map { AccessEntry(infoHash: $0.key, rule: $0.value) }
    }
}
