import Crypto
import Foundation
import NIOConcurrencyHelpers
import TrackerLogic

/// Dashboard sessions of signed-in users, and the limits on failed sign-ins.
///
/// A session is a cookie the node signs with a secret of its own process (HMAC-SHA256):
/// the user's name, when the session ends, a fingerprint of the user's password hash and
/// a random id. The node keeps no table of sessions; it checks the signature and then
/// the user as its replica holds it now, at every request. So disabling a user, removing
/// it, taking its role below `viewer` or changing its password ends its sessions on every
/// node once the change commits. Another node, or this one after a restart, does not know
/// the secret: the user signs in again there (a failover of the floating address asks for
/// it once). Signing out revokes the id until the session would have ended.
///
/// Invariant: at most `maxRevoked` revoked ids and `maxTracked` sources and users with
/// failures are kept; beyond that the oldest go (volume is hostile).
public final class DashboardSessions: Sendable {
    public static let cookieName = "tracker_session"
    public static let lifetime = Milliseconds.seconds(12 * 3600)
    /// Failed sign-ins allowed per source and per user name in `failureWindow`.
    public static let failuresPerSource = 10, failuresPerUser = 5
    public static let failureWindow = Milliseconds.seconds(300)
    static let maxRevoked = 10_000, maxTracked = 10_000

    private let secret = SymmetricKey(size: .bits256)
    private struct State {
        var revoked: [[UInt8]: Int64] = [:]
        var sourceFailures: [IPAddress: [Int64]] = [:]
        var userFailures: [String: [Int64]] = [:]
    }
    private let state = NIOLockedValueBox(State())

    public init() {}

    /// Who a session is for, as checked now.
    public struct Session: Sendable {
        public var user: User
        public var id: [UInt8]
    }

    // MARK: cookies

    /// A new session for `user`, as a cookie value.
    public func issue(for user: User, now: Int64) -> String {
        var id = [UInt8](repeating: 0, count: 16)
        var rng = SystemRandomNumberGenerator()
        for i in id.indices { id[i] = UInt8.random(in: .min ... .max, using: &rng) }
        let body = Self.body(name: user.name.text, expires: now + Self.lifetime.value, fingerprint: Self.fingerprint(user.password), id: id)
        return Self.base64url(body + Array(HMAC<SHA256>.authenticationCode(for: body, using: secret)))
    }

    /// The session a cookie value names, if it is this node's, unexpired, not signed out,
    /// and its user may still sign in with the password it signed in with.
    public func session(_ cookie: String, access: AccessPolicy, now: Int64) -> Session? {
        guard let bytes = Self.unbase64url(cookie), bytes.count > 32 + 8 + 8 + 16 + 1 else { return nil }
        let body = Array(bytes.dropLast(32)), mac = Array(bytes.suffix(32))
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: body, using: secret) else { return nil }
        let nameLength = Int(body[0])
        guard body.count == 1 + nameLength + 8 + 8 + 16, let name = UserName(String(decoding: body[1..<(1 + nameLength)], as: UTF8.self))
        else { return nil }
        var i = 1 + nameLength
        let expires = body[i..<(i + 8)].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        i += 8
        let fingerprint = Array(body[i..<(i + 8)]), id = Array(body[(i + 8)...])
        guard now < expires, state.withLockedValue({ $0.revoked[id] == nil }),
              let user = access.users[name], Self.maySignIn(user), Self.fingerprint(user.password) == fingerprint else { return nil }
        return Session(user: user, id: id)
    }

    /// Signs a session out: its id is refused until it would have ended anyway.
    public func revoke(_ session: Session, now: Int64) {
        state.withLockedValue { s in
            s.revoked = s.revoked.filter { $0.value > now }
            if s.revoked.count >= Self.maxRevoked, let oldest = s.revoked.min(by: { $0.value < $1.value }) { s.revoked[oldest.key] = nil }
            s.revoked[session.id] = now + Self.lifetime.value
        }
    }

    /// Users who may have a session: enabled, `admin` or `viewer`, with a password.
    public static func maySignIn(_ user: User) -> Bool {
        user.enabled && user.role != .peer && user.password != nil
    }

    static func body(name: String, expires: Int64, fingerprint: [UInt8], id: [UInt8]) -> [UInt8] {
        let nameBytes = Array(name.utf8)
        return [UInt8(nameBytes.count)] + nameBytes + (0..<8).map { UInt8(truncatingIfNeeded: expires >> (56 - 8 * $0)) } + fingerprint + id
    }

    /// Eight bytes of the password hash's SHA-256: changes with every new password.
    static func fingerprint(_ hash: PasswordHash?) -> [UInt8] {
        Array(SHA256.hash(data: hash?.encoded ?? []).prefix(8))
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func unbase64url(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 512 else { return nil }
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.utf8.count % 4 != 0 { s += "=" }
        return Data(base64Encoded: s).map(Array.init)
    }

    // MARK: failed sign-ins

    /// Whether a sign-in from `source` as `name` may be tried now (else 429).
    public func mayTry(from source: IPAddress?, as name: String, now: Int64) -> Bool {
        state.withLockedValue { s in
            let since = now - Self.failureWindow.value
            let bySource = source.map { (s.sourceFailures[$0] ?? []).filter { $0 > since }.count } ?? 0
            let byUser = (s.userFailures[name] ?? []).filter { $0 > since }.count
            return bySource < Self.failuresPerSource && byUser < Self.failuresPerUser
        }
    }

    public func failed(from source: IPAddress?, as name: String, now: Int64) {
        state.withLockedValue { s in
            let since = now - Self.failureWindow.value
            if let source {
                Self.note(now, since: since, in: &s.sourceFailures, key: source)
            }
            Self.note(now, since: since, in: &s.userFailures, key: String(name.prefix(UserName.maxLength)))
        }
    }

    private static func note<Key: Hashable>(_ now: Int64, since: Int64, in table: inout [Key: [Int64]], key: Key) {
        if table[key] == nil && table.count >= maxTracked {
            table = table.filter { $0.value.contains { $0 > since } }
            if table.count >= maxTracked, let any = table.first?.key { table[any] = nil }
        }
        table[key, default: []] = (table[key] ?? []).filter { $0 > since } + [now]
    }
}
