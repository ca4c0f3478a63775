import ArgumentParser
import TrackerLogic
import TrackerRuntime
import TrackerTools

struct Client: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Talk BEP 15 to a tracker and print the decoded replies.",
        subcommands: [Connect.self, AnnounceCommand.self, ScrapeCommand.self])

    struct Target: ParsableArguments {
        @Argument(help: "The tracker, e.g. udp://127.0.0.1:6969.")
        var tracker: String

        @Option(help: "Seconds to wait for a reply before retransmitting.")
        var timeout: Double = 2

        @Option(help: "Local address to send from (a group target: the interface it leaves on; default: loopback, for a cluster on this host).")
        var bind: String?

        func client() async throws -> TrackerUDPClient {
            let target: EndpointArgument
            do { target = try EndpointArgument(parsing: tracker) } catch { throw ValidationError("\(error)") }
            if let bind, IPAddress(bind) == nil { throw ValidationError("--bind: not an IP address: \(bind)") }
            return try await TrackerUDPClient.make(target: target.endpoint, localAddress: bind)
        }
    }

    struct Connect: AsyncParsableCommand {
        @OptionGroup var target: Target
        func run() async throws {
            let client = try await target.client()
            defer { Task { await client.close() } }
            let id = try await client.connect()
            print("connection_id 0x\(String(id, radix: 16))")
        }
    }

    struct AnnounceCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "announce")
        @OptionGroup var target: Target
        @Option(name: .customLong("info-hash"), help: "40 hex digits.") var infoHash: String
        @Option(name: .customLong("peer-id"), help: "40 hex digits, or up to 20 characters of text.") var peerID: String = "-TR0001-clientcli000"
        @Option(help: "The port peers reach this peer on.") var port: UInt16 = 6881
        @Option(help: "Bytes left to download (0 = seeder).") var left: Int64 = 0
        @Option(help: "Bytes downloaded.") var downloaded: Int64 = 0
        @Option(help: "Bytes uploaded.") var uploaded: Int64 = 0
        @Option(help: "none, started, completed or stopped.") var event: String = "started"
        @Option(name: .customLong("num-want")) var numWant: Int32 = -1

        func run() async throws {
            guard let hash = InfoHash(hex: infoHash) else { throw ValidationError("--info-hash must be 40 hex digits") }
            guard let peer = parsePeerID(peerID) else { throw ValidationError("--peer-id must be 40 hex digits or at most 20 characters") }
            let events: [String: AnnounceEvent] = ["none": .none, "started": .started, "completed": .completed, "stopped": .stopped]
            guard let ev = events[event] else { throw ValidationError("--event must be none, started, completed or stopped") }
            let client = try await target.client()
            defer { Task { await client.close() } }
            let cid = try await client.connect()
            let response = try await client.send(.announce(AnnounceRequest(
                connectionID: cid, transactionID: .random(in: 0 ... .max), infoHash: hash, peerID: peer,
                downloaded: downloaded, left: left, uploaded: uploaded, event: ev, key: .random(in: 0 ... .max),
                numWant: numWant, port: port)))
            try printResponse(response)
        }
    }

    struct ScrapeCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "scrape")
        @OptionGroup var target: Target
        @Argument(help: "Info hashes, 40 hex digits each (at most 74).") var infoHashes: [String]

        func run() async throws {
            let hashes = try infoHashes.map { text -> InfoHash in
                guard let h = InfoHash(hex: text) else { throw ValidationError("'\(text)' is not 40 hex digits") }
                return h
            }
            guard !hashes.isEmpty else { throw ValidationError("name at least one info hash") }
            let client = try await target.client()
            defer { Task { await client.close() } }
            let cid = try await client.connect()
            let response = try await client.send(.scrape(ScrapeRequest(connectionID: cid, transactionID: .random(in: 0 ... .max), infoHashes: hashes)))
            if case .scrape(let r) = response {
                for (hash, entry) in zip(hashes, r.entries) {
                    print("\(hash.hex) seeders=\(entry.seeders) completed=\(entry.completed) leechers=\(entry.leechers)")
                }
            } else {
                try printResponse(response)
            }
        }
    }
}

func parsePeerID(_ text: String) -> PeerID? {
    if let id = PeerID(hex: text) { return id }
    var bytes = Array(text.utf8)
    guard bytes.count <= 20 else { return nil }
    bytes += Array(repeating: UInt8(ascii: "0"), count: 20 - bytes.count)
    return PeerID(bytes: bytes)
}

struct TrackerErrorReply: Error, CustomStringConvertible {
    var description: String
}

func printResponse(_ response: TrackerResponse) throws {
    switch response {
    case .connect(let r):
        print("connection_id 0x\(String(r.connectionID, radix: 16))")
    case .announce(let r):
        print("interval=\(r.interval) seeders=\(r.seeders) leechers=\(r.leechers) peers=\(r.peers.count)")
        for p in r.peers { print("peer \(p)") }
    case .scrape(let r):
        for e in r.entries { print("seeders=\(e.seeders) completed=\(e.completed) leechers=\(e.leechers)") }
    case .error(let e):
        throw TrackerErrorReply(description: "tracker error: \(e.message)")
    }
}
