/// The tracker's users, by name and by key: part of the access policy, so committed,
/// snapshotted, digested, stamped and kept with the rest of it.
///
/// Invariant: at most `maxUsers` users; no two users hold the same key; `byKey` maps
/// exactly the keys `users` hold to their users' names.
public struct UserDirectory: Hashable, Sendable {
    public private(set) var users: [UserName: User] = [:]
    private var byKey: [TrackerKey: UserName] = [:]

    /// Bounds what a snapshot carries: at most about 150 bytes a user, 15 MiB in all.
    public static let maxUsers = 100_000

    public init() {}

    /// As a snapshot or a store carries them. A user beyond `maxUsers`, or whose key an
    /// earlier user (in name order) holds, loses the key or is left out: the same on every
    /// replica, which reads the same list.
    public init(_ list: [User]) {
        for u in list.sorted(by: { $0.name < $1.name }) { put(u) }
    }

    public var isEmpty: Bool { users.isEmpty }
    public var count: Int { users.count }
    public subscript(name: UserName) -> User? { users[name] }

    /// The user holding `key`, if any.
    public func user(holding key: TrackerKey) -> User? { byKey[key].flatMap { users[$0] } }

    /// In name order: what snapshots, stores and listings carry.
    public var sorted: [User] { users.values.sorted { $0.name < $1.name } }

    /// Adds or replaces `user` whole. A key another user holds is not taken (the master
    /// refuses such a change first; this keeps the invariant whatever a store or a restore
    /// brings).
    mutating func put(_ user: User) {
        guard users[user.name] != nil || users.count < Self.maxUsers else { return }
        if let old = users[user.name], let k = old.key { byKey[k] = nil }
        var user = user
        if let k = user.key {
            if byKey[k] != nil { user.key = nil } else { byKey[k] = user.name }
        }
        users[user.name] = user
    }

    /// Adds a committed announce of the user holding `key` to its totals; the user as it
    /// was and as it is, for the digest (nil: no user holds the key).
    mutating func count(_ a: Announce, previous: PeerRecord?, key: TrackerKey) -> (before: User, after: User)? {
        guard let name = byKey[key], var user = users[name] else { return nil }
        let before = user
        user.totals.add(a, previous: previous)
        users[name] = user
        return (before, user)
    }

    mutating func remove(_ name: UserName) {
        guard let old = users.removeValue(forKey: name) else { return }
        if let k = old.key { byKey[k] = nil }
    }

    /// Why the master refuses to add `user`, if it does.
    func refusal(adding user: User) -> String? {
        if users[user.name] != nil { return "user \(user.name) exists" }
        if users.count >= Self.maxUsers { return "the tracker holds its maximum of \(Self.maxUsers) users" }
        if let k = user.key, byKey[k] != nil { return "another user holds that key" }
        return nil
    }

    /// Why the master refuses `edit` of `name`, if it does.
    func refusal(editing name: UserName, _ edit: UserEdit) -> String? {
        guard users[name] != nil else { return "no user \(name)" }
        if case .key(let k?) = edit, let holder = byKey[k], holder != name { return "another user holds that key" }
        return nil
    }

    /// The users of `list` we hold none of, as changes that add them: what a merge brings
    /// back from a diverged replica (a user we hold stays as we hold it).
    public func missing(_ list: [User]) -> [CatalogueChange] {
        list.filter { users[$0.name] == nil }.map(CatalogueChange.addUser)
    }

    /// Why an announce carrying `key` (nil: none) is refused under private mode, if it is.
    public func refusal(ofKey key: TrackerKey?) -> String? {
        guard let key else { return Self.keyMissingMessage }
        guard let user = user(holding: key) else { return Self.keyUnknownMessage }
        return user.enabled ? nil : Self.userDisabledMessage
    }

    public static let keyMissingMessage = "this is a private tracker: announce with your key in the URL"
    public static let keyUnknownMessage = "unknown key"
    public static let userDisabledMessage = "user disabled"
}
