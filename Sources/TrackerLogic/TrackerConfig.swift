/// What an operator tunes about peer service. Validated once, at start-up.
public struct TrackerConfig: Sendable, Hashable {
    /// Seconds a peer should wait between announces (sent in every announce response).
    public var announceInterval: UInt32 = 1800
    /// How far each reply's interval may lie from `announceInterval`, in percent either
    /// way (`intervalBand`): peers that started together (a restart, a popular release)
    /// re-announce spread out instead of together. 0 gives every reply the interval.
    public var intervalJitterPercent: UInt32 = 10
    public static let maxIntervalJitterPercent: UInt32 = 50
    /// A peer not heard from for this long is dropped. Default: twice the interval.
    public var peerTimeout: Milliseconds? = nil
    /// Peers returned when `num_want` is ≤ 0.
    public var numWantDefault: Int = 50
    /// Upper bound on peers returned, whatever `num_want` asks.
    public var numWantMax: Int = 200
    /// Largest announce reply, in bytes of UDP payload: `num_want` is capped so the 20-byte
    /// header and the peers (6 bytes each over IPv4, 18 over IPv6) fit. The default, 1,232,
    /// fits an IPv6 datagram in the 1,280-byte minimum MTU without fragmenting (67 IPv6
    /// peers, 202 IPv4 ones).
    public var maxReplyBytes: Int = 1232
    public static let replyHeaderBytes = 20
    /// Use the announce's `ip` field instead of the datagram's source. Off by default:
    /// trusting it lets anyone point a swarm at a third party.
    public var trustAnnouncedIP: Bool = false
    /// Minimum validity of a connection id, in seconds (BEP 15 demands 120).
    public var connectionIDLifetimeSeconds: Int64 = 300
    /// Per-source limits: beyond them requests are dropped without a reply.
    public var connectLimit = SourceRateLimiter.Limit(perSecond: 100, burst: 200)
    public var announceLimit = SourceRateLimiter.Limit(perSecond: 100, burst: 200)
    /// Per-source limit on error replies (a bad connection id, a malformed request, a full
    /// tracker): beyond it they are dropped. Errors go to sources that proved nothing, so
    /// without it the tracker reflects one datagram for each one a spoofer sends.
    public var errorLimit = SourceRateLimiter.Limit(perSecond: 10, burst: 20)
    /// Slots of the per-source table (24 bytes each; a power of two).
    public var rateLimitTableSize = 1 << 16
    /// Most swarms held: an announce that would start one more gets a BEP 15 error.
    public var maxSwarms = 1_000_000
    /// Most peers in one swarm: a new peer beyond it gets a BEP 15 error (peers already
    /// in the swarm keep announcing).
    public var maxPeersPerSwarm = 100_000
    /// Most peers held in all swarms together: a new peer beyond it gets a BEP 15 error.
    /// The default keeps the peer tables within 2 GiB: a peer costs 93 to 108 bytes
    /// (docs/benchmarks.md), counted here as 128.
    public var maxPeers = TrackerConfig.maxPeers(memoryBudget: 2 << 30)
    public static let bytesPerPeer = 128
    public static func maxPeers(memoryBudget bytes: Int) -> Int { max(1, bytes / bytesPerPeer) }
    /// Most info hashes answered per scrape (BEP 15 fits 74 in a datagram); the rest of a
    /// longer scrape is not answered.
    public var maxScrapeHashes = BEP15Codec.maxScrapeHashes

    public init() {}

    /// This configuration with the settings of `new` that can change while a node runs:
    /// announce interval and its jitter, peer timeout, num_want default and maximum, the rate limits,
    /// the caps (swarms, peers per swarm, peers, scrape hashes) and `trustAnnouncedIP`. Two stay as they are until a restart: the connection id lifetime
    /// (ids already handed out were minted under it) and the rate-limit table's size (its
    /// slots are allocated once).
    public func takingLiveSettings(of new: TrackerConfig) -> TrackerConfig {
        var c = new
        c.connectionIDLifetimeSeconds = connectionIDLifetimeSeconds
        c.rateLimitTableSize = rateLimitTableSize
        return c
    }

    /// The intervals a reply may carry: `announceInterval` ± `intervalJitterPercent`, at
    /// least 1 s, and never longer than the peer timeout (a peer told to wait longer
    /// would be dropped before it announced again).
    public var intervalBand: ClosedRange<UInt32> {
        let spread = UInt32(clamping: UInt64(announceInterval) * UInt64(min(intervalJitterPercent, Self.maxIntervalJitterPercent)) / 100)
        let timeout = UInt32(clamping: max(effectivePeerTimeout.value / 1000, 1))
        let high = min(UInt32(clamping: UInt64(announceInterval) + UInt64(spread)), max(timeout, announceInterval))
        let low = max(1, announceInterval - min(spread, announceInterval))
        return min(low, high)...high
    }

    public var effectivePeerTimeout: Milliseconds {
        peerTimeout ?? Milliseconds.seconds(Int64(announceInterval) * 2)
    }

    /// Problems that make the configuration unusable, in words an operator can act on.
    public var problems: [String] {
        var out: [String] = []
        if announceInterval == 0 { out.append("announce interval must be at least 1 second") }
        if effectivePeerTimeout.value < Int64(announceInterval) * 1000 {
            out.append("peer timeout (\(effectivePeerTimeout)) must not be shorter than the announce interval (\(announceInterval)s)")
        }
        if intervalJitterPercent > Self.maxIntervalJitterPercent {
            out.append("interval jitter must be from 0 to \(Self.maxIntervalJitterPercent) percent (got \(intervalJitterPercent))")
        }
        if numWantDefault < 0 { out.append("num_want default must not be negative") }
        if numWantMax < 1 { out.append("num_want maximum must be at least 1") }
        if numWantDefault > numWantMax { out.append("num_want default (\(numWantDefault)) exceeds the maximum (\(numWantMax))") }
        if !(Self.replyHeaderBytes + 18...65_507).contains(maxReplyBytes) {
            out.append("max reply bytes must be from \(Self.replyHeaderBytes + 18) (one IPv6 peer) to 65507 (got \(maxReplyBytes))")
        }
        if connectionIDLifetimeSeconds < 120 { out.append("connection id lifetime must be at least 120 s (BEP 15)") }
        if maxSwarms < 1 { out.append("max swarms must be at least 1") }
        if maxPeersPerSwarm < 1 { out.append("max peers per swarm must be at least 1") }
        if maxPeers < 1 { out.append("max peers must be at least 1") }
        if !(1...BEP15Codec.maxScrapeHashes).contains(maxScrapeHashes) {
            out.append("max scrape hashes must be from 1 to \(BEP15Codec.maxScrapeHashes)")
        }
        return out
    }

    /// `num_want` ≤ 0 means the default; anything else is capped at the maximum; either
    /// way no more than `maxReplyBytes` holds for a reply of `family`'s peers.
    public func peersWanted(_ numWant: Int32, family: IPAddress.Family) -> Int {
        let asked = numWant <= 0 ? numWantDefault : min(Int(numWant), numWantMax)
        return min(asked, max(0, maxReplyBytes - Self.replyHeaderBytes) / (family == .v4 ? 6 : 18))
    }
}
