/// The swarms tab as a pure function of the repository: search, sort and one page of
/// rows. Query parameters come from a browser (or anyone who can reach the HTTP port),
/// so they are parsed into this closed type first; a bad value is an error naming it.
public struct SwarmQuery: Equatable, Sendable {
    public enum Sort: String, CaseIterable, Sendable {
        case name, size, seeders, leechers, completed, peers
    }

    /// Matched against the name (case-insensitive) and the info hash in hex.
    public var text: String
    public var sort: Sort
    public var descending: Bool
    /// From 1.
    public var page: Int
    public var pageSize: Int

    public static let maxPageSize = 500
    public static let maxTextLength = 200

    public init(text: String = "", sort: Sort = .peers, descending: Bool = true, page: Int = 1, pageSize: Int = 50) {
        self.text = text; self.sort = sort; self.descending = descending; self.page = page; self.pageSize = pageSize
    }

    /// Parses `query=&sort=[-]field&page=&size=`; unknown keys are ignored (a browser adds
    /// cache busters), bad values are refused.
    public init(parameters: [String: String]) throws(QueryError) {
        self.init()
        if let q = parameters["query"] {
            guard q.count <= Self.maxTextLength else { throw QueryError("query: at most \(Self.maxTextLength) characters") }
            text = q.trimmingWhitespace
        }
        if let s = parameters["sort"], !s.isEmpty {
            let field = s.hasPrefix("-") ? String(s.dropFirst()) : s
            guard let sort = Sort(rawValue: field) else {
                throw QueryError("sort: one of \(Sort.allCases.map(\.rawValue).joined(separator: ", ")), '-' first for descending")
            }
            self.sort = sort
            descending = s.hasPrefix("-")
        }
        page = try Self.number(parameters["page"], name: "page", default: 1, range: 1...1_000_000_000)
        pageSize = try Self.number(parameters["size"], name: "size", default: 50, range: 1...Self.maxPageSize)
    }

    public static func number(_ text: String?, name: String, default value: Int, range: ClosedRange<Int>) throws(QueryError) -> Int {
        guard let text, !text.isEmpty else { return value }
        guard let n = Int(text), range.contains(n) else { throw QueryError("\(name): a whole number from \(range.lowerBound) to \(range.upperBound)") }
        return n
    }
}

/// A query parameter the dashboard API refuses; the message names it.
public struct QueryError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One swarm as the swarms tab lists it.
public struct SwarmRow: Codable, Equatable, Sendable {
    public var infoHash: String
    /// The registered torrent's name, else nil (the page shows the hash).
    public var name: String?
    /// Total bytes of the registered torrent, else nil.
    public var size: Int64?
    public var seeders: Int
    public var leechers: Int
    public var completed: Int
    public var peers: Int

    public init(infoHash: String, name: String?, size: Int64?, seeders: Int, leechers: Int, completed: Int, peers: Int) {
        self.infoHash = infoHash; self.name = name; self.size = size
        self.seeders = seeders; self.leechers = leechers; self.completed = completed; self.peers = peers
    }
}

/// One page of rows and where it sits in the whole.
public struct ListPage<Row: Codable & Equatable & Sendable>: Codable, Equatable, Sendable {
    public var total: Int
    public var page: Int
    public var pageSize: Int
    public var pages: Int
    public var rows: [Row]

    /// The page of `rows` (already filtered and ordered) that `page` names; a page past
    /// the end is empty, not an error, so a list that shrank under the reader is harmless.
    public init(slicing rows: [Row], page: Int, pageSize: Int) {
        let size = max(1, pageSize)
        total = rows.count
        self.page = max(1, page)
        self.pageSize = size
        pages = rows.isEmpty ? 0 : (rows.count - 1) / size + 1
        let (start, overflow) = (self.page - 1).multipliedReportingOverflow(by: size)
        self.rows = !overflow && start < rows.count ? Array(rows[start..<(start + min(size, rows.count - start))]) : []
    }
}

/// What a registered torrent tells the swarms tab about its swarm.
public struct SwarmLabel: Equatable, Sendable {
    public var name: String
    public var size: Int64
    public init(name: String, size: Int64) { self.name = name; self.size = size }
}

public enum SwarmListing {
    /// Every swarm as a row, and every registered torrent's swarm even before its first
    /// peer: O(swarms), cheap enough to run on the node's loop; the sorting and slicing
    /// (`page`) can then happen elsewhere.
    public static func rows(_ store: SwarmStore) -> [SwarmRow] {
        var rows: [SwarmRow] = []
        rows.reserveCapacity(store.swarmCount)
        for (hash, swarm) in store.swarms { rows.append(row(hash, swarm, label: label(hash, store))) }
        for hash in store.catalogue.swarmHashes.keys where store[hash] == nil {
            rows.append(row(hash, Swarm(), label: label(hash, store)))
        }
        return rows
    }

