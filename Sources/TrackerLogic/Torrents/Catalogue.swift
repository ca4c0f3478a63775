/// A .torrent file the operator registered: replicated through the two-phase commit like
/// any announce, so every node names the swarm, serves the file back and enforces the
/// access list. Only the file travels and is stored; everything else is derived from it
/// again wherever it arrives, so a replica can never hold metadata that disagrees with
/// its file.
public struct RegisteredTorrent: Hashable, Sendable {
    public let file: [UInt8]
    public let metadata: TorrentMetadata
    /// When the master accepted it.
    public let registeredAt: Instant

    public init(file: [UInt8], registeredAt: Instant) throws(TorrentError) {
        self.file = file
        self.metadata = try TorrentMetadata.parse(file)
        self.registeredAt = registeredAt
    }

    public var infoHash: InfoHash { metadata.infoHash }
}

/// The operator's changes to the catalogue: registered torrents and the access policy.
public enum CatalogueChange: Hashable, Sendable {
    case register(RegisteredTorrent)
    /// By the torrent's info hash (its v1 hash, else its truncated v2 hash).
    case unregister(InfoHash)
    case setAccessMode(AccessMode)
    /// Gives each hash this rule (replacing any other it had).
    case setAccessRule(AccessRule, [InfoHash])
    /// Removes each hash's rule.
    case removeAccessRules([InfoHash])
    /// Gives each client prefix this rule (`ClientFilter`).
    case setClientRule(AccessRule, [ClientPrefix])
    /// Removes each client prefix's rule.
    case removeClientRules([ClientPrefix])
    /// A new user (`UserDirectory`).
    case addUser(User)
    /// One field of a user that exists.
    case editUser(UserName, UserEdit)
    case removeUser(UserName)
    /// Data a node kept through a clean stop, offered back: each entry applies only if
    /// it is newer than what stands in its place (`Catalogue.dominates`), with its own
    /// stamp, so the newest change to each entry wins whatever order the offers come in.
    case restore([KeptEntry])
}

/// The catalogue entries a change may touch, in the change's order (a hash may repeat):
/// what the digest recounts and what a store rewrites.
struct TouchedEntries {
    var torrents: [InfoHash] = [], rules: [InfoHash] = [], completedBases: [InfoHash] = []
    var clients: [ClientPrefix] = []
    var users: [UserName] = []
    var mode = false
}

extension CatalogueChange {
    var touched: TouchedEntries {
        var t = TouchedEntries()
        switch self {
        case .register(let torrent): t.torrents = [torrent.infoHash]
        case .unregister(let hash): t.torrents = [hash]
        case .setAccessMode: t.mode = true
        case .setAccessRule(_, let hashes), .removeAccessRules(let hashes): t.rules = hashes
        case .setClientRule(_, let prefixes), .removeClientRules(let prefixes): t.clients = prefixes
        case .addUser(let u): t.users = [u.name]
        case .editUser(let n, _), .removeUser(let n): t.users = [n]
        case .restore(let entries):
            for e in entries {
                switch e {
                case .torrent(let torrent, _): t.torrents.append(torrent.infoHash)
                case .torrentRemoved(let h, _): t.torrents.append(h)
                case .rule(let h, _, _), .ruleRemoved(let h, _): t.rules.append(h)
                case .mode: t.mode = true
                case .completed(let h, _): t.completedBases.append(h)
                case .client(let p, _, _), .clientRemoved(let p, _): t.clients.append(p)
                case .user(let u, _): t.users.append(u.name)
                case .userRemoved(let n, _): t.users.append(n)
                }
            }
        }
        return t
    }

