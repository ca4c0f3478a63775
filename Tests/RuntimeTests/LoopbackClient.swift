#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Testing
import TrackerLogic

/// A UDP client on loopback, bound so that replies can be sent to it, whose receives give
/// up after `timeoutMicroseconds`; its descriptor and address.
func loopbackClient(timeoutMicroseconds: Int = 1_000_000) throws -> (fd: Int32, endpoint: PeerEndpoint) {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    try #require(fd >= 0)
    var tv = timeval(tv_sec: timeoutMicroseconds / 1_000_000, tv_usec: timeoutMicroseconds % 1_000_000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    let any = try #require(PeerEndpoint("127.0.0.1:0"))
    try #require(SocketAddress(any).withSockAddr { bind(fd, $0, socklen_t($1)) } == 0)
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &storage) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return (fd, try #require(withUnsafePointer(to: &storage) { PeerEndpoint($0, length: length) }))
}
