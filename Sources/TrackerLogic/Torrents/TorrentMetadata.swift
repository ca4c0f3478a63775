import Crypto

/// What the tracker reads from a .torrent file (BEP 3 v1, BEP 52 v2 and hybrids): enough
/// to name a swarm, size it and decide the access list. Parsing is total: any file that
/// is not a well-formed torrent is a `TorrentError` naming the first problem.
public struct TorrentMetadata: Hashable, Sendable {
    public var name: String
    public var totalSize: Int64
    public var fileCount: Int
    public var pieceLength: Int64
    /// SHA-1 of the info dictionary (v1 and hybrid torrents).
    public var v1: InfoHash?
    /// SHA-256 of the info dictionary (v2 and hybrid torrents), all 32 bytes.
    public var v2: [UInt8]?

    public static let maxFileBytes = 1 << 20
    public static let maxNameBytes = 1024
    public static let maxFiles = 100_000

    /// The hash peers announce: v1's, else v2's truncated to 20 bytes (BEP 52).
    public var infoHash: InfoHash {
        if let v1 { return v1 }
        return v2.flatMap { InfoHash(bytes: $0.prefix(20)) } ?? InfoHash(a: 0, b: 0, c: 0)
    }

    /// Every hash a peer may announce this torrent under: a hybrid has two swarms.
    public var swarmHashes: [InfoHash] {
        var out: [InfoHash] = []
        if let v1 { out.append(v1) }
        if let v2, let short = InfoHash(bytes: v2.prefix(20)) { out.append(short) }
        return out
    }

    public static func parse(_ file: [UInt8]) throws(TorrentError) -> TorrentMetadata {
        guard file.count <= maxFileBytes else { throw TorrentError("the file is \(file.count) bytes; the limit is \(maxFileBytes)") }
        let root: Bencode
        do { root = try BencodeDecoder(maxBytes: maxFileBytes).decode(file) } catch { throw TorrentError("not bencoded: \(error)") }
        guard case .dictionary = root else { throw TorrentError("the file is not a dictionary") }
        guard let infoEntry = root["info"], case .dictionary = infoEntry.value else { throw TorrentError("no info dictionary") }
        let info = infoEntry.value
        let infoBytes = file[infoEntry.range]

        guard let nameBytes = info["name"]?.value.bytesValue, !nameBytes.isEmpty else { throw TorrentError("info.name missing or empty") }
        guard nameBytes.count <= maxNameBytes else { throw TorrentError("info.name longer than \(maxNameBytes) bytes") }
        guard let name = String(validating: nameBytes, as: UTF8.self) else { throw TorrentError("info.name is not UTF-8") }
        guard let pieceLength = info["piece length"]?.value.integerValue, pieceLength > 0 else {
            throw TorrentError("info.piece length missing or not positive")
        }

        let hasV1 = info["pieces"] != nil
        let version = info["meta version"]?.value.integerValue
        let hasV2 = version != nil
        guard hasV1 || hasV2 else { throw TorrentError("neither info.pieces (v1) nor info.meta version (v2)") }

        var totalSize: Int64 = 0, fileCount = 0
        var v1Hash: InfoHash?
        var v2Hash: [UInt8]?
        if hasV1 {
            let (size, count) = try v1Files(info, pieceLength: pieceLength)
            totalSize = size; fileCount = count
            v1Hash = InfoHash(bytes: Array(Insecure.SHA1.hash(data: infoBytes)))
        }
        if hasV2 {
            guard version == 2 else { throw TorrentError("info.meta version \(version ?? 0) is not 2") }
            guard pieceLength >= 16 * 1024, pieceLength & (pieceLength - 1) == 0 else {
                throw TorrentError("info.piece length must be a power of two of at least 16 KiB in a v2 torrent")
            }
            guard let tree = info["file tree"]?.value, case .dictionary = tree else { throw TorrentError("info.file tree missing") }
            var size: Int64 = 0, count = 0
            try walk(tree, depth: 0, size: &size, count: &count)
            guard count > 0 else { throw TorrentError("info.file tree holds no file") }
            if hasV1, size != totalSize { throw TorrentError("the v1 and v2 file lists disagree on the total size") }
            totalSize = size; fileCount = count
            v2Hash = Array(SHA256.hash(data: infoBytes))
        }
        return TorrentMetadata(name: name, totalSize: totalSize, fileCount: fileCount, pieceLength: pieceLength, v1: v1Hash, v2: v2Hash)
    }

