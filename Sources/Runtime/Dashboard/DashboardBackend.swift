import TrackerLogic

/// The dashboard's buttons.
public enum ServiceControl: String, Sendable, CaseIterable {
    /// Start the tracker service (a stopped cluster node joins again).
    case start
    /// Stop it as SIGTERM would, but keep the process and its dashboard.
    case stop
    /// Cut the node off from peers and the cluster, as a failed link would.
    case provoke
    /// Undo `provoke`.
    case recover
}

/// Why a control request changed nothing (409 to the caller).
public struct ControlRefusal: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What the dashboard reads and steers. Implementations read node state on the node's
/// own loop and hand back values, so HTTP handlers never touch it directly.
public protocol DashboardBackend: AnyObject, Sendable {
    func status() async -> NodeStatus
    func settings() async -> [SettingRow]
    /// Every swarm as a row (filtering, sorting and paging happen off the node's loop).
    func swarmRows() async -> [SwarmRow]
    /// One swarm and a page of its peers; nil if the repository does not hold it.
    func swarm(_ infoHash: InfoHash, page: Int, pageSize: Int) async -> (SwarmRow, ListPage<PeerRow>)?
    func history() async -> ServiceHistory.Snapshot
    /// Returns what happened, in words for the page.
    func control(_ request: ServiceControl) async throws(ControlRefusal) -> String
    /// The catalogue of registered torrents, newest first.
    func torrents() async -> [TorrentRow]
    /// A registered torrent, to download its file back.
    func torrent(_ infoHash: InfoHash) async -> RegisteredTorrent?
    /// The access policy, one page of its rules (nil: the service is stopped).
    func access(offset: Int, limit: Int) async -> AccessListing?
    /// The access policy as this node's replica holds it, users included (nil: the
    /// service is stopped).
    func accessPolicy() async -> AccessPolicy?
    /// Registers or removes a torrent and returns once this node's replica holds the
    /// change (committed), or refuses.
    func change(_ change: CatalogueChange) async throws(ControlRefusal) -> String
    /// What `/metrics` exports besides the status.
    var metrics: NodeMetrics { get }
}

extension SwarmListing {
    /// Orders and pages a swarm's peers on the global executor, away from the event loops
    /// (whose threads serve peers and the cluster).
    static func pageOffLoop(_ row: SwarmRow, _ swarm: Swarm, page: Int, pageSize: Int) async -> (SwarmRow, ListPage<PeerRow>) {
        let now = WallClock.now()
        return await Task.detached { (row, PeerRow.page(swarm, now: now, page: page, pageSize: pageSize)) }.value
    }

    /// The swarms table built on the global executor from the store taken as a value
    /// (in O(1) on the loop or under the lock): built on the loop, a large table held
    /// every peer's answer until it was done.
    static func rowsOffLoop(_ store: SwarmStore?) async -> [SwarmRow] {
        guard let store else { return [] }
        return await Task.detached { rows(store) }.value
    }
}

extension AccessListing {
    /// Sorts up to 100,000 rules on the global executor, away from the event loops.
    static func offLoop(_ catalogue: Catalogue, offset: Int, limit: Int) async -> AccessListing {
        await Task.detached { AccessListing(catalogue, offset: offset, limit: limit) }.value
    }
}

extension CatalogueChange {
    var doneMessage: String {
        switch self {
        case .register(let t): "registered \(t.metadata.name) (\(t.infoHash.hex))"
        case .unregister(let hash): "unregistered \(hash.hex)"
        case .setAccessMode(let mode): "access mode \(mode)"
        case .setAccessRule(let rule, let hashes): "\(rule) rule for \(Self.count(hashes))"
        case .removeAccessRules(let hashes): "rule removed for \(Self.count(hashes))"
        case .setClientRule(let rule, let prefixes): "\(rule) rule for client \(prefixes.map(\.description).joined(separator: ", "))"
        case .removeClientRules(let prefixes): "rule removed for client \(prefixes.map(\.description).joined(separator: ", "))"
        case .addUser(let u): "added user \(u.name) (\(u.role))"
        case .editUser(let n, .role(let r)): "user \(n) is now \(r)"
        case .editUser(let n, .key(let k)): k == nil ? "user \(n) holds no key" : "user \(n) holds a new key"
        case .editUser(let n, .enabled(let e)): "user \(n) \(e ? "enabled" : "disabled")"
        case .editUser(let n, .password(let p)): p == nil ? "user \(n) can no longer sign in" : "password of user \(n) set"
        case .removeUser(let n): "removed user \(n)"
        case .restore(let entries): "restored \(entries.count) kept entries"
        }
    }

    static func count(_ hashes: [InfoHash]) -> String {
        hashes.count == 1 ? hashes[0].hex : "\(hashes.count) info hashes"
    }
}
