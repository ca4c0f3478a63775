/// A peer's identity inside a swarm: its self-chosen id *and* the address it announced
/// from. Keying on both means nobody can update or remove another address's entry by
/// replaying its peer id.
public struct PeerKey: Hashable, Comparable, Sendable {
    public var peerID: PeerID
    public var ip: IPAddress

    public init(peerID: PeerID, ip: IPAddress) { self.peerID = peerID; self.ip = ip }

    public static func < (l: PeerKey, r: PeerKey) -> Bool { (l.ip, l.peerID) < (r.ip, r.peerID) }
}

/// One announce, reduced to what the repository keeps. This is the unit the cluster
/// replicates, so it is a plain value: deterministic to apply, cheap to encode.
public struct Announce: Hashable, Sendable {
    public var infoHash: InfoHash
    public var peerID: PeerID
    /// Where other peers reach this one: the datagram's source IP (or the announced IP
    /// when trusted) and the announced port.
    public var endpoint: PeerEndpoint
    public var uploaded: Int64
    public var downloaded: Int64
    public var left: Int64
    public var event: AnnounceEvent
    /// When a node received the request, by that node's clock: a request held through an
    /// election keeps the time it arrived, not the time it was committed. Drives expiry,
    /// and orders a peer's requests wherever they were committed (`Swarm`).
    public var at: Instant
    /// The user's key the request carried (private mode), checked again where the
    /// announce is applied: a key disabled or removed by an earlier commit makes it a
    /// no-op on every replica alike (`SwarmStore.apply`).
    public var trackerKey: TrackerKey?

    public init(infoHash: InfoHash, peerID: PeerID, endpoint: PeerEndpoint, uploaded: Int64,
                downloaded: Int64, left: Int64, event: AnnounceEvent, at: Instant, trackerKey: TrackerKey? = nil) {
        self.infoHash = infoHash; self.peerID = peerID; self.endpoint = endpoint
        self.uploaded = uploaded; self.downloaded = downloaded; self.left = left
        self.event = event; self.at = at; self.trackerKey = trackerKey
    }

    public var key: PeerKey { PeerKey(peerID: peerID, ip: endpoint.ip) }
}

/// The only ways the repository changes. Answering a request never mutates the store;
/// a node applies these values, in the same order everywhere, and gets the same state.
public enum SwarmUpdate: Hashable, Sendable {
    /// A started/none/completed announce inserts or refreshes the peer; completed also
    /// counts the peer's completion once; stopped removes the peer. Unless the swarm holds
    /// a later request of that peer (`Swarm`).
    case announce(Announce)
    /// Removes every peer whose last announce is earlier than the instant. The master
    /// chooses the instant, so every replica drops exactly the same peers.
    case expire(before: Instant)
    /// Folds one swarm's records from another replica into this one by the rule of
    /// `Swarm` (the latest request wins, a stop included), completions as a union. Used to
    /// keep what a partitioned minority acknowledged, and to install snapshots.
    case merge(SwarmMerge)
    /// The operator registered or removed a .torrent file (the dashboard's torrents tab).
    case catalogue(CatalogueChange)
}

/// One swarm's content, as carried by snapshots and merges.
public struct SwarmMerge: Hashable, Sendable {
    public var infoHash: InfoHash
    public var peers: [PeerRecord]
    public var completed: [PeerKey]
    /// The swarm's stops (`PeerStops`): without them a merge would bring back every
    /// peer the other branch saw leave.
    public var stops: [PeerStop]

    public init(infoHash: InfoHash, peers: [PeerRecord], completed: [PeerKey], stops: [PeerStop] = []) {
        self.infoHash = infoHash; self.peers = peers; self.completed = completed; self.stops = stops
    }

    /// Without what the master's next expiry would remove anyway (older than `cutoff`):
    /// once an expiry has dropped a stop, a record older than it must not come back.
    public func dropping(olderThan cutoff: Instant) -> SwarmMerge {
        SwarmMerge(infoHash: infoHash, peers: peers.filter { $0.lastAnnounce >= cutoff }, completed: completed,
                   stops: stops.filter { $0.at >= cutoff })
    }
}

/// A peer that left by a stop, at the time of that request.
public struct PeerStop: Hashable, Sendable {
    public var key: PeerKey
    public var at: Instant
    public init(key: PeerKey, at: Instant) { self.key = key; self.at = at }
}
