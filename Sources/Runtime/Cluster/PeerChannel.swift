#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix
import TrackerLogic

/// How peers reach the cluster.
public enum PeerChannelMode: Sendable, CustomStringConvertible {
    /// Every node joins the group on the interface; the master replies from its own
    /// unicast socket (Transmission accepts that; libtorrent and aria2 do not).
    case group(PeerEndpoint, interface: String)
    /// Every node binds the same unicast service address and joins the group, so frames
    /// sent to the group's MAC reach all of them; the master replies from the service
    /// address, which every client accepts.
    case vip(PeerEndpoint, group: PeerEndpoint, interface: String)
    /// The service address lives on the master's host only (keepalived moves it there
    /// when the master's `/api/health` says it serves). Every node binds it before it
    /// arrives (IP_FREEBIND), so the master's replies leave from the address the client
    /// sent to; slaves receive nothing. Keepalives also cross the peer network through
    /// `keepalives`, a group joined on an interface, so that a broker outage does not
    /// leave every node alone; without it they travel on the broker only.
    case floating(PeerEndpoint, keepalives: KeepaliveGroup?)
    /// One node, one socket (no group).
    case udp(PeerEndpoint)

    /// The address peers send to.
    public var serviceAddress: PeerEndpoint {
        switch self {
        case .group(let g, _): g
        case .vip(let v, _, _): v
        case .floating(let f, _): f
        case .udp(let u): u
        }
    }

    public var description: String {
        switch self {
        case .group(let g, let i): "group \(g) on \(i)"
        case .vip(let v, let g, let i): "service address \(v) via group \(g.ip) on \(i)"
        case .floating(let f, let k?): "floating address \(f), keepalives via group \(k.group.ip) on \(k.interface)"
        case .floating(let f, nil): "floating address \(f), keepalives on the broker only"
        case .udp(let u): "udp \(u)"
        }
    }
}

/// A multicast group that carries keepalives on the peer network, and the interface it
/// is joined on.
public struct KeepaliveGroup: Sendable, Equatable {
    public var group: PeerEndpoint
    public var interface: String
    public init(group: PeerEndpoint, interface: String) { self.group = group; self.interface = interface }
}

/// The sockets of the peer channel: where requests arrive and where replies leave.
struct PeerSockets {
    var receive: Channel
    var reply: Channel
    /// The node's own unicast address (for the dashboard and keepalives).
    var unicast: PeerEndpoint
    /// Where keepalives go on the peer network (the group), and the socket they leave
    /// from; nil without a group (`--udp`).
    var beaconTarget: SocketAddress? = nil
    var beaconSender: Channel? = nil
    /// `--vip` only: the service-address socket does not receive datagrams sent to the
    /// group address, so keepalives arrive on a socket bound to the group.
    var beaconReceive: Channel? = nil

    var all: [Channel] {
        var out = [receive]
        for c in [reply, beaconReceive, beaconSender].compactMap({ $0 }) where !out.contains(where: { $0 === c }) { out.append(c) }
        return out
    }
}

enum PeerChannelBinder {
    /// Linux delivers every group joined by *any* socket on the host to a socket bound to
    /// the port unless this is off.
    static let ipMulticastAll: CInt = 49
    /// Lets a socket bind an address the host does not hold (yet): Linux's IP_FREEBIND.
    static let ipFreeBind: CInt = 15

