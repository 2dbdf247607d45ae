import DeadLetters
import EventLoop
import GatewayConfiguration

/// `pushgw dead list`: the newest dead letters, filtered, as a table or JSON lines.
enum DeadListCommand: Command {
    static let name = "list"
    static let summary = "the newest dead letters as a table (--json: one object per line)"
    static let help = """
        usage: pushgw dead list [--app A[,B…]] [--reason R] [--call ID] [--since T] [--older-than T]
                                [--limit N] [--json] [--config FILE]

        Lists dead letters, newest first, across the apps of the config: id, app, age, reason,
        call id, attempts (all rounds) and replays.

          --app A[,B…]    only these apps
          --reason R      only reasons equal to R or starting with it
                          (apns_credentials matches "apns_credentials: InvalidProviderToken")
          --call ID       only the dead letters of this call id
          --since T       only those dead at or after T: \(TimeArgument.forms)
          --older-than T  only those dead before T (the same forms: 3d is three days ago), such
                          as what retention's max_age_days is about to remove
          --limit N       show at most N (default 50, at most 10000)
          --json          one JSON object per line:
                          {"id","app","time_ms","age_s","reason","call_id","type","calls_entry",
                           "attempts","replays","first_failure_ms","last_failure_ms"}
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Example: pushgw dead list --app acme --reason apns_credentials --since 2h
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, verb: name, flags: ["--json"],
                                                  options: ["--config", "--app", "--reason", "--call", "--since", "--older-than", "--limit"]) else {
                context.output.out(help)
                return 0
            }
            let now = Clock.unixMs()
            let filter = try a.filter(nowMs: now)
            let limit = try a.integer("--limit", in: 1...10_000, fallback: 50)
            let session = try DeadSession(verb: name, configFile: a.value("--config"), appFilter: filter.apps, context: context)
            defer { session.close() }
            let found = try session.newest(filter: filter, limit: limit + 1)
            let shown = Array(found.prefix(limit))
            if a.flag("--json") {
                for record in shown { context.output.out(record.summaryJSON(nowMs: now).text) }
                return 0
            }
            guard !shown.isEmpty else {
                context.output.out("no dead letters\(filter == DeadLetterFilter(apps: filter.apps) ? "" : " match") in \(describe(session.apps))")
                return 0
            }
            let rows = shown.map { r in
                [r.id, r.app, DeadFormat.age(now - r.deadAtMs), r.reason, r.callID ?? "-", String(r.attempts.count), String(r.replays)]
            }
            for line in DeadFormat.table(["ID", "APP", "AGE", "REASON", "CALL", "ATTEMPTS", "REPLAYS"], rows) {
                context.output.out(line)
            }
            if found.count > limit {
                context.output.out("(the newest \(limit) shown; more match: raise --limit or narrow the filters)")
            }
            return 0
        }
    }

    static func describe(_ apps: [String]) -> String {
        apps.count == 1 ? "app \(apps[0])" : "apps \(apps.joined(separator: ", "))"
    }
}
