/// The canonical encoding of a bencoded value (BEP 3), byte for byte what
/// `BencodeDecoder` accepts: integers without leading zeros or `-0`, byte strings
/// length-prefixed, and each dictionary's keys in ascending byte order whatever order
/// they were given in (a key given twice keeps its last value). The HTTP tracker's
/// replies are built with it.
extension Bencode {
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    public func encode(into out: inout [UInt8]) {
        switch self {
        case .integer(let n):
            out.append(UInt8(ascii: "i"))
            out += Array(String(n).utf8)
            out.append(UInt8(ascii: "e"))
        case .bytes(let bytes):
            Self.writeString(bytes, into: &out)
        case .list(let items):
            out.append(UInt8(ascii: "l"))
            for item in items { item.encode(into: &out) }
            out.append(UInt8(ascii: "e"))
        case .dictionary(let entries):
            var byKey: [[UInt8]: Bencode] = [:]
            for e in entries { byKey[e.key] = e.value }
            out.append(UInt8(ascii: "d"))
            for key in byKey.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                Self.writeString(key, into: &out)
                byKey[key]?.encode(into: &out)
            }
            out.append(UInt8(ascii: "e"))
        }
    }

    /// A dictionary from keys written as text (the ranges are the decoder's business).
    public static func dictionary(pairs: [(String, Bencode)]) -> Bencode {
        .dictionary(pairs.map { BencodeEntry(key: Array($0.0.utf8), value: $0.1, range: 0..<0) })
    }

    /// A byte string from text.
    public static func text(_ s: String) -> Bencode { .bytes(Array(s.utf8)) }

    private static func writeString(_ bytes: [UInt8], into out: inout [UInt8]) {
        out += Array(String(bytes.count).utf8)
        out.append(UInt8(ascii: ":"))
        out += bytes
    }
}
