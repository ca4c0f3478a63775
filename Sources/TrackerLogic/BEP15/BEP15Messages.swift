/// BEP 15 messages as values. The codec (`BEP15Codec`) turns them into bytes and back.

/// The `action` field.
public enum TrackerAction: UInt32, Sendable {
    case connect = 0, announce = 1, scrape = 2, error = 3
}

/// The `event` field of an announce.
public enum AnnounceEvent: UInt32, Sendable, Hashable, CaseIterable {
    case none = 0, completed = 1, started = 2, stopped = 3
}

/// Protocol id a connect request must carry in its connection-id field.
public let bep15ProtocolID: UInt64 = 0x417_2710_1980

public struct ConnectRequest: Hashable, Sendable {
    public var transactionID: UInt32
    public init(transactionID: UInt32) { self.transactionID = transactionID }
}

public struct ConnectResponse: Hashable, Sendable {
    public var transactionID: UInt32
    public var connectionID: UInt64
    public init(transactionID: UInt32, connectionID: UInt64) {
        self.transactionID = transactionID; self.connectionID = connectionID
    }
}

public struct AnnounceRequest: Hashable, Sendable {
    public var connectionID: UInt64
    public var transactionID: UInt32
    public var infoHash: InfoHash
    public var peerID: PeerID
    public var downloaded: Int64
    public var left: Int64
    public var uploaded: Int64
    public var event: AnnounceEvent
    /// The announced IPv4 address; 0 means "use the sender's". Ignored unless trusted.
    public var ip: UInt32
    public var key: UInt32
    /// -1 (or any value ≤ 0) asks for the tracker's default.
    public var numWant: Int32
    public var port: UInt16
    /// A user's key from the URL's path (BEP 41 URL data; HTTP: `/announce/<key>`), for a
    /// private tracker.
    public var trackerKey: TrackerKey?

    public init(connectionID: UInt64, transactionID: UInt32, infoHash: InfoHash, peerID: PeerID,
                downloaded: Int64, left: Int64, uploaded: Int64, event: AnnounceEvent,
                ip: UInt32 = 0, key: UInt32 = 0, numWant: Int32 = -1, port: UInt16, trackerKey: TrackerKey? = nil) {
        self.connectionID = connectionID; self.transactionID = transactionID
        self.infoHash = infoHash; self.peerID = peerID
        self.downloaded = downloaded; self.left = left; self.uploaded = uploaded
        self.event = event; self.ip = ip; self.key = key; self.numWant = numWant; self.port = port
        self.trackerKey = trackerKey
    }
}

public struct AnnounceResponse: Hashable, Sendable {
    public var transactionID: UInt32
    public var interval: UInt32
    public var leechers: UInt32
    public var seeders: UInt32
    /// All of one family: that of the request's source address, in wire form.
    public var compactPeers: CompactPeers

    public init(transactionID: UInt32, interval: UInt32, leechers: UInt32, seeders: UInt32, compactPeers: CompactPeers) {
        self.transactionID = transactionID; self.interval = interval
        self.leechers = leechers; self.seeders = seeders; self.compactPeers = compactPeers
    }

    public init(transactionID: UInt32, interval: UInt32, leechers: UInt32, seeders: UInt32, peers: [PeerEndpoint]) {
        self.init(transactionID: transactionID, interval: interval, leechers: leechers, seeders: seeders,
                  compactPeers: CompactPeers(peers))
    }

    /// The peers decoded (clients and tests read them; a tracker only writes them).
    public var peers: [PeerEndpoint] {
        get { compactPeers.endpoints }
        set { compactPeers = CompactPeers(newValue) }
    }
}

public struct ScrapeRequest: Hashable, Sendable {
    public var connectionID: UInt64
    public var transactionID: UInt32
    public var infoHashes: [InfoHash]
    public init(connectionID: UInt64, transactionID: UInt32, infoHashes: [InfoHash]) {
        self.connectionID = connectionID; self.transactionID = transactionID; self.infoHashes = infoHashes
    }
}

/// One torrent's counts in a scrape response, in BEP 15's field order.
public struct ScrapeEntry: Hashable, Sendable {
    public var seeders: UInt32
    public var completed: UInt32
    public var leechers: UInt32
    public init(seeders: UInt32, completed: UInt32, leechers: UInt32) {
        self.seeders = seeders; self.completed = completed; self.leechers = leechers
    }
}

public struct ScrapeResponse: Hashable, Sendable {
    public var transactionID: UInt32
    public var entries: [ScrapeEntry]
    public init(transactionID: UInt32, entries: [ScrapeEntry]) {
        self.transactionID = transactionID; self.entries = entries
    }
}

public struct ErrorResponse: Hashable, Sendable {
    public var transactionID: UInt32
    public var message: String
    public init(transactionID: UInt32, message: String) {
        self.transactionID = transactionID; self.message = message
    }
}

/// Anything a peer may send to a tracker.
public enum TrackerRequest: Hashable, Sendable {
    case connect(ConnectRequest)
    case announce(AnnounceRequest)
    case scrape(ScrapeRequest)

    public var transactionID: UInt32 {
        switch self {
        case .connect(let r): return r.transactionID
        case .announce(let r): return r.transactionID
        case .scrape(let r): return r.transactionID
        }
    }
}

/// Anything a tracker may send back.
public enum TrackerResponse: Hashable, Sendable {
    case connect(ConnectResponse)
    case announce(AnnounceResponse)
    case scrape(ScrapeResponse)
    case error(ErrorResponse)

    public var transactionID: UInt32 {
        switch self {
        case .connect(let r): return r.transactionID
        case .announce(let r): return r.transactionID
        case .scrape(let r): return r.transactionID
        case .error(let r): return r.transactionID
        }
    }
}
