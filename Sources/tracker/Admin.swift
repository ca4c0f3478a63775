import ArgumentParser
import Foundation
import TrackerLogic
import TrackerRuntime
import TrackerTools

/// `tracker admin`: the operator's commands, sent to any node's dashboard API. A change
/// made through one node is committed by the cluster's master like an announce, so every
/// node holds it once the command returns.
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage a running node or cluster through any node's dashboard API.",
        discussion: """
            The node is its --http address. Changes need its admin token: --token-file FILE \
            (the content of the node's --admin-token-file), TRACKER_ADMIN_TOKEN, or else \
            /etc/tracker/admin.token, which the package makes and members of the group \
            tracker may read.
              tracker admin register --node 127.0.0.1:8081 ubuntu.torrent
              tracker admin import-list whitelist.txt
              tracker admin mode allow --token-file ./other-cluster.token
            """,
        subcommands: [Status.self, Torrents.self, Register.self, Unregister.self,
                      Access.self, Mode.self, Allow.self, Deny.self, Remove.self, ImportList.self, Clients.self, Users.self, Export.self, Import.self])

    /// Where the node is and who we are to it.
    struct Connection: ParsableArguments {
        @Option(help: "The node's dashboard address, HOST:PORT (or PORT, on 127.0.0.1).")
        var node: String = "127.0.0.1:8081"

        @Option(name: .customLong("token-file"), help: "File holding the node's admin token (first line); default: $TRACKER_ADMIN_TOKEN, else \(Connection.packageTokenFile) when it is readable.")
        var tokenFile: String?

        func client() throws -> AdminClient {
            let endpoint: PeerEndpoint
            do {
                endpoint = try EndpointArgument(parsing: UInt16(node) != nil ? "127.0.0.1:\(node)" : node).endpoint
            } catch { throw ValidationError("--node: \(error)") }
            var token = ProcessInfo.processInfo.environment["TRACKER_ADMIN_TOKEN"]
            if let tokenFile {
                do { token = try AdminToken(file: tokenFile, flag: "token-file").secret } catch { throw ValidationError(error.description) }
            } else if token == nil, access(Self.packageTokenFile, R_OK) == 0 {
                do { token = try AdminToken(file: Self.packageTokenFile, flag: "token-file").secret } catch { throw ValidationError(error.description) }
            }
            return AdminClient(node: endpoint, token: token)
        }

        /// The token the package makes (root:tracker 0640) and its configuration names.
        static let packageTokenFile = "/etc/tracker/admin.token"
    }

    /// The node could not be asked, or refused: exit status 1, the reason, no usage text.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The API's answer, or an error naming what it said.
    static func send(_ client: AdminClient, _ method: AdminClient.Method, _ path: String, body: [UInt8]? = nil,
                     contentType: String = "application/json") async throws -> Any {
        let response: AdminResponse
        do { response = try await client.request(method, path, body: body, contentType: contentType) } catch {
            throw Failure(description: "\(error)")
        }
        let json = try? JSONSerialization.jsonObject(with: Data(response.body))
        guard (200..<300).contains(response.status) else {
            let said = (json as? [String: Any])?["error"] as? String ?? response.text.prefix(200).description
            throw Failure(description: "http://\(client.node)\(path): \(response.status): \(said)")
        }
        guard let json else { throw Failure(description: "http://\(client.node)\(path): the answer is not JSON") }
        return json
    }

    /// The API's `result` sentence, or `fallback` when it gave none.
    static func result(of answer: Any, or fallback: String) -> String {
        (answer as? [String: Any])?["result"] as? String ?? fallback
    }

    static func hash(_ text: String) throws -> InfoHash {
        guard let hash = InfoHash(hex: text) else { throw ValidationError("not an info hash (40 hex digits): \(text)") }
        return hash
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The node: id, role, epoch, master, serving, counts.")
        @OptionGroup var connection: Connection
        func run() async throws {
            guard let node = try await Admin.send(try connection.client(), .get, "/api/node") as? [String: Any] else {
                throw Failure(description: "the node's status is not a JSON object")
            }
            for key in ["mode", "service", "id", "role", "epoch", "master", "serving", "lastCommitted", "swarms", "peers"] {
                print("\(key) \(node[key].map { "\($0)" } ?? "-")")
            }
        }
    }

    struct Torrents: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The registered torrents: info hash, size, name.")
        @OptionGroup var connection: Connection
        func run() async throws {
            guard let rows = try await Admin.send(try connection.client(), .get, "/api/torrents") as? [[String: Any]] else {
                throw Failure(description: "the catalogue is not a JSON list")
            }
            for row in rows {
                print("\(row["infoHash"] ?? "?") \(row["size"] ?? "?") \(row["name"] ?? "?")")
            }
        }
    }

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register .torrent files (committed by the cluster before this returns).")
        @OptionGroup var connection: Connection
        @Argument(help: "The .torrent files.") var files: [String]
        func run() async throws {
            let client = try connection.client()
            for file in files {
                guard let bytes = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
                print(Admin.result(of: try await Admin.send(client, .post, "/api/torrents", body: Array(bytes),
                                                            contentType: "application/x-bittorrent"), or: "registered \(file)"))
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove registered torrents by info hash.")
        @OptionGroup var connection: Connection
        @Argument(help: "Info hashes, 40 hex digits each.") var hashes: [String]
        func run() async throws {
            let client = try connection.client()
            for hash in try hashes.map(Admin.hash) {
                print(Admin.result(of: try await Admin.send(client, .delete, "/api/torrents/\(hash.hex)"), or: "unregistered \(hash.hex)"))
            }
        }
    }

    // MARK: the access policy

    struct Access: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The access policy: its mode, then every rule (info hash and rule).")
        @OptionGroup var connection: Connection
        func run() async throws {
            let policy = try await Admin.accessPolicy(try connection.client())
            print("mode \(policy.mode) (allowed \(policy.first["allowed"] ?? "?"), denied \(policy.first["denied"] ?? "?"), "
                  + "registered torrents \(policy.first["registered"] ?? "?"))")
            for rule in policy.rules { print("\(rule["infoHash"] ?? "?") \(rule["rule"] ?? "?")") }
        }
    }

    struct Mode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set the cluster's access mode: open (every hash), allow (registered torrents and allowed hashes), deny (all but denied hashes), private (as allow, to enabled users' keys only).")
        @OptionGroup var connection: Connection
        @Argument(help: "open, allow, deny or private.") var mode: String
        func run() async throws {
            guard let mode = AccessMode(mode) else { throw ValidationError("mode: open, allow, deny or private (not \(mode))") }
            try await Admin.setMode(mode, try connection.client())
        }
    }

    static func setMode(_ mode: AccessMode, _ client: AdminClient) async throws {
        let body = try JSONSerialization.data(withJSONObject: ["mode": mode.description])
        print(result(of: try await send(client, .put, "/api/access/mode", body: Array(body)), or: "access mode \(mode)"))
    }

    /// Sends `hashes` under `rule` (allow, deny, remove), a change of at most
    /// `AccessPolicy.maxHashesPerChange` hashes at a time; each is committed before the next.
    static func setRules(_ rule: String, _ hashes: [InfoHash], _ client: AdminClient) async throws {
        try await post(rule, hashes.map(\.hex), as: "infoHashes", to: "/api/access/rules", naming: "info hashes", client)
    }

    /// POSTs `{"rule": rule, key: names}` to `path`, one change of at most
    /// `AccessPolicy.maxHashesPerChange` names at a time, each committed before the next.
    static func post(_ rule: String, _ names: [String], as key: String, to path: String, naming what: String,
                     _ client: AdminClient) async throws {
        for batch in AccessPolicy.perChange(names) {
            let body = try JSONSerialization.data(withJSONObject: ["rule": rule, key: batch] as [String: Any])
            print(Admin.result(of: try await send(client, .post, path, body: Array(body)), or: "\(rule): \(batch.count) \(what)"))
        }
    }

    /// What `allow`, `deny` and `remove` take: a node and the hashes.
    struct RuleArguments: ParsableArguments {
        @OptionGroup var connection: Connection
        @Argument(help: "Info hashes, 40 hex digits each.") var hashes: [String]
        func send(_ rule: String) async throws { try await Admin.setRules(rule, try hashes.map(Admin.hash), try connection.client()) }
    }

    struct Allow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Allow info hashes (they count in allow mode).")
        @OptionGroup var arguments: RuleArguments
        func run() async throws { try await arguments.send("allow") }
    }

    struct Deny: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deny info hashes (they count in deny mode).")
        @OptionGroup var arguments: RuleArguments
        func run() async throws { try await arguments.send("deny") }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove info hashes' allow or deny rules.")
        @OptionGroup var arguments: RuleArguments
        func run() async throws { try await arguments.send("remove") }
    }

    struct ImportList: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import-list",
            abstract: "Allow (or --deny) every info hash of a list file: one hash per line, # starts a comment (opentracker's format).")
        @OptionGroup var connection: Connection
        @Flag(help: "Deny the hashes instead of allowing them.") var deny = false
        @Argument(help: "The list file.") var file: String
        func run() async throws {
            guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
                throw ValidationError("cannot read \(file) as UTF-8 text")
            }
            switch AccessListFile.parse(text) {
            case .failure(let problem): throw ValidationError("\(file): \(problem)")
            case .success(let hashes):
                guard !hashes.isEmpty else { throw ValidationError("\(file) holds no info hashes") }
                try await Admin.setRules(deny ? "deny" : "allow", hashes, try connection.client())
            }
        }
    }

    // MARK: the client filter

    struct Clients: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The client filter: which BitTorrent clients are served, by peer-id prefix.",
            discussion: """
                The rule with the longest prefix of an announce's peer id decides. A client no \
                rule names is served while no allow rule exists, and refused once one does.
                  tracker admin clients deny -XL0012-
                  tracker admin clients allow -UT -TR -qB -lt
                  tracker admin clients deny -UT2210
                """,
            subcommands: [List.self, AllowClients.self, DenyClients.self, RemoveClients.self], defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every client rule: prefix and rule.")
            @OptionGroup var connection: Connection
            func run() async throws {
                let policy = try await Admin.accessPolicy(try connection.client())
                let rules = policy.first["clients"] as? [[String: Any]] ?? []
                if rules.isEmpty { print("no client rules: every client is served") }
                for rule in rules { print("\(rule["prefix"] ?? "?") \(rule["rule"] ?? "?")") }
            }
        }

        /// What `allow`, `deny` and `remove` take: a node and the prefixes.
        struct Arguments: ParsableArguments {
            @OptionGroup var connection: Connection
            /// Azureus-style prefixes start with a dash: taken as they are, not as options.
            @Argument(parsing: .allUnrecognized,
                      help: "Peer-id prefixes, 1 to 20 bytes each: printable ASCII without spaces (-UT355-), or 0x and hex digits.")
            var prefixes: [String]
            func send(_ rule: String) async throws {
                for text in prefixes where ClientPrefix(text) == nil {
                    throw ValidationError("\(text): a prefix is 1 to 20 printable ASCII characters without spaces, or 0x and 2 to 40 hex digits")
                }
                try await Admin.setClients(rule, prefixes.compactMap(ClientPrefix.init), try connection.client())
            }
        }

        struct AllowClients: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "allow", abstract: "Allow clients (once any is allowed, others are refused).")
            @OptionGroup var arguments: Arguments
            func run() async throws { try await arguments.send("allow") }
        }

        struct DenyClients: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "deny", abstract: "Deny clients.")
            @OptionGroup var arguments: Arguments
            func run() async throws { try await arguments.send("deny") }
        }

        struct RemoveClients: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove clients' rules.")
            @OptionGroup var arguments: Arguments
            func run() async throws { try await arguments.send("remove") }
        }
    }

    /// Sends `prefixes` under `rule` (allow, deny, remove), as `setRules` sends hashes.
    static func setClients(_ rule: String, _ prefixes: [ClientPrefix], _ client: AdminClient) async throws {
        try await post(rule, prefixes.map(\.description), as: "prefixes", to: "/api/access/clients", naming: "clients", client)
    }


    // MARK: backup

    /// Every rule of the access policy, page by page, with its mode and the first page
    /// (its counts).
    static func accessPolicy(_ client: AdminClient) async throws -> (mode: String, rules: [[String: Any]], first: [String: Any]) {
        var rules: [[String: Any]] = [], first: [String: Any]?, offset = 0
        while true {
            guard let page = try await send(client, .get, "/api/access?offset=\(offset)&limit=\(AccessListing.maxPage)") as? [String: Any],
                  let batch = page["rules"] as? [[String: Any]], let mode = page["mode"] as? String else {
                throw Failure(description: "the access policy is not a JSON object with a mode and rules")
            }
            if first == nil { first = page }
            rules += batch
            if batch.isEmpty { return (mode, rules, first ?? page) }
            offset += batch.count
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Back up the operator's data (registered .torrent files and the access policy) into a JSON file.")
        @OptionGroup var connection: Connection
        @Argument(help: "The file to write (0600).") var file: String
        func run() async throws {
            let client = try connection.client()
            guard let rows = try await Admin.send(client, .get, "/api/torrents") as? [[String: Any]] else {
                throw Failure(description: "the catalogue is not a JSON list")
            }
            var torrents: [[String: Any]] = []
            for row in rows {
                guard let hex = row["infoHash"] as? String, let hash = InfoHash(hex: hex) else { continue }
                let response: AdminResponse
                do { response = try await client.request(.get, "/api/torrents/\(hash.hex)/file") } catch { throw Failure(description: "\(error)") }
                guard response.status == 200 else { throw Failure(description: "the file of \(hash.hex): \(response.status)") }
                torrents.append(["infoHash": hash.hex, "file": Data(response.body).base64EncodedString()])
            }
            let access = try await Admin.accessPolicy(client)
            let clients = access.first["clients"] as? [[String: Any]] ?? []
            let users = try await Admin.users(client).map { u in
                ["name": u["name"] ?? "", "role": u["role"] ?? "", "enabled": u["enabled"] ?? true, "key": u["key"] ?? NSNull()]
            }
            let backup: [String: Any] = ["format": OperatorBackup.format, "torrents": torrents,
                                         "access": ["mode": access.mode, "rules": access.rules, "clients": clients, "users": users]]
            let data = try JSONSerialization.data(withJSONObject: backup, options: [.sortedKeys])
            guard FileManager.default.createFile(atPath: file, contents: data, attributes: [.posixPermissions: 0o600]) else {
                throw ValidationError("cannot write \(file)")
            }
            print("exported \(torrents.count) torrents, access mode \(access.mode), \(access.rules.count) rules, \(clients.count) client rules "
                  + "and \(users.count) users to \(file)")
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restore an export: register its torrents (those not registered yet), set its rules, then its mode.")
        @OptionGroup var connection: Connection
        @Argument(help: "A file `tracker admin export` wrote.") var file: String
        func run() async throws {
            guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
            // Checked whole before anything is sent: a bad file changes nothing.
            let backup: OperatorBackup
            do { backup = try OperatorBackup(json: data) } catch { throw ValidationError("\(file): \(error)") }
            let client = try connection.client()
            var registered = 0, already = 0
            for t in backup.torrents {
                let response: AdminResponse
                do {
                    response = try await client.request(.post, "/api/torrents", body: t.file, contentType: "application/x-bittorrent")
                } catch { throw Failure(description: "\(error)") }
                if response.status == 201 {
                    registered += 1
                } else if response.status == 409 && response.text.contains("already registered") {
                    already += 1
                } else {
                    throw Failure(description: "registering \(t.infoHash.hex): \(response.status) \(response.text.prefix(200))")
                }
            }
            print("torrents: \(registered) registered, \(already) already were")
            for rule in AccessRule.allCases {
                let hashes = backup.rules.filter { $0.rule == rule }.map(\.infoHash)
                if !hashes.isEmpty { try await Admin.setRules(rule.description, hashes, client) }
                let prefixes = backup.clients.filter { $0.rule == rule }.map(\.prefix)
                if !prefixes.isEmpty { try await Admin.setClients(rule.description, prefixes, client) }
            }
            // Users before the mode, so a private tracker's users are back before it refuses
            // anyone; each keeps its key, so the URLs handed out keep working.
            let held = Set(try await Admin.users(client).compactMap { $0["name"] as? String })
            for u in backup.users where !held.contains(u.name.text) {
                let body: [String: Any] = ["action": "add", "name": u.name.text, "role": u.role.description, "key": u.key.map { $0.description as Any } ?? false]
                _ = try await send(client, .post, "/api/users", body: Array(try JSONSerialization.data(withJSONObject: body)))
                if !u.enabled {
                    _ = try await send(client, .post, "/api/users", body: Array(try JSONSerialization.data(withJSONObject: ["action": "disable", "name": u.name.text])))
                }
            }
            print("users: \(backup.users.filter { !held.contains($0.name.text) }.count) added, \(backup.users.filter { held.contains($0.name.text) }.count) already were")
            try await Admin.setMode(backup.mode, client)
        }
    }
}

/// What `tracker admin export` writes: `{"format": "tracker-operator-data/1", "torrents":
/// [{"infoHash", "file" (base64)}], "access": {"mode", "rules": [{"infoHash", "rule"}],
/// "clients": [{"prefix", "rule"}]}}` (an export made before client rules has none).
/// Read back as input like any other: every file must parse as a torrent whose hash is
/// the one named, every rule and mode must be one this version knows.
struct OperatorBackup {
    static let format = "tracker-operator-data/1"

    struct Torrent {
        var infoHash: InfoHash
        var file: [UInt8]
    }

    var torrents: [Torrent] = []
    var mode = AccessMode.open
    var rules: [AccessEntry] = []
    var clients: [ClientRuleEntry] = []
    var users: [User] = []

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    init(json: Data) throws {
        guard let root = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else { throw Problem(description: "not a JSON object") }
        guard root["format"] as? String == Self.format else {
            throw Problem(description: "not a \(Self.format) file (format: \(root["format"] ?? "none"))")
        }
        for (i, entry) in ((root["torrents"] as? [Any]) ?? []).enumerated() {
            guard let object = entry as? [String: Any], let hex = object["infoHash"] as? String, let hash = InfoHash(hex: hex),
                  let text = object["file"] as? String, let bytes = Data(base64Encoded: text) else {
                throw Problem(description: "torrent \(i + 1): needs an infoHash and a base64 file")
            }
            guard let t = try? RegisteredTorrent(file: Array(bytes), registeredAt: Instant(milliseconds: 0)), t.infoHash == hash else {
                throw Problem(description: "torrent \(i + 1) (\(hash.hex)): the file is not that torrent")
            }
            torrents.append(Torrent(infoHash: hash, file: Array(bytes)))
        }
        guard let access = root["access"] as? [String: Any], let modeText = access["mode"] as? String,
              let mode = AccessMode(modeText) else {
            throw Problem(description: "access: needs a mode (open, allow or deny)")
        }
        self.mode = mode
        for (i, entry) in ((access["rules"] as? [Any]) ?? []).enumerated() {
            guard let object = entry as? [String: Any], let hex = object["infoHash"] as? String, let hash = InfoHash(hex: hex),
                  let ruleText = object["rule"] as? String, let rule = AccessRule.allCases.first(where: { $0.description == ruleText }) else {
                throw Problem(description: "access rule \(i + 1): needs an infoHash and a rule (allow or deny)")
            }
            rules.append(AccessEntry(infoHash: hash, rule: rule))
        }
        guard rules.count <= AccessPolicy.maxRules else { throw Problem(description: "more than \(AccessPolicy.maxRules) access rules") }
        for (i, entry) in ((access["clients"] as? [Any]) ?? []).enumerated() {
            guard let object = entry as? [String: Any], let text = object["prefix"] as? String, let prefix = ClientPrefix(text),
                  let ruleText = object["rule"] as? String, let rule = AccessRule.allCases.first(where: { $0.description == ruleText }) else {
                throw Problem(description: "client rule \(i + 1): needs a prefix (-UT355- or 0x and hex) and a rule (allow or deny)")
            }
            clients.append(ClientRuleEntry(prefix: prefix, rule: rule))
        }
        guard clients.count <= ClientFilter.maxRules else { throw Problem(description: "more than \(ClientFilter.maxRules) client rules") }
        var keys = Set<TrackerKey>()
        for (i, entry) in ((access["users"] as? [Any]) ?? []).enumerated() {
            guard let object = entry as? [String: Any], let name = (object["name"] as? String).flatMap(UserName.init),
                  let role = (object["role"] as? String).flatMap(UserRole.init), let enabled = object["enabled"] as? Bool else {
                throw Problem(description: "user \(i + 1): needs a name (\(UserName.rule)), a role (admin, viewer or peer) and enabled")
            }
            var key: TrackerKey?
            if let text = object["key"] as? String {
                guard let k = TrackerKey(text), keys.insert(k).inserted else { throw Problem(description: "user \(name): a bad or repeated key") }
                key = k
            }
            users.append(User(name: name, role: role, key: key, enabled: enabled))
        }
        guard users.count <= UserDirectory.maxUsers else { throw Problem(description: "more than \(UserDirectory.maxUsers) users") }

    }
}
