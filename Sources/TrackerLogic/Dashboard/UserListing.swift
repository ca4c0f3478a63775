/// The users as the API shows them to the admin token (keys are secrets: nothing else
/// reads them): one page in name order, a tracker may hold 100,000.
public struct UserListing: Codable, Equatable, Sendable {
    public struct Row: Codable, Equatable, Sendable {
        public var name: String
        public var role: String
        public var enabled: Bool
        /// The key, for the operator to hand to its user; nil when it holds none.
        public var key: String?
        /// Whether the user has a password (and so may sign in, by role).
        public var password: Bool
        /// `UserTotals`, as this node's replica holds them.
        public var announces: UInt64
        public var completed: UInt64
        public var uploaded: UInt64
        public var downloaded: UInt64
    }

    public var mode: String
    public var count: Int
    public var offset: Int
    public var users: [Row]

    public static let maxPage = 10_000

    /// The `n` users with the most announces (ties by name): what `/metrics` exports with
    /// `--metrics-users N`, so its label set stays bounded however many users there are.
    public static func top(_ n: Int, of access: AccessPolicy) -> [User] {
        Array(access.users.sorted.sorted { ($0.totals.announces, $1.name) > ($1.totals.announces, $0.name) }.prefix(max(0, n)))
    }

    public init(_ access: AccessPolicy, offset: Int, limit: Int) {
        mode = access.mode.description
        count = access.users.count
        self.offset = min(max(offset, 0), count)
        let n = min(max(limit, 0), Self.maxPage, count - self.offset)
        users = access.users.sorted[self.offset..<(self.offset + n)].map {
            Row(name: $0.name.text, role: $0.role.description, enabled: $0.enabled, key: $0.key?.description, password: $0.password != nil,
                announces: $0.totals.announces, completed: $0.totals.completed, uploaded: $0.totals.uploaded, downloaded: $0.totals.downloaded)
        }
    }
}
