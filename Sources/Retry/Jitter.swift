/// The source of the random draws that jitter retry delays, as a value: a seeded SplitMix64
/// stream, or one constant draw for tests. It lives inside a per-call router, so a router is a
/// plain value with no hidden global randomness; the router seeds one stream per process with
/// `Jitter.random()` and gives each call a stream `split()` off it.
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

    /// A stream for one call, split off this one: seeded from this stream's next 64 bits, so
    /// a process seeds one stream with `random()` (one system call) and gives each call its
    /// own without asking the system again. Constant streams give copies of themselves.
    public mutating func split() -> Jitter {
        guard case let .splitMix(state) = source else { return self }
        let (bits, advanced) = Jitter.splitMix(state)
        source = .splitMix(state: advanced)
        return Jitter(seed: bits)
    }

    /// The next draw, in `[0, 1)` for a seeded stream.
    public mutating func next() -> Double {
        switch source {
        case let .constant(value):
            return value
        case let .splitMix(state):
            let (bits, advanced) = Jitter.splitMix(state)
            source = .splitMix(state: advanced)
            return Double(bits >> 11) * 0x1p-53
        }
    }

    /// One SplitMix64 step: 64 random bits and the next state.
    private static func splitMix(_ state: UInt64) -> (bits: UInt64, state: UInt64) {
        let advanced = state &+ 0x9E37_79B9_7F4A_7C15
        var z = advanced
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return (z ^ (z >> 31), advanced)
    }
}
