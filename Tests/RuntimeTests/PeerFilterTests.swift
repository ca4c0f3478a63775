#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime

/// A slave that is not the heir has its kernel drop peer requests (`NodeAction.readPeers`):
/// the filter passes the cluster's frames, which share a group's socket, and nothing else;
/// taken off, every datagram arrives again.
@Suite struct PeerFilterTests {
    /// Sends each payload to `fd`'s address on loopback and returns what `fd` reads.
    private func exchange(_ payloads: [[UInt8]], to fd: CInt) throws -> [[UInt8]] {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        let sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(sender >= 0)
        defer { close(sender) }
        for p in payloads {
            _ = withUnsafePointer(to: &storage) { a in
                a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(sender, p, p.count, 0, $0, length) }
            }
        }
        usleep(50_000)
        var got: [[UInt8]] = []
        var bytes = [UInt8](repeating: 0, count: 256)
        while case let n = recv(fd, &bytes, bytes.count, Int32(MSG_DONTWAIT)), n >= 0 { got.append(Array(bytes[0..<n])) }
        return got
    }

    @Test func onlyFramesPassWhileOnAndEverythingAfter() throws {
        let fd = try PeerChannelBinder.boundSocket(try #require(PeerEndpoint("127.0.0.1:0")), freeBind: false)
        defer { close(fd) }
        let frame: [UInt8] = [0x54, 0x53, ClusterChannel.version] + [UInt8](repeating: 7, count: 30)
        let olderFrame: [UInt8] = [0x54, 0x53, ClusterChannel.version &+ 1] + [UInt8](repeating: 7, count: 30)
        let connect: [UInt8] = [0, 0, 0x04, 0x17, 0x27, 0x10, 0x19, 0x80, 0, 0, 0, 0, 0, 0, 0, 1]
        let short: [UInt8] = [0x54]
        #expect(PeerChannelBinder.passOnlyFrames(fd, true) == nil)
        #expect(try exchange([connect, frame, short, olderFrame], to: fd) == [frame])
        // Attached twice: the second replaces the first.
        #expect(PeerChannelBinder.passOnlyFrames(fd, true) == nil)
        #expect(try exchange([connect, frame], to: fd) == [frame])
        #expect(PeerChannelBinder.passOnlyFrames(fd, false) == nil)
        #expect(try exchange([connect, frame], to: fd) == [connect, frame])
        // Taken off when none is on: fine.
        #expect(PeerChannelBinder.passOnlyFrames(fd, false) == nil)
        #expect(try exchange([connect], to: fd) == [connect])
    }
}
