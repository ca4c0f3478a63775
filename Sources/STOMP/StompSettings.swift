import NIOCore

/// A `--broker` value that cannot be used, said in words an operator can act on.
public struct BrokerURLError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// One broker of the failover list.
public struct BrokerAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// `stomp+ssl://`: the connection is TLS, the broker's certificate verified.
    public var tls: Bool
    public init(host: String, port: Int, tls: Bool = false) { self.host = host; self.port = port; self.tls = tls }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    /// As written in `--broker`.
    public var url: String { "\(tls ? "stomp+ssl" : "stomp")://\(self)" }

    /// Whether the host is this machine (127.0.0.0/8 or ::1): the only place a plain
    /// connection keeps the broker password and the cluster's traffic to itself.
    public var isLoopback: Bool {
        if host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}

/// Where and how to reach the broker.
public struct StompSettings: Sendable {
    /// Tried first; the client moves down the list when a broker fails, and round again.
    public var primary: BrokerAddress
    public var fallbacks: [BrokerAddress] = []
    public var login: String?
    public var passcode: String?
    /// What we offer and ask for, in ms (STOMP `heart-beat: cx,cy`).
    public var heartbeat: Int = 1000
    public var reconnectMin = TimeAmount.milliseconds(100)
    public var reconnectMax = TimeAmount.seconds(2)
    /// For `stomp+ssl://` brokers: the CA certificates (PEM) a broker's certificate must
    /// chain to (nil: the system's trust store), and an optional client certificate.
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?

    public init(host: String, port: Int) { primary = BrokerAddress(host: host, port: port) }

    /// Every broker, in the order they are tried.
    public var brokers: [BrokerAddress] { [primary] + fallbacks }

    /// `stomp://HOST:PORT` or `stomp+ssl://HOST:PORT` (login and passcode as
    /// `stomp://user:pass@HOST:PORT`), or a failover list of them separated by commas
    /// (`stomp+ssl://a:61614,stomp+ssl://b:61614`, schemes may mix); credentials, if
    /// given more than once, must be the same.
    public init(url: String) throws {
        let parts = url.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingBlanks }
        guard parts.count <= 16 else { throw BrokerURLError("at most 16 brokers in a failover list (got \(parts.count))") }
        var brokers: [BrokerAddress] = []
        var login: String?, passcode: String?
        for part in parts {
            let (address, l, p) = try Self.parse(part)
            if brokers.contains(where: { $0.host == address.host && $0.port == address.port }) {
                throw BrokerURLError("broker \(address) is listed twice")
            }
            brokers.append(address)
            if let l {
                if let login, login != l || passcode != p {
                    throw BrokerURLError("brokers in one list must use the same login and passcode")
                }
                login = l
                passcode = p
            }
        }
        guard let first = brokers.first else { throw BrokerURLError("no broker URL") }
        self.init(host: first.host, port: first.port)
        primary = first
        fallbacks = Array(brokers.dropFirst())
        self.login = login
        self.passcode = passcode
    }

    static func parse(_ url: String) throws -> (BrokerAddress, login: String?, passcode: String?) {
        let tls: Bool
        var rest: Substring
        if url.hasPrefix("stomp://") {
            tls = false
            rest = Substring(url.dropFirst("stomp://".count))
        } else if url.hasPrefix("stomp+ssl://") {
            tls = true
            rest = Substring(url.dropFirst("stomp+ssl://".count))
        } else {
            throw BrokerURLError("broker URL must start with stomp:// or stomp+ssl:// (got '\(url)')")
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        var login: String?, passcode: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = credentials.split(separator: ":", maxSplits: 1)
            login = parts.first.map(String.init)
            passcode = parts.count > 1 ? String(parts[1]) : nil
        }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
            throw BrokerURLError("broker URL needs HOST:PORT (got '\(url)')")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw BrokerURLError("broker URL has no host (got '\(url)')") }
        if host == "localhost" {
            // ActiveMQ's STOMP connector listens on IPv4 only; "localhost" may resolve to ::1.
            host = "127.0.0.1"
        }
        return (BrokerAddress(host: host, port: port, tls: tls), login, passcode)
    }
}

extension Substring {
    /// Without the spaces and tabs around it: what a header value or a list item written
    /// by hand may carry (the module does without Foundation).
    var trimmingBlanks: String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else { return "" }
        return String(self[first...last])
    }
}
