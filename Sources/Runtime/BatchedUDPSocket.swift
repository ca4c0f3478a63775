#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
import NIOCore
import Synchronization
import TrackerLogic

/// A UDP socket served by one thread of its own: up to `batchSize` datagrams read with
/// one recvmmsg(2) (`DatagramSlots`), answered with one sendmmsg(2) (`DatagramBatch`),
/// through buffers allocated once. A reply goes back to its request's `sockaddr` as the
/// kernel filled it in.
///
/// Invariants: `serve` runs on one thread at a time; `stop` may be called from any
/// thread, after which `serve` returns within `stopLatency`; `close` only after `serve`
/// returned.
public final class BatchedUDPSocket: @unchecked Sendable {
    /// Datagrams per system call: what recvmmsg takes at once when peers keep it busy.
    public static let batchSize = DatagramSlots.count
    /// Bytes kept for one datagram (`DatagramSlots.slotBytes`).
    public static let slotBytes = DatagramSlots.slotBytes
    /// How long a blocked read may take to notice `stop` if shutdown(2) did not wake it.
    static let stopLatency = timeval(tv_sec: 0, tv_usec: 200_000)

    /// One received batch, handed to the handler; it appends its replies.
    public struct Batch {
        /// Datagrams read, those dropped included (truncated, or from a family that is
        /// neither IPv4 nor IPv6).
        public var received = 0
        /// The datagrams to answer; `slot` is where the reply goes.
        public var requests: [(slot: Int, bytes: ByteBuffer, source: PeerEndpoint)] = []
        public var replies: [(slot: Int, response: TrackerResponse)] = []
    }

    public struct SocketError: Error, CustomStringConvertible {
        package var call: String
        package var code: Int32
        package init(call: String, code: Int32) { self.call = call; self.code = code }
        public var description: String { "\(call): \(String(cString: strerror(code)))" }
    }

    let fd: Int32
    private let stopping = Atomic<Bool>(false)
    private let slots = DatagramSlots()
    private let replies = DatagramBatch()
    private var batch = Batch()

    /// Binds `endpoint` (`reusePort`: beside other sockets of this process on the same
    /// address, the kernel spreading sources over them). `v6Only`: an IPv6 socket serves
    /// IPv6 alone, so that `[::]` binds beside `0.0.0.0` on one port; otherwise `[::]`
    /// serves both families, IPv4 peers arriving as mapped addresses.
    public init(binding endpoint: PeerEndpoint, reusePort: Bool, v6Only: Bool = false) throws(SocketError) {
        let family = endpoint.ip.family == .v4 ? AF_INET : AF_INET6
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError(call: "socket", code: errno) }
        var one: Int32 = 1
        var timeout = Self.stopLatency
        // No SO_REUSEADDR: on UDP it would let a second tracker bind the same port unnoticed.
        let bound = (family != AF_INET6 || !v6Only || setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) == 0)
            && (!reusePort || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) == 0)
            && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0
            && SocketAddress(endpoint).withSockAddr { Glibc.bind(fd, $0, socklen_t($1)) } == 0
        guard bound else {
            let code = errno
            Glibc.close(fd)
            throw SocketError(call: "bind", code: code)
        }
        self.fd = fd
        batch.requests.reserveCapacity(Self.batchSize)
        batch.replies.reserveCapacity(Self.batchSize)
    }

    /// The address the socket is bound to (its port when it was bound to port 0).
    public var localEndpoint: PeerEndpoint? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafePointer(to: &storage) { PeerEndpoint($0, length: length) }
    }

    /// Reads, answers and writes batches on the calling thread until `stop`.
    /// `answer` is called once per batch, and appends a reply for each request to answer.
    public func serve(_ answer: (inout Batch) -> Void) {
        while !stopping.load(ordering: .relaxed) {
            guard receive() else { continue }
            answer(&batch)
            send()
        }
    }

    /// Makes `serve` return: sets the flag it reads, and wakes its blocked read.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        _ = shutdown(fd, Int32(SHUT_RDWR))
    }

    public func close() { _ = Glibc.close(fd) }

    /// One recvmmsg into the slots; fills `batch`. False when nothing came (the timeout,
    /// a signal, an ICMP error reported on the socket, a shutdown).
    private func receive() -> Bool {
        batch.requests.removeAll(keepingCapacity: true)
        batch.replies.removeAll(keepingCapacity: true)
        batch.received = slots.receive(from: fd)
        guard batch.received > 0 else { return false }
        for i in 0..<batch.received {
            guard let (bytes, source) = slots.datagram(i) else { continue }
            batch.requests.append((i, bytes, source))
        }
        return true
    }

    /// Sends the batch's replies with one sendmmsg, each to the address its request came
    /// from; at most one reply per slot of the batch.
    private func send() {
        for reply in batch.replies where (0..<batch.received).contains(reply.slot) {
            guard replies.append(reply.response, toName: slots.vectors.names + reply.slot, length: slots.vectors.nameLengths[reply.slot]) else { break }
        }
        replies.send(on: fd)
    }
}
