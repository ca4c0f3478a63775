import Crypto
import NIOCore

/// Why a frame from the cluster channel was dropped. Counted per reason and shown to
/// operators: a steady count of anything but `stale` means someone is on the broker who
/// should not be, or a node runs with the wrong key.
public enum ClusterRejection: String, Error, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Not a frame of ours: wrong magic or version, too short, or a body the codec refuses.
    case malformed
    /// Signed with a key this node does not hold (another cluster, or a rotation half done).
    case unknownKey
    /// The HMAC does not match: forged or altered in transit.
    case badTag
    /// Sent too long ago (or too far in the future) for any window to judge it: a replay
    /// from an old capture, or a clock far off.
    case stale
    /// A sequence number this receiver already accepted from that sender, or one that fell
    /// behind its window: a replay or a reorder beyond repair.
    case replayed
    /// Claims our own id but was sent before this process started: an earlier run of ours,
    /// replayed.
    case ownPastRun
    /// A fragment of a message larger than any node sends (more pieces or bytes than the
    /// reassembly bounds allow).
    case oversized

    public var description: String { rawValue }
}

/// The authenticated frame every cluster message travels in, and the receiver's replay
/// protection. Pure: the caller gives the time.
///
/// Frame: magic "TS" (2), version (1), key id (4), sent-at milliseconds (8), sequence
/// number (8), the `ClusterCodec` message (which names the sender and its incarnation),
/// then HMAC-SHA256 (32) over everything before it. The tag therefore covers the sender
/// id, its incarnation and its sequence number: nobody without the key can speak for a
/// node, and a receiver accepts each (sender, incarnation, sequence) once. A message
/// longer than `fragmentBytes` travels as several frames, each carrying a `Fragment`.
public struct ClusterChannel: Sendable {
    public static let magic: UInt16 = 0x5453
    public static let version: UInt8 = 1
    /// Magic and version: the first three bytes of every frame. No BEP 15 request starts
    /// with them (connect starts with the protocol id, and no issued connection id does),
    /// so on the peer network they tell a keepalive from a request.
    public static let framePrefix = UInt64(magic) << 8 | UInt64(version)

    /// Whether a datagram from the peer network is a cluster frame (not a peer request).
    public static func isFrame(_ datagram: ByteBuffer) -> Bool {
        guard let m = datagram.getInteger(at: datagram.readerIndex, as: UInt16.self),
              let v = datagram.getInteger(at: datagram.readerIndex + 2, as: UInt8.self) else { return false }
        return m == magic && v == version
    }
    public static let headerBytes = 2 + 1 + 4 + 8 + 8
    public static let tagBytes = FrameMAC.tagBytes

    /// Signs with the first key; accepts any of them (at most two: old and new during a
    /// rotation).
    public let keys: [ClusterKey]
    /// Frames sent longer ago than this (or stamped this far ahead) are refused. Every
    /// receiver that has heard a sender keeps its window, so this bounds only replays into
    /// a node that restarted or never heard that sender.
    public let maxAge: Milliseconds
    /// When this process started: a frame from our own id stamped earlier is a replay.
    public let startedAt: Instant
    /// Longest encoded message sent in one frame; longer ones go in pieces of this size.
    public let fragmentBytes: Int
    public static let defaultFragmentBytes = 1 << 20
    private var nextSequence: UInt64 = 1
    private var windows = ReplayWindows()
    private var reassembly = FragmentReassembly()
    /// HMAC-SHA256 already keyed (its inner and outer pads hashed), one per key: each
    /// frame copies one instead of hashing the key again (a quarter of the simulator's time).
    private let macs: [FrameMAC]

    public init(keys: [ClusterKey], maxAge: Milliseconds = .seconds(30), startedAt: Instant,
                fragmentBytes: Int = ClusterChannel.defaultFragmentBytes) {
        self.keys = keys.isEmpty ? [.insecure] : Array(keys.prefix(2))
        self.maxAge = maxAge
        self.startedAt = startedAt
        self.fragmentBytes = min(max(fragmentBytes, 64), 16 << 20)
        macs = self.keys.map { FrameMAC(key: $0.bytes) }
    }

    // MARK: sending

