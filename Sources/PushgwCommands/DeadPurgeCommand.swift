import DeadLetters
import GatewayConfiguration
import VisibleText

/// `pushgw dead purge`: deletes dead letters, after confirmation.
enum DeadPurgeCommand: Command {
    static let name = "purge"
    static let summary = "delete dead letters (asks for confirmation)"
    static let help = """
        usage: pushgw dead purge ID… [--app A] [--dry-run] [--yes] [--config FILE]
               pushgw dead purge --all [--app A[,B…]] [--reason R] [--call ID] [--since T]
                                 [--older-than D] [--dry-run] [--yes] [--config FILE]

        Deletes dead letters for good (and the replay history their events carried). Asks for
        confirmation on a terminal; without a terminal it refuses (exit 2) unless --yes is given.

          ID…             dead letters as pushgw dead list prints them (APP/ID names the app)
          --all           every dead letter that passes the filters (the same as list shows)
          --app A[,B…]    only these apps
          --reason R      with --all: reasons equal to R or starting with it
          --call ID       with --all: the dead letters of this call id
          --since T       with --all: dead at or after T
          --older-than D  with --all: dead before D ago, or before a date
                          (T and D: \(TimeArgument.forms))
          --dry-run       print what would be deleted and change nothing
          --yes           do not ask
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Writes an audit record (who, when, which, how many, the filters) to stderr and to the
        stream PREFIX:audit. Exit status: 0 purged, 1 failed or not confirmed, 2 bad usage or
        config error.

        Examples: pushgw dead purge 1764412345000-0
                  pushgw dead purge --all --app acme --reason invalid_event --older-than 3d --yes
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, verb: name, flags: ["--all", "--dry-run", "--yes"],
                                                  options: ["--config", "--app", "--reason", "--call", "--since", "--older-than"],
                                                  maxPositionals: 100_000) else {
                context.output.out(help)
                return 0
            }
            let selection = try a.selection(action: "purge", filterOptions: ["--reason", "--call", "--since", "--older-than"])
            let change = try a.change(selection, action: "purge", asks: .always, interactive: context.terminal.isInteractive)
            let session = try DeadSession(verb: name, configFile: a.value("--config"), appFilter: change.filter.apps, context: context)
            defer { session.close() }
            let (all, filter) = (change.all, change.filter)
            var summary = DeadLetterOperations.PurgeSummary()
            let selected = try session.bulk(change, done: "purged", context: context, line: { r in
                "would purge \(TerminalText.field(r.app))/\(r.id)  \(DeadFormat.age(change.nowMs - r.deadAtMs)) old  "
                    + "call \(TerminalText.field(r.callID ?? "-"))  \(TerminalText.field(r.reason))"
            }, question: { "Delete \($0)\(all ? " matching \(filter.json.text)" : "") for good?" }, act: { page, proceed in
                session.operations.purge(page) { part in
                    summary.add(part)
                    proceed(part.failure == nil)
                }
            })
            guard let selected else { return 0 }
            try session.finishAudited(ids: summary.ids, requested: selected.count, done: summary.purged,
                                      filter: all ? filter : nil, failure: summary.failure,
                                      summary: "purged \(summary.purged) of \(selected.what)", context: context)
            return 0
        }
    }
}
