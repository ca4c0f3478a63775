/// The only source of randomness the logic uses: a small, fast, seedable generator.
///
/// The logic takes it as an injected value so that a seed replays identically in the
/// simulator; the runtime seeds it from the operating system once at start-up.
/// Algorithm: xoshiro256** seeded through SplitMix64, the usual pairing.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var s0: UInt64, s1: UInt64, s2: UInt64, s3: UInt64

    public init(seed: UInt64) {
        var sm = SplitMix64(state: seed)
        s0 = sm.next(); s1 = sm.next(); s2 = sm.next(); s3 = sm.next()
        if s0 | s1 | s2 | s3 == 0 { s0 = 1 }
    }

    public mutating func next() -> UInt64 {
        let result = rotl(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 45)
        return result
    }

    /// A child generator whose stream is independent of this one's later output:
    /// the simulator hands one to each node and fault source.
    public mutating func split() -> SeededGenerator { SeededGenerator(seed: next()) }

    /// Uniform in `0..<bound` without modulo bias worth worrying about (Lemire's method);
    /// 0 for an empty range.
    public mutating func below(_ bound: Int) -> Int {
        guard bound > 0 else { return 0 }
        return Int(truncatingIfNeeded: next().multipliedFullWidth(by: UInt64(bound)).high)
    }

    /// True with the given probability.
    public mutating func chance(_ probability: Double) -> Bool {
        guard probability > 0 else { return false }
        return Double(next() >> 11) * 0x1p-53 < probability
    }

    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 { (x << k) | (x >> (64 - k)) }
}

struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
