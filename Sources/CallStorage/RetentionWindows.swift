/// How long one app's per-call keys live in Redis (`apps.APP.retention`, config/README.md):
/// the windows an operator trades against Redis memory. Every script that writes one of these
/// keys takes its TTL from here, by app (`CallStore.Config.windows(for:)`), as an argument.
public struct RetentionWindows: Equatable, Sendable {
    /// The idempotency window, seconds: how long a call's first outcome is kept (its compact
    /// record in `AppKeys.outcomes`, `OutcomeBuckets`; an end event's own `cancelResult` and a
    /// receipt's `ringResult` keep their whole result), so an event with that id is answered
    /// `duplicate` rather than routed again. 24 h by default.
    public var resultSeconds: Int
    /// With `compactRecord`, how long a call's whole result JSON stays under
    /// `AppKeys.result(id)`, seconds, at most the window (`detailSeconds`): the producer reads it
    /// within seconds. 900 s by default.
    public var resultDetailSeconds: Int
    /// Whether the app keeps the compact idempotency record (its config's `result_detail_s`):
    /// a call's first outcome in the window's buckets (`AppKeys.outcomes`), its whole result for
    /// `resultDetailSeconds` only. Off (the default), the whole result is kept for the window and
    /// no bucket is written or read: ~544 B of Redis a call for the window against ~108 B, at
    /// +25–45 % Redis CPU per event (the bucket reads of every lookup; docs/operations.md).
    public var compactRecord: Bool
    /// How long a cancellation marker (`AppKeys.cancelled(id)`, set by a cancel, an answer or a
    /// decline) lasts, seconds: a call or retry of that id read meanwhile is not pushed. 24 h.
    public var cancelSeconds: Int
    /// How long a token APNs or FCM declared invalid is remembered (`AppKeys.invalidPrefix`, for
    /// every `TokenChannel`: voip, alert, fcm), seconds: its calls skip it meanwhile. 30 days.
    public var invalidTokenSeconds: Int

    public init(resultSeconds: Int = 86_400, resultDetailSeconds: Int = 900, cancelSeconds: Int = 86_400,
                invalidTokenSeconds: Int = 30 * 86_400, compactRecord: Bool = false) {
        self.compactRecord = compactRecord
        precondition(resultSeconds > 0 && resultDetailSeconds > 0 && cancelSeconds > 0 && invalidTokenSeconds > 0,
                     "retention windows must be positive")
        self.resultSeconds = resultSeconds
        self.resultDetailSeconds = resultDetailSeconds
        self.cancelSeconds = cancelSeconds
        self.invalidTokenSeconds = invalidTokenSeconds
    }

    /// The TTL of a call's result JSON: with the compact record `resultDetailSeconds`, but
    /// never past the window; else the window.
    public var detailSeconds: Int { compactRecord ? min(resultDetailSeconds, resultSeconds) : resultSeconds }

    /// The outcome buckets a read asks at `unixSeconds`: the live ones with the compact record,
    /// none without (then a result key alone says a call is done).
    public func liveBuckets(atUnixSeconds unixSeconds: Int64) -> [Int64] {
        compactRecord ? buckets.live(atUnixSeconds: unixSeconds) : []
    }

    /// What a script is given as a record's compact code: `code` with the compact record, else
    /// '' (no compact record: the result is kept whole for the window).
    public func recordedCode(_ code: String?) -> String { compactRecord ? code ?? "" : "" }

    /// The window's outcome buckets.
    public var buckets: OutcomeBuckets { OutcomeBuckets(windowSeconds: resultSeconds) }

    /// Today's windows: 24 h (the whole result, no compact record), 24 h, 30 days.
    public static let defaults = RetentionWindows()

    /// The windows of `app` among `windows` (by app id, `CallStore.Config.windows`): an app
    /// not listed has the defaults.
    public static func of(_ app: AppKeys, in windows: [String: RetentionWindows]) -> RetentionWindows {
        windows[app.app] ?? .defaults
    }
}

/// What the windows cost in Redis memory at a steady call rate, by kind of key: estimates from
/// measured bytes per key (docs/operations.md, *Redis sizing*), for `pushgw config check --rate`.
public enum RetentionMemory {
    /// One kind of per-call key and what it holds at a rate.
    public struct Row: Equatable, Sendable {
        /// The key's name pattern, as docs/protocol.md writes it.
        public let key: String
        /// Bytes of Redis `used_memory` per key (an estimate: measured, see `Kind`).
        public let bytesPerKey: Int
        /// Keys written per call (1 for a result; the share of calls that write the key).
        public let keysPerCall: Double
        /// How long each key lives, seconds.
        public let seconds: Int
        /// Bytes held once the rate has run for `seconds`: rate × keys per call × seconds × bytes.
        public let bytes: Double
    }

    /// The measured bytes of `used_memory` per key, with what was measured.
    /// - `result:ID`: 550 B (the result JSON, 340 B on average, with its key), measured on
    ///   100,000 events of mixed outcomes at 1,000/s by deleting the kind.
    /// - `invalid:voip|alert|fcm:TOKEN`: ~205 B per newly invalid token, measured likewise
    ///   (the key alone, a 64-hex-digit token holding unix ms, measured 197 B).
    /// - `cancelled:ID`: ~200 B (measured 150 B for a cancel's `1` and 197 B for an
    ///   `answered:DEVICE`, 36-character ids, 100,000 keys on Redis 7.0).
    public static let resultBytes = 550
    /// - `outcomes:BUCKET`: ~108 B of `used_memory` per call (a call id of 36 characters and its
    ///   one-letter outcome code as a field of a hash bucket), measured by bench/redis-sizing.sh.
    public static let compactOutcomeBytes = 108
    public static let invalidTokenBytes = 205
    public static let cancelMarkerBytes = 200

    /// The share of calls that bring a newly invalid token, for the estimate: 1 % (a
    /// deployment's own is its feedback stream's rate over its call rate).
    public static let invalidTokenShare = 0.01
    /// The share of calls that set a cancellation marker: every call that is cancelled,
    /// answered or declined does; the estimate counts all of them (an upper bound).
    public static let cancelMarkerShare = 1.0

    /// The rows for `windows` at `callsPerSecond`: the result (its detail with the compact
    /// record, then the compact record, kept up to a quarter past the window: `OutcomeBuckets`),
    /// cancellation marker, invalid token.
    public static func rows(_ windows: RetentionWindows, callsPerSecond: Double) -> [Row] {
        func row(_ key: String, _ bytes: Int, _ share: Double, _ seconds: Int) -> Row {
            Row(key: key, bytesPerKey: bytes, keysPerCall: share, seconds: seconds,
                bytes: callsPerSecond * share * Double(seconds) * Double(bytes))
        }
        let compact = windows.compactRecord
            ? [row("outcomes:BUCKET", compactOutcomeBytes, 1, windows.resultSeconds + Int(windows.buckets.quarterSeconds))] : []
        return [row("result:ID", resultBytes, 1, windows.detailSeconds)] + compact
            + [row("cancelled:ID", cancelMarkerBytes, cancelMarkerShare, windows.cancelSeconds),
               row("invalid:voip|alert|fcm:TOKEN", invalidTokenBytes, invalidTokenShare, windows.invalidTokenSeconds)]
    }
}
