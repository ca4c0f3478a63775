import NIOCore

/// One peer row of a store's log: the peer as memory holds it after a commit (or after its
/// announce, when a later row of the same commit names it again: the latest row wins), or
/// its key alone when memory no longer holds it. A written row's key is its record's, so
/// a row cannot name one peer and carry another's values.
public enum PeerLogRow: Hashable, Sendable {
    case written(InfoHash, PeerRecord)
    case removed(InfoHash, PeerKey)

    public var infoHash: InfoHash {
        switch self {
        case .written(let h, _), .removed(let h, _): h
        }
    }

    public var key: PeerKey {
        switch self {
        case .written(_, let r): r.key
        case .removed(_, let k): k
        }
    }

    /// The peer's values, nil for a removal.
    public var record: PeerRecord? {
        if case .written(_, let r) = self { r } else { nil }
    }
}

/// A commit's peer rows as a store's log keeps them: one blob per commit (or per run of
/// commits a store writes together), not a row per announce. Each SQL row costs the
/// writer its binding, a step of SQLite's virtual machine and a B-tree insert; one blob
/// of a commit's rows costs one of each (docs/benchmarks.md, "Design choices").
///
/// Layout: the format byte (1), then each row in the commit's order: a tag (1 written, 0
/// removed), the info hash's 20 bytes, then the peer as the cluster codec lays out a
/// `PeerRecord` (written) or a `PeerKey` (removed). Integers are big-endian.
public struct PeerLogRecord: Sendable {
    public private(set) var bytes: ByteBuffer
    public private(set) var rows = 0

    static let format: UInt8 = 1
    static let written: UInt8 = 1
    static let removed: UInt8 = 0
    /// The shortest row: tag, info hash, peer id, an IPv4 address with its family byte.
    static let minRowBytes = 1 + 20 + 20 + 5

    public init(capacity rows: Int = 0) {
        bytes = ByteBuffer()
        bytes.reserveCapacity(1 + max(0, min(rows, 1 << 16)) * 88)
        bytes.writeInteger(Self.format)
    }

    public var isEmpty: Bool { rows == 0 }

    /// The longest row: a written IPv6 peer.
    static let maxRowBytes = 1 + 20 + ClusterCodec.maxRecordBytes

    /// A peer's row: its record when memory holds it, else a removal of `key`. Written
    /// through one pointer: field by field into the buffer, the rows were half of a store
    /// writer's CPU.
    public mutating func append(_ infoHash: InfoHash, _ key: PeerKey, _ record: PeerRecord?) {
        bytes.writeBigEndian(atMost: Self.maxRowBytes) { w in
            if let record {
                w.put(Self.written); w.put(infoHash); ClusterCodec.write(record, &w)
            } else {
                w.put(Self.removed); w.put(infoHash); ClusterCodec.write(key, &w)
            }
        }
        rows += 1
    }

    /// The rows of a record read back from a store, in order; bytes no writer of ours
    /// leaves (another format, an unknown tag, a truncated row) are an error.
    public static func decode(_ raw: UnsafeRawBufferPointer) -> Result<[PeerLogRow], ClusterDecodingError> {
        do {
            var r = ClusterCodec.Reader(raw)
            let format: UInt8 = try r.int()
            guard format == Self.format else { throw ClusterDecodingError("peer log record of format \(format)") }
            var out: [PeerLogRow] = []
            out.reserveCapacity(r.remaining / minRowBytes)
            while r.remaining > 0 {
                let tag: UInt8 = try r.int()
                let hash = try r.bytes20()
                switch tag {
                case Self.written: out.append(.written(hash, try r.record()))
                case Self.removed: out.append(.removed(hash, PeerKey(peerID: try r.bytes20(), ip: try r.ip())))
                default: throw ClusterDecodingError("peer log row with tag \(tag)")
                }
            }
            return .success(out)
        } catch let e as ClusterDecodingError { return .failure(e) } catch {
            return .failure(ClusterDecodingError("\(error)"))
        }
    }

    public static func decode(_ bytes: [UInt8]) -> Result<[PeerLogRow], ClusterDecodingError> {
        bytes.withUnsafeBytes { decode($0) }
    }
}
