import Foundation

/// How dead letters' times, ages and counts are shown to people, the same on the command line
/// and in the operators' console. Pure functions.
public enum DeadFormat {
    /// `2026-11-29T10:11:12.345Z`.
    public static func time(_ ms: Int64) -> String {
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let millis = Int((ms % 1000 + 1000) % 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // Written digit by digit: String(format:) costs microseconds, and a console page shows
        // a time per row.
        func padded(_ n: Int32, _ width: Int) -> String {
            let digits = String(n)
            return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
        }
        return padded(parts.tm_year + 1900, 4) + "-" + padded(parts.tm_mon + 1, 2) + "-" + padded(parts.tm_mday, 2) + "T"
            + padded(parts.tm_hour, 2) + ":" + padded(parts.tm_min, 2) + ":" + padded(parts.tm_sec, 2) + "." + padded(Int32(millis), 3) + "Z"
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

    /// A deadline remark for a replay: the router never sends a VoIP push after the call's
    /// deadline, so such a replay ends with the missed-call alert (or `expired`).
    public static func deadlineNote(_ record: DeadLetterRecord, nowMs: Int64) -> String {
        guard let deadline = record.deadlineMs, deadline <= nowMs else { return "" }
        return " (deadline passed \(age(nowMs - deadline)) ago: alert fallback only)"
    }
}
