/// A user's name: what the operator types, what the dashboard shows, what a session and a
/// user's totals are keyed by.
///
/// Invariant: 1 to `maxLength` bytes of lower-case ASCII letters, digits, `.`, `_` and `-`,
/// starting with a letter or digit (so it never reads as an option or a path).
public struct UserName: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let text: String

    public static let maxLength = 32

    public init?(_ text: String) {
        let utf8 = Array(text.utf8)
        guard (1...Self.maxLength).contains(utf8.count), let first = utf8.first, Self.isAlphanumeric(first),
              utf8.allSatisfy({ Self.isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") })
        else { return nil }
        self.text = text
    }

    static func isAlphanumeric(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
    }

    public var description: String { text }
    public static func < (l: UserName, r: UserName) -> Bool { l.text < r.text }

    /// What an operator is told when a name does not parse.
    public static let rule = "1 to 32 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
}

/// What a user may do: sign in to the dashboard with its controls (`admin`), sign in to
/// look (`viewer`), or only announce with a key (`peer`). Any role may hold a key.
public enum UserRole: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case admin = 1, viewer = 2, peer = 3

    public var description: String {
        switch self {
        case .admin: "admin"
        case .viewer: "viewer"
        case .peer: "peer"
        }
    }

    public init?(_ text: String) {
        guard let role = Self.allCases.first(where: { $0.description == text }) else { return nil }
        self = role
    }
}

/// A user's tracker key: what a private torrent's announce URL carries
/// (`/announce/<key>` over HTTP, BEP 41 URL data over UDP).
///
/// Invariant: exactly `length` URL-safe characters (RFC 4648 §5: `A-Z a-z 0-9 - _`), so it
/// goes into a URL unescaped. 32 of them are 192 bits: not guessable, and random keys never
/// collide in practice (the master still refuses a key another user holds).
public struct TrackerKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public static let length = 32

    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.length, bytes.allSatisfy(Self.isURLSafe) else { return nil }
        self.bytes = Array(bytes)
    }

    public init?(_ text: String) { self.init(bytes: Array(text.utf8)) }

    /// A fresh key drawn from `rng` (the runtime passes the system's generator).
    public static func random(using rng: inout some RandomNumberGenerator) -> TrackerKey {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        // 64 symbols: six bits of each draw, with no bias.
        var out: [UInt8] = []
        out.reserveCapacity(length)
        for _ in 0..<length { out.append(alphabet[Int(rng.next() & 63)]) }
        return TrackerKey(uncheckedBytes: out)
    }

    private init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    static func isURLSafe(_ b: UInt8) -> Bool {
        UserName.isAlphanumeric(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
    }

    public var description: String { String(decoding: bytes, as: UTF8.self) }
    public static func < (l: TrackerKey, r: TrackerKey) -> Bool { l.bytes.lexicographicallyPrecedes(r.bytes) }
}

/// A password as a key-derivation function left it: the parameters, the salt and the
/// derived bytes. TrackerLogic only carries and compares it; the runtime derives and
/// verifies (`PasswordHasher`), so the cost of the function never lands on a state machine.
///
/// Invariant: `encoded` is 4 parameter bytes (format 1 = scrypt; log2 N; r; p), a 16-byte
/// salt and a 32-byte derived key: 52 bytes.
public struct PasswordHash: Hashable, Sendable {
    public let encoded: [UInt8]

    public static let length = 52
    public static let scryptFormat: UInt8 = 1

    public init?(encoded: some Collection<UInt8>) {
        let bytes = Array(encoded)
        guard bytes.count == Self.length, bytes[0] == Self.scryptFormat,
              (10...20).contains(bytes[1]), (1...16).contains(bytes[2]), (1...4).contains(bytes[3])
        else { return nil }
        self.encoded = bytes
    }

    public var logN: UInt8 { encoded[1] }
    public var blockSize: UInt8 { encoded[2] }
    public var parallelism: UInt8 { encoded[3] }
    public var salt: ArraySlice<UInt8> { encoded[4..<20] }
    public var derived: ArraySlice<UInt8> { encoded[20..<52] }
}

/// One user of the tracker, as every replica holds it.
public struct User: Hashable, Sendable {
    public var name: UserName
    public var role: UserRole
    public var key: TrackerKey?
    public var enabled: Bool
    public var password: PasswordHash?
    /// What the user's committed announces add up to (`UserTotals`).
    public var totals: UserTotals

    public init(name: UserName, role: UserRole, key: TrackerKey? = nil, enabled: Bool = true, password: PasswordHash? = nil,
                totals: UserTotals = UserTotals()) {
        self.name = name; self.role = role; self.key = key; self.enabled = enabled; self.password = password; self.totals = totals
    }
}

/// A user's totals: its announces, `completed` events, and the bytes its peers reported
/// uploading and downloading since their previous announce. Derived from the committed
/// announces that carried the user's key (private mode) as each replica applies them
/// (`SwarmStore.apply`), so every replica holds the same at the same commit, and the
/// digest covers them. They travel with the user: in snapshots, stores and kept data.
///
/// A delta is the counter's rise over the peer's record before the announce (a new
/// record: the counter itself); a counter that went down (a client restarted its
/// session) adds nothing. Every total saturates rather than wraps.
public struct UserTotals: Hashable, Sendable {
    public var announces: UInt64 = 0
    public var completed: UInt64 = 0
    public var uploaded: UInt64 = 0
    public var downloaded: UInt64 = 0

    public init(announces: UInt64 = 0, completed: UInt64 = 0, uploaded: UInt64 = 0, downloaded: UInt64 = 0) {
        self.announces = announces; self.completed = completed; self.uploaded = uploaded; self.downloaded = downloaded
    }

    public var isZero: Bool { self == UserTotals() }

    /// `a` added, the peer's record before it being `previous`.
    package mutating func add(_ a: Announce, previous: PeerRecord?) {
        // Counters are hostile: negative ones count as 0, and both are then at most
        // Int64.max, so the difference cannot overflow.
        func rise(_ now: Int64, _ before: Int64?) -> UInt64 {
            let n = max(now, 0), b = max(before ?? 0, 0)
            return n > b ? UInt64(n - b) : 0
        }
        announces = announces.addingSaturated(1)
        if a.event == .completed { completed = completed.addingSaturated(1) }
        uploaded = uploaded.addingSaturated(rise(a.uploaded, previous?.uploaded))
        downloaded = downloaded.addingSaturated(rise(a.downloaded, previous?.downloaded))
    }

    /// Each field the larger of the two: what a kept copy and the replica's make together
    /// (totals only grow).
    func merged(with other: UserTotals) -> UserTotals {
        UserTotals(announces: max(announces, other.announces), completed: max(completed, other.completed),
                   uploaded: max(uploaded, other.uploaded), downloaded: max(downloaded, other.downloaded))
    }
}

extension UInt64 {
    func addingSaturated(_ x: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(x)
        return overflow ? .max : sum
    }
}

/// One edit of a user that exists: what `CatalogueChange.editUser` carries. One field at a
/// time, so two operators' edits of different fields never undo each other.
public enum UserEdit: Hashable, Sendable {
    case role(UserRole)
    /// A new key, or none (the user can no longer announce to a private tracker).
    case key(TrackerKey?)
    case enabled(Bool)
    /// A new password, or none (the user can no longer sign in).
    case password(PasswordHash?)

    func applied(to user: User) -> User {
        var u = user
        switch self {
        case .role(let r): u.role = r
        case .key(let k): u.key = k
        case .enabled(let e): u.enabled = e
        case .password(let p): u.password = p
        }
        return u
    }
}
