// The compact idempotency record (docs/protocol.md, *Finding results*): what is kept of a call
// for its app's whole idempotency window is its first outcome as a one-letter code in a hash
// bucket of the app (`AppKeys.outcomes`), not its result JSON, which `result:ID` holds only
// for the shorter `RetentionWindows.resultDetailSeconds`. This file holds the table of codes
// and the arithmetic of the buckets; the scripts that write and read them are CallStoreScripts'.

/// The one table of outcome codes, mapped both ways: each outcome a call's result can be
/// recorded with (`CallOutcome`'s names in Routing, `outcome` in docs/protocol.md) and its
/// one-byte code. A code read back that is not in the table is an error (`UnknownCode`),
/// never a guess: a gateway of a newer version may have written it, and an older one must
/// neither route the call again nor invent its outcome.
public enum CompactOutcome {
    /// Outcome name → code. `duplicate` has none: it is never stored.
    public static let codes: KeyValuePairs<String, String> = [
        "delivered_voip": "v", "delivered_alert": "a", "undeliverable": "u", "expired": "e", "cancelled": "c",
        "dead_lettered": "d", "answered": "n", "declined": "x", "ringing": "r",
    ]

    /// A code no gateway of this version writes.
    public struct UnknownCode: Error, Equatable, CustomStringConvertible {
        public let code: String
        public var description: String { "unknown outcome code \(code.debugDescription) in an outcomes bucket" }
    }

    private static let byName: [String: String] = Dictionary(uniqueKeysWithValues: codes.map { ($0.key, $0.value) })
    private static let byCode: [String: String] = Dictionary(uniqueKeysWithValues: codes.map { ($0.value, $0.key) })

    /// The code of outcome `name`; nil for one without (`duplicate`, or a name not in the table).
    public static func code(of name: String) -> String? { byName[name] }

    /// The outcome name of `code`; throws `UnknownCode` for one not in the table.
    public static func decode(_ code: String) throws(UnknownCode) -> String {
        guard let name = byCode[code] else { throw UnknownCode(code: code) }
        return name
    }

    /// The code of a result JSON's outcome (`{"outcome":"…",…}`), nil when the result claims
    /// nothing (an invalid event's, `ResultEntry.claimedOutcome`) or its outcome has no code.
    static func code(ofResultJSON json: String) -> String? {
        ResultEntry.claimedOutcome(json).flatMap(code(of:))
    }
}

/// The outcome buckets of one app's idempotency window: bucket `b` = floor(unix s / q), q a
/// quarter of the window (rounded up), holds the compact records written during it, and expires
/// a window and a quarter after its start, so a record lives at least the window and at most a
/// quarter more, and the live buckets at any time are the current one and the four before it.
public struct OutcomeBuckets: Equatable, Sendable {
    /// A quarter of the window, seconds (at least 1).
    public let quarterSeconds: Int64
    public let windowSeconds: Int64

    public init(windowSeconds: Int) {
        precondition(windowSeconds > 0, "the idempotency window is positive")
        self.windowSeconds = Int64(windowSeconds)
        quarterSeconds = max(1, (Int64(windowSeconds) + 3) / 4)
    }

    /// The bucket a record written at `unixSeconds` lands in.
    public func bucket(atUnixSeconds unixSeconds: Int64) -> Int64 { unixSeconds / quarterSeconds }

    /// When bucket `bucket`'s key expires (unix s, `EXPIREAT`): its start + the window + a quarter.
    public func expiresAt(_ bucket: Int64) -> Int64 { bucket * quarterSeconds + windowSeconds + quarterSeconds }

    /// The buckets that may be live at `unixSeconds`, newest first: the current one and the
    /// four before it (the one before those expired at the current one's start).
    public func live(atUnixSeconds unixSeconds: Int64) -> [Int64] {
        let now = bucket(atUnixSeconds: unixSeconds)
        return (0...4).map { now - $0 }
    }
}
