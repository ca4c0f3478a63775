#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
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

extension PeerChannelMode {
    /// The family of the service address (a group's family is its service address's).
    public var family: IPAddress.Family { serviceAddress.ip.family }
}

/// How peers reach the cluster in each address family it serves: one mode, or an IPv4 and
/// an IPv6 one (`--group 239.255.42.99:6969 --group [ff15::42]:6969`), bound side by side.
///
/// Invariant: at least one mode, at most one per family.
public struct PeerChannels: Sendable, CustomStringConvertible {
    public let modes: [PeerChannelMode]

    public init?(_ modes: [PeerChannelMode]) {
        guard !modes.isEmpty, Set(modes.map(\.family)).count == modes.count else { return nil }
        self.modes = modes
    }

    /// Where peers send (the first family's, for what names one address).
    public var serviceAddress: PeerEndpoint { modes[0].serviceAddress }

    public var description: String { modes.map(\.description).joined(separator: " and ") }
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
    /// `receive`'s descriptor: the node reads it itself (`PeerIntake`), NIO only waits
    /// for it to become readable after it went quiet.
    var receiveDescriptor: CInt
    var reply: Channel
    /// `reply`'s descriptor: replies leave through `DatagramBatch`, not NIO's writes.
    var replyDescriptor: CInt
    /// The node's own unicast address (for the dashboard and keepalives).
    var unicast: PeerEndpoint
    /// Where keepalives go on the peer network (the group), and the socket they leave
    /// from; nil without a group (`--udp`).
    var beaconTarget: SocketAddress? = nil
    var beaconSender: Channel? = nil
    /// `beaconSender`'s descriptor: keepalives leave through `sendDatagram`, not NIO's
    /// writes (`PeerSendFailures`).
    var beaconDescriptor: CInt? = nil
    /// `--vip` only: the service-address socket does not receive datagrams sent to the
    /// group address, so keepalives arrive on a socket bound to the group.
    var beaconReceive: Channel? = nil

    var all: [Channel] {
        var out = [receive]
        for c in [reply, beaconReceive, beaconSender].compactMap({ $0 }) where !out.contains(where: { $0 === c }) { out.append(c) }
        return out
    }
}

/// The sockets of every family a node serves: a reply leaves from its peer's family's
/// sockets, keepalives go to every family's group.
struct PeerSocketSet {
    var families: [PeerSockets]

    /// Which family's sockets a reply to `peer` leaves from (its family's; the first when
    /// the node does not serve that family, which cannot reach it: a datagram arrives only
    /// on a socket of its own family).
    func replyFamily(to peer: PeerEndpoint) -> Int {
        families.firstIndex { $0.unicast.ip.family == peer.ip.family } ?? 0
    }

    var unicast: String { families.map { "\($0.unicast)" }.joined(separator: ", ") }

    /// Bytes waiting in every receive queue (a pause backlog lies in all of them).
    func receiveQueueBytes() -> Int? {
        let each = families.map { $0.receive.receiveQueueBytes() }
        return each.contains { $0 == nil } ? nil : each.reduce(0) { $0 + ($1 ?? 0) }
    }

    var all: [Channel] { families.flatMap(\.all) }

    /// Attaches (or detaches) a filter on every receive socket that passes only the
    /// cluster's frames: the kernel drops peer requests before they are queued, and the
    /// keepalives that share a group's socket still arrive. What is queued already stays.
    /// Returns what failed, per socket.
    func passOnlyFrames(_ on: Bool) -> [String] {
        families.compactMap { family in
            PeerChannelBinder.passOnlyFrames(family.receiveDescriptor, on).map { "\(family.unicast): \($0)" }
        }
    }
}

