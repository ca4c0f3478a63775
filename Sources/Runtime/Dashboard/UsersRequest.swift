import Foundation
import TrackerLogic

/// The body of `POST /api/users` as the catalogue change it asks for:
///
/// - `{"action": "add", "name": N, "role": "admin" | "viewer" | "peer", "key": true | false}`
///   (role `peer` and a key by default);
/// - `{"action": "key", "name": N}` gives a new key, `{"action": "key", "name": N,
///   "key": false}` takes it away; a key given as a string is taken as it is (what an
///   import puts back, so the URLs handed out keep working);
/// - `{"action": "role", "name": N, "role": R}`;
/// - `{"action": "password", "name": N, "password": P}` sets the password a user signs in
///   to the dashboard with (`P`: 8 to 1,024 bytes; the route derives its hash), and
///   `{"action": "password", "name": N, "password": null}` takes it away;
/// - `{"action": "enable" | "disable" | "remove", "name": N}`.
///
/// Keys are drawn here, by the node that takes the request, from the system's generator;
/// the master refuses one another user holds. Anything else is a `Problem` the API answers
/// 400 with, and nothing is submitted.
public enum UsersRequest {
    public struct Problem: Error, CustomStringConvertible {
        public var description: String
    }

    public static func change(_ body: Data, using rng: inout some RandomNumberGenerator) throws(Problem) -> CatalogueChange {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let action = object["action"] as? String else {
            throw Problem(description: "the body must be a JSON object with an action (add, key, role, enable, disable, remove)")
        }
        guard let text = object["name"] as? String, let name = UserName(text) else {
            throw Problem(description: "name: \(UserName.rule)")
        }
        func role() throws(Problem) -> UserRole? {
            guard let value = object["role"] else { return nil }
            guard let text = value as? String, let role = UserRole(text) else { throw Problem(description: "role: admin, viewer or peer") }
            return role
        }
        func key() throws(Problem) -> TrackerKey? {
            switch object["key"] {
            case nil: return TrackerKey.random(using: &rng)
            case let flag as Bool: return flag ? TrackerKey.random(using: &rng) : nil
            case let text as String:
                guard let k = TrackerKey(text) else { throw Problem(description: "key: \(TrackerKey.length) of A-Z, a-z, 0-9, '-', '_'") }
                return k
            default: throw Problem(description: "key: true, false or a key")
            }
        }
        switch action {
        case "add":
            return .addUser(User(name: name, role: try role() ?? .peer, key: try key()))
        case "key": return .editUser(name, .key(try key()))
        case "role":
            guard let r = try role() else { throw Problem(description: "role: admin, viewer or peer") }
            return .editUser(name, .role(r))
        case "password":
            switch object["password"] {
            case is NSNull: return .editUser(name, .password(nil))
            case let text as String:
                if let refusal = PasswordHasher.refusal(of: text) { throw Problem(description: "password: \(refusal)") }
                // A placeholder the route replaces with the derived hash.
                return .editUser(name, .password(nil))
            default: throw Problem(description: "password: a string, or null to take it away")
            }
        case "enable": return .editUser(name, .enabled(true))
        case "disable": return .editUser(name, .enabled(false))
        case "remove": return .removeUser(name)
        default: throw Problem(description: "action: add, key, role, password, enable, disable or remove (not \(action))")
        }
    }

    /// The clear password of a `password` action, to derive its hash from.
    public static func password(_ body: Data) -> String? {
        (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["password"] as? String
    }
}
