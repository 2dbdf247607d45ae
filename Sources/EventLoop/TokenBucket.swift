/// A token bucket: `perSecond` tokens a second, at most `burst` held (full at the start). The
/// admin endpoint's accept rate (`AdminAdmission`) and the HTTP API's per-app request rate
/// (IngestEndpoint's `AppRequestRate`) and the router's per-app event rate (`limits`) are each one. Pure: the caller passes the time.
package struct TokenBucket: Equatable, Sendable {
    package let perSecond: Int
    package let burst: Int
    private var tokens: Double
    private var refilledMs: Int64?

    package init(perSecond: Int, burst: Int) {
        precondition(perSecond > 0 && burst > 0, "a bucket refills and holds something")
        self.perSecond = perSecond
        self.burst = burst
        tokens = Double(burst)
    }

    private var perMs: Double { Double(perSecond) / 1000 }

    private mutating func refill(_ nowMs: Int64) {
        if let refilledMs { tokens = min(Double(burst), tokens + Double(max(0, nowMs - refilledMs)) * perMs) }
        refilledMs = nowMs
    }

    /// Milliseconds until a whole token is there (0 when one is).
    private var waitMs: Int64 { tokens >= 1 ? 0 : Int64(((1 - tokens) / perMs).rounded(.up)) }

    /// Takes a token at `nowMs` when there is one: nil; else takes none and returns the
    /// milliseconds until one is there (a request refused with `Retry-After`).
    package mutating func take(nowMs: Int64) -> Int64? {
        refill(nowMs)
        guard tokens >= 1 else { return waitMs }
        tokens -= 1
        return nil
    }

    /// The whole tokens there at `nowMs` (none taken).
    package mutating func available(nowMs: Int64) -> Int {
        refill(nowMs)
        return max(0, Int(tokens))
    }

    /// Takes `n` tokens at `nowMs` (at most what `available` said: what it counts was read).
    package mutating func take(_ n: Int, nowMs: Int64) {
        refill(nowMs)
        tokens -= Double(n)
    }

    /// Milliseconds from the last refill until `n` whole tokens are there (0 when they are).
    package func msUntil(_ n: Int) -> Int64 {
        tokens >= Double(n) ? 0 : Int64(((Double(n) - tokens) / perMs).rounded(.up))
    }

    /// Spends a token at `nowMs` whatever is left (what it counts happened already: an
    /// accept): nil while another could be taken now, else the milliseconds until one can.
    package mutating func spend(nowMs: Int64) -> Int64? {
        refill(nowMs)
        tokens -= 1
        return tokens >= 1 ? nil : waitMs
    }
}
