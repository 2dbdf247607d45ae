import CallStorage
import DeadLetters
import Foundation
import GatewayConfiguration
import JSONOutput

/// `pushgw config check [--config F | F] [--json] [--rate N/s]`: validates a config file and
/// prints every problem, one per line, with its JSON path and fix; with `--rate`, the Redis
/// memory its retention windows hold at that call rate (`RetentionMemory`).
enum ConfigCommand: Command {
    static let name = "config"
    static let summary = "check a config file and name every problem"
    static let help = """
        usage: pushgw config check [--config FILE | FILE] [--json] [--rate N/s]

        Reads the config (default \(GatewayConfig.defaultFile)), applies the PUSHGW_* environment
        overrides, and prints every problem on its own line:
          FILE: JSON.PATH: [warning: ]PROBLEM; FIX
        followed by a summary line. Key files are checked by their header only; no secret is
        ever printed.

          --config FILE   the config file (or give it as the only argument)
          --json          print one JSON object instead:
                          {"file":…,"ok":…,"errors":N,"warnings":N,"problems":[{"severity":…,
                           "path":…,"problem":…,"fix":…}]}
          --rate N/s      also print the Redis memory each app's retention windows
                          (apps.APP.retention) hold once N calls a second have come to the
                          app for the longest of them, by kind of key: estimates from
                          measured bytes per key (docs/operations.md, Redis sizing); with
                          --json under "redis_memory"

        Exit status: 0 when the config is usable (warnings alone do not fail it), 1 when it has
        errors, 2 on bad usage.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("config needs a subcommand: check", verb: name))
        }
        switch sub {
        case "--help", "-h", "help":
            context.output.out(help)
            return 0
        case "check":
            return check(Array(args.dropFirst()), context: context)
        default:
            return context.usage(UsageError("unknown config subcommand \"\(sub)\" (known: check)", verb: name))
        }
    }

    private static func check(_ args: [String], context: CommandContext) -> Int32 {
        let arguments: Arguments
        do {
            switch try Arguments.parse(args, verb: name, flags: ["--json"], options: ["--config", "--rate"], maxPositionals: 1) {
            case .help:
                context.output.out(help)
                return 0
            case let .arguments(parsed):
                arguments = parsed
            }
        } catch {
            return context.usage(error)
        }
        if arguments.values["--config"] != nil && !arguments.positionals.isEmpty {
            return context.usage(UsageError("give the config file either with --config or as an argument, not both", verb: name))
        }
        var rate: Double?
        if let text = arguments.values["--rate"] {
            guard let n = callRate(text) else {
                return context.usage(UsageError("--rate \"\(text)\" is not a call rate: write calls per second, such as 1000/s "
                                                + "(more than 0, at most \(Int(maxCallRate)))", verb: name))
            }
            rate = n
        }
        let file = arguments.values["--config"] ?? arguments.positionals.first ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment,
                                        workingDirectory: context.workingDirectory)
        let memory = rate.flatMap { rate in report.config.map { RetentionMemoryReport(config: $0, callsPerSecond: rate) } }
        if arguments.flags.contains("--json") {
            context.output.out(jsonReport(report, file: file, memory: memory))
        } else {
            report.problems.forEach { context.output.out($0.description) }
            memory?.lines.forEach { context.output.out($0) }
            if rate != nil && memory == nil { context.output.out("Redis memory not estimated: the config is not usable") }
            context.output.out(summary(report, file: file))
        }
        return report.errors.isEmpty ? 0 : 1
    }

    /// The highest `--rate`: well above what one deployment routes, low enough that no product overflows.
    static let maxCallRate = 10_000_000.0

    /// `--rate`'s value: calls per second, `1000/s` or `1000` (a fraction too); nil unless
    /// more than 0 and at most `maxCallRate`.
    static func callRate(_ text: String) -> Double? {
        let number = text.hasSuffix("/s") ? String(text.dropLast(2)) : text
        guard let n = Double(number), n.isFinite, n > 0, n <= maxCallRate else { return nil }
        return n
    }

    static func summary(_ report: ConfigReport, file: String) -> String {
        let warnings = report.warnings.count
        let warningText = warnings == 1 ? "1 warning" : "\(warnings) warnings"
        if let config = report.config {
            let fcm = config.fcmCredentials.isEmpty ? "" : " (\(config.fcmCredentials.count) of them FCM)"
            let count = config.credentials.count + config.fcmCredentials.count
            return "\(file): usable: \(config.apps.count) apps, \(count) credentials\(fcm), \(warningText)"
        }
        let errors = report.errors.count
        return "\(file): not usable: \(errors == 1 ? "1 error" : "\(errors) errors"), \(warningText)"
    }

    static func jsonReport(_ report: ConfigReport, file: String, memory: RetentionMemoryReport? = nil) -> String {
        let problems = report.problems.map {
            OrderedJSON.object([("severity", .string($0.severity.rawValue)), ("path", .string($0.path)),
                                ("problem", .string($0.problem)), ("fix", .string($0.fix))])
        }
        var fields: [(String, OrderedJSON)] = [("file", .string(file)), ("ok", .bool(report.errors.isEmpty)),
                                               ("errors", .int(Int64(report.errors.count))),
                                               ("warnings", .int(Int64(report.warnings.count))), ("problems", .array(problems))]
        if let memory { fields.append(("redis_memory", memory.json)) }
        return OrderedJSON.object(fields).text
    }
}

/// What `config check --rate` prints: per app, the Redis memory its retention windows hold at
/// the rate, by kind of key (`RetentionMemory.rows`), and the app's total.
struct RetentionMemoryReport {
    let callsPerSecond: Double
    /// By app id, in order.
    let apps: [(id: String, rows: [RetentionMemory.Row])]

    init(config: GatewayConfig, callsPerSecond: Double) {
        self.callsPerSecond = callsPerSecond
        apps = config.apps.keys.sorted().map { ($0, RetentionMemory.rows(config.apps[$0]!.retention, callsPerSecond: callsPerSecond)) }
    }

    var lines: [String] {
        let rate = Self.number(callsPerSecond)
        var out = ["Redis memory held at \(rate) calls/s to each app, by kind of key (estimates from measured bytes per key; "
                   + "docs/operations.md, Redis sizing):"]
        let header = ["app", "key", "bytes/key", "keys/call", "kept", "memory"]
        var table = [header]
        for app in apps {
            for row in app.rows {
                table.append([app.id, row.key, "\(row.bytesPerKey) B", Self.number(row.keysPerCall), RetentionWindows.spoken(row.seconds),
                              Self.bytes(row.bytes)])
            }
            table.append([app.id, "total", "", "", "", Self.bytes(app.rows.reduce(0) { $0 + $1.bytes })])
        }
        let widths = header.indices.map { column in table.map { $0[column].count }.max() ?? 0 }
        for row in table {
            let cells = row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            out.append("  " + cells.joined(separator: "  "))
        }
        return out
    }

    var json: OrderedJSON {
        .object([("calls_per_second", .double(callsPerSecond)),
                 ("apps", .object(apps.map { app in
                     (app.id, .object([
                        ("keys", .array(app.rows.map { row in
                            .object([("key", .string(row.key)), ("bytes_per_key", .int(Int64(row.bytesPerKey))),
                                     ("keys_per_call", .double(row.keysPerCall)), ("seconds", .int(Int64(row.seconds))),
                                     ("bytes", .int(Int64(row.bytes.rounded())))])
                        })),
                        ("total_bytes", .int(Int64(app.rows.reduce(0) { $0 + $1.bytes }.rounded())))]))
                 }))])
    }

    /// `1000`, `0.01`, `2.5`: a whole number without its fraction.
    static func number(_ n: Double) -> String {
        n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
    }

    /// Bytes in decimal units, three significant figures: `531 MB`, `47.5 GB`, `1.2 TB`.
    static func bytes(_ n: Double) -> String {
        let units = ["B", "kB", "MB", "GB", "TB", "PB"]
        var value = n
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        let text = value >= 100 || unit == 0 ? String(format: "%.0f", value)
            : value >= 10 ? String(format: "%.1f", value) : String(format: "%.2f", value)
        return text + " " + units[unit]
    }
}
