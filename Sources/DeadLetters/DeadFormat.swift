import Foundation

/// How times, ages and counts are shown to people, the same on the command line and in the
/// operators' console: dead letters' times, and the other times people read (a certificate's
/// dates in a config problem, when APNs says a token became invalid). Pure functions.
public enum DeadFormat {
    /// `2026-11-29T10:11:12.345Z`.
    public static func time(_ ms: Int64) -> String {
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let millis = Int((ms % 1000 + 1000) % 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        // A year beyond four digits (or before year 0) is written as it is, the rest the same.
        let longYear = (0...9999).contains(year) ? nil : Array(String(year).utf8)
        // Written digit by digit into its bytes: String(format:) cost ~40,000 instructions, and
        // every log line and every console row has a time.
        return String(unsafeUninitializedCapacity: 20 + (longYear?.count ?? 4)) { out in
            var at = 0
            func digits(_ n: Int, _ width: Int, then separator: UInt8) {
                var n = n
                for k in stride(from: width - 1, through: 0, by: -1) {
                    out[at + k] = UInt8(ascii: "0") + UInt8(n % 10)
                    n /= 10
                }
                out[at + width] = separator
                at += width + 1
            }
            if let longYear {
                for (k, b) in longYear.enumerated() { out[k] = b }
                out[longYear.count] = UInt8(ascii: "-")
                at = longYear.count + 1
            } else {
                digits(year, 4, then: UInt8(ascii: "-"))
            }
            digits(Int(parts.tm_mon) + 1, 2, then: UInt8(ascii: "-"))
            digits(Int(parts.tm_mday), 2, then: UInt8(ascii: "T"))
            digits(Int(parts.tm_hour), 2, then: UInt8(ascii: ":"))
            digits(Int(parts.tm_min), 2, then: UInt8(ascii: ":"))
            digits(Int(parts.tm_sec), 2, then: UInt8(ascii: "."))
            digits(millis, 3, then: UInt8(ascii: "Z"))
            return at
        }
    }

    /// A short age: `45s`, `12m`, `5h`, `3d` (whole units, rounded down; hours up to 48).
    public static func age(_ ms: Int64) -> String {
        let s = max(0, ms) / 1000
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m" }
        if s < 48 * 3600 { return "\(s / 3600)h" }
        return "\(s / 86_400)d"
    }

    /// `1 dead letter`, `3 dead letters`.
    public static func count(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(n) \(n == 1 ? singular : plural ?? singular + "s")"
    }

    /// What an operator typed, quoted in the message that refuses it: at most 40 characters
    /// (a number of 400 digits is named by its start and length).
    public static func quoted(_ text: String) -> String {
        text.count <= 40 ? "\"\(text)\"" : "\"\(text.prefix(40))…\" (\(text.count) characters)"
    }

    /// The call's deadline as `dead show` and the console's dead-letter page give it: when it
    /// is, where it comes from, and what a replay now does (`ReplayForecast`).
    public static func deadline(_ record: DeadLetterRecord, ringTimeoutMs: Int64, nowMs: Int64) -> String {
        let deadline = record.callDeadlineMs(ringTimeoutMs: ringTimeoutMs)
        let source = record.deadlineMs != nil ? "the event's deadline"
            : record.ledgerDeadlineMs != nil ? "the original call's, carried by its replay"
            : "the call's first entry + the app's \(ringTimeoutMs / 1000) s ring timeout"
        let forecast = ReplayForecast(record, ringTimeoutMs: ringTimeoutMs, nowMs: nowMs)
        return time(deadline) + " (\(source)); a replay now: " + forecast.text(nowMs: nowMs)
    }

    /// The note on an event kept only in part, nil for a whole one.
    public static func cutNote(_ record: DeadLetterRecord) -> String? {
        guard !record.isEventWhole else { return nil }
        return "only the first \(record.event.count) of the event's \(record.eventBytes) bytes were kept (it was refused for its size)"
    }
}
