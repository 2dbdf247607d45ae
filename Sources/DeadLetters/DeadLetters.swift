// DeadLetters: the per-app dead-letter streams: write, list, show, replay, purge, retention.
// Owns: what happens to an event a human must look at. Must not decide routing.
// Status: not built yet (issue 4).

/// Retention of one app's dead-letter stream.
public struct DeadLetterRetention: Equatable, Sendable {
    /// Entries kept at most.
    public var maxEntries: Int
    /// Age in seconds after which an entry is removed.
    public var maxAgeSeconds: Int

    /// The defaults: 10,000 entries and 14 days.
    public static let `default` = DeadLetterRetention(maxEntries: 10_000, maxAgeSeconds: 14 * 86_400)

    public init(maxEntries: Int, maxAgeSeconds: Int) {
        self.maxEntries = maxEntries
        self.maxAgeSeconds = maxAgeSeconds
    }
}
