#if canImport(Glibc)
import Glibc
#endif
import CBatchedUDP

/// What one recvmmsg(2) or sendmmsg(2) of up to `count` datagrams works in, allocated
/// once: each datagram's `sockaddr` and its length, its one `iovec` and its `mmsghdr`.
///
/// Invariant: `deallocate` is called once, by the owner's deinit, and nothing is used after.
struct MessageVectors {
    let count: Int
    let names: UnsafeMutablePointer<sockaddr_storage>
    let nameLengths: UnsafeMutablePointer<socklen_t>
    let vectors: UnsafeMutablePointer<iovec>
    let messages: UnsafeMutablePointer<cbatched_message>

    init(count: Int) {
        self.count = count
        names = .allocate(capacity: count)
        names.initialize(repeating: sockaddr_storage(), count: count)
        nameLengths = .allocate(capacity: count)
        nameLengths.initialize(repeating: 0, count: count)
        vectors = .allocate(capacity: count)
        vectors.initialize(repeating: iovec(), count: count)
        messages = .allocate(capacity: count)
        messages.initialize(repeating: cbatched_message(), count: count)
    }

    func deallocate() {
        names.deallocate(); nameLengths.deallocate(); vectors.deallocate(); messages.deallocate()
    }

    /// Points message `i` at `length` bytes from `bytes` and at its own `sockaddr`, of
    /// `nameLength` bytes (what a read may fill, or what a send goes to).
    func point(_ i: Int, at bytes: UnsafeMutableRawPointer, length: Int, nameLength: socklen_t) {
        vectors[i] = iovec(iov_base: bytes, iov_len: length)
        messages[i] = cbatched_message()
        messages[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
        messages[i].msg_hdr.msg_namelen = nameLength
        messages[i].msg_hdr.msg_iov = vectors + i
        messages[i].msg_hdr.msg_iovlen = 1
    }
}