    /// Why `catalogue` cannot take this change, if it cannot.
    public func refusal(in catalogue: Catalogue) -> String? {
        switch self {
        case .register(let t): catalogue.refusal(t)
        case .unregister(let hash): catalogue.torrents[hash] == nil ? "\(hash.hex) is not registered" : nil
        case .setAccessMode: nil
        case .setAccessRule(_, let hashes):
            Self.listRefusal(hashes) ?? {
                let added = Set(hashes).filter { catalogue.access.rules[$0] == nil }.count
                return catalogue.access.rules.count + added > AccessPolicy.maxRules
                    ? "the access list holds its maximum of \(AccessPolicy.maxRules) info hashes" : nil
            }()
        case .removeAccessRules(let hashes):
            Self.listRefusal(hashes) ?? (hashes.contains { catalogue.access.rules[$0] != nil } ? nil : "none of these info hashes is in the access list")
        case .setClientRule(_, let prefixes):
            Self.clientListRefusal(prefixes) ?? {
                let added = Set(prefixes).filter { catalogue.access.clients.rules[$0] == nil }.count
                return catalogue.access.clients.rules.count + added > ClientFilter.maxRules
                    ? "the client list holds its maximum of \(ClientFilter.maxRules) prefixes" : nil
            }()
        case .removeClientRules(let prefixes):
            Self.clientListRefusal(prefixes)
                ?? (prefixes.contains { catalogue.access.clients.rules[$0] != nil } ? nil : "none of these prefixes is in the client list")
        case .addUser(let u): catalogue.access.users.refusal(adding: u)
        case .editUser(let n, let edit): catalogue.access.users.refusal(editing: n, edit)
        case .removeUser(let n): catalogue.access.users[n] == nil ? "no user \(n)" : nil
        case .restore(let entries):
            if entries.isEmpty || entries.count > AccessPolicy.maxHashesPerChange {
                "a restore carries 1 to \(AccessPolicy.maxHashesPerChange) entries"
            } else if entries.reduce(0, { $0 + $1.fileBytes }) > Catalogue.maxRestoreBytes {
                "a restore carries at most \(Catalogue.maxRestoreBytes >> 20) MiB of torrent files"
            } else {
                entries.allSatisfy(catalogue.dominates) ? "the catalogue holds these entries or newer" : nil
            }
        }
    }

    static func clientListRefusal(_ prefixes: [ClientPrefix]) -> String? {
        if prefixes.isEmpty { return "no client prefixes given" }
        if prefixes.count > AccessPolicy.maxHashesPerChange { return "at most \(AccessPolicy.maxHashesPerChange) client prefixes per change" }
        return nil
    }

    static func listRefusal(_ hashes: [InfoHash]) -> String? {
        if hashes.isEmpty { return "no info hashes given" }
        if hashes.count > AccessPolicy.maxHashesPerChange { return "at most \(AccessPolicy.maxHashesPerChange) info hashes per change" }
        return nil
    }

    /// Whether `catalogue` shows the change done.
    public func isDone(in catalogue: Catalogue) -> Bool {
        switch self {
        case .register(let t): catalogue.torrents[t.infoHash] != nil
        case .unregister(let hash): catalogue.torrents[hash] == nil
        case .setAccessMode(let mode): catalogue.access.mode == mode
        case .setAccessRule(let rule, let hashes): hashes.allSatisfy { catalogue.access.rules[$0] == rule }
        case .removeAccessRules(let hashes): hashes.allSatisfy { catalogue.access.rules[$0] == nil }
        case .setClientRule(let rule, let prefixes): prefixes.allSatisfy { catalogue.access.clients.rules[$0] == rule }
        case .removeClientRules(let prefixes): prefixes.allSatisfy { catalogue.access.clients.rules[$0] == nil }
        case .addUser(let u): catalogue.access.users[u.name] == u
        case .editUser(let n, let edit): catalogue.access.users[n].map { edit.applied(to: $0) == $0 } ?? false
        case .removeUser(let n): catalogue.access.users[n] == nil
        case .restore(let entries): entries.allSatisfy(catalogue.dominates)
        }
    }
}

/// Registered torrents, by info hash, and the access list they make.
public struct Catalogue: Hashable, Sendable {
    public private(set) var torrents: [InfoHash: RegisteredTorrent] = [:]
    /// Every swarm hash of every registered torrent (a hybrid adds two).
    public private(set) var swarmHashes: [InfoHash: InfoHash] = [:]
    public private(set) var totalBytes = 0

    /// Bounds what a snapshot carries (the whole catalogue travels in one cluster message).
    public static let maxTotalBytes = 32 << 20
    public static let maxTorrents = 10_000

    /// Which swarms are served (`AccessPolicy`).
    public private(set) var access = AccessPolicy()
    /// When each entry last changed (`CatalogueStamps`).
    public private(set) var stamps = CatalogueStamps()
    /// Completions of registered torrents' swarms from before a full stop, under the
    /// swarms' own (`KeptEntry.completed`): a scrape reports the sum. Only swarm hashes of
    /// registered torrents get one, so at most two per torrent.
    public private(set) var completedBase: [InfoHash: Int] = [:]

    public init() {}

