/// A bencoded value (BEP 3). Uploaded .torrent files are hostile bytes, so the decoder
/// is strict and total: it accepts exactly the canonical encoding (no leading zeros, no
/// `-0`, dictionary keys in strictly ascending byte order, nothing after the value),
/// bounds depth and size, and answers everything else with an error that says where.
public indirect enum Bencode: Equatable, Sendable {
    case integer(Int64)
    case bytes([UInt8])
    case list([Bencode])
    case dictionary([BencodeEntry])

    /// The value under `key` of a dictionary; nil for a missing key or a non-dictionary.
    public subscript(key: String) -> BencodeEntry? {
        guard case .dictionary(let entries) = self else { return nil }
        let k = Array(key.utf8)
        return entries.first { $0.key == k }
    }
}

/// One key of a dictionary, with the byte range its value occupied in the input: the
/// info hash is the hash of exactly those bytes.
public struct BencodeEntry: Equatable, Sendable {
    public var key: [UInt8]
    public var value: Bencode
    public var range: Range<Int>

    public init(key: [UInt8], value: Bencode, range: Range<Int>) { self.key = key; self.value = value; self.range = range }
}

public struct BencodeError: Error, Equatable, Sendable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public init(at offset: Int, _ reason: String) { self.offset = offset; self.reason = reason }
    public var description: String { "byte \(offset): \(reason)" }
}

public struct BencodeDecoder: Sendable {
    /// Deeper nesting than any real torrent; keeps recursion shallow.
    public var maxDepth = 64
    public var maxBytes = 4 << 20

    public init(maxDepth: Int = 64, maxBytes: Int = 4 << 20) { self.maxDepth = maxDepth; self.maxBytes = maxBytes }

    public func decode(_ input: [UInt8]) throws(BencodeError) -> Bencode {
        guard input.count <= maxBytes else { throw BencodeError(at: maxBytes, "larger than \(maxBytes) bytes") }
        guard !input.isEmpty else { throw BencodeError(at: 0, "empty input") }
        var cursor = Cursor(input: input, maxDepth: maxDepth)
        let value = try cursor.value(depth: 0)
        guard cursor.offset == input.count else {
            throw BencodeError(at: cursor.offset, "\(input.count - cursor.offset) bytes after the value")
        }
        return value
    }

    struct Cursor {
        let input: [UInt8]
        let maxDepth: Int
        var offset = 0

        init(input: [UInt8], maxDepth: Int) { self.input = input; self.maxDepth = maxDepth }

        func peek() throws(BencodeError) -> UInt8 {
            guard offset < input.count else { throw BencodeError(at: offset, "truncated") }
            return input[offset]
        }

        mutating func value(depth: Int) throws(BencodeError) -> Bencode {
            guard depth < maxDepth else { throw BencodeError(at: offset, "nested deeper than \(maxDepth)") }
            switch try peek() {
            case UInt8(ascii: "i"):
                offset += 1
                let n = try integer(until: UInt8(ascii: "e"), allowSign: true)
                return .integer(n)
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                return .bytes(try string())
            case UInt8(ascii: "l"):
                offset += 1
                var items: [Bencode] = []
                while try peek() != UInt8(ascii: "e") { items.append(try value(depth: depth + 1)) }
                offset += 1
                return .list(items)
            case UInt8(ascii: "d"):
                offset += 1
                var entries: [BencodeEntry] = []
                while try peek() != UInt8(ascii: "e") {
                    let keyAt = offset
                    guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(try peek()) else {
                        throw BencodeError(at: offset, "dictionary key is not a string")
                    }
                    let key = try string()
                    if let previous = entries.last?.key, !previous.lexicographicallyPrecedes(key) {
                        throw BencodeError(at: keyAt, previous == key ? "duplicate dictionary key" : "dictionary keys out of order")
                    }
                    let start = offset
                    let v = try value(depth: depth + 1)
                    entries.append(BencodeEntry(key: key, value: v, range: start..<offset))
                }
                offset += 1
                return .dictionary(entries)
            case let byte:
                throw BencodeError(at: offset, "unexpected byte 0x\(String(byte, radix: 16))")
            }
        }

        /// `len:bytes`.
        mutating func string() throws(BencodeError) -> [UInt8] {
            let at = offset
            let n = try integer(until: UInt8(ascii: ":"), allowSign: false)
            guard n <= Int64(input.count - offset) else { throw BencodeError(at: at, "string of \(n) bytes runs past the end") }
            let end = offset + Int(n)
            defer { offset = end }
            return Array(input[offset..<end])
        }

        /// Canonical decimal digits up to `terminator`, into an Int64 without overflow.
        mutating func integer(until terminator: UInt8, allowSign: Bool) throws(BencodeError) -> Int64 {
            let start = offset
            var negative = false
            if allowSign, try peek() == UInt8(ascii: "-") { negative = true; offset += 1 }
            let digitsAt = offset
            var value: Int64 = 0
            while true {
                let byte = try peek()
                if byte == terminator { break }
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else {
                    throw BencodeError(at: offset, "unexpected byte 0x\(String(byte, radix: 16)) in a number")
                }
                let digit = Int64(byte - UInt8(ascii: "0"))
                let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                let (next, o2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
                guard !o1, !o2 else { throw BencodeError(at: start, "number out of range") }
                value = next
                offset += 1
            }
            let digits = offset - digitsAt
            guard digits > 0 else { throw BencodeError(at: start, "number without digits") }
            guard !(input[digitsAt] == UInt8(ascii: "0") && digits > 1) else { throw BencodeError(at: start, "number with a leading zero") }
            guard !(negative && value == 0) else { throw BencodeError(at: start, "negative zero") }
            offset += 1  // the terminator
            return value
        }
    }
}
