/// The rows of a node's repository as values: peers, completions, stops, registered torrents
/// and the commit metadata, changed by exactly the writes a node asks of its disk
/// (`CommitRows`, a snapshot, a wipe). The simulator's disk is one of these, so a
/// simulated restart reads back what the rows say, as the runtime's SQLite file does;
/// a row the node forgot to write shows as replicas that differ after a restart.
///
/// The `swarms` table's counts are not kept: they follow from the rows, and a restart
/// does not read them.
public struct RepositoryRows: Sendable, Equatable {
    public private(set) var peers: [InfoHash: [PeerKey: PeerRecord]] = [:]
    public private(set) var completions: [InfoHash: Set<PeerKey>] = [:]
    public private(set) var stops: [InfoHash: [PeerKey: Instant]] = [:]
    public private(set) var torrents: [InfoHash: RegisteredTorrent] = [:]
    public private(set) var accessMode = AccessMode.open
    public private(set) var accessRules: [InfoHash: AccessRule] = [:]
    public private(set) var clientRules: [ClientPrefix: AccessRule] = [:]
    public private(set) var users: [UserName: User] = [:]
    public private(set) var stamps = CatalogueStamps()
    public private(set) var completedBase: [InfoHash: Int] = [:]
    public private(set) var lastCommitted = TxRef.zero
    public private(set) var history = EpochHistory()

    public init() {}

    public mutating func apply(_ rows: CommitRows) {
        for change in rows.changes {
            switch change {
            case .peer(let hash, let key, let record):
                peers[hash, default: [:]][key] = record
                if peers[hash]?.isEmpty == true { peers[hash] = nil }
            case .completion(let hash, let key):
                completions[hash, default: []].insert(key)
            case .stop(let hash, let key, let at):
                stops[hash, default: [:]][key] = at
                if stops[hash]?.isEmpty == true { stops[hash] = nil }
            case .swarm(let hash, let content):
                peers[hash] = nil
                completions[hash] = nil
                stops[hash] = nil
                if let content { insert(content) }
            case .expire(let before):
                for hash in Array(peers.keys) {
                    peers[hash] = peers[hash]?.filter { $0.value.lastAnnounce >= before }
                    if peers[hash]?.isEmpty == true { peers[hash] = nil }
                }
                for hash in Array(stops.keys) {
                    stops[hash] = stops[hash]?.filter { $0.value >= before }
                    if stops[hash]?.isEmpty == true { stops[hash] = nil }
                }
            case .torrent(let hash, let t):
                torrents[hash] = t
            case .accessMode(let mode):
                accessMode = mode
            case .accessRule(let hash, let rule):
                accessRules[hash] = rule
            case .torrentStamp(let hash, let stamp):
                stamps.setTorrent(hash, stamp)
            case .ruleStamp(let hash, let stamp):
                stamps.setRule(hash, stamp)
            case .modeStamp(let ref):
                stamps.mode = ref
            case .clientRule(let prefix, let rule):
                clientRules[prefix] = rule
            case .clientStamp(let prefix, let stamp):
                stamps.setClient(prefix, stamp)
            case .user(let name, let user):
                users[name] = user
            case .userStamp(let name, let stamp):
                stamps.setUser(name, stamp)
            case .pruneTombstones:
                stamps.pruneTombstones()
            case .completedBase(let hash, let count):
                completedBase[hash] = count
            }
        }
        lastCommitted = rows.lastCommitted
        history = rows.history
    }

    /// Everything replaced by the snapshot's content.
    public mutating func replace(with snapshot: Snapshot) {
        self = RepositoryRows()
        for content in snapshot.content { insert(content) }
        for t in snapshot.torrents { torrents[t.infoHash] = t }
        accessMode = snapshot.access.mode
        accessRules = snapshot.access.rules
        clientRules = snapshot.access.clients.rules
        users = snapshot.access.users.users
        stamps = snapshot.stamps
        completedBase = snapshot.completedBase
        lastCommitted = snapshot.lastCommitted
        history = snapshot.history
    }

    /// Emptied (a clean shutdown, a merged-away state); the epoch is kept elsewhere.
    public mutating func wipe() { self = RepositoryRows() }

    private mutating func insert(_ content: SwarmMerge) {
        for r in content.peers { peers[content.infoHash, default: [:]][r.key] = r }
        for key in content.completed { completions[content.infoHash, default: []].insert(key) }
        for stop in content.stops { stops[content.infoHash, default: [:]][stop.key] = stop.at }
    }

    /// What a restart reads: nil when nothing was ever committed.
    public var snapshot: Snapshot? {
        guard lastCommitted.txid > 0 else { return nil }
        let content = Set(peers.keys).union(completions.keys).union(stops.keys).sorted().map {
            SwarmMerge(infoHash: $0, peers: peers[$0].map { Array($0.values) } ?? [],
                       completed: completions[$0].map { Array($0) } ?? [],
                       stops: stops[$0].map { $0.map { PeerStop(key: $0.key, at: $0.value) } } ?? [])
        }
        return Snapshot(restoredAt: lastCommitted, history: history, content: content, torrents: Array(torrents.values),
                        access: AccessPolicy(mode: accessMode, rules: accessRules.map { AccessEntry(infoHash: $0.key, rule: $0.value) },
                                             clients: clientRules.map { ClientRuleEntry(prefix: $0.key, rule: $0.value) },
                                             users: Array(users.values)),
                        stamps: stamps, completedBase: completedBase)
    }
}

extension Snapshot {
    /// A repository read back from its rows, in any order, with the checksum of what
    /// they build: the one way both stores turn rows into what a restarted node installs.
    public init(restoredAt lastCommitted: TxRef, history: EpochHistory, content: [SwarmMerge], torrents: [RegisteredTorrent],
                access: AccessPolicy = AccessPolicy(), stamps: CatalogueStamps = CatalogueStamps(),
                completedBase: [InfoHash: Int] = [:]) {
        let store = SwarmStore(content: content, torrents: torrents, access: access, stamps: stamps, completedBase: completedBase)
        self.init(lastCommitted: lastCommitted, history: history, content: store.content(), torrents: store.catalogue.sorted,
                  access: store.catalogue.access, stamps: store.catalogue.stamps, completedBase: store.catalogue.completedBase,
                  digest: Digest.of(store))
    }
}
