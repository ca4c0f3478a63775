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
    package static let count = 32
    /// Bytes kept for one datagram. The largest BEP 15 request (a scrape of 74 hashes)
    /// is 1,496 bytes; a longer datagram is truncated by the kernel and dropped here.
    package static let slotBytes = 2048

    /// Where each slot's datagram came from (and, for the standalone socket, where its
    /// reply goes).
    let names: UnsafeMutablePointer<sockaddr_storage>
    let nameLengths: UnsafeMutablePointer<socklen_t>
    let vectors: UnsafeMutablePointer<iovec>
    let messages: UnsafeMutablePointer<cbatched_message>
    private var inbound: ByteBuffer
    /// Datagrams the last `receive` read, those `datagram` drops included.
    private(set) var received = 0

    init() {
        let n = Self.count
        names = .allocate(capacity: n)
        names.initialize(repeating: sockaddr_storage(), count: n)
        nameLengths = .allocate(capacity: n)
        nameLengths.initialize(repeating: 0, count: n)
        vectors = .allocate(capacity: n)
        vectors.initialize(repeating: iovec(), count: n)
        messages = .allocate(capacity: n)
        messages.initialize(repeating: cbatched_message(), count: n)
        inbound = ByteBufferAllocator().buffer(capacity: n * Self.slotBytes)
    }

    deinit {
        names.deallocate(); nameLengths.deallocate(); vectors.deallocate(); messages.deallocate()
    }

    /// One recvmmsg on `fd` into the slots: how many datagrams it read; 0 when none was
    /// queued (a non-blocking socket), on a timeout, a signal, an ICMP error reported on
    /// the socket or a shutdown.
    func receive(from fd: Int32) -> Int {
        received = 0
        let n = Self.count, slot = Self.slotBytes
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
        guard count > 0 else { return 0 }
        inbound.moveWriterIndex(forwardBy: n * slot)
        received = Int(count)
        for i in 0..<received { nameLengths[i] = messages[i].msg_hdr.msg_namelen }
        return received
    }

    /// The datagram in slot `i` of the last `receive` and its source; nil when the kernel
    /// truncated it or its source is neither IPv4 nor IPv6.
    func datagram(_ i: Int) -> (bytes: ByteBuffer, source: PeerEndpoint)? {
        guard (0..<received).contains(i), messages[i].msg_hdr.msg_flags & Int32(MSG_TRUNC) == 0,
              let source = PeerEndpoint(names + i, length: nameLengths[i]),
              let bytes = inbound.getSlice(at: i * Self.slotBytes, length: Int(messages[i].msg_len)) else { return nil }
        return (bytes, source)
    }
}
