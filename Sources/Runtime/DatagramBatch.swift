#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP
import NIOCore
import TrackerLogic

/// BEP 15 datagrams encoded one after another into one buffer allocated once, each with
/// the `sockaddr` it goes to, and sent with one sendmmsg(2).
///
/// Why not a NIO channel's writes: each datagram cost a `SocketAddress` (a boxed
/// address), an envelope, a pending-write entry and its bookkeeping after the vector
/// write, about a tenth of a serving node's loop. The standalone socket's and a cluster
/// node's replies leave through this, and so do `tracker bench`'s requests.
///
/// A datagram the kernel refuses (unreachable, not permitted, the socket's send buffer
/// full) is dropped, as the network might have; its client retransmits.
///
/// Invariants: used by one thread at a time; at most `capacity` datagrams between sends
/// (`append` says when it is full).
package final class DatagramBatch {
    package static let capacity = DatagramSlots.count

    private let vectors = MessageVectors(count: capacity)
    private var outbound: ByteBuffer
    /// Where each datagram lies in `outbound`.
    private var spans: [(offset: Int, length: Int)] = []

    package init() {
        outbound = ByteBufferAllocator().buffer(capacity: Self.capacity * DatagramSlots.slotBytes)
        spans.reserveCapacity(Self.capacity)
    }

    deinit { vectors.deallocate() }

    package var isEmpty: Bool { spans.isEmpty }
    package var isFull: Bool { spans.count >= Self.capacity }

    /// Adds a reply to `endpoint`; false (and nothing added) when the batch is full.
    @discardableResult
    package func append(_ response: TrackerResponse, to endpoint: PeerEndpoint) -> Bool {
        append(to: endpoint) { BEP15Codec.encode(response, into: &$0) }
    }

    /// Adds a reply to an address as recvmsg(2) filled it in; false when the batch is full.
    @discardableResult
    package func append(_ response: TrackerResponse, toName name: UnsafePointer<sockaddr_storage>, length: socklen_t) -> Bool {
        guard !isFull else { return false }
        vectors.names[spans.count] = name.pointee
        vectors.nameLengths[spans.count] = length
        encode { BEP15Codec.encode(response, into: &$0) }
        return true
    }

    /// Adds a request to `endpoint`; false (and nothing added) when the batch is full.
    @discardableResult
    package func append(_ request: TrackerRequest, to endpoint: PeerEndpoint) -> Bool {
        append(to: endpoint) { BEP15Codec.encode(request, into: &$0) }
    }

    private func append(to endpoint: PeerEndpoint, encoding write: (inout ByteBuffer) -> Void) -> Bool {
        guard !isFull else { return false }
        vectors.nameLengths[spans.count] = endpoint.store(in: vectors.names + spans.count)
        encode(write)
        return true
    }

    private func encode(_ write: (inout ByteBuffer) -> Void) {
        let offset = outbound.writerIndex
        write(&outbound)
        spans.append((offset, outbound.writerIndex - offset))
    }

    /// Empties the batch without sending; returns how many datagrams it held.
    @discardableResult
    package func discard() -> Int {
        let count = spans.count
        outbound.clear()
        spans.removeAll(keepingCapacity: true)
        return count
    }

    /// The errno of the last datagram the kernel refused (0: none yet).
    package private(set) var lastError: CInt = 0

    /// Sends every datagram on `fd` and empties the batch; returns how many were dropped.
    @discardableResult
    package func send(on fd: CInt) -> Int {
        guard !spans.isEmpty else { return 0 }
        var dropped = 0
        outbound.withUnsafeReadableBytes { [spans] raw in
            guard let base = raw.baseAddress else { dropped = spans.count; return }
            for (i, span) in spans.enumerated() {
                vectors.point(i, at: UnsafeMutableRawPointer(mutating: base + span.offset), length: span.length, nameLength: vectors.nameLengths[i])
            }
            var done = 0
            while done < spans.count {
                let r = cbatched_sendmmsg(fd, vectors.messages + done, UInt32(spans.count - done))
                if r > 0 {
                    done += Int(r)
                } else if r < 0 && errno == EINTR {
                    continue
                } else {
                    // The first of the rest was refused: skip it.
                    lastError = errno
                    done += 1
                    dropped += 1
                }
            }
        }
        outbound.clear()
        spans.removeAll(keepingCapacity: true)
        return dropped
    }
}