    /// One swarm and a page of its peers; a registered torrent without peers is an empty
    /// swarm, anything else the repository does not hold is nil.
    public static func detail(_ store: SwarmStore, _ hash: InfoHash, now: Instant, page: Int, pageSize: Int)
        -> (SwarmRow, ListPage<PeerRow>)? {
        guard let (row, swarm) = snapshot(store, hash) else { return nil }
        return (row, PeerRow.page(swarm, now: now, page: page, pageSize: pageSize))
    }

    /// A swarm's row and the swarm itself, in O(1): the swarm is a value, so its peers
    /// can be ordered and paged on another thread (`PeerRow.page`) while the node goes
    /// on. (Its next change copies its table once, on the node's side: callers bound how
    /// often they ask.)
    public static func snapshot(_ store: SwarmStore, _ hash: InfoHash) -> (SwarmRow, Swarm)? {
        guard let swarm = store[hash] ?? (store.catalogue.isRegistered(hash) ? Swarm() : nil) else { return nil }
        return (row(hash, swarm, label: label(hash, store)), swarm)
    }

    public static func label(_ hash: InfoHash, _ store: SwarmStore) -> SwarmLabel? {
        store.catalogue.torrent(forSwarm: hash).map { SwarmLabel(name: $0.metadata.name, size: $0.metadata.totalSize) }
    }

    public static func row(_ hash: InfoHash, _ swarm: Swarm, label: SwarmLabel? = nil) -> SwarmRow {
        SwarmRow(infoHash: hash.hex, name: label?.name, size: label?.size, seeders: swarm.seeders,
                 leechers: swarm.leechers, completed: swarm.completed, peers: swarm.peerCount)
    }

    /// Filters, orders (ties broken by info hash, so pages never overlap) and slices.
    public static func page(_ rows: [SwarmRow], _ query: SwarmQuery) -> ListPage<SwarmRow> {
        let needle = query.text.lowercased()
        let matching = needle.isEmpty ? rows : rows.filter {
            $0.infoHash.contains(needle) || ($0.name?.lowercased().contains(needle) ?? false)
        }
        let sorted = matching.sorted { l, r in
            let order = compare(l, r, by: query.sort)
            if order != 0 { return query.descending ? order > 0 : order < 0 }
            return l.infoHash < r.infoHash
        }
        return ListPage(slicing: sorted, page: query.page, pageSize: query.pageSize)
    }

    /// -1, 0 or 1. Unnamed swarms sort by their hash, after every named one.
    static func compare(_ l: SwarmRow, _ r: SwarmRow, by sort: SwarmQuery.Sort) -> Int {
        func cmp<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a > b ? 1 : 0) }
        switch sort {
        case .name:
            switch (l.name, r.name) {
            case let (a?, b?): return cmp(a.lowercased(), b.lowercased())
            case (.some, nil): return -1
            case (nil, .some): return 1
            case (nil, nil): return 0
            }
        case .size: return cmp(l.size ?? -1, r.size ?? -1)
        case .seeders: return cmp(l.seeders, r.seeders)
        case .leechers: return cmp(l.leechers, r.leechers)
        case .completed: return cmp(l.completed, r.completed)
        case .peers: return cmp(l.peers, r.peers)
        }
    }
}

/// One peer as a swarm's page lists it.
public struct PeerRow: Codable, Equatable, Sendable {
    public var peerID: String
    /// The client, from the peer id's conventions, when recognised.
    public var client: String?
    public var address: String
    public var uploaded: Int64
    public var downloaded: Int64
    public var left: Int64
    public var seeder: Bool
    /// Milliseconds since its last announce.
    public var lastAnnounceMsAgo: Int64

    public init(_ p: PeerRecord, now: Instant) {
        peerID = p.peerID.printable
        client = PeerClient.name(of: p.peerID)
        address = "\(p.endpoint)"
        uploaded = p.uploaded
        downloaded = p.downloaded
        left = p.left
        seeder = p.isSeeder
        lastAnnounceMsAgo = max(0, (now - p.lastAnnounce).value)
    }

    /// Most recent first, then by address: a stable order for paging.
    public static func page(_ swarm: Swarm, now: Instant, page: Int, pageSize: Int) -> ListPage<PeerRow> {
        // Compared as values: formatting addresses inside the comparator cost n log n strings.
        let ordered = swarm.peers.sorted { l, r in
            l.lastAnnounce != r.lastAnnounce ? l.lastAnnounce > r.lastAnnounce : l.endpoint < r.endpoint
        }
        let slice = ListPage(slicing: Array(ordered.indices), page: page, pageSize: pageSize)
        return ListPage(total: slice.total, page: slice.page, pageSize: slice.pageSize, pages: slice.pages,
                        rows: slice.rows.map { PeerRow(ordered[$0], now: now) })
    }
}

extension ListPage {
    init(total: Int, page: Int, pageSize: Int, pages: Int, rows: [Row]) {
        self.total = total; self.page = page; self.pageSize = pageSize; self.pages = pages; self.rows = rows
    }
}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
