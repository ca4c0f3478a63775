import ArgumentParser
import Foundation
import Logging
import TOMLKit
import TrackerRuntime

/// `tracker run --config FILE`: a TOML file whose keys are `run`'s long option names
/// without the dashes (`broker = "stomp://…"`, `keepalive = "1s"`, `trust-announced-ip =
/// true`, `cluster-key-file = ["new.key", "old.key"]`), read in layers:
/// 1. FILE itself (the package's conffile, which an upgrade may replace);
/// 2. every `*.toml` in `FILE.d/`, in name order (the operator's own settings, and the
///    dashboard's edits in `90-dashboard.toml`), a key there replacing the one before;
/// 3. `TRACKER_<KEY>` environment variables (`TRACKER_NUMWANT_MAX=100`; a value that reads
///    as a TOML value, `["a", "b"]` or `true`, is taken as one, anything else as a string);
/// 4. the command line, which overrides them all.
/// The layers become arguments placed before the command line's, parsed by `run` itself:
/// one set of rules, one set of messages, rewritten to name the key and where it was set.
enum ConfigFile {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    typealias Setting = ConfigLayers.Setting

    /// The layers of `run`'s settings (`ConfigLayers`).
    static let layers = ConfigLayers(keys: runKeys)

    static func dropInDirectory(of path: String) -> String { ConfigLayers.dropInDirectory(of: path) }

    /// The settings of `path`, its drop-ins and the environment, by key.
    static func settings(path: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                         replacing substitute: (file: String, with: String)? = nil) throws -> [String: Setting] {
        do { return try layers.settings(path: path, environment: environment, replacing: substitute) } catch {
            throw Problem(description: error.description)
        }
    }

    /// `run`'s long option names, as its help lists them (hidden ones and `config` aside).
    static let runKeys: [String] = {
        let help = Run.helpMessage(columns: 10_000)
        var keys: [String] = []
        var rest = help[...]
        while let r = rest.range(of: #"--[a-z][a-z0-9-]+"#, options: .regularExpression) {
            let key = String(rest[r].dropFirst(2))
            if key != "config", key != "help", !keys.contains(key) { keys.append(key) }
            rest = rest[r.upperBound...]
        }
        return keys
    }()

