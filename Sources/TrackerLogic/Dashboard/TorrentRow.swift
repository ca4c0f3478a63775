/// One registered torrent as the torrents tab lists it.
public struct TorrentRow: Codable, Equatable, Sendable {
    public var infoHash: String
    /// The full SHA-256 info hash of a v2 or hybrid torrent.
    public var v2InfoHash: String?
    /// Every hash peers may announce it under (two for a hybrid).
    public var swarmHashes: [String]
    public var name: String
    public var size: Int64
    public var files: Int
    public var pieceLength: Int64
    public var fileBytes: Int
    /// Milliseconds since the Unix epoch.
    public var registeredAt: Int64

    public init(_ t: RegisteredTorrent) {
        infoHash = t.infoHash.hex
        v2InfoHash = t.metadata.v2.map { $0.map { String($0 >> 4, radix: 16) + String($0 & 0xF, radix: 16) }.joined() }
        swarmHashes = t.metadata.swarmHashes.map(\.hex)
        name = t.metadata.name
        size = t.metadata.totalSize
        files = t.metadata.fileCount
        pieceLength = t.metadata.pieceLength
        fileBytes = t.file.count
        registeredAt = t.registeredAt.milliseconds
    }

    /// Newest first.
    public static func rows(_ catalogue: Catalogue) -> [TorrentRow] {
        catalogue.torrents.values.sorted { ($0.registeredAt, $0.infoHash) > ($1.registeredAt, $1.infoHash) }.map(TorrentRow.init)
    }
}
