import ArgumentParser
import Foundation
import TrackerLogic
import TrackerRuntime
import TrackerTools

extension Admin {
    /// `tracker admin user …`: the users of a private tracker and of the dashboard
    /// (`UsersRequest` is what each subcommand sends).
    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "user",
            abstract: "Users: their roles, their tracker keys (private mode) and whether they are enabled.",
            discussion: """
                Each change is committed by the cluster before the command returns. A key is 32 URL-safe \
                characters drawn by the node; hand the user the announce URL it prints.
                  tracker admin user add alice
                  tracker admin user key alice          (a new key: the old one stops working)
                  tracker admin user disable alice      (refused from the next announce on)
                  tracker admin mode private
                """,
            subcommands: [List.self, Add.self, Key.self, Role.self, Password.self, Enable.self, Disable.self, Remove.self],
            defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every user: name, role, enabled or not, key, then its totals.")
            @OptionGroup var connection: Connection
            func run() async throws {
                let users = try await Admin.users(try connection.client())
                if users.isEmpty { print("no users") }
                for u in users {
                    print("\(u["name"] ?? "?") \(u["role"] ?? "?") \((u["enabled"] as? Bool) == false ? "disabled" : "enabled") "
                          + "\((u["key"] as? String) ?? "-") announces=\(u["announces"] ?? 0) completed=\(u["completed"] ?? 0) "
                          + "uploaded=\(u["uploaded"] ?? 0) downloaded=\(u["downloaded"] ?? 0)")
                }
            }
        }

        struct Name: ParsableArguments {
            @OptionGroup var connection: Connection
            @Argument(help: "The user's name: \(UserName.rule).") var name: String
            func validated() throws -> String {
                guard UserName(name) != nil else { throw ValidationError("name: \(UserName.rule)") }
                return name
            }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add a user, with a new key unless --no-key.")
            @OptionGroup var user: Name
            @Option(help: "admin, viewer or peer.") var role: String = "peer"
            @Flag(help: "Give the user no key (a dashboard user only).") var noKey = false
            func run() async throws {
                guard UserRole(role) != nil else { throw ValidationError("role: admin, viewer or peer") }
                try await Admin.changeUser(["action": "add", "name": try user.validated(), "role": role, "key": !noKey], user.connection)
            }
        }

        struct Key: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Give a user a new key (the old one stops working), or none.")
            @OptionGroup var user: Name
            @Flag(help: "Take the user's key away.") var remove = false
            func run() async throws {
                try await Admin.changeUser(["action": "key", "name": try user.validated(), "key": !remove], user.connection)
            }
        }

        struct Role: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Change a user's role.")
            @OptionGroup var user: Name
            @Argument(help: "admin, viewer or peer.") var role: String
            func run() async throws {
                guard UserRole(role) != nil else { throw ValidationError("role: admin, viewer or peer") }
                try await Admin.changeUser(["action": "role", "name": try user.validated(), "role": role], user.connection)
            }
        }

        struct Password: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Set the password an admin or viewer signs in to the dashboard with, read from the first line of standard input.",
                discussion: "The node derives its scrypt hash; only the hash is replicated and stored. A new password ends the user's sessions.")
            @OptionGroup var user: Name
            @Flag(help: "Take the password away: the user can no longer sign in.") var remove = false
            func run() async throws {
                let name = try user.validated()
                if remove { return try await Admin.changeUser(["action": "password", "name": name, "password": NSNull()], user.connection) }
                guard let password = readLine(strippingNewline: true), !password.isEmpty else {
                    throw ValidationError("give the password on standard input (echo … | tracker admin user password \(name))")
                }
                if let refusal = PasswordHasher.refusal(of: password) { throw ValidationError("password: \(refusal)") }
                try await Admin.changeUser(["action": "password", "name": name, "password": password], user.connection)
            }
        }

        struct Enable: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Enable a user.")
            @OptionGroup var user: Name
            func run() async throws { try await Admin.changeUser(["action": "enable", "name": try user.validated()], user.connection) }
        }

        struct Disable: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Disable a user: its announces are refused once this commits.")
            @OptionGroup var user: Name
            func run() async throws { try await Admin.changeUser(["action": "disable", "name": try user.validated()], user.connection) }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove a user and its key.")
            @OptionGroup var user: Name
            func run() async throws { try await Admin.changeUser(["action": "remove", "name": try user.validated()], user.connection) }
        }
    }

    /// POSTs one user change; prints the result, and the key the node drew, if any, as the
    /// announce paths that carry it.
    static func changeUser(_ body: [String: Any], _ connection: Connection) async throws {
        let answer = try await send(try connection.client(), .post, "/api/users", body: Array(try JSONSerialization.data(withJSONObject: body)))
        print(result(of: answer, or: "done"))
        if let key = (answer as? [String: Any])?["key"] as? String, !key.isEmpty {
            print("key \(key)")
            print("announce URLs: http://TRACKER:PORT/announce/\(key)  udp://TRACKER:PORT/announce/\(key)")
        }
    }

    /// Every user, page by page, keys included.
    static func users(_ client: AdminClient) async throws -> [[String: Any]] {
        var users: [[String: Any]] = [], offset = 0
        while true {
            guard let page = try await send(client, .get, "/api/users?offset=\(offset)&limit=\(UserListing.maxPage)") as? [String: Any],
                  let batch = page["users"] as? [[String: Any]] else {
                throw Failure(description: "the users are not a JSON object with a list of users")
            }
            users += batch
            if batch.isEmpty { return users }
            offset += batch.count
        }
    }
}
