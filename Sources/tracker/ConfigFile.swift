import ArgumentParser
import Foundation
import Logging
import TOMLKit
import TrackerRuntime

/// `tracker run --config FILE`: a TOML file whose keys are `run`'s long option names
/// without the dashes (`broker = "stomp://…"`, `keepalive = "1s"`, `trust-announced-ip =
/// true`, `cluster-key-file = ["new.key", "old.key"]`). The file becomes arguments placed
/// before the command line's, so a flag given on the command line overrides the file.
/// Arguments are then parsed by `run` itself: one set of rules, one set of messages,
/// rewritten to name the key and the file.
enum ConfigFile {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// The file's settings as `run` arguments.
    static func arguments(path: String) throws -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw Problem(description: "config \(path): cannot read it") }
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let e as TOMLParseError {
            throw Problem(description: "config \(path): line \(e.source.begin.line): \(e.description)")
        } catch { throw Problem(description: "config \(path): \(error)") }
        var out: [String] = []
        for key in table.keys.sorted() {
            guard let value = table[key] else { continue }
            guard key != "config" else { throw Problem(description: "config \(path): key 'config' cannot name another file") }
            switch value.type {
            case .bool:
                if value.bool == true { out.append("--\(key)") }
            case .int, .double, .string:
                out += ["--\(key)", value.int.map(String.init) ?? value.double.map { "\($0)" } ?? value.string ?? ""]
            case .array:
                guard let items = value.array, items.allSatisfy({ $0.type == .string || $0.type == .int }) else {
                    throw Problem(description: "config \(path): key '\(key)': a list may hold only strings or numbers")
                }
                for item in items { out += ["--\(key)", item.string ?? item.int.map(String.init) ?? ""] }
            default:
                throw Problem(description: "config \(path): key '\(key)': a \(value.type) is not a setting (use a string, number, true/false or a list)")
            }
        }
        // Parsed on their own first, so a bad key or value is reported against the file.
        let run: Run
        do { run = try Run.parse(out) } catch {
            throw Problem(description: "config \(path): " + rewrite(Run.message(for: error)))
        }
        // The values `run` checks only when it starts.
        do {
            _ = try run.service.config()
            _ = try run.httpEndpoint()
        } catch {
            throw Problem(description: "config \(path): " + rewrite(Run.message(for: error)))
        }
        return out
    }

    /// The file's settings by key, as `arguments(path:)` gives them (a flag's value
    /// empty, a list's values joined): what a reload compares to tell what changed.
    static func values(path: String) throws -> [String: String] {
        let args = try arguments(path: path)
        var out: [String: [String]] = [:]
        var i = 0
        while i < args.count {
            let hasValue = i + 1 < args.count && !args[i + 1].hasPrefix("--")
            out[String(args[i].dropFirst(2)), default: []].append(hasValue ? args[i + 1] : "")
            i += hasValue ? 2 : 1
        }
        return out.mapValues { $0.joined(separator: "\u{0}") }
    }

    /// ArgumentParser speaks of `--key`; the file has `key`.
    static func rewrite(_ message: String) -> String {
        var m = message
        if let r = m.range(of: #"Unknown option '--([a-z0-9-]+)'"#, options: .regularExpression) {
            let key = m[r].dropFirst("Unknown option '--".count).dropLast()
            m.replaceSubrange(r, with: "unknown key '\(key)'")
        }
        m = m.replacingOccurrences(of: #"^--([a-z0-9-]+):"#, with: "key '$1':", options: .regularExpression)
        return m.replacingOccurrences(of: #"'--([a-z0-9-]+)(?: <[a-z0-9-]+>)?'"#, with: "key '$1'", options: .regularExpression)
    }

    /// `tracker run ARGS`: when ARGS give `--config FILE`, the file's arguments go first.
    static func expand(_ arguments: [String]) throws -> [String] {
        guard arguments.first == "run" else { return arguments }
        var path: String?
        for (i, a) in arguments.enumerated() {
            if a == "--config", i + 1 < arguments.count { path = arguments[i + 1] }
            if a.hasPrefix("--config=") { path = String(a.dropFirst("--config=".count)) }
        }
        guard let path else { return arguments }
        let fromFile = try self.arguments(path: path)
        // A list given on the command line replaces the file's list rather than adding to it.
        let given = Set(arguments.filter { $0.hasPrefix("--") })
        var kept: [String] = []
        var i = 0
        while i < fromFile.count {
            let flag = fromFile[i]
            let hasValue = i + 1 < fromFile.count && !fromFile[i + 1].hasPrefix("--")
            if !given.contains(flag) { kept.append(flag); if hasValue { kept.append(fromFile[i + 1]) } }
            i += hasValue ? 2 : 1
        }
        return ["run"] + kept + arguments.dropFirst()
    }

    /// What the configuration tab may change: the tracker service's tuning, not the
    /// node's identity, addresses or keys — and nothing the command line already sets.
    static let editableKeys = ["interval", "peer-timeout", "numwant-default", "numwant-max", "max-reply-bytes", "connection-id-lifetime",
                               "connect-limit", "announce-limit", "error-limit", "max-swarms", "max-peers-per-swarm", "max-peers", "max-scrape",
                               "trust-announced-ip", "keepalive", "quorum", "cluster-size",
                               "held-requests", "held-window", "receive-skew"]

    static func editor(file: String) -> SettingsEditor {
        let onCommandLine = Set(CommandLine.arguments.filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) })
        return SettingsEditor(file: file, editable: editableKeys.filter { !onCommandLine.contains($0) }) { changes in
            try save(changes, to: file)
        }
    }

    /// Writes `changes` into the file — only if the file, changed, is still valid. The
    /// rest of the file (comments included), its mode and its owner stay as they were.
    static func save(_ changes: [String: String], to path: String) throws {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw Problem(description: "config \(path): cannot read it") }
        do { _ = try TOMLTable(string: text) } catch { throw Problem(description: "config \(path): \(error)") }
        do {
            try ConfigFileEdit.replace(path, with: ConfigFileEdit.apply(changes, to: text)) { candidate in
                do { _ = try arguments(path: candidate) } catch {
                    throw Problem(description: "\(error)".replacingOccurrences(of: candidate, with: path))
                }
            }
        } catch let e as AtomicFile.WriteError {
            throw Problem(description: e.description)
        }
    }

    /// The example is also the package's /etc/tracker/tracker.toml: a node of a cluster
    /// across hosts (docs/deploy.md), which starts once its key files exist.
    static let example = """
        # tracker run --config FILE: every key is a `tracker run` option without its dashes.
        # Options given on the command line override the file. Unknown keys are an error.
        # `tracker config check FILE` makes every check `run` makes before it binds anything.
        # A cluster of three hosts and a broker host: /usr/share/doc/tracker/deploy.md.

        # --- peers: one peer channel (deploy.md says which fits your network)
        floating = "10.0.0.100:6969"      # cluster: an address keepalived moves to the serving master's host
        group = "239.255.42.99:6969"      # with floating: keepalives cross the LAN through it; alone: peers send to it (Transmission only)
        # group = ["239.255.42.99:6969", "[ff15::42]:6969"]  # both families: one group (vip, floating) each
        interface = "eth0"                # the interface the group is joined on
        # vip = "10.0.0.100:6969"         # cluster, with group: a shared address delivered through the group's MAC
        # udp = "0.0.0.0:6969"            # standalone node (no broker): where peers send requests
        # threads = 2                     # standalone node: event loops, one SO_REUSEPORT socket each

        # --- cluster
        id = "1"                          # unique per node: 1, 2, 3 (the highest live id is master)
        broker = "stomp+ssl://broker.example.net:61614"   # or a failover list: "stomp+ssl://a:61614,stomp+ssl://b:61614"
        cluster = "tracker"               # broker topic /topic/NAME
        cluster-key-file = ["/etc/tracker/cluster.key"]   # from `tracker keygen`; two during a rotation: the first signs
        # insecure-cluster = false        # never on a broker others can publish to
        # connection-id-key-file = "/etc/tracker/connid.key"
        broker-user = "tracker"
        broker-password-file = "/etc/tracker/broker.password"
        broker-ca-file = "/etc/tracker/broker-ca.pem"     # the CA the broker's certificate chains to
        # broker-cert-file = "/etc/tracker/node.pem"      # a client certificate, if the broker asks for one
        # broker-key-file = "/etc/tracker/node.key"
        keepalive = "1s"
        quorum = "live"                   # live | strict
        cluster-size = 3                  # for strict quorum
        held-requests = 4096              # requests kept while no master serves; the next one answers them
        held-window = "15s"               # …if they are at most this old by then
        receive-skew = "10ms"             # a held request read this soon after a master's word was its to answer
        db = "/var/lib/tracker/tracker.sqlite"

        # --- dashboard, /api/health (keepalived asks it) and /metrics
        http = "127.0.0.1:8081"
        # admin-token-file = "/etc/tracker/admin.token"   # default: drawn and written beside db
        # http-host-name = ["tracker1.example.net"]

        # --- tracker service
        interval = 1800                   # seconds between announces
        # peer-timeout = 3600             # default: 2 × interval
        numwant-default = 50
        numwant-max = 200
        max-reply-bytes = 1232            # num_want capped so a reply fits (IPv6: 67 peers, no fragmentation)
        connection-id-lifetime = 300
        trust-announced-ip = false
        connect-limit = "100/200"         # per source: RATE/BURST, or "off"
        announce-limit = "100/200"
        error-limit = "10/20"             # error replies per source: no 1:1 reflection
        max-swarms = 1000000
        max-peers-per-swarm = 100000
        max-peers = 16777216              # all swarms: 2 GiB of peer tables at 128 bytes a peer
        max-scrape = 74

        # --- logging
        log-level = "info"
        # log-format = "json"             # one JSON object per line (journald, Loki); default: text
        """

}

/// `tracker config example | check FILE`.
struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Config files for `tracker run --config FILE`.",
        subcommands: [Example.self, Check.self])

    struct Example: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a commented example config file.")
        func run() { print(ConfigFile.example) }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a config file as `tracker run --config FILE` would before it binds anything.",
            discussion: "Every key known, every value valid and in range, every file readable, key files valid, addresses that parse, the interface present and up.")
        @Argument(help: "The TOML file.") var file: String
        func run() throws {
            let args: [String]
            do { args = try ConfigFile.arguments(path: file) } catch let p as ConfigFile.Problem { throw ValidationError(p.description) }
            let node: String
            do {
                node = try Run.parse(args).preflight(logger: Logger(label: "tracker"))
            } catch {
                throw ValidationError("config \(file): " + ConfigFile.rewrite(Run.message(for: error)))
            }
            print("\(file): \(args.filter { $0.hasPrefix("--") }.count) settings, all valid: \(node)")
        }
    }
}
