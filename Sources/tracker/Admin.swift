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
            """,
        subcommands: [Status.self, Torrents.self, Register.self, Unregister.self])

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
}
