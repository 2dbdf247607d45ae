// DeadLetters: the per-app dead-letter streams after the router wrote them: reading them as
// people need them (the event, every attempt across replays, the reason), replay, purge,
// retention, and the audit of what operators did.
// Owns: what happens to an event a human must look at. Must not decide routing: a replayed
// event goes back to the calls stream and the router decides again.
// Files: DeadLetterRecord (one dead letter read back, joined with its replay history, and
// `ReplayHistory`, the ledger's JSON), DeadLetterOperations (listing, finding, replay, purge,
// counts and the audit stream, for the command line and the console alike), DeadLetterFilter,
// DeadLetterReference (naming one dead letter), TimeArgument (`--since`/`--older-than` values),
// DeadFormat (text shown to people), EventDigest, ReplayPacer (rate limit), ReplayForecast
// (what a replay will do: ring, the missed-call alert only, nothing), ScanPacing (the share of
// Redis and the loop bulk reads take), AuditRecord, PrettyJSON (re-indenting and reading the
// JSON inside dead letters; the module JSONOutput writes), DeadLetterRetention (the retention
// runner), RecordedResult (a call's stored result read back for `pushgw calls show`, its
// attempts read as a dead letter's are), StreamExport (an app's results, feedback or dead
// letters as JSON lines, paced: `pushgw export`).
// Redis commands and scripts live in CallStorage's DeadLetterStore.

/// Retention of one app's dead-letter stream (config `apps.APP.dead_letters`).
public struct DeadLetterRetentionPolicy: Equatable, Sendable {
    /// Entries kept at most (> 0); the oldest beyond it are removed.
    public var maxEntries: Int
    /// Age in seconds (> 0) after which an entry is removed, measured from its death (the
    /// entry id's time, Redis-server clock).
    public var maxAgeSeconds: Int
    /// The stream's memory in bytes (> 0, as Redis counts it: `MEMORY USAGE`) above which the
    /// oldest entries are removed.
    public var maxBytes: Int

    /// The defaults: 10,000 entries, 14 days and 64 MiB.
    public static let `default` = DeadLetterRetentionPolicy(maxEntries: 10_000, maxAgeSeconds: 14 * 86_400, maxBytes: 64 << 20)

    public init(maxEntries: Int, maxAgeSeconds: Int, maxBytes: Int = 64 << 20) {
        precondition(maxEntries > 0 && maxAgeSeconds > 0 && maxBytes > 0, "retention needs a positive count, age and size")
        self.maxEntries = maxEntries
        self.maxAgeSeconds = maxAgeSeconds
        self.maxBytes = maxBytes
    }

    /// `10000 entries, 14 days, 64 MiB`: how `pushgw dead stats` and the console name it.
    public var summary: String {
        "\(DeadFormat.count(maxEntries, "entry", "entries")), \(DeadFormat.count(maxAgeSeconds / 86_400, "day")), \(maxBytes >> 20) MiB"
    }

    /// How long a replay ledger is kept: long enough for the replayed event to die again
    /// (the alert fallback may try for a day or more) and for that dead letter to live its
    /// whole retention.
    public var ledgerTTLSeconds: Int { maxAgeSeconds + 2 * 86_400 }
}
