/// The access policy as the API and the dashboard show it: the mode, how many rules of
/// each kind, one page of the rules in hash order (a list may hold 100,000), and every
/// client rule (at most `ClientFilter.maxRules`) in prefix order.
public struct AccessListing: Codable, Equatable, Sendable {
    public struct Rule: Codable, Equatable, Sendable {
        public var infoHash: String
        public var rule: String
    }

    public var mode: String
    public var allowed: Int
    public var denied: Int
    /// Registered torrents, allowed in `allow` mode by being registered.
    public var registered: Int
    public var offset: Int
    public var rules: [Rule]

    public struct ClientRule: Codable, Equatable, Sendable {
        /// As `ClientPrefix.description` writes it (text, or `0x` and hex).
        public var prefix: String
        public var rule: String
    }

    public var clients: [ClientRule]

    /// Most rules one page carries.
    public static let maxPage = 10_000

    public init(_ catalogue: Catalogue, offset: Int, limit: Int) {
        let access = catalogue.access
        mode = access.mode.description
        allowed = access.rules.values.filter { $0 == .allow }.count
        denied = access.rules.count - allowed
        registered = catalogue.torrents.count
        self.offset = min(max(offset, 0), access.rules.count)
        let count = min(max(limit, 0), Self.maxPage, access.rules.count - self.offset)
        rules = access.sortedRules[self.offset..<(self.offset + count)].map { Rule(infoHash: $0.infoHash.hex, rule: $0.rule.description) }
        clients = access.clients.sortedRules.map { ClientRule(prefix: $0.prefix.description, rule: $0.rule.description) }
    }
}
