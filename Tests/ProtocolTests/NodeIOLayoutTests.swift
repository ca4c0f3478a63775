import NIOCore
import Testing
import TrackerLogic

/// A serving node's events are mostly peers' datagrams and its actions mostly replies:
/// no other case may make an event or an action larger than those (`NodeIO.swift`:
/// larger cases are `indirect`), or every datagram and every reply is carried, copied and
/// matched at the size of the largest case.
@Suite struct NodeIOLayoutTests {
    @Test func noEventIsLargerThanAPeersDatagram() {
        #expect(MemoryLayout<NodeEvent>.size <= MemoryLayout<ByteBuffer>.size + MemoryLayout<PeerEndpoint>.size + 1)
    }

    @Test func noActionIsLargerThanAReply() {
        #expect(MemoryLayout<NodeAction>.size <= MemoryLayout<TrackerResponse>.size + MemoryLayout<PeerEndpoint>.size + 1)
    }
}