    /// The layers' settings as `run` arguments, checked as `run` parses them: a bad key
    /// or value is named with the layer that set it.
    static func arguments(path: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
                          replacing substitute: (file: String, with: String)? = nil) throws -> [String] {
        let settings = try self.settings(path: path, environment: environment, replacing: substitute)
        let out = settings.keys.sorted().flatMap { settings[$0]?.arguments ?? [] }
        func problem(_ error: Error) -> Problem {
            let message = rewrite(Run.message(for: error))
            // The layer that set the key the message names, else the file and its drop-ins.
            var source = path ?? "environment"
            if let r = message.range(of: #"key '[a-z0-9-]+'"#, options: .regularExpression),
               let s = settings[String(message[r].dropFirst(5).dropLast())] {
                source = s.source
            } else if let path, settings.values.contains(where: { $0.source != path }) {
                source = "\(path) (with \(Set(settings.values.map(\.source)).subtracting([path]).sorted().joined(separator: ", ")))"
            }
            return Problem(description: "config \(source): " + message)
        }
        // Parsed on their own first, so a bad key or value is reported against its layer.
        let run: Run
        do { run = try Run.parse(out) } catch { throw problem(error) }
        // The values `run` checks only when it starts.
        do {
            _ = try run.service.config()
            _ = try run.httpEndpoint()
        } catch { throw problem(error) }
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

    /// `tracker run ARGS`: the layers' arguments (`--config FILE` with its drop-ins, and
    /// the environment) go first.
    static func expand(_ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [String] {
        guard arguments.first == "run" else { return arguments }
        var path: String?
        for (i, a) in arguments.enumerated() {
            if a == "--config", i + 1 < arguments.count { path = arguments[i + 1] }
            if a.hasPrefix("--config=") { path = String(a.dropFirst("--config=".count)) }
        }
        let fromFile = try self.arguments(path: path, environment: environment)
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
                               "interval-jitter",
                               "trust-announced-ip", "keepalive", "quorum", "cluster-size",
                               "held-requests", "held-window", "receive-skew"]

    /// The dashboard's edits go to `FILE.d/90-dashboard.toml` when FILE has a drop-in
    /// directory (the package's: the unit may write there, not to FILE), else to FILE.
    static func editor(file: String) -> SettingsEditor {
        let onCommandLine = Set(CommandLine.arguments.filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) })
        var isDirectory: ObjCBool = false
        let dropIns = FileManager.default.fileExists(atPath: dropInDirectory(of: file), isDirectory: &isDirectory) && isDirectory.boolValue
        let target = dropIns ? "\(dropInDirectory(of: file))/\(dashboardDropIn)" : file
        return SettingsEditor(file: target, editable: editableKeys.filter { !onCommandLine.contains($0) }) { changes in
            try save(changes, to: target, config: file)
        }
    }

    static let dashboardDropIn = "90-dashboard.toml"

    /// Each key the layers set, and those on this process's command line, with its value
    /// and source: what `/api/config` adds to the node's own rows. Layers that no longer
    /// pass are shown as one row saying so.
    static func sourceRows(path: String?) -> [SettingRow] {
        var rows: [SettingRow] = []
        do {
            let settings = try self.settings(path: path)
            for key in settings.keys.sorted() {
                guard let s = settings[key] else { continue }
                rows.append(SettingRow(key: key, value: shown(key, s.arguments), source: s.source))
            }
        } catch {
            rows.append(SettingRow(key: "configuration", value: "\(error)", source: path ?? "environment"))
        }
        var given = CommandLine.arguments.dropFirst(2)[...]
        while let flag = given.first, flag.hasPrefix("--") {
            given = given.dropFirst()
            let key = String(flag.dropFirst(2).prefix { $0 != "=" })
            var values: [String] = []
            while let v = given.first, !v.hasPrefix("--") { values.append(v); given = given.dropFirst() }
            guard key != "config" else { continue }
            rows.removeAll { $0.key == key }
            rows.append(SettingRow(key: key, value: shown(key, [flag] + values), source: "command line"))
        }
        return rows
    }

    /// A setting's value as `config check` prints it; never a secret's, which only files
    /// hold (`…-file` keys name the file).
    static func shown(_ key: String, _ arguments: [String]) -> String {
        let values = arguments.filter { !$0.hasPrefix("--") }
        if arguments.isEmpty { return "(unset)" }
        // A broker URL may carry a passcode (stomp://USER:PASS@HOST): never printed.
        let masked = values.map { $0.replacingOccurrences(of: #"://([^:/@,]*):[^@/,]*@"#, with: "://$1:***@", options: .regularExpression) }
        return values.isEmpty ? "true" : masked.joined(separator: ", ")
    }

    /// Writes `changes` into `path` (the config file or one of its drop-ins) — only if
    /// every layer, so changed, passes every check `tracker config check` makes. The
    /// rest of the file (comments included), its mode and its owner stay as they were.
    static func save(_ changes: [String: String], to path: String, config: String) throws {
        let exists = FileManager.default.fileExists(atPath: path)
        let text: String
        if exists {
            guard let t = try? String(contentsOfFile: path, encoding: .utf8) else { throw Problem(description: "config \(path): cannot read it") }
            text = t
        } else {
            text = "# Settings saved from the dashboard's configuration tab; they override \(config).\n"
        }
        do { _ = try TOMLTable(string: text) } catch { throw Problem(description: "config \(path): \(error)") }
        let validate = { (candidate: String) throws in
            do { try check(path: config, replacing: (path, candidate)) } catch {
                throw Problem(description: "\(error)".replacingOccurrences(of: candidate, with: path))
            }
        }
        do {
            if exists {
                try ConfigFileEdit.replace(path, with: ConfigFileEdit.apply(changes, to: text), validate: validate)
            } else {
                try AtomicFile.write(path, ConfigFileEdit.apply(changes, to: text), mode: 0o640, validate: validate)
            }
        } catch let e as AtomicFile.WriteError {
            throw Problem(description: e.description)
        }
    }

    /// Every check `run` makes before it binds anything, on the layers of `path`: what
    /// `tracker config check` prints, and what a dashboard save must pass.
    @discardableResult
    static func check(path: String, replacing substitute: (file: String, with: String)? = nil,
                      logger: Logger = Logger(label: "tracker", factory: { _ in SwiftLogNoOpLogHandler() })) throws -> (args: [String], node: String) {
        let args = try arguments(path: path, replacing: substitute)
        do {
            return (args, try Run.parse(args).preflight(logger: logger))
        } catch {
            let message = rewrite(Run.message(for: error))
            let settings = (try? self.settings(path: path, replacing: substitute)) ?? [:]
            var source = path
            if let r = message.range(of: #"key '[a-z0-9-]+'"#, options: .regularExpression),
               let s = settings[String(message[r].dropFirst(5).dropLast())] {
                source = s.source
            }
            throw Problem(description: "config \(source): " + message)
        }
    }

    /// The package's /etc/tracker/tracker.toml: a standalone public tracker that serves
    /// as installed. The operator's changes go to drop-ins, so an upgrade never asks.
    static let example = """
        # /etc/tracker/tracker.toml: a standalone public UDP tracker, as installed.
        #
        # Every key is a `tracker run` option without its dashes; unknown keys are an error.
        # Keep this file as the package ships it: put your settings in
        # /etc/tracker/tracker.toml.d/*.toml, read after it in name order (a key there
        # replaces the one here), so upgrades replace this file without asking.
        # TRACKER_<KEY> environment variables (TRACKER_NUMWANT_MAX=100) override the files,
        # and the command line overrides everything.
        # `tracker config check /etc/tracker/tracker.toml` makes every check `run` makes
        # before it binds anything, and says where each value came from.

        # --- peers: where they send their requests
        udp = ["0.0.0.0:6969", "[::]:6969"]   # every IPv4 and IPv6 address
        # threads = 2                         # serving threads, one SO_REUSEPORT socket each per address
        http-tracker = ["0.0.0.0:6969", "[::]:6969"]     # HTTP announces and scrapes (BEP 3, BEP 48), on TCP
        # http-tracker-cert-file = "/etc/tracker/https.pem"   # HTTPS, read again on SIGHUP (with http-tracker-key-file)
        # trusted-proxies = "127.0.0.1"       # a reverse proxy whose X-Forwarded-For names the client

        # --- registered torrents and the access policy, kept across restarts
        db = "/var/lib/tracker/tracker.sqlite"

        # --- dashboard, /api/health and /metrics
        http = "127.0.0.1:8081"               # the dashboard: it shows peers' addresses, so loopback
        admin-token-file = "/etc/tracker/admin.token"   # made by the package; `tracker admin` reads it too
        # metrics = "10.0.0.11:9469"          # /metrics alone (no peer data, no controls), for a Prometheus host

        # --- tracker service
        interval = 1800                       # seconds between announces
        interval-jitter = 10                  # percent either way, per reply: re-announces spread out (0: none)
        # peer-timeout = 3600                 # default: 2 × interval
        numwant-default = 50
        numwant-max = 200
        max-reply-bytes = 1232                # num_want capped so a reply fits (IPv6: 67 peers, no fragmentation)
        connection-id-lifetime = 300
        trust-announced-ip = false
        connect-limit = "100/200"             # per source: RATE/BURST, or "off"
        announce-limit = "100/200"
        error-limit = "10/20"                 # error replies per source: no 1:1 reflection
        max-swarms = 1000000
        max-peers-per-swarm = 100000
        max-peers = 16777216                  # all swarms: 2 GiB of peer tables at 128 bytes a peer
        max-scrape = 74

        # --- logging
        log-level = "info"
        # log-format = "json"                 # one JSON object per line (Loki); default: text, with journald priorities

        # --- a node of a cluster across hosts (/usr/share/doc/udp-tracker-cluster/deploy.md):
        # `tracker config example --cluster > /etc/tracker/tracker.toml.d/cluster.toml`, edited there.
        # udp = []                            # the cluster's peer channel replaces the addresses above
        # id = "1"
        # floating = "10.0.0.100:6969"
        # broker = "stomp+ssl://broker.example.net:61614"
        """

    /// `tracker config example --cluster`: the drop-in that makes the package's node a
    /// node of a cluster across hosts (docs/operating/deploy.md), which starts once its
    /// key files exist.
    static let clusterExample = """
        # /etc/tracker/tracker.toml.d/cluster.toml: this host's node of a cluster.
        # Read after /etc/tracker/tracker.toml; a key here replaces the one there.
        # A cluster of three hosts and a broker host: /usr/share/doc/udp-tracker-cluster/deploy.md.

        # --- peers: one peer channel (deploy.md says which fits your network)
        udp = []                          # not the standalone addresses: the channel below replaces them
        floating = "10.0.0.100:6969"      # an address keepalived moves to the serving master's host
        group = "239.255.42.99:6969"      # with floating: keepalives cross the LAN through it too; omit it where multicast is dropped
        # group = ["239.255.42.99:6969", "[ff15::42]:6969"]  # both families: one group (vip, floating) each
        interface = "eth0"                # the interface the group is joined on
        # vip = "10.0.0.100:6969"         # with group, instead of floating: a shared address delivered through the group's MAC
        http-tracker = "10.0.0.100:6969"  # HTTP announces (BEP 3) on the floating address's TCP port; only its holder accepts

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
        db = "/var/lib/tracker/cluster.sqlite"   # a cluster node's repository (emptied on a clean stop), not the standalone one
        """

}

/// `tracker config example | check FILE`.
struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Config files for `tracker run --config FILE`.",
        subcommands: [Example.self, Check.self])

    struct Example: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a commented example config file: the package's standalone /etc/tracker/tracker.toml, or with --cluster the drop-in that makes it a cluster node.")
        @Flag(help: "The cluster node's drop-in (/etc/tracker/tracker.toml.d/cluster.toml).") var cluster = false
        func run() { print(cluster ? ConfigFile.clusterExample : ConfigFile.example) }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a config file as `tracker run --config FILE` would before it binds anything.",
            discussion: "Every key known, every value valid and in range, every file readable, key files valid, addresses that parse, the interface present and up.")
        @Argument(help: "The TOML file.") var file: String
        func run() throws {
            let checked: (args: [String], node: String)
            do { checked = try ConfigFile.check(path: file, logger: Logger(label: "tracker")) } catch {
                FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
                throw ExitCode(Tracker.configurationError)
            }
            print("\(file): \(checked.args.filter { $0.hasPrefix("--") }.count) settings, all valid: \(checked.node)")
            // Where each value came from: the file, a drop-in or the environment.
            let settings = (try? ConfigFile.settings(path: file)) ?? [:]
            for key in settings.keys.sorted() {
                guard let setting = settings[key] else { continue }
                print("  \(key) = \(ConfigFile.shown(key, setting.arguments))  (\(setting.source))")
            }
        }
    }
}
