import ArgumentParser
import NIOCore
import TrackerLogic
import TrackerRuntime
import TrackerTools

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "BEP 15 (or, with --http, HTTP) load generator: keeps many announces in flight and reports responses/s and latency.")

    @Option(help: "The tracker to load, e.g. 127.0.0.1:6969.") var target: String = "127.0.0.1:6969"
    @Flag(help: "Load an HTTP tracker (--target HOST:PORT) over keep-alive connections, --concurrency of them, one request in flight on each, spread over --sockets threads.")
    var http = false
    @Option(help: "Seconds to measure.") var duration: Double = 10
    @Option(help: "Distinct info hashes announced.") var torrents: Int = 10000
    @Option(help: "Requests kept in flight.") var concurrency: Int = 256
    @Option(help: "Source sockets the requests are spread over (one per server socket of an SO_REUSEPORT tracker).")
    var sockets: Int = 1
    @Option(name: .customLong("peers-per-torrent"), help: "Distinct simulated peers per torrent.") var peersPerTorrent: Int = 20
    @Option(name: .customLong("scrape-every"), help: "Make every Nth request a scrape (0: announces only).") var scrapeEvery: Int = 0
    @Option(help: "Seed for the workload.") var seed: UInt64 = 1
    @Option(name: .customLong("multicast-interface"), help: "Local IPv4 address group requests leave from (target is a group).")
    var multicastInterface: String = "127.0.0.1"
    @Flag(name: .customLong("print-info-hashes"), help: "Print the workload's info hashes (for a whitelist) and exit.") var printInfoHashes = false
    @Flag(help: "Send nothing: fill a repository in this process with --torrents × --peers-per-torrent peers and report resident bytes per peer.")
    var memory = false
    @Option(name: .customLong("completed-percent"), help: "With --memory: the share of peers that announce completion.")
    var completedPercent: Int = 0
    @Flag(help: "Send nothing: time each stage of a snapshot transfer (take, seal in fragments, open, install, write to SQLite, load) of --torrents × --peers-per-torrent peers in this process.")
    var transfer = false
    @Flag(help: "Send nothing: write --announces re-announces of a --torrents × --peers-per-torrent repository to SQLite as a cluster node's store writer does, and report the writer's CPU per announce.")
    var store = false
    @Flag(help: "Send nothing: take --announces re-announces of a --torrents × --peers-per-torrent repository through a PREPARE and its commit (the master builds and seals the transaction, a follower opens it, a replica commits it and builds its store rows), and report each stage's CPU per announce.")
    var replica = false
    @Option(help: "With --store or --replica: re-announces after the repository is filled.") var announces: Int = 200_000
    @Option(name: .customLong("per-transaction"), help: "With --store or --replica: announces per committed transaction.")
    var perTransaction: Int = 100
    @Option(name: .customLong("per-write"), help: "With --store: committed transactions per SQLite write (the writer's group commit).")
    var perWrite: Int = 10
    @Option(help: "With --transfer or --store: where the temporary SQLite file goes.") var directory: String = "/tmp"

    func validate() throws {
        guard duration > 0 else { throw ValidationError("--duration must be positive") }
        guard torrents > 0 else { throw ValidationError("--torrents must be positive") }
        guard (1...65535).contains(concurrency) else { throw ValidationError("--concurrency must be 1…65535") }
        guard (1...64).contains(sockets) else { throw ValidationError("--sockets must be 1…64") }
        guard peersPerTorrent > 0 else { throw ValidationError("--peers-per-torrent must be positive") }
        guard (0...100).contains(completedPercent) else { throw ValidationError("--completed-percent must be 0…100") }
        guard (1...100_000_000).contains(announces) else { throw ValidationError("--announces must be 1…100,000,000") }
        guard (1...65_535).contains(perTransaction) else { throw ValidationError("--per-transaction must be 1…65535") }
        guard (1...65_535).contains(perWrite) else { throw ValidationError("--per-write must be 1…65535") }
        let peers = torrents.multipliedReportingOverflow(by: peersPerTorrent)
        guard !peers.overflow, peers.partialValue <= 100_000_000 else {
            throw ValidationError("--torrents × --peers-per-torrent must be at most 100,000,000")
        }
    }

    func run() async throws {
        if transfer {
            do {
                let result = try TransferBench.run(torrents: torrents, peersPerTorrent: peersPerTorrent, seed: seed, directory: directory)
                print(result)
                print(result.json)
            } catch {
                print("transfer: \(error)")
                throw ExitCode(1)
            }
            return
        }
        if store {
            do {
                let result = try StoreBench.run(torrents: torrents, peersPerTorrent: peersPerTorrent, announces: announces,
                                                perTransaction: perTransaction, perWrite: perWrite, seed: seed, directory: directory)
                print(result)
                print(result.json)
            } catch {
                print("store: \(error)")
                throw ExitCode(1)
            }
            return
        }
        if replica {
            do {
                let result = try ReplicaBench.run(torrents: torrents, peersPerTorrent: peersPerTorrent, announces: announces,
                                                  perTransaction: perTransaction, seed: seed)
                print(result)
                print(result.json)
            } catch {
                print("replica: \(error)")
                throw ExitCode(1)
            }
            return
        }
        if memory {
            let result = MemoryBench.run(torrents: torrents, peersPerTorrent: peersPerTorrent, completedPercent: completedPercent, seed: seed)
            print(result)
            print(result.json)
            return
        }
        let endpoint: EndpointArgument
        do { endpoint = try EndpointArgument(parsing: target) } catch { throw ValidationError("--target: \(error)") }
        var config = BenchConfig(target: endpoint.endpoint, duration: .milliseconds(Int64(duration * 1000)),
                                 torrents: torrents, concurrency: concurrency)
        config.peersPerTorrent = peersPerTorrent
        config.sockets = sockets
        config.scrapeEvery = scrapeEvery
        config.seed = seed
        guard let interface = IPAddress(multicastInterface) else { throw ValidationError("--multicast-interface: not an IP address") }
        config.multicastInterface = interface
        if printInfoHashes {
            for h in config.infoHashes() { print(h.hex) }
            return
        }
        let result = try await (http ? HTTPLoadGenerator.run(config) : LoadGenerator.run(config))
        print(result)
        print(result.json)
        if result.responses == 0 { throw ExitCode(1) }
    }
}
