/// The start of a peer id that names a BitTorrent client and its version: Azureus-style
/// `-UT355-` (dash, two letters, four version characters, dash) or Shadow-style `S58B--`
/// (a letter, then version characters). A client filter rule names one.
///
/// Invariant: 1 to 20 bytes (a peer id's length).
public struct ClientPrefix: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public static let maxLength = 20

    public init?(bytes: [UInt8]) {
        guard (1...Self.maxLength).contains(bytes.count) else { return nil }
        self.bytes = bytes
    }

    /// As an operator writes it: printable ASCII other than space (`-UT355-`), or `0x` and
    /// an even number of hex digits for a prefix that is not text.
    public init?(_ text: String) {
        if text.hasPrefix("0x") {
            let digits = Array(text.utf8.dropFirst(2))
            guard digits.count % 2 == 0 else { return nil }
            var out: [UInt8] = []
            for i in stride(from: 0, to: digits.count, by: 2) {
                guard let hi = Bytes20.nibble(digits[i]), let lo = Bytes20.nibble(digits[i + 1]) else { return nil }
                out.append(hi << 4 | lo)
            }
            self.init(bytes: out)
        } else {
            let utf8 = Array(text.utf8)
            guard utf8.allSatisfy(Self.isPlain) else { return nil }
            self.init(bytes: utf8)
        }
    }

    /// The form `init(_:)` reads back.
    public var description: String {
        bytes.allSatisfy(Self.isPlain) && !bytes.starts(with: Array("0x".utf8))
            ? String(decoding: bytes, as: UTF8.self)
            : "0x" + bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    static func isPlain(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }

    public static func < (l: ClientPrefix, r: ClientPrefix) -> Bool { l.bytes.lexicographicallyPrecedes(r.bytes) }

    /// How much of a name a refusal shows of a peer id no rule named: an Azureus-style
    /// client and version (`-UT355-`) is eight bytes.
    static let shownLength = 8
}

extension String {
    fileprivate func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}

/// Which clients the tracker serves, judged by the peer id an announce carries.
///
/// The rule with the longest prefix of the peer id decides: `allow` serves, `deny`
/// refuses. A peer id no rule matches is served while the list holds no `allow` rule (a
/// deny list), and refused once it holds one (an allow list, whose `deny` rules carve out
/// versions: allow `-UT`, deny `-UT2210`). An empty list serves every client.
///
/// Scrapes carry no peer id and are never filtered. A client denied after it announced
/// keeps its record until it expires: the rule refuses its announces, stop included.
///
/// Invariant: at most `maxRules` rules; a prefix has at most one; `lengths` holds exactly
/// the lengths of the rules' prefixes.
public struct ClientFilter: Hashable, Sendable {
    public private(set) var rules: [ClientPrefix: AccessRule] = [:]
    /// The prefix lengths some rule has, longest first: what a check probes.
    private var lengths: [Int] = []
    private var allowRules = 0

    /// Clients are few: a list of this many is far beyond any tracker's need, and bounds
    /// what a snapshot carries and what one check costs.
    public static let maxRules = 1_000

    public init() {}

    public init(_ entries: [ClientRuleEntry]) {
        for e in entries.prefix(Self.maxRules) { set(e.rule, for: [e.prefix]) }
    }

    public var isEmpty: Bool { rules.isEmpty }

    /// Why an announce with `peerID` is refused, or nil when it is served.
    public func refusal(of peerID: PeerID) -> String? {
        guard !rules.isEmpty else { return nil }
        let id = peerID.bytes
        for n in lengths {
            guard let prefix = ClientPrefix(bytes: Array(id[0..<n])), let rule = rules[prefix] else { continue }
            return rule == .allow ? nil : Self.deniedMessage(prefix.description)
        }
        return allowRules > 0 ? Self.notAllowedMessage(Self.shown(id)) : nil
    }

    /// The start of a peer id as a refusal names it: printable bytes as they are, others
    /// as `?`.
    static func shown(_ id: [UInt8]) -> String {
        String(decoding: id.prefix(ClientPrefix.shownLength).map { ClientPrefix.isPlain($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    public static func deniedMessage(_ client: String) -> String { "client \(client) is denied by this tracker" }
    public static func notAllowedMessage(_ client: String) -> String { "client \(client) is not allowed by this tracker" }

    /// Whether `message` is a refusal of this filter (what a peer may be answered).
    public static func isRefusal(_ message: String) -> Bool {
        message.hasPrefix("client ") && (message.hasSuffix(" is denied by this tracker") || message.hasSuffix(" is not allowed by this tracker"))
    }

    mutating func set(_ rule: AccessRule?, for prefixes: [ClientPrefix]) {
        for prefix in prefixes {
            let old = rules[prefix]
            if let rule {
                guard old != nil || rules.count < Self.maxRules else { continue }
                rules[prefix] = rule
            } else {
                rules[prefix] = nil
            }
            allowRules += (rules[prefix] == .allow ? 1 : 0) - (old == .allow ? 1 : 0)
        }
        lengths = Set(rules.keys.map(\.bytes.count)).sorted(by: >)
    }

    /// In a canonical order: what snapshots and stores carry.
    public var sortedRules: [ClientRuleEntry] {
        rules.sorted { $0.key < $1.key }.map { ClientRuleEntry(prefix: $0.key, rule: $0.value) }
    }

    /// The changes that give the prefixes of `entries` we hold no rule for theirs, at most
    /// `AccessPolicy.maxHashesPerChange` each: what a merge brings back from a diverged
    /// replica.
    public func missing(_ entries: [ClientRuleEntry]) -> [CatalogueChange] {
        AccessRule.allCases.flatMap { rule in
            AccessPolicy.perChange(entries.filter { $0.rule == rule && rules[$0.prefix] == nil }.map(\.prefix)).map { .setClientRule(rule, $0) }
        }
    }

}

/// One rule of the client filter.
public struct ClientRuleEntry: Hashable, Sendable {
    public var prefix: ClientPrefix
    public var rule: AccessRule
    public init(prefix: ClientPrefix, rule: AccessRule) { self.prefix = prefix; self.rule = rule }
}