    /// `stamp`: the transaction that carries the change (a restore's entries bring their
    /// own). A standalone node, which keeps no history, stamps nothing.
    public mutating func apply(_ change: CatalogueChange, stamp: TxRef? = nil) {
        switch change {
        case .register(let t):
            register(t)
            if let stamp { stamps.setTorrent(t.infoHash, CatalogueStamp(ref: stamp, removed: false)) }
        case .unregister(let hash):
            remove(hash)
            if let stamp { stampRemoval(ofTorrent: hash, stamp) }
        case .setAccessMode(let mode):
            access.set(mode)
            if let stamp { stamps.mode = stamp }
        case .setAccessRule(let rule, let hashes):
            access.set(rule, for: hashes)
            if let stamp { for h in hashes where access.rules[h] != nil { stamps.setRule(h, CatalogueStamp(ref: stamp, removed: false)) } }
        case .removeAccessRules(let hashes):
            access.set(nil, for: hashes)
            if let stamp { stampRemoval(ofRules: hashes, stamp) }
        case .setClientRule(let rule, let prefixes):
            access.set(rule, forClients: prefixes)
            if let stamp {
                for p in prefixes where access.clients.rules[p] != nil { stamps.setClient(p, CatalogueStamp(ref: stamp, removed: false)) }
            }
        case .removeClientRules(let prefixes):
            access.set(nil, forClients: prefixes)
            if let stamp { for p in prefixes { stamps.setClient(p, CatalogueStamp(ref: stamp, removed: true)) } }
        case .addUser(let u):
            guard access.users[u.name] == nil else { break }
            access.put(u)
            if let stamp, access.users[u.name] != nil { stamps.setUser(u.name, CatalogueStamp(ref: stamp, removed: false)) }
        case .editUser(let n, let edit):
            guard let old = access.users[n], access.users.refusal(editing: n, edit) == nil else { break }
            access.put(edit.applied(to: old))
            if let stamp { stamps.setUser(n, CatalogueStamp(ref: stamp, removed: false)) }
        case .removeUser(let n):
            access.removeUser(n)
            if let stamp { stamps.setUser(n, CatalogueStamp(ref: stamp, removed: true)) }
        case .restore(let entries):
            for entry in entries where !dominates(entry) { restore(entry) }
        }
        stamps.pruneTombstones()
    }

    /// One kept entry, newer than what stands in its place, with its own stamp. A torrent
    /// the catalogue has no room for is left out, unstamped.
    mutating func restore(_ entry: KeptEntry) {
        switch entry {
        case .torrent(let t, let ref):
            guard torrents[t.infoHash] != nil || refusal(t) == nil else { return }
            register(t)
            stamps.setTorrent(t.infoHash, CatalogueStamp(ref: ref, removed: false))
        case .torrentRemoved(let hash, let ref):
            remove(hash)
            stampRemoval(ofTorrent: hash, ref)
        case .rule(let hash, let rule, let ref):
            access.set(rule, for: [hash])
            guard access.rules[hash] != nil else { return }
            stamps.setRule(hash, CatalogueStamp(ref: ref, removed: false))
        case .ruleRemoved(let hash, let ref):
            access.set(nil, for: [hash])
            stampRemoval(ofRules: [hash], ref)
        case .mode(let mode, let ref):
            access.set(mode)
            stamps.mode = ref
        case .completed(let hash, let count):
            completedBase[hash] = max(completedBase[hash] ?? 0, count)
        case .client(let prefix, let rule, let ref):
            access.set(rule, forClients: [prefix])
            guard access.clients.rules[prefix] != nil else { return }
            stamps.setClient(prefix, CatalogueStamp(ref: ref, removed: false))
        case .clientRemoved(let prefix, let ref):
            access.set(nil, forClients: [prefix])
            stamps.setClient(prefix, CatalogueStamp(ref: ref, removed: true))
        case .user(let u, let ref):
            // A key another user holds stays with that user (`UserDirectory.put`). The
            // same version of the user (its stamp) keeps the higher of each total.
            var u = u
            if let held = access.users[u.name], stamps.users[u.name]?.ref == ref { u.totals = held.totals.merged(with: u.totals) }
            access.put(u)
            guard access.users[u.name] != nil else { return }
            stamps.setUser(u.name, CatalogueStamp(ref: ref, removed: false))
        case .userRemoved(let name, let ref):
            access.removeUser(name)
            stamps.setUser(name, CatalogueStamp(ref: ref, removed: true))
        }
    }

