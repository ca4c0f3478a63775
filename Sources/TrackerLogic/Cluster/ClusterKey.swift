import Crypto

/// A secret shared by the nodes of one cluster. It authenticates every cluster message
/// (HMAC-SHA256) and keys the BEP 15 connection ids, so nobody without it can speak for
/// a node or forge an id offline.
public struct ClusterKey: Sendable, Hashable {
    /// 32 random bytes from `tracker keygen`.
    public let bytes: [UInt8]
    /// Names the key in every frame (so two keys can be live during a rotation) without
    /// revealing it: the first four bytes of SHA-256 over a label and the key.
    public let id: UInt32

    public static let length = 32

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.length else { return nil }
        self.bytes = bytes
        var hash = SHA256()
        hash.update(data: Array("tracker cluster key id v1".utf8))
        hash.update(data: bytes)
        self.id = Array(hash.finalize()).prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The key file format: 64 hex digits on one line (comments with '#' and blank lines
    /// are ignored). Errors say what is wrong without echoing the secret.
    public init(keyFile text: String) throws(ClusterKeyError) {
        let lines = text.split(whereSeparator: \.isNewline)
            .map { $0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed() }
            .map { String($0) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard lines.count == 1, let hex = lines.first else {
            throw ClusterKeyError("expected one line of 64 hex digits, found \(lines.count) non-comment lines")
        }
        guard hex.count == 2 * Self.length, let bytes = Self.decodeHex(hex), let key = ClusterKey(bytes: bytes) else {
            throw ClusterKeyError("expected 64 hex digits (32 bytes)")
        }
        self = key
    }

    /// The well-known key of `--insecure-cluster`: messages are still framed, sequenced and
    /// checksummed, but anyone can forge them.
    public static let insecure = ClusterKey(bytes: Array(repeating: 0, count: length))!

    /// What `tracker keygen` writes, given 32 random bytes.
    public static func keyFile(for bytes: [UInt8]) -> String {
        "# tracker cluster key: keep it secret, identical on every node\n" + bytes.map { hexDigits($0) }.joined() + "\n"
    }

    /// Keys derived for another purpose (connection ids), so the cluster key itself is
    /// never used twice.
    public func derive(_ label: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array(label.utf8), using: SymmetricKey(data: bytes)))
    }

    /// The SipHash key for connection ids: every node of the cluster issues and accepts
    /// the same ids (they survive failover), and nobody without the key can compute one.
    public var connectionIDKey: SipHash24 {
        let d = derive("tracker connection ids v1")
        func word(_ at: Int) -> UInt64 { d[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return SipHash24(k0: word(0), k1: word(8))
    }

    static func hexDigits(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }

    static func decodeHex(_ text: some StringProtocol) -> [UInt8]? {
        var out: [UInt8] = []
        var high: UInt8?
        for c in text.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        return high == nil ? out : nil
    }
}

public struct ClusterKeyError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
