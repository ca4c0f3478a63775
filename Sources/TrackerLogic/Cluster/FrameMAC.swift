import Crypto

/// HMAC-SHA256 (RFC 2104) of cluster frames, keyed once per channel.
///
/// Why not `Crypto.HMAC<SHA256>`: it is generic over its hash function and not inlinable,
/// so each frame went through generic dispatch and metadata lookups that cost several
/// times the hashing itself. This is the same construction over the same library's
/// SHA-256, called on the concrete type. `FrameMACTests` checks it byte for byte against
/// `HMAC<SHA256>` and against RFC 4231's vectors.
public struct FrameMAC: Sendable {
    public static let blockBytes = 64
    public static let tagBytes = SHA256.byteCount

    /// SHA-256 after one block of key ⊕ ipad, and after one of key ⊕ opad.
    private let inner: SHA256
    private let outer: SHA256

    public init(key: [UInt8]) {
        var block = key.count > Self.blockBytes ? Array(SHA256.hash(data: key)) : key
        block += repeatElement(0, count: Self.blockBytes - block.count)
        var inner = SHA256(), outer = SHA256()
        block.map { $0 ^ 0x36 }.withUnsafeBytes { inner.update(bufferPointer: $0) }
        block.map { $0 ^ 0x5c }.withUnsafeBytes { outer.update(bufferPointer: $0) }
        self.inner = inner
        self.outer = outer
    }

    public func tag(_ message: UnsafeRawBufferPointer) -> SHA256Digest {
        var inner = self.inner
        inner.update(bufferPointer: message)
        var outer = self.outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize()
    }

    /// Compares every byte whatever the first difference, so the time taken says nothing
    /// about how much of a forged tag was right.
    public func isValid(_ tag: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer) -> Bool {
        guard tag.count == Self.tagBytes else { return false }
        return self.tag(message).withUnsafeBytes { expected in
            var difference: UInt8 = 0
            for i in 0..<Self.tagBytes { difference |= expected[i] ^ tag[i] }
            return difference == 0
        }
    }
}
