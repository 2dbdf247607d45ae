/// Times an operator types to select dead letters (`pushgw dead --since T`, `--older-than D`,
/// the console's age filter): a duration back from now, or an ISO 8601 date. Pure functions.
public enum TimeArgument {
    /// What the help texts say a time may be.
    public static let forms = "a duration of at most 100 years (90s, 15m, 2h, 3d, 1w, 1h30m) or an ISO date "
        + "(2026-11-29, 2026-11-29T10:00:00Z)"

    /// The longest duration, ms: 100 years of 365.25 days. Every sum of pairs is checked
    /// against it, so no operator's text reaches an overflow.
    public static let longestMs: Int64 = 36_525 * 86_400_000

    /// The instant `text` names, unix ms: a duration is that long before `nowMs`, a date is
    /// itself. Nil when it is neither.
    public static func instant(_ text: String, nowMs: Int64) -> Int64? {
        if let d = durationMs(text) { return nowMs - d }
        return isoDateMs(text)
    }

    /// One or more NUMBER UNIT pairs, units `s`, `m`, `h`, `d`, `w` (`90s`, `1h30m`), in ms;
    /// nil for anything else, zero and more than `longestMs` included.
    public static func durationMs(_ text: String) -> Int64? {
        var total: Int64 = 0
        var number: Int64?
        var sawPair = false
        for c in text {
            if let digit = c.wholeNumberValue, c.isASCII {
                let (m, o1) = (number ?? 0).multipliedReportingOverflow(by: 10)
                let (n, o2) = m.addingReportingOverflow(Int64(digit))
                guard !o1, !o2, n < 1_000_000_000 else { return nil }
                number = n
                continue
            }
            let unit: Int64
            switch c {
            case "s": unit = 1000
            case "m": unit = 60_000
            case "h": unit = 3_600_000
            case "d": unit = 86_400_000
            case "w": unit = 7 * 86_400_000
            default: return nil
            }
            // n < 1e9 and unit <= 6.048e8: the product fits; the sum stays under longestMs.
            guard let n = number, n * unit <= longestMs - total else { return nil }
            total += n * unit
            number = nil
            sawPair = true
        }
        guard sawPair, number == nil, total > 0 else { return nil }
        return total
    }

    /// `YYYY-MM-DD`, optionally followed by `T` (or a space) and `HH:MM[:SS[.fff]]`, and a
    /// zone `Z`, `±HH:MM`, `±HHMM` or `±HH`; without a zone the time is UTC. Unix ms, nil
    /// when malformed or out of range.
    public static func isoDateMs(_ text: String) -> Int64? {
        let s = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= s.count else { return nil }
            var n = 0
            for k in 0..<count {
                let c = s[i + k]
                guard c >= 48 && c <= 57 else { return nil }
                n = n * 10 + Int(c - 48)
            }
            i += count
            return n
        }
        func take(_ c: UInt8) -> Bool {
            guard i < s.count, s[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), take(45), let month = digits(2), take(45), let day = digits(2) else { return nil }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day) else { return nil }
        var hour = 0, minute = 0, second = 0, millis = 0
        if take(84) || take(32) {  // "T" or " "
            guard let h = digits(2), take(58), let m = digits(2) else { return nil }
            hour = h
            minute = m
            if take(58) {
                guard let sec = digits(2) else { return nil }
                second = sec
                if take(46) {
                    var scale = 100
                    var any = false
                    while i < s.count, s[i] >= 48, s[i] <= 57 {
                        millis += Int(s[i] - 48) * scale
                        scale /= 10
                        i += 1
                        any = true
                    }
                    guard any else { return nil }
                }
            }
            guard hour < 24, minute < 60, second < 60 else { return nil }
        }
        var offsetMinutes = 0
        if take(90) {  // "Z"
        } else if i < s.count, s[i] == 43 || s[i] == 45 {  // "+" / "-"
            let sign = s[i] == 43 ? 1 : -1
            i += 1
            guard let oh = digits(2), oh < 24 else { return nil }
            var om = 0
            if take(58) {
                guard let m = digits(2) else { return nil }
                om = m
            } else if i < s.count {
                guard let m = digits(2) else { return nil }
                om = m
            }
            guard om < 60 else { return nil }
            offsetMinutes = sign * (oh * 60 + om)
        }
        guard i == s.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        return seconds * 1000 + Int64(millis)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
