import Foundation

/// The gateway's log: one JSON object per line on stdout (`time`, `level`, `msg`, then any
/// fields such as `app` and `event`). Loop-owned; writes are unbuffered lines.
///
/// Secrets never reach it: callers pass tokens through `Log.token(_:)` (last 8 characters)
/// and URLs through `RedisConfig.redactedURL`. Control and bidi characters are written as
/// `\uXXXX` (`TerminalText`).
public final class Log {
    /// Severity, lowest first; lines below the configured level are dropped.
    public enum Level: String, Comparable, CaseIterable, Sendable {
        case debug, info, warn, error
        private var rank: Int {
            switch self {
            case .debug: 0
            case .info: 1
            case .warn: 2
            case .error: 3
            }
        }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    public let minimum: Level
    private let write: (String) -> Void

    /// A log writing lines to `write` (stdout by default).
    public init(minimum: Level = .info, write: @escaping (String) -> Void = { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }) {
        self.minimum = minimum
        self.write = write
    }

    /// Writes one line when `level` is at or above the minimum. `fields` is evaluated only
    /// then: the router logs per call, and a dropped line should cost a comparison.
    public func log(_ level: Level, _ message: String, _ fields: @autoclosure () -> [String: Any] = [:]) {
        guard level >= minimum else { return }
        var object: [String: Any] = fields()
        object["time"] = Log.timestamp()
        object["level"] = level.rawValue
        object["msg"] = message
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        // JSONSerialization escapes C0 controls only; DEL, C1 and bidi controls from an event
        // (a call id, a reason) are escaped too, so a terminal showing the log is safe.
        write(TerminalText.line(String(decoding: data, as: UTF8.self)))
    }

    public func info(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:]) { log(.info, message, fields()) }
    public func warn(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:]) { log(.warn, message, fields()) }
    public func error(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:]) { log(.error, message, fields()) }
    public func debug(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:]) { log(.debug, message, fields()) }

    /// A device token as logs may show it: its last 8 characters.
    public static func token(_ token: String) -> String {
        token.count <= 8 ? token : "…" + token.suffix(8)
    }

    private static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var tm = tm()
        var seconds = ts.tv_sec
        gmtime_r(&seconds, &tm)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                      tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1_000_000)
    }
}