    /// One frame, however long the message (keepalives on the peer network, which must
    /// fit a datagram anyway).
    public mutating func seal(_ envelope: ClusterEnvelope, now: Instant) -> ByteBuffer {
        seal(now: now, reserving: 64) { ClusterCodec.encode(envelope, into: &$0) }
    }

    /// The frames to publish for one message: one, or a `Fragment` per `fragmentBytes`
    /// of the encoded message.
    public mutating func sealFragments(_ envelope: ClusterEnvelope, now: Instant) -> [ByteBuffer] {
        sealFragments(encoded: ClusterCodec.encode(envelope), from: envelope.from, incarnation: envelope.incarnation, now: now)
    }

    /// The same, for a message the caller encoded already (the simulator checks each
    /// encoding round-trips before it sends it).
    public mutating func sealFragments(encoded message: ByteBuffer, from: NodeID, incarnation: UInt64, now: Instant) -> [ByteBuffer] {
        guard message.readableBytes > fragmentBytes else {
            return [seal(now: now, reserving: message.readableBytes) { var m = message; $0.writeBuffer(&m) }]
        }
        let count = (message.readableBytes + fragmentBytes - 1) / fragmentBytes
        let transfer = nextSequence
        return (0..<count).map { i in
            let start = i * fragmentBytes
            let piece = message.getSlice(at: message.readerIndex + start, length: min(fragmentBytes, message.readableBytes - start)) ?? ByteBuffer()
            let fragment = Fragment(from: from, incarnation: incarnation, transfer: transfer,
                                    index: UInt32(truncatingIfNeeded: i), count: UInt32(truncatingIfNeeded: count), payload: piece)
            return seal(now: now, reserving: Fragment.headerBytes + piece.readableBytes) { fragment.write(into: &$0) }
        }
    }

    private mutating func seal(now: Instant, reserving body: Int, _ writeBody: (inout ByteBuffer) -> Void) -> ByteBuffer {
        var b = ByteBuffer()
        b.reserveCapacity(Self.headerBytes + body + Self.tagBytes)
        b.writeInteger(Self.magic)
        b.writeInteger(Self.version)
        b.writeInteger(keys[0].id)
        b.writeInteger(now.milliseconds)
        b.writeInteger(nextSequence)
        nextSequence &+= 1
        writeBody(&b)
        let tag = b.withUnsafeReadableBytes { macs[0].tag($0) }
        tag.withUnsafeBytes { _ = b.writeBytes($0) }
        return b
    }

    // MARK: receiving

    /// Verifies, decodes and de-duplicates one frame. `ownID` is the receiver's id (its
    /// past runs' frames are refused). Nil: a fragment was taken in, its message is not
    /// whole yet.
    public mutating func open(_ frame: ByteBuffer, ownID: NodeID, now: Instant) -> Result<ClusterEnvelope?, ClusterRejection> {
        guard frame.readableBytes >= Self.headerBytes + Self.tagBytes else { return .failure(.malformed) }
        var header = frame
        guard header.readInteger(as: UInt16.self) == Self.magic, header.readInteger(as: UInt8.self) == Self.version,
              let keyID = header.readInteger(as: UInt32.self), let sentAtRaw = header.readInteger(as: Int64.self),
              let sequence = header.readInteger(as: UInt64.self) else { return .failure(.malformed) }
        guard let k = keys.firstIndex(where: { $0.id == keyID }) else { return .failure(.unknownKey) }
        let signedLength = frame.readableBytes - Self.tagBytes
        let authentic = frame.withUnsafeReadableBytes { raw in
            macs[k].isValid(UnsafeRawBufferPointer(rebasing: raw[signedLength...]),
                            for: UnsafeRawBufferPointer(rebasing: raw[..<signedLength]))
        }
        guard authentic else { return .failure(.badTag) }
        let sentAt = Instant(milliseconds: sentAtRaw)
        guard now - sentAt <= maxAge, sentAt - now <= maxAge else { return .failure(.stale) }
        guard let body = frame.getSlice(at: frame.readerIndex + Self.headerBytes, length: signedLength - Self.headerBytes) else {
            return .failure(.malformed)
        }
        if Fragment.isFragment(body) { return openFragment(body, sequence: sequence, sentAt: sentAt, ownID: ownID, now: now) }
        guard case .success(let envelope) = ClusterCodec.decode(body) else { return .failure(.malformed) }
        if envelope.from == ownID && ownID.isAssigned && sentAt < startedAt { return .failure(.ownPastRun) }
        guard windows.accept(sender: envelope.from, incarnation: envelope.incarnation, sequence: sequence, now: now) else {
            return .failure(.replayed)
        }
        return .success(envelope)
    }

