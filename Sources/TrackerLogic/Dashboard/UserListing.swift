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
    }

    public var mode: String
    public var count: Int
    public var offset: Int
    public var users: [Row]

    public static let maxPage = 10_000

    public init(_ access: AccessPolicy, offset: Int, limit: Int) {
        mode = access.mode.description
        count = access.users.count
        self.offset = min(max(offset, 0), count)
        let n = min(max(limit, 0), Self.maxPage, count - self.offset)
        users = access.users.sorted[self.offset..<(self.offset + n)].map {
            Row(name: $0.name.text, role: $0.role.description, enabled: $0.enabled, key: $0.key?.description, password: $0.password != nil)
        }
    }
}