package enum PeerChannelBinder {
    /// Linux delivers every group joined by *any* socket on the host to a socket bound to
    /// the port unless this is off.
    static let ipMulticastAll: CInt = 49
    /// Lets a socket bind an address the host does not hold (yet): Linux's IP_FREEBIND.
    static let ipFreeBind: CInt = 15
    /// The same for IPv6 (IPV6_MULTICAST_ALL from Linux 4.20, IPV6_FREEBIND from 4.15).
    static let ipv6MulticastAll: CInt = 29
    static let ipv6FreeBind: CInt = 78

    /// Attaches to socket `fd` a filter that passes only the cluster's frames (`on`), or
    /// lets every datagram through again; nil when done, else why not.
    package static func passOnlyFrames(_ fd: CInt, _ on: Bool) -> String? {
        guard cbatched_pass_only_frames(fd, on ? 1 : 0, ClusterChannel.magic, ClusterChannel.version) != 0 else { return nil }
        return String(cString: strerror(errno))
    }

    static func bind(_ channels: PeerChannels, loop: EventLoop, handler: @escaping @Sendable () -> ChannelHandler) async throws -> PeerSocketSet {
        var families: [PeerSockets] = []
        do {
            for mode in channels.modes { families.append(try await bind(mode, loop: loop, handler: handler)) }
        } catch {
            for s in families { for c in s.all { try? await c.close() } }
            throw error
        }
        return PeerSocketSet(families: families)
    }

    static func bind(_ mode: PeerChannelMode, loop: EventLoop, handler: @escaping @Sendable () -> ChannelHandler) async throws -> PeerSockets {
        /// The socket requests arrive on: made and bound here, NIO told not to read it.
        func receiveChannel(_ endpoint: PeerEndpoint, freeBind: Bool = false) async throws -> (Channel, CInt) {
            let fd = try boundSocket(endpoint, freeBind: freeBind)
            return (try await bootstrap().channelOption(.autoRead, value: false).withBoundSocket(fd).get(), fd)
        }
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
            let (ch, fd) = try await receiveChannel(endpoint)
            return PeerSockets(receive: ch, receiveDescriptor: fd, reply: ch, replyDescriptor: fd, unicast: endpoint)
        case .floating(let endpoint, let keepalives):
            let (ch, fd) = try await receiveChannel(endpoint, freeBind: true)
            var sockets = PeerSockets(receive: ch, receiveDescriptor: fd, reply: ch, replyDescriptor: fd, unicast: endpoint)
            if let keepalives {
                let device = try multicastDevice(named: keepalives.interface, family: keepalives.group.ip.family)
                try await bindKeepalives(&sockets, group: keepalives.group, device: device, bootstrap: bootstrap(), loop: loop)
            }
            return sockets
        case .group(let group, let interface):
            let device = try multicastDevice(named: interface, family: group.ip.family)
            let (ch, fd) = try await receiveChannel(group)
            try await join(ch, group: group, device: device)
            // Replies leave from the node's own address on that interface, any free port.
            let ip = try address(of: device)
            let replyFD = try boundSocket(PeerEndpoint(ip: ip, port: 0), freeBind: false)
            let reply = try await DatagramBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler()) }
                }
                .withBoundSocket(replyFD).get()
            let port = UInt16(reply.localAddress?.port ?? 0)
            try await reply.setMulticastInterface(device).get()
            return PeerSockets(receive: ch, receiveDescriptor: fd, reply: reply, replyDescriptor: replyFD, unicast: PeerEndpoint(ip: ip, port: port),
                               beaconTarget: group.socketAddress(), beaconSender: reply, beaconDescriptor: replyFD)
        case .vip(let vip, let group, let interface):
            guard vip.ip.family == group.ip.family else {
                throw ConfigurationError("service address \(vip) and group \(group) are of different families")
            }
            let device = try multicastDevice(named: interface, family: group.ip.family)
            let (ch, fd) = try await receiveChannel(vip)
            try await join(ch, group: group, device: device)
            var sockets = PeerSockets(receive: ch, receiveDescriptor: fd, reply: ch, replyDescriptor: fd, unicast: vip)
            try await bindKeepalives(&sockets, group: group, device: device, bootstrap: bootstrap(), loop: loop)
            return sockets
        }
    }

    /// A non-blocking datagram socket bound to `endpoint`, for NIO to adopt: made here so
    /// that the node knows its descriptor. SO_REUSEADDR before the bind, as NIO's own
    /// bind does: the nodes of one host share the group's port (and a shared service
    /// address); with `freeBind`, IP_FREEBIND (the floating address may not be here yet).
    package static func boundSocket(_ endpoint: PeerEndpoint, freeBind: Bool) throws -> CInt {
        let v4 = endpoint.ip.family == .v4
        let fd = socket(v4 ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ConfigurationError("cannot make a socket for \(endpoint): \(String(cString: strerror(errno)))") }
        var one: CInt = 1
        let size = socklen_t(MemoryLayout<CInt>.size)
        var failed: String? = nil
        if setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) != 0 {
            failed = "SO_REUSEADDR"
        } else if freeBind, (v4 ? setsockopt(fd, CInt(IPPROTO_IP), ipFreeBind, &one, size)
                                : setsockopt(fd, CInt(IPPROTO_IPV6), ipv6FreeBind, &one, size)) != 0 {
            failed = "IP_FREEBIND"
        } else if SocketAddress(endpoint).withSockAddr({ Glibc.bind(fd, $0, socklen_t($1)) }) != 0 {
            failed = "bind"
        }
        guard let failed else { return fd }
        let reason = String(cString: strerror(errno))
        close(fd)
        throw ConfigurationError("cannot bind \(endpoint) (\(failed)): \(reason)")
    }

    /// Keepalives on the peer network when the service socket is bound to an address
    /// other than the group: they arrive on a socket bound to the group, and leave from
    /// the node's own address (every node may hold the service address, and a kernel
    /// drops a datagram whose source is one of its own).
    static func bindKeepalives(_ sockets: inout PeerSockets, group: PeerEndpoint, device: NIONetworkDevice,
                               bootstrap: DatagramBootstrap, loop: EventLoop) async throws {
        let ip = try address(of: device)
        let beacons = try await bootstrap.bind(to: group.socketAddress()).get()
        try await join(beacons, group: group, device: device)
        let senderFD = try boundSocket(PeerEndpoint(ip: ip, port: 0), freeBind: false)
        let sender = try await DatagramBootstrap(group: loop).withBoundSocket(senderFD).get()
        try await sender.setMulticastInterface(device).get()
        sockets.beaconTarget = group.socketAddress()
        sockets.beaconSender = sender
        sockets.beaconDescriptor = senderFD
        sockets.beaconReceive = beacons
    }

    /// The device's own address, for the sockets replies and keepalives leave from.
    static func address(of device: NIONetworkDevice) throws -> IPAddress {
        guard let local = device.address, let ip = PeerEndpoint(local)?.ip else {
            throw ConfigurationError("interface \(device.name) has no address of that family")
        }
        return ip
    }

    static func join(_ channel: Channel, group: PeerEndpoint, device: NIONetworkDevice) async throws {
        guard group.ip.isMulticast else {
            throw ConfigurationError("\(group.ip) is not a multicast group (224.0.0.0/4, ff00::/8)")
        }
        if group.ip.family == .v4 {
            try await channel.setOption(.socket(SocketOptionLevel(IPPROTO_IP), SocketOptionName(ipMulticastAll)), value: 0).get()
        } else {
            try await channel.setOption(.socket(SocketOptionLevel(IPPROTO_IPV6), SocketOptionName(ipv6MulticastAll)), value: 0).get()
        }
        guard let multicast = channel as? MulticastChannel else { throw ConfigurationError("socket cannot join groups") }
        do {
            try await multicast.joinGroup(group.socketAddress(), device: device).get()
        } catch {
            throw ConfigurationError("cannot join \(group.ip) on \(device.name): \(error)")
        }
    }

    /// The interface's device of the group's family: for IPv6 its first address that is
    /// not link-local (replies must leave from an address a peer can reach without a
    /// scope). NIO refuses to join a group on `lo` because the kernel does not flag it
    /// multicast-capable, yet joining works; say it does.
    static func multicastDevice(named name: String, family: IPAddress.Family) throws -> NIONetworkDevice {
        let devices = try System.enumerateDevices()
        let candidates = devices.filter { d in
            guard d.name == name, let a = d.address, let ip = PeerEndpoint(a)?.ip, ip.family == family else { return false }
            return !ip.isLinkLocal
        }
        guard var device = candidates.first else {
            let names = Set(devices.map(\.name)).sorted().joined(separator: ", ")
            let kind = family == .v4 ? "an IPv4 address" : "an IPv6 address that is not link-local"
            throw ConfigurationError("no interface named '\(name)' with \(kind) (have: \(names))")
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

    /// The same by device: its IPv4 address, or for IPv6 its interface index.
    func setMulticastInterface(_ device: NIONetworkDevice) -> EventLoopFuture<Void> {
        guard let provider = self as? SocketOptionProvider else {
            return eventLoop.makeFailedFuture(ConfigurationError("socket has no multicast interface option"))
        }
        if let a = device.address, let ip = PeerEndpoint(a)?.ip, ip.family == .v4 { return setMulticastInterface(ip) }
        return provider.setIPv6MulticastIF(CUnsignedInt(device.interfaceIndex))
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

    /// 224.0.0.0/4 or ff00::/8.
    public var isMulticast: Bool {
        switch self {
        case .v4: isIPv4Multicast
        case .v6(let hi, _): hi >> 56 == 0xFF
        }
    }

    /// fe80::/10 (an address that needs a scope to be reached).
    var isLinkLocal: Bool {
        if case .v6(let hi, _) = self { return hi >> 54 == 0x3FA }
        return false
    }
}
