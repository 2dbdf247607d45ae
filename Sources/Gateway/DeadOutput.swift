import DeadLetters
import Foundation

/// How `pushgw dead` shows times, ages and tables to people. Pure functions.
enum DeadFormat {
    /// `2026-11-29T10:11:12.345Z`.
    static func time(_ ms: Int64) -> String {
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let millis = Int((ms % 1000 + 1000) % 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, millis)
    }

    /// A short age: `45s`, `12m`, `5h`, `3d` (whole units, rounded down; hours up to 48).
    static func age(_ ms: Int64) -> String {
        let s = max(0, ms) / 1000
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m" }
        if s < 48 * 3600 { return "\(s / 3600)h" }
        return "\(s / 86_400)d"
    }

    /// `1 dead letter`, `3 dead letters`.
    static func count(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(n) \(n == 1 ? singular : plural ?? singular + "s")"
    }

    /// Rows under a header, columns padded to their widest cell and separated by two spaces;
    /// the last column is not padded. Every cell is written as `TerminalText.field`: a line
    /// break or escape in a call id or reason cannot start a row of its own.
    static func table(_ header: [String], _ rows: [[String]]) -> [String] {
        let all = [header] + rows.map { $0.map(TerminalText.field) }
        var widths = [Int](repeating: 0, count: header.count)
        for row in all {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        return all.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
    }

    /// A deadline remark for a replay: the router never sends a VoIP push after the call's
    /// deadline, so such a replay ends with the missed-call alert (or `expired`).
    static func deadlineNote(_ record: DeadLetterRecord, nowMs: Int64) -> String {
        guard let deadline = record.deadlineMs, deadline <= nowMs else { return "" }
        return " (deadline passed \(age(nowMs - deadline)) ago: alert fallback only)"
    }
}
