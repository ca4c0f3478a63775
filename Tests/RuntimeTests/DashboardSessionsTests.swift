import Foundation
import Testing
import TrackerLogic
import TrackerRuntime

/// Dashboard sign-in: scrypt hashes, the session cookie as the node checks it at every
/// request (its signature, its end, sign-out, and the user as the replica holds it now),
/// the limits on failed sign-ins, and the bodies of the users endpoint.
@Suite("Dashboard sessions") struct DashboardSessionsTests {
    let now: Int64 = 1_800_000_000_000
    let vera = UserName("vera")!

    func access(_ users: [User]) -> AccessPolicy { AccessPolicy(mode: .open, rules: [], users: users) }

    @Test func aPasswordVerifiesAgainstItsHashOnly() async throws {
        let hash = try await PasswordHasher.hash("correct horse")
        #expect(hash.logN == 15 && hash.blockSize == 8 && hash.parallelism == 1)
        #expect(await PasswordHasher.verify("correct horse", against: hash))
        #expect(!(await PasswordHasher.verify("correct horsE", against: hash)))
        let again = try await PasswordHasher.hash("correct horse")
        #expect(again.salt != hash.salt && again.derived != hash.derived, "a fresh salt each time")
        await #expect(throws: PasswordHasher.Problem.self) { try await PasswordHasher.hash("short") }
        #expect(PasswordHasher.refusal(of: String(repeating: "x", count: 1025)) != nil)
    }

    @Test func aSessionLastsWhileItsUserMaySignInWithThatPassword() throws {
        let sessions = DashboardSessions()
        let password = PasswordHash(encoded: [1, 15, 8, 1] + Array(repeating: 3, count: 48))!
        let user = User(name: vera, role: .viewer, password: password)
        let cookie = sessions.issue(for: user, now: now)
        #expect(sessions.session(cookie, access: access([user]), now: now + 1)?.user == user)
        #expect(sessions.session(cookie, access: access([user]), now: now + DashboardSessions.lifetime.value) == nil, "ended")
        var disabled = user
        disabled.enabled = false
        #expect(sessions.session(cookie, access: access([disabled]), now: now + 1) == nil, "a disabled user's session ends")
        var demoted = user
        demoted.role = .peer
        #expect(sessions.session(cookie, access: access([demoted]), now: now + 1) == nil, "a peer may not sign in")
        var renewed = user
        renewed.password = PasswordHash(encoded: [1, 15, 8, 1] + Array(repeating: 4, count: 48))!
        #expect(sessions.session(cookie, access: access([renewed]), now: now + 1) == nil, "a new password ends the session")
        #expect(sessions.session(cookie, access: access([]), now: now + 1) == nil, "a removed user's session ends")
        // Another node (another secret) and a forged cookie are nobody.
        #expect(DashboardSessions().session(cookie, access: access([user]), now: now + 1) == nil)
        var forged = Array(cookie.utf8)
        forged[3] = forged[3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(sessions.session(String(decoding: forged, as: UTF8.self), access: access([user]), now: now + 1) == nil)
        for junk in ["", "%%%", String(repeating: "A", count: 4000), "AAAA"] {
            #expect(sessions.session(junk, access: access([user]), now: now) == nil)
        }
        let session = try #require(sessions.session(cookie, access: access([user]), now: now + 1))
        sessions.revoke(session, now: now + 2)
        #expect(sessions.session(cookie, access: access([user]), now: now + 3) == nil, "signed out")
        #expect(sessions.session(sessions.issue(for: user, now: now), access: access([user]), now: now + 3) != nil, "a new sign-in works")
    }

    @Test func failedSignInsAreLimitedPerSourceAndPerName() {
        let sessions = DashboardSessions()
        let a = IPAddress("192.0.2.1")!, b = IPAddress("192.0.2.2")!
        for _ in 0..<DashboardSessions.failuresPerUser { sessions.failed(from: b, as: "vera", now: now) }
        #expect(!sessions.mayTry(from: a, as: "vera", now: now + 1), "a name's failures from anywhere")
        #expect(sessions.mayTry(from: a, as: "root", now: now + 1))
        #expect(sessions.mayTry(from: a, as: "vera", now: now + DashboardSessions.failureWindow.value + 1), "they age out")
        for i in 0..<DashboardSessions.failuresPerSource { sessions.failed(from: a, as: "name\(i)", now: now) }
        #expect(!sessions.mayTry(from: a, as: "root", now: now + 1), "a source's failures, whatever the names")
        #expect(sessions.mayTry(from: IPAddress("192.0.2.3")!, as: "root", now: now + 1))
    }

    @Test func theUsersEndpointsBodies() throws {
        var rng = SystemRandomNumberGenerator()
        func change(_ json: String) throws -> CatalogueChange { try UsersRequest.change(Data(json.utf8), using: &rng) }
        guard case .addUser(let u) = try change(#"{"action": "add", "name": "alice"}"#) else { Issue.record("not an add"); return }
        #expect(u.role == .peer && u.key != nil && u.enabled)
        #expect(try change(#"{"action": "add", "name": "bob", "role": "viewer", "key": false}"#) == .addUser(User(name: UserName("bob")!, role: .viewer)))
        let key = String(repeating: "k", count: 32)
        #expect(try change(#"{"action": "key", "name": "bob", "key": "\#(key)"}"#) == .editUser(UserName("bob")!, .key(TrackerKey(key))))
        #expect(try change(#"{"action": "password", "name": "bob", "password": null}"#) == .editUser(UserName("bob")!, .password(nil)))
        #expect(UsersRequest.password(Data(#"{"action": "password", "name": "bob", "password": "long enough"}"#.utf8)) == "long enough")
        for bad in [#"{"action": "add", "name": "Bob"}"#, #"{"action": "add", "name": "bob", "role": "root"}"#,
                    #"{"action": "key", "name": "bob", "key": "short"}"#, #"{"action": "password", "name": "bob", "password": "short"}"#,
                    #"{"action": "fly", "name": "bob"}"#, #"{"name": "bob"}"#, "[]", "not json"] {
            #expect(throws: UsersRequest.Problem.self) { try change(bad) }
        }
    }
}
