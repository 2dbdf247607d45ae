// Retry: retry policies, the durable retry schedule and its mover.
// Owns: when a failed push is tried again. Must not decide routing: whether a reason is
// retryable comes from the APNs reason table.
// Files: the policy (here), the pure backoff (Backoff.swift, Jitter.swift) and the mover's
// timing (MoverPacing.swift). The durable schedule's keys and Lua scripts live in CallStorage
// (RetrySchedule.swift: every key and command is there), and the mover's I/O in GatewayRoles
// (RetryRole.swift), so this module stays free of sockets and libevent types.

/// A per-app retry policy for one channel (VoIP or alert): how many attempts, and the bounds
/// of the exponential backoff between them (`delayMs(forRetry:random:throttled:)`).
public struct RetryPolicy: Equatable, Sendable {
    /// Attempts in all, the first included; at most `attemptsLimit` in a config.
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

    /// The most attempts a policy may allow (the config refuses more). A saved retry that
    /// claims more attempts made than this was not written by pushgw.
    public static let attemptsLimit = 100
    /// The longest base or cap delay a policy may have, in milliseconds (one hour).
    public static let delayLimitMs = 3_600_000
}
