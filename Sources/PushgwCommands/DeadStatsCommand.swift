import DeadLetters
import EventLoop
import GatewayConfiguration
import JSONOutput

/// `pushgw dead stats`: how many dead letters each app has, why, how old the oldest is, and
/// what retention is about to remove.
enum DeadStatsCommand: Command {
    static let name = "stats"
    static let summary = "counts per app and reason, the oldest entry, what retention will remove"
    static let help = """
        usage: pushgw dead stats [--app A[,B…]] [--json] [--config FILE]

        For each app of the config: the number of dead letters, the count per reason, the
        oldest entry and its age, the app's retention (dead_letters.max_entries,
        max_age_days and max_megabytes) and how many entries a retention trim run now would
        remove.

          --app A[,B…]    only these apps
          --json          one JSON object: {"apps":[{"app","count","oldest":{"id","time_ms",
                          "age_s"}|null,"reasons":{REASON:N,…},"retention":{"max_entries",
                          "max_age_days","max_megabytes"},"trim_now":N}],"total":N}
          --config FILE   the config (default \(GatewayConfig.defaultFile))
        """

    typealias AppStats = DeadLetterOperations.AppStats

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, verb: name, flags: ["--json"], options: ["--config", "--app"]) else {
                context.output.out(help)
                return 0
            }
            let session = try DeadSession(verb: name, configFile: a.value("--config"), appFilter: try a.apps(), context: context)
            defer { session.close() }
            let now = Clock.unixMs()
            let stats = try session.wait { session.operations.stats(apps: session.apps, completion: $0) }
            let total = stats.reduce(0) { $0 + $1.count }
            if a.flag("--json") {
                context.output.out(json(stats, total: total, nowMs: now).text)
            } else {
                render(stats, total: total, nowMs: now).forEach(context.output.out)
            }
            return 0
        }
    }

    static func json(_ stats: [AppStats], total: Int, nowMs: Int64) -> OrderedJSON {
        .object([
            ("apps", .array(stats.map { s in
                .object([
                    ("app", .string(s.app)), ("count", .int(s.count)),
                    ("oldest", s.oldest.map { .object([("id", .string($0.id)), ("time_ms", .int($0.timeMs)),
                                                       ("age_s", .int(max(0, nowMs - $0.timeMs) / 1000))]) } ?? .null),
                    ("reasons", .object(s.reasons.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
                        .map { ($0.key, .int($0.value)) })),
                    ("retention", .object([("max_entries", .int(s.policy.maxEntries)),
                                           ("max_age_days", .int(s.policy.maxAgeSeconds / 86_400)),
                                           ("max_megabytes", .int(s.policy.maxBytes >> 20))])),
                    ("trim_now", .int(s.trimNow)),
                ])
            })),
            ("total", .int(total)),
        ])
    }

    static func render(_ stats: [AppStats], total: Int, nowMs: Int64) -> [String] {
        let rows = stats.map { s in
            [s.app, String(s.count), s.oldest.map { DeadFormat.time($0.timeMs) } ?? "-",
             s.oldest.map { DeadFormat.age(nowMs - $0.timeMs) } ?? "-", String(s.trimNow),
             s.policy.summary]
        }
        var lines = DeadFormat.table(["APP", "DEAD", "OLDEST", "AGE", "TRIM NOW", "RETENTION"], rows)
        let reasons = stats.flatMap { s in s.reasons.map { (s.app, $0.key, $0.value) } }
            .sorted { ($0.0, -$0.2, $0.1) < ($1.0, -$1.2, $1.1) }
        if !reasons.isEmpty {
            lines.append("")
            lines += DeadFormat.table(["APP", "DEAD", "REASON"], reasons.map { [$0.0, String($0.2), $0.1] })
        }
        lines.append("")
        lines.append("total: \(DeadFormat.count(total, "dead letter")) in \(DeadFormat.count(stats.count, "app"))")
        return lines
    }
}
