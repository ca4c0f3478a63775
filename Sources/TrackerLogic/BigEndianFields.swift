import NIOCore

/// Big-endian fields read straight from a datagram's bytes at fixed offsets.
///
/// Why not `ByteBuffer.readInteger`: each of those reaches the buffer's storage object,
/// and every such access is a dynamic exclusivity check plus a bounds check; an announce
/// has fourteen fields, and decoding them that way cost a peer request about 4 % of a
/// standalone node's CPU. Here the storage is reached once, for the span.
///
/// Invariant: callers check the span's length against the layout before reading. The
/// span's own bounds check stays as a backstop, so a mistake in a layout traps instead
/// of reading past the datagram; no length that a peer can send reaches it.
enum BigEndianFields {
    @inline(__always)
    static func u16(_ bytes: borrowing RawSpan, _ at: Int) -> UInt16 {
        UInt16(bigEndian: bytes.unsafeLoadUnaligned(fromByteOffset: at, as: UInt16.self))
    }

    @inline(__always)
    static func u32(_ bytes: borrowing RawSpan, _ at: Int) -> UInt32 {
        UInt32(bigEndian: bytes.unsafeLoadUnaligned(fromByteOffset: at, as: UInt32.self))
    }

    @inline(__always)
    static func u64(_ bytes: borrowing RawSpan, _ at: Int) -> UInt64 {
        UInt64(bigEndian: bytes.unsafeLoadUnaligned(fromByteOffset: at, as: UInt64.self))
    }

    @inline(__always)
    static func i64(_ bytes: borrowing RawSpan, _ at: Int) -> Int64 { Int64(bitPattern: u64(bytes, at)) }

    /// Twenty bytes as an info hash or peer id (the layout of `Bytes20(reading:)`).
    @inline(__always)
    static func bytes20(_ bytes: borrowing RawSpan, _ at: Int) -> Bytes20 {
        Bytes20(a: u64(bytes, at), b: u64(bytes, at + 8), c: u32(bytes, at + 16))
    }
}

/// Big-endian fields written one after another through one pointer: the writing half of
/// `BigEndianFields`, for the layouts written most (an announce's answer, a peer log
/// row), where a `ByteBuffer.writeInteger` per field costs a dynamic exclusivity check
/// and a capacity check each.
///
/// Invariant: the caller obtained `out` from `writeWithUnsafeMutableBytes` with at least
/// the layout's largest size, computed from the values it writes, never from input.
struct BigEndianWriter {
    let out: UnsafeMutableRawBufferPointer
    private(set) var written = 0

    init(_ out: UnsafeMutableRawBufferPointer) { self.out = out }

    @inline(__always)
    mutating func put<T: FixedWidthInteger>(_ value: T) {
        out.storeBytes(of: value.bigEndian, toByteOffset: written, as: T.self)
        written += MemoryLayout<T>.size
    }

    @inline(__always)
    mutating func put(_ value: Bytes20) { put(value.a); put(value.b); put(value.c) }

    /// The address's 4 or 16 bytes, without its family (BEP 23's compact form).
    @inline(__always)
    mutating func put(_ ip: IPAddress) {
        switch ip {
        case .v4(let v): put(v)
        case .v6(let hi, let lo): put(hi); put(lo)
        }
    }

    /// LEB128: seven bits a byte, low first, the high bit set on every byte but the last;
    /// at most ten bytes.
    @inline(__always)
    mutating func putVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            out[written] = UInt8(truncatingIfNeeded: v) | 0x80
            written += 1
            v >>= 7
        }
        out[written] = UInt8(truncatingIfNeeded: v)
        written += 1
    }

    /// Bytes as they are; their count counts against the writer's bound like any field.
    @inline(__always)
    mutating func put(raw bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { source in
            UnsafeMutableRawBufferPointer(rebasing: out[written..<(written + source.count)]).copyMemory(from: source)
        }
        written += bytes.count
    }
}

extension ByteBuffer {
    /// Runs `body` on a writer over at least `maxBytes` writable bytes and keeps what it
    /// wrote. `maxBytes` must bound what `body` writes (`BigEndianWriter`'s invariant).
    @inline(__always)
    mutating func writeBigEndian(atMost maxBytes: Int, _ body: (inout BigEndianWriter) -> Void) {
        writeWithUnsafeMutableBytes(minimumWritableBytes: maxBytes) { out in
            var w = BigEndianWriter(out)
            body(&w)
            return w.written
        }
    }
}
