// MoverPacing: when the retry mover looks at the durable schedule again. A pure value: the
// caller passes the time and the random draw, so tests need no clock.

/// The retry mover's timing decisions (docs/architecture.md): a retry fires within 50 ms of its
/// due time, and an idle process polls Redis no more than about 20 times a second.
///
/// The mover looks at one key, the due index (each app's earliest due time), then moves what is
/// due. After each look it sleeps:
///
/// | after the look                                   | sleep                                 |
/// |--------------------------------------------------|---------------------------------------|
/// | a move batch was full, or something is due now   | 0 (look again at once)                |
/// | the earliest due time is `d` ms away             | `min(d, idle)`                        |
/// | nothing is scheduled                             | `idle`                                |
///
/// where `idle` is `idlePollMs` moved by up to ±`spread`/2 at random (50 ms ± 5 ms by
/// default), so the movers of several processes do not poll in lockstep while one mover still
/// averages `1000 / idlePollMs` looks a second when idle. A retry scheduled by *this* process (`retryScheduled`)
/// wakes the mover at its due time if that is earlier than the planned look; one scheduled by
/// another process is seen at the next look, so it is moved at most `idlePollMs` late.
public struct MoverPacing: Equatable, Sendable {
    /// The mean sleep between two looks when nothing is due soon, in ms: bounds the lateness of
    /// a retry another process scheduled (to `idlePollMs · (1 + spread/2)`), and sets the idle
    /// rate of looks (`1000 / idlePollMs` a second on average).
    public var idlePollMs: Int64
    /// The width of the random spread around `idlePollMs`, as a fraction of it (0 … 1).
    public var spread: Double
    /// When the next look is planned (unix ms); nil before the first and during a look.
    public private(set) var nextLookAtMs: Int64?
    /// The earliest due time this process scheduled while a look was in flight (the look may
    /// have read the index before that schedule landed).
    private var scheduledDuringLookMs: Int64?

    public init(idlePollMs: Int64 = 50, spread: Double = 0.2) {
        precondition(idlePollMs > 0, "the mover needs a positive idle poll interval")
        self.idlePollMs = idlePollMs
        self.spread = min(1, max(0, spread))
    }

    /// A look at the index begins.
    public mutating func lookStarted() {
        nextLookAtMs = nil
    }

    /// A look (and the moves it led to) finished at `now`: the delay before the next one.
    ///
    /// - Parameters:
    ///   - earliestDueMs: the earliest due time the index still holds; nil when it is empty.
    ///   - more: a move was cut by its batch limit, so more is due already.
    ///   - random: a draw in `[0, 1)` for the idle sleep's spread.
    public mutating func lookDone(now: Int64, earliestDueMs: Int64?, more: Bool, random: Double) -> Int64 {
        let r = random.isNaN ? 0 : min(1, max(0, random))
        let idle = max(1, idlePollMs + Int64((Double(idlePollMs) * spread * (r - 0.5)).rounded(.down)))
        let earliest = [earliestDueMs, scheduledDuringLookMs].compactMap { $0 }.min()
        scheduledDuringLookMs = nil
        var delay = idle
        if more {
            delay = 0
        } else if let earliest {
            delay = min(idle, max(0, earliest - now))
        }
        nextLookAtMs = now + delay
        return delay
    }

    /// This process scheduled a retry due at `dueAtMs`: the new delay before the next look when
    /// that is earlier than the one planned, else nil (keep the plan; during a look the due
    /// time is remembered for `lookDone`).
    public mutating func retryScheduled(dueAtMs: Int64, now: Int64) -> Int64? {
        guard let planned = nextLookAtMs else {
            scheduledDuringLookMs = min(scheduledDuringLookMs ?? dueAtMs, dueAtMs)
            return nil
        }
        guard dueAtMs < planned else { return nil }
        let delay = max(0, dueAtMs - now)
        nextLookAtMs = now + delay
        return delay
    }
}