    private mutating func openFragment(_ body: ByteBuffer, sequence: UInt64, sentAt: Instant, ownID: NodeID,
                                       now: Instant) -> Result<ClusterEnvelope?, ClusterRejection> {
        guard let fragment = Fragment(decoding: body) else { return .failure(.malformed) }
        if fragment.from == ownID && ownID.isAssigned && sentAt < startedAt { return .failure(.ownPastRun) }
        guard windows.accept(sender: fragment.from, incarnation: fragment.incarnation, sequence: sequence, now: now) else {
            return .failure(.replayed)
        }
        switch reassembly.accept(fragment, now: now, maxAge: maxAge) {
        case .pending:
            return .success(nil)
        case .dropped(let reason):
            return .failure(reason)
        case .complete(let message):
            // The pieces were authenticated one by one; the whole must be what their
            // sender sent, under its own name.
            guard case .success(let envelope) = ClusterCodec.decode(message),
                  envelope.from == fragment.from, envelope.incarnation == fragment.incarnation else { return .failure(.malformed) }
            return .success(envelope)
        }
    }
}

/// Which sequence numbers each (sender, incarnation) has had accepted: the highest, and
/// a bitmap of the `width` below it. Bounded: the least recently heard entry goes when
/// the table is full (only authenticated frames create entries).
struct ReplayWindows: Sendable {
    static let width: UInt64 = 1024
    static let maxEntries = 4096

    struct Key: Hashable, Comparable, Sendable {
        var sender: NodeID
        var incarnation: UInt64

        static func < (a: Key, b: Key) -> Bool { (a.sender.rawValue, a.incarnation) < (b.sender.rawValue, b.incarnation) }
    }

    struct Window: Sendable {
        var highest: UInt64
        /// Bit i of word i/64 set: `highest - i` was accepted (bit 0 is `highest` itself).
        var seen: [UInt64]
        var lastHeard: Instant
    }

    private var entries: [Key: Window] = [:]

    mutating func accept(sender: NodeID, incarnation: UInt64, sequence: UInt64, now: Instant) -> Bool {
        let key = Key(sender: sender, incarnation: incarnation)
        // In place: a window copied out of the table would copy its bitmap on every frame.
        if let accepted = entries[key]?.accept(sequence, now: now) { return accepted }
        // Least recently heard first; ties by key, so which window goes never depends on
        // the table's (per-process) hash order.
        if entries.count >= Self.maxEntries, let oldest = entries.min(by: { ($0.value.lastHeard, $0.key) < ($1.value.lastHeard, $1.key) })?.key {
            entries[oldest] = nil
        }
        var seen = [UInt64](repeating: 0, count: Int(Self.width / 64))
        seen[0] = 1
        entries[key] = Window(highest: sequence, seen: seen, lastHeard: now)
        return true
    }
}

extension ReplayWindows.Window {
    /// Accepts `sequence` unless it was seen or is older than the window.
    mutating func accept(_ sequence: UInt64, now: Instant) -> Bool {
        if sequence > highest {
            shift(by: sequence - highest)
            highest = sequence
            seen[0] |= 1
        } else {
            let back = highest - sequence
            guard back < ReplayWindows.width else { return false }
            let (word, bit) = (Int(back / 64), back % 64)
            guard seen[word] & (1 << bit) == 0 else { return false }
            seen[word] |= 1 << bit
        }
        lastHeard = now
        return true
    }
}

extension ReplayWindows.Window {
    /// Moves the bitmap `n` places towards older sequence numbers.
    mutating func shift(by n: UInt64) {
        guard n < ReplayWindows.width else {
            for i in seen.indices { seen[i] = 0 }
            return
        }
        let words = Int(n / 64), bits = n % 64
        for i in stride(from: seen.count - 1, through: 0, by: -1) {
            let from = i - words
            var v: UInt64 = from >= 0 ? seen[from] << bits : 0
            if bits > 0, from - 1 >= 0 { v |= seen[from - 1] >> (64 - bits) }
            seen[i] = v
        }
    }
}