    /// A single `length` or a `files` list; padding files (attr `p`, BEP 47) count towards
    /// the pieces but not towards the size or the file count.
    static func v1Files(_ info: Bencode, pieceLength: Int64) throws(TorrentError) -> (Int64, Int) {
        guard let pieces = info["pieces"]?.value.bytesValue, pieces.count % 20 == 0 else {
            throw TorrentError("info.pieces is not a multiple of 20 bytes")
        }
        var size: Int64 = 0, padded: Int64 = 0, count = 0
        switch (info["length"]?.value, info["files"]?.value) {
        case (.integer(let length)?, nil):
            guard length >= 0 else { throw TorrentError("info.length is negative") }
            size = length; padded = length; count = 1
        case (nil, .list(let files)?):
            guard !files.isEmpty, files.count <= maxFiles else { throw TorrentError("info.files must hold 1 to \(maxFiles) files") }
            for (i, f) in files.enumerated() {
                guard let length = f["length"]?.value.integerValue, length >= 0 else { throw TorrentError("info.files[\(i)].length missing or negative") }
                guard case .list(let path)? = f["path"]?.value, !path.isEmpty,
                      path.allSatisfy({ ($0.bytesValue?.isEmpty == false) }) else {
                    throw TorrentError("info.files[\(i)].path must be a list of non-empty strings")
                }
                let (p, o) = padded.addingReportingOverflow(length)
                guard !o else { throw TorrentError("total size out of range") }
                padded = p
                if f["attr"]?.value.bytesValue?.contains(UInt8(ascii: "p")) == true { continue }
                size += length; count += 1
            }
        default:
            throw TorrentError("info must have exactly one of length and files")
        }
        let expected = padded == 0 ? 0 : (padded - 1) / pieceLength + 1
        guard Int64(pieces.count / 20) == expected else {
            throw TorrentError("info.pieces holds \(pieces.count / 20) hashes; \(padded) bytes in pieces of \(pieceLength) need \(expected)")
        }
        return (size, count)
    }

    /// BEP 52's file tree: directories are dictionaries of names, a file is a dictionary
    /// whose only key is the empty string, holding `length` (and `pieces root`).
    static func walk(_ node: Bencode, depth: Int, size: inout Int64, count: inout Int) throws(TorrentError) {
        guard depth < 32 else { throw TorrentError("info.file tree nested deeper than 32") }
        guard case .dictionary(let entries) = node, !entries.isEmpty else { throw TorrentError("info.file tree has an empty directory") }
        for entry in entries {
            if entry.key.isEmpty {
                guard entries.count == 1, let length = entry.value["length"]?.value.integerValue, length >= 0 else {
                    throw TorrentError("info.file tree has a file without a length")
                }
                if let root = entry.value["pieces root"]?.value {
                    guard let bytes = root.bytesValue, bytes.count == 32 else { throw TorrentError("info.file tree has a pieces root that is not 32 bytes") }
                }
                let (s, o) = size.addingReportingOverflow(length)
                guard !o else { throw TorrentError("total size out of range") }
                size = s
                count += 1
                guard count <= maxFiles else { throw TorrentError("more than \(maxFiles) files") }
            } else {
                try walk(entry.value, depth: depth + 1, size: &size, count: &count)
            }
        }
    }
}

public struct TorrentError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension Bencode {
    var bytesValue: [UInt8]? { if case .bytes(let b) = self { b } else { nil } }
    var integerValue: Int64? { if case .integer(let n) = self { n } else { nil } }
}
