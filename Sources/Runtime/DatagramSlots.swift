#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
import NIOCore
import TrackerLogic

/// Buffers for reading up to `count` datagrams with one recvmmsg(2), allocated once: each
/// datagram lands in its own `slotBytes` slice of one buffer, its source in a
/// `sockaddr_storage` that is read in place, without a string.
///
/// Why not a NIO channel's read: for a request of 100 bytes, the channel's envelope and
/// its `SocketAddress` (whose host string is formatted with sprintf for every datagram)
/// cost as much CPU as the tracker's logic. The standalone socket and the cluster's peer
/// intake both read through this.
///
/// Invariants: used by one thread at a time; a datagram's bytes are valid until the next
/// `receive` (a slice kept longer holds a copy, as `ByteBuffer` copies on write).
package final class DatagramSlots {
    /// Datagrams per system call: what recvmmsg takes at once when peers keep it busy.
    /// 64 rather than 32 saved a little CPU per response (docs/benchmarks.md, "Design
    /// choices"); the kernel's cost per datagram is most of it either way.
    package static let count = 64
    /// Bytes kept for one datagram. The largest BEP 15 request (a scrape of 74 hashes)
    /// is 1,496 bytes; a longer datagram is truncated by the kernel and dropped here.
    package static let slotBytes = 2048

    /// Each slot's `sockaddr` (where its datagram came from, and for the standalone
    /// socket where its reply goes), `iovec` and `mmsghdr`.
    let vectors = MessageVectors(count: count)
    private var inbound: ByteBuffer
    /// Datagrams the last `receive` read, those `datagram` drops included.
    private(set) var received = 0

    package init() {
        inbound = ByteBufferAllocator().buffer(capacity: Self.count * Self.slotBytes)
    }

    deinit { vectors.deallocate() }

    /// One recvmmsg on `fd` into the slots: how many datagrams it read; 0 when none was
    /// queued (a non-blocking socket), on a timeout, a signal, an ICMP error reported on
    /// the socket or a shutdown.
    package func receive(from fd: Int32) -> Int {
        received = 0
        let n = Self.count, slot = Self.slotBytes
        inbound.clear()
        let count = inbound.withUnsafeMutableWritableBytes { raw -> Int32 in
            guard let base = raw.baseAddress, raw.count >= n * slot else { return -1 }
            for i in 0..<n {
                vectors.point(i, at: base + i * slot, length: slot, nameLength: socklen_t(MemoryLayout<sockaddr_storage>.size))
            }
            return cbatched_recvmmsg(fd, vectors.messages, UInt32(n))
        }
        guard count > 0 else { return 0 }
        inbound.moveWriterIndex(forwardBy: n * slot)
        received = Int(count)
        for i in 0..<received { vectors.nameLengths[i] = vectors.messages[i].msg_hdr.msg_namelen }
        return received
    }

    /// The datagram in slot `i` of the last `receive` and its source; nil when the kernel
    /// truncated it or its source is neither IPv4 nor IPv6.
    package func datagram(_ i: Int) -> (bytes: ByteBuffer, source: PeerEndpoint)? {
        guard (0..<received).contains(i), vectors.messages[i].msg_hdr.msg_flags & Int32(MSG_TRUNC) == 0,
              let source = PeerEndpoint(vectors.names + i, length: vectors.nameLengths[i]),
              let bytes = inbound.getSlice(at: i * Self.slotBytes, length: Int(vectors.messages[i].msg_len)) else { return nil }
        return (bytes, source)
    }
}
