#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import TrackerLogic

/// Reads a node's peer socket on the node's event loop with recvmmsg(2) into buffers
/// allocated once (`DatagramSlots`), polling while datagrams keep coming.
///
/// Why: behind a group every node receives every request, and a follower only holds it.
/// Through a NIO channel each datagram cost an envelope and a `SocketAddress` whose host
/// string is formatted with sprintf, and each burst a readiness wake of its own: more of
/// a follower's CPU than its share of the replication.
/// Reading the socket from another thread was measured and dropped (the hand-off to the
/// loop cost a wake on each side).
///
/// How: NIO's channel owns the socket, with auto-read off. After NIO delivered one read
/// (`readCompleted`), the intake reads what is queued every `interval`, up to
/// `batchesPerPoll` system calls a turn, so that a backlog never holds the loop past a
/// keepalive. Requests come in bursts, each a round of two-phase commit after the last
/// (clients answered together send again together), so only `quietPolls` empty polls in
/// a row hand the wait back to NIO (`read()`: one readiness wake, then polling again).
/// An idle node takes no wake; a busy one takes one per `interval` however many
/// datagrams arrive.
///
/// A request is read up to `interval` after it arrived. That is far inside what held
/// requests already allow for (`ClusterConfig.receiveSkew`, 10 ms by default: evidence
/// covers requests read that long after it), and adds at most `interval` to a reply.
///
/// Invariants: on the loop only. Exactly one of these holds while the intake runs: a
/// poll is scheduled, or NIO was asked to read. The descriptor is NIO's and is never read
/// once the channel is closed or `stop` was called.
package final class PeerIntake {
    /// How long a busy socket waits between polls.
    package static let interval = TimeAmount.milliseconds(1)
    /// recvmmsg calls per poll at most (`DatagramSlots.count` datagrams each, 256 a
    /// turn): a turn's bound on the loop.
    package static let batchesPerPoll = 256 / DatagramSlots.count
    /// Empty polls in a row after which the socket counts as quiet.
    package static let quietPolls = 8

    package let channel: Channel
    package let descriptor: CInt
    private let slots = DatagramSlots()
    private var scheduled: Scheduled<Void>?
    private var stopped = false
    private var emptyPolls = 0
    /// Each datagram read (with when its recvmmsg returned), and the end of a turn's reads.
    private let deliver: (ByteBuffer, PeerEndpoint, Instant) -> Void
    private let turnEnded: () -> Void

    package init(channel: Channel, descriptor: CInt, deliver: @escaping (ByteBuffer, PeerEndpoint, Instant) -> Void, turnEnded: @escaping () -> Void) {
        self.channel = channel
        self.descriptor = descriptor
        self.deliver = deliver
        self.turnEnded = turnEnded
    }

    /// Starts waiting for the first datagram.
    package func start() { channel.read() }

    /// NIO delivered a read (through the channel's handler): poll from now on.
    package func readCompleted() {
        guard !stopped, scheduled == nil else { return }
        emptyPolls = 0
        scheduled = channel.eventLoop.assumeIsolated().scheduleTask(in: Self.interval) { [self] in poll() }
    }

    package func stop() {
        stopped = true
        scheduled?.cancel()
        scheduled = nil
    }

    private func poll() {
        scheduled = nil
        guard !stopped, channel.isActive else { return }
        var read = 0
        var drained = false
        for _ in 0..<Self.batchesPerPoll {
            let n = slots.receive(from: descriptor)
            let now = n > 0 ? WallClock.now() : Instant(milliseconds: 0)
            for i in 0..<n {
                if let (bytes, source) = slots.datagram(i) { deliver(bytes, source, now) }
            }
            read += n
            if n < DatagramSlots.count { drained = true; break }
        }
        if read > 0 { turnEnded() }
        guard !stopped, channel.isActive else { return }
        emptyPolls = read == 0 ? emptyPolls + 1 : 0
        if emptyPolls >= Self.quietPolls {
            channel.read()
        } else {
            // A full turn left datagrams queued: the next one as soon as the loop's other
            // work had its turn.
            scheduled = channel.eventLoop.assumeIsolated().scheduleTask(in: drained ? Self.interval : .zero) { [self] in poll() }
        }
    }
}
