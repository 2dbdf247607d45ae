// Retry: retry policies, the durable retry schedule and its mover.
// Owns: when a failed push is tried again. Must not decide routing: whether a reason is
// retryable comes from the APNs reason table.
// Status: policies and the pure backoff (Backoff.swift, Jitter.swift) are built; the durable
// schedule and its mover are not yet (issue 4).

/// A per-app retry policy for one channel (VoIP or alert): how many attempts, and the bounds
/// of the exponential backoff between them (`delayMs(forRetry:random:throttled:)`).
public struct RetryPolicy: Equatable, Sendable {
    /// Attempts in all, the first included.
    public var maxAttempts: Int
    /// Base delay of the exponential backoff, in milliseconds.
    public var baseMs: Int
    /// Upper bound of one delay, in milliseconds.
    public var capMs: Int

    public init(maxAttempts: Int, baseMs: Int, capMs: Int) {
        self.maxAttempts = maxAttempts
        self.baseMs = baseMs
        self.capMs = capMs
    }
}
