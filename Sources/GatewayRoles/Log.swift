import DeadLetters
import EventLoop
import Foundation
import JSONOutput
import VisibleText

/// The gateway's log: one JSON object per line on stdout (`time`, `level`, `msg`, then the
/// fields such as `app` and `event`, sorted; the cause of a line, when it has one, is `error`).
/// Loop-owned; writes are unbuffered lines. When stdout is the journal's stream, each line
/// starts with its syslog priority (`<3>` error, `<4>` warn, `<6>` info, `<7>` debug), which
/// journald takes as the line's priority (docs/operations.md, Logs).
///
/// Secrets never reach it: callers pass tokens through `Log.token(_:)` (last 8 characters)
/// and URLs through `RedisConfig.redactedURL`. Control and bidi characters are written as
/// `\uXXXX` (`TerminalText`).
///
/// Lines that can repeat in a loop (a failing Redis step, a refused accept, an unreachable
/// APNs) are written with `limited: true`: the same message for the same app, pool or
/// connection is written at most once per `Repeats.intervalMs`; the lines dropped meanwhile
/// are counted, and the next one written carries that count as `suppressed`
/// (docs/operations.md, Logs).
package final class Log {
    /// Severity, lowest first; lines below the configured level are dropped.
    package enum Level: String, Comparable, CaseIterable, Sendable {
        case debug, info, warn, error
        private var rank: Int {
            switch self {
            case .debug: 0
            case .info: 1
            case .warn: 2
            case .error: 3
            }
        }
        package static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }

        /// The syslog priority journald files the line at (`journalctl -p`).
        var syslogPriority: Int {
            switch self {
            case .debug: 7
            case .info: 6
            case .warn: 4
            case .error: 3
            }
        }
    }

    package let minimum: Level
    /// Lines start with `<N>`, their syslog priority (`Log.stdoutIsTheJournal`).
    package let prefixesPriority: Bool
    private let write: (String) -> Void
    private var repeats: RepeatLimiter
    private let clock: () -> Int64

    /// How often a limited line may repeat, and the clock it is measured on (monotonic ms).
    package struct Repeats {
        package var intervalMs: Int64
        package var clock: () -> Int64

        package init(intervalMs: Int64 = 10_000, clock: @escaping () -> Int64 = Clock.monotonicMs) {
            self.intervalMs = intervalMs
            self.clock = clock
        }
    }

    /// A log writing lines to `write` (stdout by default), with their priority first when
    /// `prefixesPriority` (by default when stdout is the journal's stream).
    package init(minimum: Level = .info, repeats: Repeats = Repeats(), prefixesPriority: Bool = Log.stdoutIsTheJournal(),
                write: @escaping (String) -> Void = { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }) {
        self.minimum = minimum
        self.prefixesPriority = prefixesPriority
        self.write = write
        self.repeats = RepeatLimiter(intervalMs: repeats.intervalMs)
        self.clock = repeats.clock
    }

    /// Writes one line when `level` is at or above the minimum. `fields` is evaluated only
    /// then: the router logs per call, and a dropped line should cost a comparison. With
    /// `limited`, a line repeating within the interval is counted instead of written.
    package func log(_ level: Level, _ message: String, _ fields: @autoclosure () -> [String: Any] = [:],
                    limited: Bool = false) {
        guard level >= minimum else { return }
        var object: [String: Any] = fields()
        if limited {
            let key = RepeatLimiter.Key(level: level.rawValue, message: message,
                                        subject: Log.subjectFields.map { object[$0].map { "\($0)" } ?? "" })
            switch repeats.admit(key, nowMs: clock()) {
            case .drop: return
            case let .write(suppressed): if suppressed > 0 { object["suppressed"] = suppressed }
            }
        }
        // `time`, `level`, `msg` first, the fields after them sorted; `/` as it is. The
        // writer escapes C0 controls only; DEL, C1 and bidi controls from an event (a call id,
        // a reason) are escaped too, so a terminal showing the log is safe.
        var members: [(String, OrderedJSON)] = [("time", .string(Log.timestamp())), ("level", .string(level.rawValue)),
                                                ("msg", .string(message))]
        for (key, value) in object.sorted(by: { $0.key < $1.key }) where !Log.leadingKeys.contains(key) {
            members.append((key, OrderedJSON(loggable: value)))
        }
        let line = TerminalText.line(OrderedJSON.object(members).text)
        write(prefixesPriority ? "<\(level.syslogPriority)>" + line : line)
    }

    /// The keys every line starts with; a field of the same name is not written.
    static let leadingKeys: Set<String> = ["time", "level", "msg"]

    /// True when stdout is the stream systemd connected to the journal: `JOURNAL_STREAM` names
    /// its device and inode (`DEV:INODE`), and they are stdout's. A child that inherited the
    /// variable but writes elsewhere (a pipe, a file) gets plain lines.
    package static func stdoutIsTheJournal(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var facts = stat()
        guard fstat(STDOUT_FILENO, &facts) == 0 else { return false }
        return UInt64(facts.st_dev) == device && UInt64(facts.st_ino) == inode
    }

    package func info(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:], limited: Bool = false) {
        log(.info, message, fields(), limited: limited)
    }
    package func warn(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:], limited: Bool = false) {
        log(.warn, message, fields(), limited: limited)
    }
    package func error(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:], limited: Bool = false) {
        log(.error, message, fields(), limited: limited)
    }
    package func debug(_ message: String, _ fields: @autoclosure () -> [String: Any] = [:]) { log(.debug, message, fields()) }

    /// The fields that say what a limited line is about: the same message about another app,
    /// pool or connection is a different line.
    static let subjectFields = ["app", "credential", "environment", "connection"]

    /// A device token as logs may show it: its last 8 characters.
    package static func token(_ token: String) -> String {
        token.count <= 8 ? token : "…" + token.suffix(8)
    }

    /// Now, as every time people read is written (`DeadFormat.time`).
    private static func timestamp() -> String { DeadFormat.time(Clock.unixMs()) }
}

/// Decides whether a repeated line is written: at most once per `intervalMs` per key, counting
/// the lines dropped in between. Pure (the caller passes the time).
struct RepeatLimiter {
    struct Key: Hashable {
        let level: String
        let message: String
        let subject: [String]
    }

    enum Verdict: Equatable {
        /// Write it, mentioning the lines dropped since the last one written.
        case write(suppressed: Int)
        case drop
    }

    let intervalMs: Int64
    private var seen: [Key: (writtenAtMs: Int64, suppressed: Int)] = [:]

    init(intervalMs: Int64) {
        precondition(intervalMs >= 0, "the repeat interval is not negative")
        self.intervalMs = intervalMs
    }

    mutating func admit(_ key: Key, nowMs: Int64) -> Verdict {
        if let last = seen[key], nowMs - last.writtenAtMs < intervalMs {
            seen[key] = (last.writtenAtMs, last.suppressed + 1)
            return .drop
        }
        let suppressed = seen[key]?.suppressed ?? 0
        seen[key] = (nowMs, 0)
        return .write(suppressed: suppressed)
    }
}
