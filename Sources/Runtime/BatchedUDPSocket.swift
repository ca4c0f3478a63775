#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
import NIOCore
import Synchronization
import TrackerLogic

/// A UDP socket served by one thread of its own: up to `batchSize` datagrams read with
/// one recvmmsg(2), answered with one sendmmsg(2), through buffers allocated once.
///
/// Why not a NIO channel: for a request of 100 bytes, the channel's envelope, its
/// `SocketAddress` (whose host string is formatted for every datagram), its buffers and
/// its write promises cost as much CPU as the tracker's logic. Here a datagram is a slice
/// of one buffer, its source is read from the `sockaddr` in place, and a reply goes back
/// to that same `sockaddr`.
///
/// Invariants: `serve` runs on one thread at a time; `stop` may be called from any
/// thread, after which `serve` returns within `stopLatency`; `close` only after `serve`
/// returned.
public final class BatchedUDPSocket: @unchecked Sendable {
    /// Datagrams per system call: what recvmmsg takes at once when peers keep it busy.
    public static let batchSize = 32
    /// Bytes kept for one datagram. The largest BEP 15 request (a scrape of 74 hashes)
    /// is 1,496 bytes; a longer datagram is truncated by the kernel and dropped here.
    public static let slotBytes = 2048
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
        var call: String
        var code: Int32
        public var description: String { "\(call): \(String(cString: strerror(code)))" }
    }

    let fd: Int32
    private let stopping = Atomic<Bool>(false)
    /// Where each slot's datagram came from, and where its reply goes.
    private let names: UnsafeMutablePointer<sockaddr_storage>
    private let nameLengths: UnsafeMutablePointer<socklen_t>
    private let vectors: UnsafeMutablePointer<iovec>
    private let messages: UnsafeMutablePointer<cbatched_message>
    private var inbound: ByteBuffer
    private var outbound: ByteBuffer
    private var batch = Batch()
    /// Where each reply of the batch lies in `outbound`.
    private var spans: [(slot: Int, offset: Int, length: Int)] = []

    /// Binds `endpoint` (`reusePort`: beside other sockets of this process on the same
    /// address, the kernel spreading sources over them).
    public init(binding endpoint: PeerEndpoint, reusePort: Bool) throws(SocketError) {
        let family = endpoint.ip.family == .v4 ? AF_INET : AF_INET6
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError(call: "socket", code: errno) }
        var one: Int32 = 1
        var timeout = Self.stopLatency
        // No SO_REUSEADDR: on UDP it would let a second tracker bind the same port unnoticed.
        let bound = (!reusePort || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size)) == 0)
            && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0
            && SocketAddress(endpoint).withSockAddr { Glibc.bind(fd, $0, socklen_t($1)) } == 0
        guard bound else {
            let code = errno
            Glibc.close(fd)
            throw SocketError(call: "bind", code: code)
        }
        self.fd = fd
        let n = Self.batchSize
        names = .allocate(capacity: n)
        names.initialize(repeating: sockaddr_storage(), count: n)
        nameLengths = .allocate(capacity: n)
        nameLengths.initialize(repeating: 0, count: n)
        vectors = .allocate(capacity: n)
        vectors.initialize(repeating: iovec(), count: n)
        messages = .allocate(capacity: n)
        messages.initialize(repeating: cbatched_message(), count: n)
        inbound = ByteBufferAllocator().buffer(capacity: n * Self.slotBytes)
        outbound = ByteBufferAllocator().buffer(capacity: n * Self.slotBytes)
        batch.requests.reserveCapacity(n)
        batch.replies.reserveCapacity(n)
        spans.reserveCapacity(n)
    }

    deinit {
        names.deallocate(); nameLengths.deallocate(); vectors.deallocate(); messages.deallocate()
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

    /// One recvmmsg into the slots of `inbound`; fills `batch`. False when nothing came
    /// (the timeout, a signal, an ICMP error reported on the socket, a shutdown).
    private func receive() -> Bool {
        batch.requests.removeAll(keepingCapacity: true)
        batch.replies.removeAll(keepingCapacity: true)
        batch.received = 0
        let n = Self.batchSize, slot = Self.slotBytes
        inbound.clear()
        let count = inbound.withUnsafeMutableWritableBytes { raw -> Int32 in
            guard let base = raw.baseAddress, raw.count >= n * slot else { return -1 }
            for i in 0..<n {
                vectors[i] = iovec(iov_base: base + i * slot, iov_len: slot)
                messages[i] = cbatched_message()
                messages[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
                messages[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                messages[i].msg_hdr.msg_iov = vectors + i
                messages[i].msg_hdr.msg_iovlen = 1
            }
            return cbatched_recvmmsg(fd, messages, UInt32(n))
        }
        guard count > 0 else { return false }
        inbound.moveWriterIndex(forwardBy: n * slot)
        batch.received = Int(count)
        for i in 0..<Int(count) {
            let header = messages[i].msg_hdr
            nameLengths[i] = header.msg_namelen
            guard header.msg_flags & Int32(MSG_TRUNC) == 0, let source = PeerEndpoint(names + i, length: header.msg_namelen),
                  let bytes = inbound.getSlice(at: i * slot, length: Int(messages[i].msg_len)) else { continue }
            batch.requests.append((i, bytes, source))
        }
        return true
    }

    /// Encodes the batch's replies one after another into `outbound` and sends them with
    /// sendmmsg, each to the address its request came from. A reply the kernel refuses
    /// (unreachable, not permitted) is dropped, as the network might have.
    private func send() {
        guard !batch.replies.isEmpty else { return }
        outbound.clear()
        spans.removeAll(keepingCapacity: true)
        // At most one reply per slot: the vectors and messages hold one batch.
        for reply in batch.replies.prefix(Self.batchSize) where (0..<batch.received).contains(reply.slot) {
            let offset = outbound.writerIndex
            BEP15Codec.encode(reply.response, into: &outbound)
            spans.append((reply.slot, offset, outbound.writerIndex - offset))
        }
        outbound.withUnsafeReadableBytes { [spans] raw in
            guard let base = raw.baseAddress else { return }
            for (i, span) in spans.enumerated() {
                vectors[i] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + span.offset), iov_len: span.length)
                messages[i] = cbatched_message()
                messages[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + span.slot)
                messages[i].msg_hdr.msg_namelen = nameLengths[span.slot]
                messages[i].msg_hdr.msg_iov = vectors + i
                messages[i].msg_hdr.msg_iovlen = 1
            }
            var sent = 0
            while sent < spans.count {
                let r = cbatched_sendmmsg(fd, messages + sent, UInt32(spans.count - sent))
                if r > 0 {
                    sent += Int(r)
                } else if errno != EINTR {
                    sent += 1
                }
            }
        }
    }
}
