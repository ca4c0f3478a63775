import ArgumentParser
import Foundation
import TrackerLogic
import TrackerRuntime

/// `tracker admin`: the operator's commands, sent to any node's dashboard API. A change
/// made through one node is committed by the cluster's master like an announce, so every
/// node holds it once the command returns.
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage a running node or cluster through any node's dashboard API.",
        discussion: """
            The node is its --http address. Changes need its admin token: --token-file FILE \
            (the content of the node's --admin-token-file), or TRACKER_ADMIN_TOKEN.
              tracker admin register --node 127.0.0.1:8081 --token-file /etc/tracker/admin.token ubuntu.torrent
              tracker admin import-list --token-file /etc/tracker/admin.token whitelist.txt
              tracker admin mode allow --token-file /etc/tracker/admin.token
            """,
        subcommands: [Status.self, Torrents.self, Register.self, Unregister.self,
                      Access.self, Mode.self, Allow.self, Deny.self, Remove.self, ImportList.self])

    /// Where the node is and who we are to it.
    struct Connection: ParsableArguments {
        @Option(help: "The node's dashboard address, HOST:PORT (or PORT, on 127.0.0.1).")
        var node: String = "127.0.0.1:8081"

        @Option(name: .customLong("token-file"), help: "File holding the node's admin token (first line); default: $TRACKER_ADMIN_TOKEN.")
        var tokenFile: String?

        func client() throws -> AdminClient {
            let endpoint: PeerEndpoint
            do {
                endpoint = try EndpointArgument(parsing: UInt16(node) != nil ? "127.0.0.1:\(node)" : node).endpoint
            } catch { throw ValidationError("--node: \(error)") }
            var token = ProcessInfo.processInfo.environment["TRACKER_ADMIN_TOKEN"]
            if let tokenFile {
                do { token = try AdminToken(file: tokenFile, flag: "token-file").secret } catch { throw ValidationError(error.description) }
            }
            return AdminClient(node: endpoint, token: token)
        }
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
            let client = try connection.client()
            var offset = 0
            repeat {
                guard let page = try await Admin.send(client, .get, "/api/access?offset=\(offset)&limit=\(AccessListing.maxPage)") as? [String: Any],
                      let rules = page["rules"] as? [[String: Any]] else {
                    throw Failure(description: "the access policy is not a JSON object with rules")
                }
                if offset == 0 {
                    print("mode \(page["mode"] ?? "?") (allowed \(page["allowed"] ?? "?"), denied \(page["denied"] ?? "?"), "
                          + "registered torrents \(page["registered"] ?? "?"))")
                }
                for rule in rules { print("\(rule["infoHash"] ?? "?") \(rule["rule"] ?? "?")") }
                offset = rules.isEmpty ? -1 : offset + rules.count
            } while offset > 0
        }
    }

    struct Mode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set the cluster's access mode: open (every hash), allow (registered torrents and allowed hashes), deny (all but denied hashes).")
        @OptionGroup var connection: Connection
        @Argument(help: "open, allow or deny.") var mode: String
        func run() async throws {
            guard let mode = AccessMode(mode) else { throw ValidationError("mode: open, allow or deny (not \(mode))") }
            let body = try JSONSerialization.data(withJSONObject: ["mode": mode.description])
            print(Admin.result(of: try await Admin.send(try connection.client(), .put, "/api/access/mode", body: Array(body)),
                               or: "access mode \(mode)"))
        }
    }

    /// Sends `hashes` under `rule` (allow, deny, remove), a change of at most
    /// `AccessPolicy.maxHashesPerChange` hashes at a time; each is committed before the next.
    static func setRules(_ rule: String, _ hashes: [InfoHash], _ client: AdminClient) async throws {
        var start = 0
        while start < hashes.count {
            let batch = hashes[start..<min(start + AccessPolicy.maxHashesPerChange, hashes.count)]
            let body = try JSONSerialization.data(withJSONObject: ["rule": rule, "infoHashes": batch.map(\.hex)] as [String: Any])
            print(Admin.result(of: try await send(client, .post, "/api/access/rules", body: Array(body)),
                               or: "\(rule): \(batch.count) info hashes"))
            start += batch.count
        }
    }

    struct Allow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Allow info hashes (they count in allow mode).")
        @OptionGroup var connection: Connection
        @Argument(help: "Info hashes, 40 hex digits each.") var hashes: [String]
        func run() async throws { try await Admin.setRules("allow", try hashes.map(Admin.hash), try connection.client()) }
    }

    struct Deny: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deny info hashes (they count in deny mode).")
        @OptionGroup var connection: Connection
        @Argument(help: "Info hashes, 40 hex digits each.") var hashes: [String]
        func run() async throws { try await Admin.setRules("deny", try hashes.map(Admin.hash), try connection.client()) }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove info hashes' allow or deny rules.")
        @OptionGroup var connection: Connection
        @Argument(help: "Info hashes, 40 hex digits each.") var hashes: [String]
        func run() async throws { try await Admin.setRules("remove", try hashes.map(Admin.hash), try connection.client()) }
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
}
