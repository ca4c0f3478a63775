/// SipHash-2-4 over whole 64-bit little-endian words: a keyed hash, fast on short
/// inputs, strong enough that a peer cannot forge an id for an address it does not own.
public struct SipHash24: Sendable {
    public var k0: UInt64
    public var k1: UInt64

    public init(k0: UInt64, k1: UInt64) { self.k0 = k0; self.k1 = k1 }

    /// The hash of the byte string formed by `words` in little-endian order.
    public func hash(words: [UInt64]) -> UInt64 {
        var state = State(k0: k0, k1: k1)
        for m in words { state.compress(m) }
        return state.finalize(byteCount: words.count * 8)
    }

    /// Fixed-arity forms, so the hot path builds no array.
    @inlinable public func hash(_ a: UInt64, _ b: UInt64) -> UInt64 {
        var state = State(k0: k0, k1: k1)
        state.compress(a); state.compress(b)
        return state.finalize(byteCount: 16)
    }

    @inlinable public func hash(_ a: UInt64, _ b: UInt64, _ c: UInt64) -> UInt64 {
        var state = State(k0: k0, k1: k1)
        state.compress(a); state.compress(b); state.compress(c)
        return state.finalize(byteCount: 24)
    }

    /// Two three-word hashes at once. Each hash is a chain of dependent rounds, so one
    /// alone leaves most of a core's execution units idle; two independent chains in
    /// lockstep take little longer than one.
    @inlinable public func hash(_ x: (UInt64, UInt64, UInt64), _ y: (UInt64, UInt64, UInt64)) -> (UInt64, UInt64) {
        var s = State(k0: k0, k1: k1), t = State(k0: k0, k1: k1)
        s.compress(x.0); t.compress(y.0)
        s.compress(x.1); t.compress(y.1)
        s.compress(x.2); t.compress(y.2)
        return (s.finalize(byteCount: 24), t.finalize(byteCount: 24))
    }

    @usableFromInline struct State {
        @usableFromInline var v0, v1, v2, v3: UInt64

        @inlinable init(k0: UInt64, k1: UInt64) {
            v0 = 0x736f_6d65_7073_6575 ^ k0
            v1 = 0x646f_7261_6e64_6f6d ^ k1
            v2 = 0x6c79_6765_6e65_7261 ^ k0
            v3 = 0x7465_6462_7974_6573 ^ k1
        }

        @inlinable @inline(__always) mutating func round() {
            v0 &+= v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32)
            v2 &+= v3; v3 = rotl(v3, 16); v3 ^= v2
            v0 &+= v3; v3 = rotl(v3, 21); v3 ^= v0
            v2 &+= v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32)
        }

        @inlinable @inline(__always) mutating func compress(_ m: UInt64) {
            v3 ^= m; round(); round(); v0 ^= m
        }

        @inlinable @inline(__always) mutating func finalize(byteCount: Int) -> UInt64 {
            let b = UInt64(truncatingIfNeeded: byteCount) << 56
            v3 ^= b; round(); round(); v0 ^= b
            v2 ^= 0xFF
            round(); round(); round(); round()
            return v0 ^ v1 ^ v2 ^ v3
        }

        @inlinable @inline(__always) func rotl(_ x: UInt64, _ b: UInt64) -> UInt64 { (x << b) | (x >> (64 - b)) }
    }
}

/// Stateless BEP 15 connection ids.
///
/// Policy: an id is `keyedHash(source IP, time slot)` with the slot's low byte stored in
/// the id's low byte. Checking one costs a single hash and no table, so a tracker under
/// a flood of connects keeps no state, and every node of a cluster that shares the key
/// accepts ids any other node issued. An id is accepted while its slot is at most
/// `acceptedSlots` slots old: with the defaults (60 s slots, 5 minute lifetime) an id is
/// good for at least 5 and at most 6 minutes — BEP 15 asks for 2, and real clients reuse
/// ids somewhat longer. The port is not hashed, because NATs may change it between
/// requests. An id from the future (a slot ahead of ours, within a clock-drift allowance
/// of one slot) is accepted too, so nodes with slightly different clocks agree.
public struct ConnectionIDPolicy: Sendable {
    /// Issues ids; accepted too.
    public var hasher: SipHash24
    /// Also accepted (the previous key while a cluster key is rotated), never issued.
    public var alternate: SipHash24?
    public var slotSeconds: Int64
    public var acceptedSlots: Int64

    /// Issues with the first key and accepts ids of either (the second is the key being
    /// rotated out).
    public init(keys: [SipHash24], lifetimeSeconds: Int64 = 300, slotSeconds: Int64 = 60) {
        self.init(key: keys.first ?? SipHash24(k0: 0, k1: 0), lifetimeSeconds: lifetimeSeconds, slotSeconds: slotSeconds)
        alternate = keys.count > 1 ? keys[1] : nil
    }

    /// `lifetimeSeconds` is the guaranteed minimum validity; at least 120 (BEP 15).
    public init(key: SipHash24, lifetimeSeconds: Int64 = 300, slotSeconds: Int64 = 60) {
        let lifetime = min(max(lifetimeSeconds, 120), 86_400)
        let slotSeconds = min(max(slotSeconds, 1), 3600)
        self.hasher = key
        self.slotSeconds = slotSeconds
        self.acceptedSlots = min((lifetime + slotSeconds - 1) / slotSeconds, 250)
    }

    public func issue(for ip: IPAddress, now: Instant) -> UInt64 {
        id(for: ip, slot: now.seconds / slotSeconds)
    }

    public func isValid(_ id: UInt64, for ip: IPAddress, now: Instant) -> Bool {
        let current = now.seconds / slotSeconds
        // Reconstruct the full slot from its low byte: the nearest slot not later than
        // current + 1 with that low byte.
        let low = Int64(id & 0xFF)
        let ahead = current + 1
        let back = (ahead - low) & 0xFF
        let slot = ahead - back
        guard current - slot <= acceptedSlots else { return false }
        if Self.id(hasher, for: ip, slot: slot) == id { return true }
        return alternate.map { Self.id($0, for: ip, slot: slot) == id } ?? false
    }

    private func id(for ip: IPAddress, slot: Int64) -> UInt64 { Self.id(hasher, for: ip, slot: slot) }

    private static func id(_ hasher: SipHash24, for ip: IPAddress, slot: Int64) -> UInt64 {
        let h: UInt64
        switch ip {
        case .v4(let v): h = hasher.hash(UInt64(v) | 4 << 32, UInt64(bitPattern: slot))
        case .v6(let hi, let lo): h = hasher.hash(hi, lo, UInt64(bitPattern: slot))
        }
        var id = (h & ~0xFF) | UInt64(truncatingIfNeeded: slot) & 0xFF
        // Never collide with the connect magic, which would confuse a decoder.
        if id == bep15ProtocolID { id ^= 0x100 }
        // Never begin like a cluster frame: keepalives share the peer network, and a
        // datagram that starts like one is taken for one.
        if id >> 40 == ClusterChannel.framePrefix { id ^= 1 << 63 }
        return id
    }
}
