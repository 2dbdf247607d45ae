/// The source of the random draws that jitter retry delays, as a value: a seeded SplitMix64
/// stream, or one constant draw for tests. It lives inside a per-call router, so a router is a
/// plain value with no hidden global randomness; the gateway seeds it with `Jitter.random()`.
public struct Jitter: Equatable, Sendable {
    private enum Source: Equatable, Sendable {
        case splitMix(state: UInt64)
        case constant(Double)
    }

    private var source: Source

    /// A deterministic stream of draws from `seed` (SplitMix64).
    public init(seed: UInt64) {
        source = .splitMix(state: seed)
    }

    /// Every draw is `value` (clamped to `[0, 1]` by the backoff); for tests and tables.
    public static func constant(_ value: Double) -> Jitter {
        var jitter = Jitter(seed: 0)
        jitter.source = .constant(value)
        return jitter
    }

    /// A stream seeded from the system's random number generator.
    public static func random() -> Jitter {
        var rng = SystemRandomNumberGenerator()
        return Jitter(seed: rng.next())
    }

    /// The next draw, in `[0, 1)` for a seeded stream.
    public mutating func next() -> Double {
        switch source {
        case let .constant(value):
            return value
        case let .splitMix(state):
            let advanced = state &+ 0x9E37_79B9_7F4A_7C15
            source = .splitMix(state: advanced)
            var z = advanced
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            return Double(z >> 11) * 0x1p-53
        }
    }
}
