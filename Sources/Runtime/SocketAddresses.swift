import NIOCore
import TrackerLogic

extension PeerEndpoint {
    /// The logic's view of a socket address; `nil` for Unix-domain addresses.
    public init?(_ address: SocketAddress) {
        switch address {
        case .v4(let a):
            self.init(ip: .v4(UInt32(bigEndian: a.address.sin_addr.s_addr)), port: UInt16(bigEndian: a.address.sin_port))
        case .v6(let a):
            var addr = a.address.sin6_addr
            let (hi, lo) = withUnsafeBytes(of: &addr) { raw -> (UInt64, UInt64) in
                var hi: UInt64 = 0, lo: UInt64 = 0
                for i in 0..<8 { hi = hi << 8 | UInt64(raw[i]) }
                for i in 8..<16 { lo = lo << 8 | UInt64(raw[i]) }
                return (hi, lo)
            }
            self.init(ip: .v6(hi, lo), port: UInt16(bigEndian: a.address.sin6_port))
        case .unixDomainSocket:
            return nil
        }
    }

    public func socketAddress() throws -> SocketAddress {
        try SocketAddress(ipAddress: ip.description, port: Int(port))
    }
}

/// A `HOST:PORT` command-line value that must name a literal IP address.
public struct EndpointArgument: Sendable, CustomStringConvertible {
    public var endpoint: PeerEndpoint

    public init(parsing text: String) throws {
        var s = Substring(text)
        if s.hasPrefix("udp://") { s = s.dropFirst(6) }
        if let slash = s.firstIndex(of: "/") { s = s[..<slash] }
        if s.hasPrefix("localhost:") { s = "127.0.0.1" + s.dropFirst("localhost".count) }
        guard let endpoint = PeerEndpoint(s) else {
            throw ConfigurationError("'\(text)' is not HOST:PORT with a literal IPv4 address or [IPv6] address")
        }
        self.endpoint = endpoint
    }

    public var description: String { endpoint.description }
}

/// A problem with what the operator asked for, worded for the operator.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
