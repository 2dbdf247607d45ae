// Backoff: the pure delay function of a retry policy. No clock, no randomness of its own:
// the caller passes the random draw (see `Jitter`), so the same inputs give the same delay.

extension RetryPolicy {
    /// The largest delay before retry number `retry` (0 for the first retry, i.e. the second
    /// attempt): `min(cap, base · 2^retry)`, computed without overflow. Negative inputs count as 0.
    ///
    /// With `base 100, cap 2000` (the default VoIP policy):
    ///
    /// | retry | 0   | 1   | 2   | 3   | 4    | 5+   |
    /// |-------|-----|-----|-----|-----|------|------|
    /// | ceiling (ms) | 100 | 200 | 400 | 800 | 1600 | 2000 |
    public func ceilingMs(forRetry retry: Int) -> Int64 {
        let cap = Int64(max(0, capMs))
        let base = Int64(max(0, baseMs))
        let n = max(0, retry)
        // base · 2^n overflows or passes the cap once base > cap >> n.
        if n >= 62 || base > (cap >> Int64(n)) { return cap }
        return min(cap, base << Int64(n))
    }

    /// The delay before retry number `retry` (0-based), in milliseconds, with full jitter:
    /// `floor(random · ceiling)`, where `random` is a draw in `[0, 1)` (clamped to `[0, 1]`).
    ///
    /// `throttled` is for APNs saying "slow down" (429 TooManyRequests, or the client's own
    /// queue being full): the delay is then drawn from `[cap/2, cap]` instead,
    /// `cap/2 + floor(random · (cap − cap/2))`, so a throttled retry never waits less than half
    /// the cap and, for the same draw, never less than an unthrottled one.
    ///
    /// With `base 100, cap 2000`:
    ///
    /// | retry | random | delay (ms) | throttled (ms) |
    /// |-------|--------|------------|----------------|
    /// | 0     | 0.5    | 50         | 1500           |
    /// | 3     | 0.5    | 400        | 1500           |
    /// | 9     | 0.999  | 1998       | 1999           |
    /// | any   | 0      | 0          | 1000           |
    public func delayMs(forRetry retry: Int, random: Double, throttled: Bool = false) -> Int64 {
        let r = random.isNaN ? 0 : min(1, max(0, random))
        if throttled {
            let cap = Int64(max(0, capMs))
            let floor = cap / 2
            return floor + Int64((r * Double(cap - floor)).rounded(.down))
        }
        let ceiling = ceilingMs(forRetry: retry)
        return Int64((r * Double(ceiling)).rounded(.down))
    }

    /// True when a policy allows another attempt after `attemptsMade` attempts (the first send
    /// included). A policy of fewer than one attempt still allows the first.
    public func allowsAnotherAttempt(after attemptsMade: Int) -> Bool {
        attemptsMade < max(1, maxAttempts)
    }
}
