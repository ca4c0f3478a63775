/// Per-source token buckets for connects, announces and error replies, in a fixed table:
/// memory does not grow with the number of sources, however many addresses a flood spoofs.
///
/// A source is an IPv4 address or an IPv6 /64: one host is routinely given a whole /64,
/// so buckets per /128 would give it as many as it cares to use.
///
/// A source's bucket lives in the slot its keyed hash picks (the key is secret, so nobody
/// can aim collisions at a victim). A slot remembers a tag of its owner; a different
/// source landing there takes the slot over with a full bucket. Under a flood from many
/// sources the table therefore forgets, and limits only the heavy hitters that keep their
/// slot — the point is to stop one address (or one spoofed victim) from using the
/// tracker as a reflector, not to account for everyone exactly.
public struct SourceRateLimiter: Sendable {
    public struct Limit: Sendable, Hashable {
        /// Tokens added per second; 0 turns the limit off.
        public var perSecond: UInt32
        /// Bucket size: how many requests may come at once.
        public var burst: UInt32

        public init(perSecond: UInt32, burst: UInt32) { self.perSecond = min(perSecond, 1_000_000); self.burst = min(max(burst, 1), 1_000_000) }
        public static let off = Limit(perSecond: 0, burst: 1)
        public var isOff: Bool { perSecond == 0 }
    }

    public enum Kind: Sendable { case connect, announce, error }

    struct Slot: Sendable {
        var tag: UInt32 = 0
        /// Thousandths of a token.
        var connectMilli: UInt32 = 0
        var announceMilli: UInt32 = 0
        var errorMilli: UInt32 = 0
        var updated: Int64 = 0
    }

    public private(set) var connect: Limit
    public private(set) var announce: Limit
    public private(set) var error: Limit
    let hasher: SipHash24
    let mask: Int
    private var slots: [Slot] = []
    /// Requests refused so far, for operators.
    public private(set) var refused = 0

    /// `tableSize` is rounded up to a power of two (24 bytes a slot).
    public init(connect: Limit, announce: Limit, error: Limit = .off, key: SipHash24, tableSize: Int = 1 << 16) {
        self.connect = connect
        self.announce = announce
        self.error = error
        self.hasher = key
        var size = 1
        while size < min(max(tableSize, 1), 1 << 24) { size <<= 1 }
        self.mask = size - 1
    }

    public var isOff: Bool { connect.isOff && announce.isOff && error.isOff }

    /// New limits (a reloaded configuration). Every source keeps the tokens it has, at
    /// most the new burst from its next request on; the table and its key stay.
    public mutating func reconfigure(connect: Limit, announce: Limit, error: Limit) {
        self.connect = connect
        self.announce = announce
        self.error = error
    }

    /// Slots allocated (on first use, never more): the memory bound, 24 bytes each.
    public var tableSlots: Int { slots.count }

    /// Takes one token for a request of `kind` from `ip`; false when its bucket is empty.
    public mutating func allow(_ kind: Kind, from ip: IPAddress, now: Instant) -> Bool {
        let limit: Limit
        switch kind {
        case .connect: limit = connect
        case .announce: limit = announce
        case .error: limit = error
        }
        guard !limit.isOff else { return true }
        if slots.isEmpty { slots = Array(repeating: Slot(), count: mask + 1) }
        let h: UInt64
        switch ip {
        case .v4(let v): h = hasher.hash(UInt64(v) | 4 << 32, 0x726174)
        case .v6(let prefix, _): h = hasher.hash(prefix, 6, 0x726174)
        }
        let index = Int(truncatingIfNeeded: h) & mask
        let tag = UInt32(truncatingIfNeeded: h >> 32) | 1
        var slot = slots[index]
        if slot.tag != tag {
            slot = Slot(tag: tag, connectMilli: connect.burst &* 1000, announceMilli: announce.burst &* 1000,
                        errorMilli: error.burst &* 1000, updated: now.milliseconds)
        }
        // Refill: perSecond tokens a second is perSecond milli-tokens a millisecond.
        let elapsed = UInt64(clamping: max(0, now.milliseconds &- slot.updated))
        slot.updated = max(slot.updated, now.milliseconds)
        func refill(_ milli: UInt32, _ l: Limit) -> UInt32 {
            let added = elapsed.multipliedReportingOverflow(by: UInt64(l.perSecond))
            let total = added.overflow ? UInt64.max : UInt64(milli).addingReportingOverflow(added.partialValue).partialValue
            return UInt32(min(total, UInt64(l.burst) * 1000))
        }
        slot.connectMilli = refill(slot.connectMilli, connect)
        slot.announceMilli = refill(slot.announceMilli, announce)
        slot.errorMilli = refill(slot.errorMilli, error)
        let allowed: Bool
        switch kind {
        case .connect:
            allowed = slot.connectMilli >= 1000
            if allowed { slot.connectMilli -= 1000 }
        case .announce:
            allowed = slot.announceMilli >= 1000
            if allowed { slot.announceMilli -= 1000 }
        case .error:
            allowed = slot.errorMilli >= 1000
            if allowed { slot.errorMilli -= 1000 }
        }
        slots[index] = slot
        if !allowed { refused &+= 1 }
        return allowed
    }
}
