import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TrackerLogic

/// What a request carries to be let in: the admin or viewer token (`Authorization:
/// Bearer`, scripts and `tracker admin`), or a signed-in user's session cookie (people, in
/// the page). A request that changes anything on a session's strength must also carry
/// `X-Tracker-CSRF: 1`, which a page of another site cannot send without a CORS
/// preflight this node never grants; with `SameSite=Strict` on the cookie, that keeps the
/// protection the token alone gave (a browser never sends a token on its own).
struct SignInCheck: Sendable {
    let sessions: DashboardSessions
    let backend: DashboardBackend

    static let csrfHeader = HTTPField.Name("X-Tracker-CSRF")
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")

    static func carriesCSRF(_ request: Request) -> Bool { csrfHeader.map { request.headers[$0] == "1" } ?? false }

    func session(_ request: Request) async -> DashboardSessions.Session? {
        guard let cookie = Self.cookie(request), let access = await backend.accessPolicy() else { return nil }
        return sessions.session(cookie, access: access, now: WallClock.now().milliseconds)
    }

    /// The session, if the request may act on its strength: a read, or a change that
    /// carries the CSRF header.
    func actingSession(_ request: Request) async -> DashboardSessions.Session? {
        let reads = request.method == .get || request.method == .head
        guard reads || Self.carriesCSRF(request) else { return nil }
        return await session(request)
    }

    static func cookie(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for part in header.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces)
                if pair.hasPrefix(DashboardSessions.cookieName + "=") { return String(pair.dropFirst(DashboardSessions.cookieName.count + 1)) }
            }
        }
        return nil
    }
}

extension DashboardRoutes {
    /// `POST /api/session` (`{"name", "password"}`): signs in; `GET` says who is signed in;
    /// `DELETE` signs out.
    static func addSignIn(to router: Router<DashboardContext>, check: SignInCheck, limits: DashboardLimits) {
        router.post("/api/session") { request, context in
            guard SignInCheck.carriesCSRF(request) else {
                throw APIError(.forbidden, "a sign-in needs the X-Tracker-CSRF: 1 header")
            }
            let body = try await requestBody(request, upTo: 4096, within: limits.bodyTimeout)
            guard let object = try? JSONDecoder().decode([String: String].self, from: Data(buffer: body)),
                  let name = object["name"], let password = object["password"] else {
                throw APIError(.badRequest, "the body must be {\"name\": …, \"password\": …}")
            }
            let now = WallClock.now().milliseconds
            guard check.sessions.mayTry(from: context.remote, as: name, now: now) else {
                throw APIError(.tooManyRequests, "too many failed sign-ins from this address or for this user; retry in a few minutes")
            }
            let access = await check.backend.accessPolicy()
            // The same refusal whatever was wrong, and a derivation either way, so neither
            // the answer nor its time tells whether the name exists.
            let user = UserName(name).flatMap { access?.users[$0] }
            var matches = false
            if let hash = user?.password ?? Self.decoyHash { matches = await PasswordHasher.verify(password, against: hash) }
            guard matches, let user, DashboardSessions.maySignIn(user) else {
                check.sessions.failed(from: context.remote, as: name, now: now)
                throw APIError(.unauthorized, "wrong name or password, or the user may not sign in")
            }
            var headers = HTTPFields()
            let secure = SignInCheck.forwardedProto.map { request.headers[$0] == "https" } == true ? "; Secure" : ""
            headers[.setCookie] = "\(DashboardSessions.cookieName)=\(check.sessions.issue(for: user, now: now)); HttpOnly; SameSite=Strict; "
                + "Path=/; Max-Age=\(DashboardSessions.lifetime.value / 1000)\(secure)"
            headers[.contentType] = "application/json"
            let answer = try JSONEncoder().encode(["name": user.name.text, "role": user.role.description])
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer)))
        }
        router.get("/api/session") { request, _ in
            guard let session = await check.session(request) else { throw APIError(.unauthorized, "not signed in") }
            return json(["name": session.user.name.text, "role": session.user.role.description])
        }
        router.delete("/api/session") { request, _ in
            if let session = await check.actingSession(request) {
                check.sessions.revoke(session, now: WallClock.now().milliseconds)
            }
            var headers = HTTPFields()
            headers[.setCookie] = "\(DashboardSessions.cookieName)=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "{\"result\":\"signed out\"}")))
        }
    }

    /// What a sign-in for a name with no password is checked against (a fixed salt, and no
    /// password derives to zeros in practice): the time of a refusal says nothing.
    static let decoyHash = PasswordHash(encoded: [PasswordHash.scryptFormat, 15, 8, 1] + Array(repeating: 0x5A, count: 16)
                                        + Array(repeating: 0, count: 32))
}
