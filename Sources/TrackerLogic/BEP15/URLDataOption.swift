import NIOCore

/// BEP 41's options after an announce's 98 bytes, read for one thing: a user's tracker
/// key in the URL's path. A client given `udp://tracker:6969/announce/<key>` (or
/// `udp://tracker:6969/<key>`) sends the path and query as URL data; a private tracker
/// reads the key there, as an HTTP tracker reads it from `/announce/<key>`.
///
/// Options: 0 ends the list, 1 is a one-byte no-op, any other kind is a length byte and
/// that many bytes. URL data (kind 2) may come in several options, concatenated. A list
/// cut short ends where it is cut: what came before still counts, as BEP 41 asks of a
/// tracker that reads what it can.
///
/// Invariant: reads at most the datagram's bytes, and keeps at most `maxURLData` bytes.
public enum URLDataOption {
    public static let endOfOptions: UInt8 = 0, noOperation: UInt8 = 1, urlData: UInt8 = 2
    /// More than any announce path a tracker hands out; the rest is ignored.
    public static let maxURLData = 1_024

    /// The URL data of the options in `bytes[offset...]`, concatenated.
    static func urlData(_ bytes: borrowing RawSpan, from offset: Int) -> [UInt8] {
        let end = bytes.byteCount
        var i = offset, out: [UInt8] = []
        while i < end {
            let kind = bytes.unsafeLoad(fromByteOffset: i, as: UInt8.self)
            if kind == endOfOptions { break }
            if kind == noOperation { i += 1; continue }
            guard i + 1 < end else { break }
            let length = Int(bytes.unsafeLoad(fromByteOffset: i + 1, as: UInt8.self))
            let start = i + 2, stop = min(start + length, end)
            if kind == urlData {
                var j = start
                while j < stop && out.count < maxURLData { out.append(bytes.unsafeLoad(fromByteOffset: j, as: UInt8.self)); j += 1 }
            }
            i = start + length
        }
        return out
    }

    /// The key a URL's path carries: its last segment, before any query, when that is a
    /// well-formed `TrackerKey` (`/announce/<key>`, `/<key>`). Nil for `/announce`.
    public static func trackerKey(inPath path: some Collection<UInt8>) -> TrackerKey? {
        let beforeQuery = path.split(separator: UInt8(ascii: "?"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        guard let last = beforeQuery.split(separator: UInt8(ascii: "/")).last else { return nil }
        return TrackerKey(bytes: last)
    }

    /// The options that carry `path` as URL data, in options of at most 255 bytes, ended.
    public static func encode(path: [UInt8], into buffer: inout ByteBuffer) {
        var rest = path[...]
        while !rest.isEmpty {
            let chunk = rest.prefix(255)
            buffer.writeInteger(urlData)
            buffer.writeInteger(UInt8(chunk.count))
            buffer.writeBytes(chunk)
            rest = rest.dropFirst(chunk.count)
        }
        buffer.writeInteger(endOfOptions)
    }
}
