/// What one attempt's answer means, and when the next attempt is (docs/webhooks.md,
/// "Retries"): network errors, 5xx and 429 are retried with jittered exponential backoff
/// until the delivery is `retryForMs` old (counted from its result's time); any other answer
/// outside 2xx is final and the delivery goes to the webhook dead letters.
public struct WebhookAttempts: Sendable, Equatable {
    /// How long a delivery is retried, from its result's time.
    public var retryForMs: Int64
    /// The first backoff; each next one doubles, up to `maxBackoffMs`, each with ±50 % jitter.
    public var firstBackoffMs: Int64
    public var maxBackoffMs: Int64

    public init(retryForMs: Int64, firstBackoffMs: Int64 = 1_000, maxBackoffMs: Int64 = 300_000) {
        self.retryForMs = retryForMs
        self.firstBackoffMs = firstBackoffMs
        self.maxBackoffMs = maxBackoffMs
    }

    /// How an attempt ended, as the role saw it.
    public enum Answer: Equatable, Sendable {
        case status(Int)
        /// No HTTP answer: DNS, connect, TLS, timeout.
        case transportFailed(String)
        /// The receiver's address is one webhooks may not reach (no retry helps).
        case refusedAddress
    }

    /// What to do next.
    public enum Next: Equatable, Sendable {
        /// Delivered: acknowledge the entry.
        case delivered
        /// Try again after `afterMs`.
        case retry(afterMs: Int64)
        /// Give up: to the webhook dead letters, with `reason`.
        case deadLetter(reason: String)
    }

    /// After attempt number `attempt` (1 = the first) of a delivery whose result was written at
    /// `resultMs`, answered `answer` at `nowMs`. `random` in [0, 1) draws the jitter.
    public func onAnswer(_ answer: Answer, attempt: Int, resultMs: Int64, nowMs: Int64, random: Double) -> Next {
        let reason: String
        switch answer {
        case let .status(code) where (200..<300).contains(code):
            return .delivered
        case let .status(code) where code >= 500 || code == 429:
            reason = "status \(code)"
        case let .status(code):
            return .deadLetter(reason: "status \(code)")
        case .refusedAddress:
            return .deadLetter(reason: "refused_address: the receiver's address is loopback or private (allow_private_targets is off)")
        case let .transportFailed(text):
            reason = text
        }
        let exponent = min(max(attempt - 1, 0), 30)
        let base = min(maxBackoffMs, firstBackoffMs << exponent)
        let wait = max(1, Int64(Double(base) * (0.5 + random)))
        guard nowMs + wait <= resultMs + retryForMs else {
            return .deadLetter(reason: "retried for \(retryForMs / 1000) s; last: \(reason)")
        }
        return .retry(afterMs: wait)
    }
}
