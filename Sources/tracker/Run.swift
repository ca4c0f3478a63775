import ArgumentParser
import Logging
import TrackerLogic
import TrackerRuntime

/// Options that tune peer service, shared by every way of running a node.
struct PeerServiceOptions: ParsableArguments {
    @Option(help: "Seconds peers should wait between announces.")
    var interval: UInt32 = 1800

    @Option(name: .customLong("peer-timeout"), help: "Seconds after which a silent peer is dropped (default: 2 × interval).")
    var peerTimeout: Int64?

    @Option(name: .customLong("numwant-default"), help: "Peers returned when a client asks for the default (num_want ≤ 0).")
    var numWantDefault: Int = 50

    @Option(name: .customLong("numwant-max"), help: "Most peers returned per announce.")
    var numWantMax: Int = 200

    @Option(name: .customLong("connection-id-lifetime"), help: "Seconds a connection id stays valid (at least 120).")
    var connectionIDLifetime: Int64 = 300

    @Flag(name: .customLong("trust-announced-ip"), help: "Use the announce's ip field instead of the sender's address.")
    var trustAnnouncedIP = false

    func config() throws -> TrackerConfig {
        var c = TrackerConfig()
        c.announceInterval = interval
        c.peerTimeout = peerTimeout.map { Milliseconds.seconds($0) }
        c.numWantDefault = numWantDefault
        c.numWantMax = numWantMax
        c.connectionIDLifetimeSeconds = connectionIDLifetime
        c.trustAnnouncedIP = trustAnnouncedIP
        if let problem = c.problems.first { throw ValidationError(problem) }
        return c
    }
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a tracker node. With no options: a standalone node on udp://127.0.0.1:6969.")

    @Option(help: "UDP address to serve peers on (standalone node), e.g. 127.0.0.1:6969 or [::1]:6969.")
    var udp: String = "127.0.0.1:6969"

    @OptionGroup var service: PeerServiceOptions

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else { throw ValidationError("unknown log level '\(logLevel)'") }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "tracker")
        let bind: EndpointArgument
        do { bind = try EndpointArgument(parsing: udp) } catch { throw ValidationError("--udp: \(error)") }
        try await StandaloneServer.run(bind: bind.endpoint, config: try service.config(), logger: logger)
    }
}
