import CallStorage
import Foundation

/// The bounds `config check` names for `apps.APP.retention` (config/README.md), in seconds.
extension RetentionWindows {
    /// The idempotency window: from a second (tests, and a deployment whose producers never
    /// send an event twice) to 30 days.
    static let resultRange = 1...30 * 86_400
    /// The result's detail: the same bounds (it never outlasts the window: `detailSeconds`).
    static let resultDetailRange = 1...30 * 86_400
    /// The cancellation marker: the same bounds.
    static let cancelRange = 1...30 * 86_400
    /// A known-invalid token: up to a year.
    static let invalidTokenRange = 1...365 * 86_400
    /// Under this `config check` warns about the idempotency window: a producer that adds an
    /// event again after a timeout does so within seconds to a minute, and would ring the call twice.
    static let shortestSensibleResultSeconds = 60
}

extension ConfigParser {
    /// `retention`: `result_window_s`, `result_detail_s`, `cancel_window_s`,
    /// `invalid_token_ttl_s`, each optional (today's `RetentionWindows.defaults`); nil when a
    /// key is invalid (reported). `ringSeconds` and `alertTTLSeconds` are the app's own (nil
    /// when invalid): a cancellation marker shorter than the longest a call may still push is
    /// warned about, and a result detail shorter than the ring (a cancel read after it cannot
    /// say the call was delivered: `cancelled_after`).
    func parseRetention(_ entry: [String: Any], in parent: JSONPath, ringSeconds: Int?, alertTTLSeconds: Int?) -> RetentionWindows? {
        let path = parent.appending("retention")
        guard let section = reader.section(entry, "retention", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["result_window_s", "result_detail_s", "cancel_window_s", "invalid_token_ttl_s"])
        let defaults = RetentionWindows.defaults
        let result = seconds(section, "result_window_s", in: path, fallback: defaults.resultSeconds,
                             range: RetentionWindows.resultRange, what: "the idempotency window of result:ID")
        let detail = seconds(section, "result_detail_s", in: path, fallback: defaults.resultDetailSeconds,
                             range: RetentionWindows.resultDetailRange, what: "how long result:ID keeps the whole result JSON")
        let cancel = seconds(section, "cancel_window_s", in: path, fallback: defaults.cancelSeconds,
                             range: RetentionWindows.cancelRange, what: "the lifetime of a cancellation marker cancelled:ID")
        let invalid = seconds(section, "invalid_token_ttl_s", in: path, fallback: defaults.invalidTokenSeconds,
                              range: RetentionWindows.invalidTokenRange, what: "how long a known-invalid token is remembered")
        guard let result, let detail, let cancel, let invalid else { return nil }
        if result < RetentionWindows.shortestSensibleResultSeconds {
            reader.warning(path.appending("result_window_s"),
                           "an event whose id comes again \(result) s after its outcome is routed again (its phones ring twice)",
                           fix: "write how long a producer may send an event again, in seconds, such as \(defaults.resultSeconds) (24 h)")
        }
        // The compact record is kept when result_detail_s is written (RetentionWindows.compactRecord).
        let compact = reader.lookup(section, "result_detail_s", in: path) != nil
        if compact, let ringSeconds, min(detail, result) < ringSeconds {
            reader.warning(path.appending("result_detail_s"),
                           "a call may ring \(ringSeconds) s (ring_timeout_s), but its result JSON is kept \(min(detail, result)) s: a cancel, answer or decline read after that cannot say the call was delivered (cancelled_after), and the producer reads only its first outcome (detail_expired)",
                           fix: "write at least \(ringSeconds), such as \(max(ringSeconds, defaults.resultDetailSeconds))")
        }
        let pushes = [ringSeconds, alertTTLSeconds].compactMap { $0 }.max() ?? 0
        if cancel < pushes {
            reader.warning(path.appending("cancel_window_s"),
                           "a call may still push \(pushes) s after its event (ring_timeout_s, retry.alert.ttl_s), but its cancellation is forgotten after \(cancel) s: a retry moved before the cancel would push",
                           fix: "write at least \(pushes), such as \(max(pushes, defaults.cancelSeconds))")
        }
        return RetentionWindows(resultSeconds: result, resultDetailSeconds: detail, cancelSeconds: cancel, invalidTokenSeconds: invalid,
                                compactRecord: compact)
    }

    /// A whole number of seconds in `range`; `fallback` when absent. A duration written with a
    /// unit (`"24h"`, `"30d"`, `"1500ms"`) and a number that reads as milliseconds (over the
    /// bound, but in it once divided by 1,000) are named as such, with the seconds to write.
    private func seconds(_ section: [String: Any], _ key: String, in path: JSONPath, fallback: Int,
                         range: ClosedRange<Int>, what: String) -> Int? {
        guard let found = reader.lookup(section, key, in: path) else { return fallback }
        let bounds = "from \(range.lowerBound) to \(range.upperBound) (\(RetentionWindows.spoken(range.upperBound)))"
        switch JSONKind(found.value) {
        case let .string(text) where Int(text) == nil:
            if let s = RetentionWindows.secondsOf(text) {
                reader.error(found.path, "\(reader.quoted(text)) is a duration with a unit; \(key) is a number of seconds",
                             fix: "write \(s) without quotes (\(what), in seconds, \(bounds))")
                return nil
            }
        case let .integer(n) where n > range.upperBound && n % 1000 == 0 && range.contains(n / 1000):
            reader.error(found.path, "\(n) is over the limit of \(range.upperBound) seconds; it reads as milliseconds",
                         fix: "write \(n / 1000) (\(what), in seconds, not milliseconds)")
            return nil
        case let .integer(n) where n > range.upperBound:
            reader.error(found.path, "\(n) s is over the limit of \(range.upperBound) s (\(RetentionWindows.spoken(range.upperBound)))",
                         fix: "write \(what), in seconds, \(bounds), such as \(fallback)")
            return nil
        default:
            break
        }
        return reader.positiveInteger(section, key, in: path, fallback: fallback, most: range.upperBound)
    }
}

extension RetentionWindows {
    /// The seconds of a duration with a unit, `"24h"`, `"30d"`, `"90s"`, `"5m"`/`"5min"`,
    /// `"1500ms"` (rounded up to whole seconds); nil for anything else.
    static func secondsOf(_ text: String) -> Int? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count <= 12, let n = Int(digits) else { return nil }
        let unit = trimmed.dropFirst(digits.count).trimmingCharacters(in: .whitespaces)
        switch unit {
        case "ms": return (n + 999) / 1000
        case "s", "sec": return n
        case "m", "min": return n * 60
        case "h": return n * 3600
        case "d": return n * 86_400
        default: return nil
        }
    }

    /// `seconds` as an operator says it: `30 days`, `24 h`, `90 s`.
    package static func spoken(_ seconds: Int) -> String {
        if seconds >= 2 * 86_400, seconds % 86_400 == 0 { return "\(seconds / 86_400) days" }
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600) h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60) min" }
        return "\(seconds) s"
    }
}

extension GatewayConfig {
    /// Each app's retention windows, by app id: what `CallStore.Config.windows` and
    /// `RetrySchedule.Config.windows` are given.
    package var retentionWindows: [String: RetentionWindows] { apps.mapValues(\.retention) }
}