    mutating func register(_ t: RegisteredTorrent) {
        remove(t.infoHash)
        torrents[t.infoHash] = t
        for h in t.metadata.swarmHashes { swarmHashes[h] = t.infoHash }
        totalBytes += t.file.count
    }

    mutating func stampRemoval(ofTorrent hash: InfoHash, _ ref: TxRef) {
        stamps.setTorrent(hash, CatalogueStamp(ref: ref, removed: true))
    }

    mutating func stampRemoval(ofRules hashes: [InfoHash], _ ref: TxRef) {
        for h in hashes { stamps.setRule(h, CatalogueStamp(ref: ref, removed: true)) }
    }

    /// The policy a snapshot or a store carries, in place of ours.
    mutating func install(_ policy: AccessPolicy) { access = policy }

    /// The stamps a snapshot or a store carries, in place of ours.
    mutating func install(_ stamps: CatalogueStamps) { self.stamps = stamps }

    /// The completion bases a snapshot or a store carries, in place of ours.
    mutating func install(completedBase: [InfoHash: Int]) { self.completedBase = completedBase }

    /// A committed announce added to the totals of the user holding `key`.
    mutating func count(_ a: Announce, previous: PeerRecord?, key: TrackerKey) -> (before: User, after: User)? {
        access.count(a, previous: previous, key: key)
    }

    /// Whether an announce for `hash` is served under the access policy.
    public func admits(_ hash: InfoHash) -> Bool {
        access.mode == .open || access.admits(hash, registered: isRegistered(hash))
    }

    mutating func remove(_ hash: InfoHash) {
        guard let old = torrents.removeValue(forKey: hash) else { return }
        for h in old.metadata.swarmHashes where swarmHashes[h] == hash { swarmHashes[h] = nil }
        totalBytes -= old.file.count
    }

    /// Whether `hash` is a registered torrent's swarm.
    public func isRegistered(_ hash: InfoHash) -> Bool { swarmHashes[hash] != nil }

    /// The torrent a swarm belongs to.
    public func torrent(forSwarm hash: InfoHash) -> RegisteredTorrent? { swarmHashes[hash].flatMap { torrents[$0] } }

    /// Why the master refuses to register `t` now, if it does.
    public func refusal(_ t: RegisteredTorrent) -> String? {
        if torrents[t.infoHash] != nil { return "\(t.infoHash.hex) is already registered" }
        if torrents.count >= Self.maxTorrents { return "the catalogue holds its maximum of \(Self.maxTorrents) torrents" }
        if totalBytes + t.file.count > Self.maxTotalBytes { return "the catalogue holds its maximum of \(Self.maxTotalBytes >> 20) MiB of files" }
        return nil
    }

    /// In a canonical order: what snapshots carry.
    public var sorted: [RegisteredTorrent] { torrents.values.sorted { $0.infoHash < $1.infoHash } }

    /// The changes that build this catalogue from an empty one, in a canonical order:
    /// registrations, the rules and client rules (`AccessPolicy.maxHashesPerChange` a change), the users, then the
    /// mode, last, so no announce is refused for a rule not yet there. What a standalone
    /// node's kept operator data is put back with when its service starts.
    public var rebuildingChanges: [CatalogueChange] {
        sorted.map(CatalogueChange.register) + AccessPolicy().missing(access.sortedRules) + ClientFilter().missing(access.clients.sortedRules)
            + access.users.sorted.map(CatalogueChange.addUser)
            + (access.mode == .open ? [] : [.setAccessMode(access.mode)]) + Catalogue.restoring(keptCompletionBases)
    }

    /// The users whose totals are not zero, as kept entries (unstamped: a standalone node's
    /// store writes each user whole, totals included).
    public var keptUserTotals: [KeptEntry] {
        access.users.sorted.filter { !$0.totals.isZero }.map { .user($0, .zero) }
    }

    /// The completion bases as kept entries, in hash order.
    public var keptCompletionBases: [KeptEntry] { KeptEntry.completions(completedBase) }

    /// This catalogue with `store`'s completions of registered torrents' swarms taken in
    /// as bases (`completedBase`): what a standalone node keeps when its service stops.
    public func keepingCompletions(of store: SwarmStore) -> Catalogue {
        var kept = self
        for change in Catalogue.restoring(store.keptCompletionCounts) { kept.apply(change) }
        return kept
    }
}
