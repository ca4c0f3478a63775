import NIOCore

/// One piece of a cluster message too large for one frame. A snapshot of a million peers
/// is ~62 MB: as one STOMP message it would meet the broker's frame and memory limits
/// (64 MB each in our ActiveMQ configuration) and hold the broker's memory until every
/// subscriber took it whole. Cut into `ClusterChannel.fragmentBytes` pieces it flows.
///
/// Each fragment is a frame of its own (its own sequence number and HMAC tag), so only a
/// key holder can start, feed or spoil a reassembly, and a replayed fragment is refused
/// like any replayed frame. Layout, inside the frame where a `ClusterCodec` message would
/// be: magic "TF" (2), sender id (4), incarnation (8), transfer id (8: the sequence number
/// of the first fragment's frame), index (4), count (4), then the piece of the encoded
/// message. Integers are big-endian.
public struct Fragment: Hashable, Sendable {
    /// Distinct from `ClusterCodec.magic` ("TK"): a frame body is one or the other.
    public static let magic: UInt16 = 0x5446
    public static let headerBytes = 2 + 4 + 8 + 8 + 4 + 4

    public var from: NodeID
    public var incarnation: UInt64
    public var transfer: UInt64
    public var index: UInt32
    public var count: UInt32
    public var payload: ByteBuffer

    static func isFragment(_ body: ByteBuffer) -> Bool {
        body.getInteger(at: body.readerIndex, as: UInt16.self) == magic
    }

    public func write(into b: inout ByteBuffer) {
        b.writeInteger(Self.magic)
        b.writeInteger(from.rawValue)
        b.writeInteger(incarnation)
        b.writeInteger(transfer)
        b.writeInteger(index)
        b.writeInteger(count)
        var piece = payload
        b.writeBuffer(&piece)
    }

    /// Nil when the header is short, names no sender, or its index is not below its count.
    public init?(decoding body: ByteBuffer) {
        var b = body
        guard b.readInteger(as: UInt16.self) == Self.magic,
              let from = b.readInteger(as: UInt32.self), let incarnation = b.readInteger(as: UInt64.self),
              let transfer = b.readInteger(as: UInt64.self), let index = b.readInteger(as: UInt32.self),
              let count = b.readInteger(as: UInt32.self),
              NodeID(from).isAssigned, index < count, b.readableBytes > 0 else { return nil }
        self.init(from: NodeID(from), incarnation: incarnation, transfer: transfer, index: index, count: count, payload: b)
    }

    public init(from: NodeID, incarnation: UInt64, transfer: UInt64, index: UInt32, count: UInt32, payload: ByteBuffer) {
        self.from = from; self.incarnation = incarnation; self.transfer = transfer
        self.index = index; self.count = count; self.payload = payload
    }
}

/// The receiver's half-assembled messages. Fragments may arrive in any order (the
/// simulator's network reorders; the broker does not), each at most once (the replay
/// window sees to that). Bounded: a message may not exceed `maxMessageBytes` nor
/// `maxFragments` pieces, at most `maxPartials` messages are in assembly (the least
/// recently fed goes first), and one not fed for `maxAge` is dropped. A lost fragment
/// therefore costs its message, never memory: the protocol asks again (a joiner's hello,
/// a recovering master's catch-up request) as it does for any lost message.
public struct FragmentReassembly: Sendable {
    public static let maxFragments: UInt32 = 1 << 16
    public static let maxPartials = 4
    /// 512 MiB: a snapshot of eight million peers.
    public let maxMessageBytes: Int

    public init(maxMessageBytes: Int = 512 << 20) { self.maxMessageBytes = maxMessageBytes }

    struct Key: Hashable, Comparable, Sendable {
        var sender: NodeID
        var incarnation: UInt64
        var transfer: UInt64

        static func < (a: Key, b: Key) -> Bool {
            (a.sender.rawValue, a.incarnation, a.transfer) < (b.sender.rawValue, b.incarnation, b.transfer)
        }
    }

    struct Partial: Sendable {
        var pieces: [ByteBuffer?]
        var received = 0
        var bytes = 0
        var lastHeard: Instant
    }

    public enum Outcome: Sendable, Equatable {
        case pending
        /// Every piece, in order: the encoded message.
        case complete(ByteBuffer)
        case dropped(ClusterRejection)
    }

    private var partials: [Key: Partial] = [:]

    /// The transfers in assembly, in order.
    public var pendingTransfers: [UInt64] { partials.keys.map(\.transfer).sorted() }

    public mutating func accept(_ f: Fragment, now: Instant, maxAge: Milliseconds) -> Outcome {
        partials = partials.filter { now - $0.value.lastHeard <= maxAge }
        guard f.count >= 2, f.count <= Self.maxFragments else { return .dropped(.oversized) }
        let key = Key(sender: f.from, incarnation: f.incarnation, transfer: f.transfer)
        var partial: Partial
        if let p = partials[key] {
            guard p.pieces.count == Int(f.count) else {
                partials[key] = nil
                return .dropped(.malformed)
            }
            partial = p
        } else {
            // Least recently fed first; ties by key, never by the table's per-process hash order.
            if partials.count >= Self.maxPartials, let oldest = partials.min(by: { ($0.value.lastHeard, $0.key) < ($1.value.lastHeard, $1.key) })?.key {
                partials[oldest] = nil
            }
            partial = Partial(pieces: Array(repeating: nil, count: Int(f.count)), lastHeard: now)
        }
        let i = Int(f.index)
        guard partial.pieces[i] == nil else { return .dropped(.replayed) }
        guard partial.bytes <= maxMessageBytes - f.payload.readableBytes else {
            partials[key] = nil
            return .dropped(.oversized)
        }
        partial.pieces[i] = f.payload
        partial.received += 1
        partial.bytes += f.payload.readableBytes
        partial.lastHeard = now
        guard partial.received == partial.pieces.count else {
            partials[key] = partial
            return .pending
        }
        partials[key] = nil
        var message = ByteBuffer()
        message.reserveCapacity(partial.bytes)
        for case var piece? in partial.pieces { message.writeBuffer(&piece) }
        return .complete(message)
    }
}
