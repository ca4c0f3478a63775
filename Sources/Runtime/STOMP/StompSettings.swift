import NIOCore

/// One broker of the failover list.
public struct BrokerAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) { self.host = host; self.port = port }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
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

    public init(host: String, port: Int) { primary = BrokerAddress(host: host, port: port) }

    /// Every broker, in the order they are tried.
    public var brokers: [BrokerAddress] { [primary] + fallbacks }

    /// `stomp://HOST:PORT` (login and passcode as `stomp://user:pass@HOST:PORT`), or a
    /// failover list of them separated by commas (`stomp://a:61613,stomp://b:61613`);
    /// credentials, if given more than once, must be the same.
    public init(url: String) throws {
        let parts = url.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count <= 16 else { throw ConfigurationError("at most 16 brokers in a failover list (got \(parts.count))") }
        var brokers: [BrokerAddress] = []
        var login: String?, passcode: String?
        for part in parts {
            let (address, l, p) = try Self.parse(part)
            if brokers.contains(address) { throw ConfigurationError("broker \(address) is listed twice") }
            brokers.append(address)
            if let l {
                if let login, login != l || passcode != p {
                    throw ConfigurationError("brokers in one list must use the same login and passcode")
                }
                login = l
                passcode = p
            }
        }
        guard let first = brokers.first else { throw ConfigurationError("no broker URL") }
        self.init(host: first.host, port: first.port)
        fallbacks = Array(brokers.dropFirst())
        self.login = login
        self.passcode = passcode
    }

    static func parse(_ url: String) throws -> (BrokerAddress, login: String?, passcode: String?) {
        guard url.hasPrefix("stomp://") else { throw ConfigurationError("broker URL must start with stomp:// (got '\(url)')") }
        var rest = Substring(url.dropFirst("stomp://".count))
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
            throw ConfigurationError("broker URL needs HOST:PORT (got '\(url)')")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ConfigurationError("broker URL has no host (got '\(url)')") }
        if host == "localhost" {
            // ActiveMQ's STOMP connector listens on IPv4 only; "localhost" may resolve to ::1.
            host = "127.0.0.1"
        }
        return (BrokerAddress(host: host, port: port), login, passcode)
    }
}
