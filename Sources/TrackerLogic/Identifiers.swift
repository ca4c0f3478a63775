import NIOCore

/// Twenty opaque bytes held as three machine words, so that hashing and comparing an
/// info hash or peer id on the hot path costs a few instructions and no allocation.
public struct Bytes20: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var a: UInt64
    public var b: UInt64
    public var c: UInt32

    public init(a: UInt64, b: UInt64, c: UInt32) { self.a = a; self.b = b; self.c = c }

    /// Reads twenty bytes; `nil` (and nothing consumed) when fewer remain.
    public init?(reading buffer: inout ByteBuffer) {
        guard buffer.readableBytes >= 20,
              let a = buffer.readInteger(as: UInt64.self),
              let b = buffer.readInteger(as: UInt64.self),
              let c = buffer.readInteger(as: UInt32.self) else { return nil }
        self.init(a: a, b: b, c: c)
    }

    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 20 else { return nil }
        var buffer = ByteBuffer(bytes: bytes)
        self.init(reading: &buffer)
    }

    /// Forty hex digits, either case.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 40 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(20)
        var i = 0
        while i < 40 {
            guard let hi = Bytes20.nibble(utf8[i]), let lo = Bytes20.nibble(utf8[i + 1]) else { return nil }
            bytes.append(hi << 4 | lo)
            i += 2
        }
        self.init(bytes: bytes)
    }

    public func write(to buffer: inout ByteBuffer) {
        buffer.writeInteger(a)
        buffer.writeInteger(b)
        buffer.writeInteger(c)
    }

    public var bytes: [UInt8] { [UInt8](unsafeUninitializedCapacity: 20) { out, count in count = write(to: out) } }

    /// Byte `i` (0..<20) in wire order: the words are big-endian.
    private func byte(_ i: Int) -> UInt8 {
        switch i {
        case ..<8: UInt8(truncatingIfNeeded: a >> (56 - 8 * i))
        case ..<16: UInt8(truncatingIfNeeded: b >> (56 - 8 * (i - 8)))
        default: UInt8(truncatingIfNeeded: c >> (24 - 8 * (i - 16)))
        }
    }

    /// Forty lowercase hex digits, written straight into the string's storage.
    public var hex: String {
        String(unsafeUninitializedCapacity: 40) { out in
            for i in 0..<20 {
                let v = byte(i)
                out[2 * i] = Self.hexDigit(v >> 4)
                out[2 * i + 1] = Self.hexDigit(v & 0xF)
            }
            return 40
        }
    }

    /// Writes the twenty bytes in wire order into `out` (room for at least 20) and returns
    /// how many it wrote: the SQLite writer binds two per announce it stores, from the stack.
    @discardableResult
    public func write(to out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        guard out.count >= 20 else { return 0 }
        for i in 0..<20 { out[i] = byte(i) }
        return 20
    }

    private static func hexDigit(_ n: UInt8) -> UInt8 { n < 10 ? 0x30 &+ n : 0x57 &+ n }

    public var description: String { hex }

    public static func < (l: Bytes20, r: Bytes20) -> Bool { (l.a, l.b, l.c) < (r.a, r.b, r.c) }

    static func nibble(_ ch: UInt8) -> UInt8? {
        switch ch {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return ch - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return ch - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return ch - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// The SHA-1 of a torrent's info dictionary: names a swarm.
public typealias InfoHash = Bytes20
/// A client's self-chosen 20-byte id.
public typealias PeerID = Bytes20

extension Bytes20 {
    /// Printable form of a peer id: clients put an ASCII prefix such as `-lt2000-` first.
    public var printable: String {
        let b = bytes
        if b.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return String(decoding: b, as: UTF8.self) }
        let prefix = b.prefix { $0 >= 0x20 && $0 < 0x7F }
        return prefix.count >= 8 ? String(decoding: prefix, as: UTF8.self) + "…" + hex.suffix(8) : hex
    }
}
