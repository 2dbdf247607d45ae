// Reconnect backoff, shared by every transport on the loop (APNs connections, Redis).

/// Reconnect delays: capped exponential backoff with jitter, a pure function.
///
/// `delayMs(attempt:)` = uniform in [d/2, d] where d = min(cap, base · 2^attempt).
/// With the defaults (base 50 ms, cap 5 s):
///
/// | attempt | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7+ |
/// |---|---|---|---|---|---|---|---|---|
/// | d (ms) | 50 | 100 | 200 | 400 | 800 | 1600 | 3200 | 5000 |
///
/// The first attempt after a lost connection is attempt 0; a successful connect resets it.
public struct ReconnectBackoff: Equatable, Sendable {
    public var baseMs: Int64
    public var capMs: Int64

    public init(baseMs: Int64 = 50, capMs: Int64 = 5000) {
        precondition(baseMs > 0 && capMs >= baseMs, "backoff needs 0 < base <= cap")
        self.baseMs = baseMs
        self.capMs = capMs
    }

    /// The delay before attempt number `attempt` (0-based); `unit` is a random number in [0, 1).
    public func delayMs(attempt: Int, unit: Double) -> Int64 {
        // Cap the exponent before shifting so large attempt numbers cannot overflow.
        let shift = min(attempt, 40)
        let full = min(capMs, baseMs << Int64(shift) > 0 ? baseMs << Int64(shift) : capMs)
        let half = full / 2
        return half + Int64(Double(full - half) * min(max(unit, 0), 1))
    }
}