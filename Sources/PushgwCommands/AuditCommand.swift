import DeadLetters
import EventLoop
import GatewayConfiguration
import JSONOutput
import VisibleText

/// `pushgw audit`: the audit stream `PREFIX:audit`, newest first: every replay, purge and
/// `tokens forget`, from the command line and the console alike (docs/operations.md, "Audit").
/// Read through `DeadLetterOperations.auditTrail` in a `DeadSession`, as the console's audit page.
enum AuditCommand: Command {
    static let name = "audit"
    static let summary = "who replayed, purged or forgot what, newest first (the audit stream)"
    static let help = """
        usage: pushgw audit [--limit N] [--before ID] [--json] [--config FILE]

        Lists the audit stream PREFIX:audit, newest first: what each replay, purge and tokens
        forget changed, by whom (user, and sudo_user under sudo), when, how many of how many,
        the entries, filters and options (rate, the console's client and access). The stream
        keeps about the last 10,000 records.

          --limit N       show at most N records (default 50, at most 10000)
          --before ID     only records older than the audit entry ID (the ID column of the
                          last page: the next page)
          --json          one JSON object per line:
                          {"id","time_ms","verb","user","sudo_user","requested","done","ids",
                           "filters","options"}
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Exit status: 0 done (also when the stream is empty), 1 Redis unreachable, 2 bad usage
        or config error.

        Example: pushgw audit --limit 20
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, command: name, verb: "", flags: ["--json"],
                                                  options: ["--config", "--limit", "--before"]) else {
                context.output.out(help)
                return 0
            }
            let limit = try a.integer("--limit", in: 1...10_000, fallback: 50)
            let before = a.value("--before")
            if let before, !DeadLetterRecord.isEntryID(before) {
                throw a.usage("--before must be an audit entry id (MS-SEQ such as 1764412345000-0), not \(DeadFormat.quoted(before))")
            }
            let session = try DeadSession(command: name, verb: "", configFile: a.value("--config"), appFilter: nil,
                                          context: context)
            defer { session.close() }
            let entries = try session.wait {
                session.operations.auditTrail(count: limit + 1, before: before.map { "(" + $0 }, completion: $0)
            }
            let shown = Array(entries.prefix(limit))
            if a.flag("--json") {
                for entry in shown { context.output.out(json(entry).text) }
                return 0
            }
            guard !shown.isEmpty else {
                context.output.out(before == nil ? "no audit records" : "no audit records before \(before!)")
                return 0
            }
            let now = Clock.unixMs()
            let rows = shown.map { e in
                [e.id, DeadFormat.time(e.timeMs), DeadFormat.age(now - e.timeMs), e.verb,
                 e.user + (e.sudoUser.map { " (sudo \($0))" } ?? ""), "\(e.done)/\(e.requested)", what(e)]
            }
            for line in DeadFormat.table(["ID", "TIME", "AGE", "VERB", "USER", "DONE", "WHAT"], rows) {
                context.output.out(line)
            }
            if entries.count > limit, let last = shown.last {
                context.output.out("(the newest \(limit) shown; older ones: pushgw audit --before \(last.id))")
            }
            return 0
        }
    }

    /// The entries named (the first three), else the filters, then the options other than none.
    static func what(_ e: AuditEntry) -> String {
        var parts: [String] = []
        if !e.ids.isEmpty {
            parts.append(e.ids.prefix(3).joined(separator: ", ") + (e.ids.count > 3 ? ", … (\(e.ids.count) listed)" : ""))
        }
        if e.filters != "null" { parts.append("filters \(e.filters)") }
        if e.options != "{}" { parts.append("options \(e.options)") }
        return parts.isEmpty ? "-" : parts.joined(separator: "; ")
    }

    /// One `--json` line; the filters and options as the JSON objects they were written as.
    static func json(_ e: AuditEntry) -> OrderedJSON {
        func embedded(_ text: String, _ fallback: OrderedJSON) -> OrderedJSON {
            EmbeddedJSON(text).map { .embedded($0) } ?? fallback
        }
        return .object([("id", .string(e.id)), ("time_ms", .int(e.timeMs)), ("verb", .string(e.verb)), ("user", .string(e.user)),
                        ("sudo_user", .string(e.sudoUser)), ("requested", .int(e.requested)), ("done", .int(e.done)),
                        ("ids", .array(e.ids.map { .string($0) })),
                        ("filters", embedded(e.filters, .string(e.filters))), ("options", embedded(e.options, .string(e.options)))])
    }
}