    static func bind(_ mode: PeerChannelMode, loop: EventLoop, handler: @escaping @Sendable () -> ChannelHandler) async throws -> PeerSockets {
        func bootstrap() -> DatagramBootstrap {
            DatagramBootstrap(group: loop)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.datagramVectorReadMessageCount, value: 32)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 32 * 2048))
                .channelOption(.socket(SocketOptionLevel(SOL_SOCKET), SocketOptionName(SO_RCVBUF)), value: 4 << 20)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler()) }
                }
        }
        switch mode {
        case .udp(let endpoint):
            let ch = try await bootstrap().bind(to: endpoint.socketAddress()).get()
            return PeerSockets(receive: ch, reply: ch, unicast: endpoint)
        case .floating(let endpoint, let keepalives):
            let ch = try await bootstrap()
                .channelOption(.socket(SocketOptionLevel(IPPROTO_IP), SocketOptionName(ipFreeBind)), value: 1)
                .bind(to: endpoint.socketAddress()).get()
            var sockets = PeerSockets(receive: ch, reply: ch, unicast: endpoint)
            if let keepalives {
                let device = try multicastDevice(named: keepalives.interface)
                try await bindKeepalives(&sockets, group: keepalives.group, device: device, bootstrap: bootstrap(), loop: loop)
            }
            return sockets
        case .group(let group, let interface):
            let device = try multicastDevice(named: interface)
            let ch = try await bootstrap().bind(to: group.socketAddress()).get()
            try await join(ch, group: group, device: device)
            // Replies leave from the node's own address on that interface, any free port.
            guard let local = device.address, let ip = PeerEndpoint(local)?.ip else {
                throw ConfigurationError("interface \(interface) has no IPv4 address")
            }
            let reply = try await DatagramBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler()) }
                }
                .bind(to: PeerEndpoint(ip: ip, port: 0).socketAddress()).get()
            let port = UInt16(reply.localAddress?.port ?? 0)
            try await reply.setMulticastInterface(ip).get()
            return PeerSockets(receive: ch, reply: reply, unicast: PeerEndpoint(ip: ip, port: port),
                               beaconTarget: group.socketAddress(), beaconSender: reply)
        case .vip(let vip, let group, let interface):
            let device = try multicastDevice(named: interface)
            let ch = try await bootstrap().bind(to: vip.socketAddress()).get()
            try await join(ch, group: group, device: device)
            var sockets = PeerSockets(receive: ch, reply: ch, unicast: vip)
            try await bindKeepalives(&sockets, group: group, device: device, bootstrap: bootstrap(), loop: loop)
            return sockets
        }
    }

    /// Keepalives on the peer network when the service socket is bound to an address
    /// other than the group: they arrive on a socket bound to the group, and leave from
    /// the node's own address (every node may hold the service address, and a kernel
    /// drops a datagram whose source is one of its own).
    static func bindKeepalives(_ sockets: inout PeerSockets, group: PeerEndpoint, device: NIONetworkDevice,
                               bootstrap: DatagramBootstrap, loop: EventLoop) async throws {
        guard let local = device.address, let ip = PeerEndpoint(local)?.ip else {
            throw ConfigurationError("interface \(device.name) has no IPv4 address")
        }
        let beacons = try await bootstrap.bind(to: group.socketAddress()).get()
        try await join(beacons, group: group, device: device)
        let sender = try await DatagramBootstrap(group: loop).bind(to: PeerEndpoint(ip: ip, port: 0).socketAddress()).get()
        try await sender.setMulticastInterface(ip).get()
        sockets.beaconTarget = group.socketAddress()
        sockets.beaconSender = sender
        sockets.beaconReceive = beacons
    }

    static func join(_ channel: Channel, group: PeerEndpoint, device: NIONetworkDevice) async throws {
        guard case .v4 = group.ip, group.ip.isIPv4Multicast else {
            throw ConfigurationError("\(group.ip) is not an IPv4 multicast group (224.0.0.0/4)")
        }
        try await channel.setOption(.socket(SocketOptionLevel(IPPROTO_IP), SocketOptionName(ipMulticastAll)), value: 0).get()
        guard let multicast = channel as? MulticastChannel else { throw ConfigurationError("socket cannot join groups") }
        do {
            try await multicast.joinGroup(group.socketAddress(), device: device).get()
        } catch {
            throw ConfigurationError("cannot join \(group.ip) on \(device.name): \(error)")
        }
    }

    /// The interface's IPv4 device. NIO refuses to join a group on `lo` because the
    /// kernel does not flag it multicast-capable, yet joining works; say it does.
    static func multicastDevice(named name: String) throws -> NIONetworkDevice {
        let devices = try System.enumerateDevices()
        guard var device = devices.first(where: { $0.name == name && $0.address?.protocol == .inet }) else {
            let names = Set(devices.map(\.name)).sorted().joined(separator: ", ")
            throw ConfigurationError("no IPv4 interface named '\(name)' (have: \(names))")
        }
        device.multicastSupported = true
        return device
    }
}

extension Channel {
    /// Where this socket's multicast datagrams leave (IP_MULTICAST_IF). Without it, a
    /// sender on the cluster's own host would send the group out of the default route.
    /// Call it from the channel initializer, before anything is sent.
    public func setMulticastInterface(_ address: IPAddress) -> EventLoopFuture<Void> {
        guard case .v4(let bits) = address, let provider = self as? SocketOptionProvider else {
            return eventLoop.makeFailedFuture(ConfigurationError("multicast interface must be an IPv4 address"))
        }
        return provider.setIPMulticastIF(in_addr(s_addr: bits.bigEndian))
    }
}

extension Channel {
    /// Bytes waiting in the socket's receive queue: the first field of SO_MEMINFO, an array
    /// of 32-bit counters (the kernel's receive allocation, datagram overhead included).
    /// The kernel copies as many bytes as asked; NIO asks for one `SocketOptionValue`, so
    /// the first four bytes of it are that field. Nil where the channel cannot say.
    func receiveQueueBytes() -> Int? {
        #if os(Linux)
        let memInfo = ChannelOptions.socket(SocketOptionLevel(SOL_SOCKET), SocketOptionName(SO_MEMINFO))
        guard let options = syncOptions, let value = try? options.getOption(memInfo) else { return nil }
        return Int(withUnsafeBytes(of: value) { $0.loadUnaligned(as: UInt32.self) })
        #else
        return nil
        #endif
    }
}

extension IPAddress {
    public var isIPv4Multicast: Bool {
        if case .v4(let bits) = self { return bits >> 28 == 0xE }
        return false
    }
}
