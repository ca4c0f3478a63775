#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import TrackerLogic

extension PeerEndpoint {
    /// The logic's view of a socket address; `nil` for Unix-domain addresses.
    public init?(_ address: SocketAddress) {
        switch address {
        case .v4(let a): self.init(a.address)
        case .v6(let a): self.init(a.address)
        case .unixDomainSocket: return nil
        }
    }

    init(_ sin: sockaddr_in) {
        self.init(ip: .v4(UInt32(bigEndian: sin.sin_addr.s_addr)), port: UInt16(bigEndian: sin.sin_port))
    }

    init(_ sin6: sockaddr_in6) {
        var addr = sin6.sin6_addr
        let (hi, lo) = withUnsafeBytes(of: &addr) { raw -> (UInt64, UInt64) in
            var hi: UInt64 = 0, lo: UInt64 = 0
            for i in 0..<8 { hi = hi << 8 | UInt64(raw[i]) }
            for i in 8..<16 { lo = lo << 8 | UInt64(raw[i]) }
            return (hi, lo)
        }
        self.init(ip: .v6(hi, lo), port: UInt16(bigEndian: sin6.sin6_port))
    }

    /// A source address as recvmsg(2) filled it in, read without building a string;
    /// `nil` for a family other than IPv4 and IPv6, or a length too short for its family.
    public init?(_ storage: UnsafePointer<sockaddr_storage>, length: socklen_t) {
        switch Int32(storage.pointee.ss_family) {
        case AF_INET where Int(length) >= MemoryLayout<sockaddr_in>.size:
            self.init(UnsafeRawPointer(storage).loadUnaligned(as: sockaddr_in.self))
        case AF_INET6 where Int(length) >= MemoryLayout<sockaddr_in6>.size:
            self.init(UnsafeRawPointer(storage).loadUnaligned(as: sockaddr_in6.self))
        default:
            return nil
        }
    }

    public func socketAddress() -> SocketAddress { SocketAddress(self) }
}

extension IPAddress {
    /// 127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6: reachable from this host only.
    public var isLoopback: Bool {
        switch unmapped {
        case .v4(let a): a >> 24 == 127
        case .v6(let hi, let lo): hi == 0 && lo == 1
        }
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
extension SocketAddress {
    /// The inverse of `PeerEndpoint(_:)`, built from the bits without parsing text:
    /// replies are built per datagram.
    public init(_ endpoint: PeerEndpoint) {
        switch endpoint.ip {
        case .v4(let bits): self.init(PeerEndpoint.sockaddrV4(bits, port: endpoint.port), host: "")
        case .v6(let hi, let lo): self.init(PeerEndpoint.sockaddrV6(hi, lo, port: endpoint.port), host: "")
        }
    }
}

extension PeerEndpoint {
    static func sockaddrV4(_ bits: UInt32, port: UInt16) -> sockaddr_in {
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = bits.bigEndian
        return sin
    }

    static func sockaddrV6(_ hi: UInt64, _ lo: UInt64, port: UInt16) -> sockaddr_in6 {
        var sin6 = sockaddr_in6()
        sin6.sin6_family = sa_family_t(AF_INET6)
        sin6.sin6_port = port.bigEndian
        withUnsafeMutableBytes(of: &sin6.sin6_addr) { raw in
            for i in 0..<8 { raw[i] = UInt8(truncatingIfNeeded: hi >> (56 - 8 * UInt64(i))) }
            for i in 0..<8 { raw[8 + i] = UInt8(truncatingIfNeeded: lo >> (56 - 8 * UInt64(i))) }
        }
        return sin6
    }

    /// This endpoint as the `sockaddr` a system call takes, written into `storage`
    /// without a `SocketAddress` (whose box is allocated per address); its length.
    func store(in storage: UnsafeMutablePointer<sockaddr_storage>) -> socklen_t {
        let raw = UnsafeMutableRawPointer(storage)
        switch ip {
        case .v4(let bits):
            raw.storeBytes(of: Self.sockaddrV4(bits, port: port), as: sockaddr_in.self)
            return socklen_t(MemoryLayout<sockaddr_in>.size)
        case .v6(let hi, let lo):
            raw.storeBytes(of: Self.sockaddrV6(hi, lo, port: port), as: sockaddr_in6.self)
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
    }
}
