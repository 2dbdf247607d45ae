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
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, millis)
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
