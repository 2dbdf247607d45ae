import DeadLetters
import EventLoop
import GatewayConfiguration
import VisibleText

/// `pushgw dead replay`: puts dead letters back on their app's calls stream, paced, marked as
/// replays, after the operator fixed what killed them.
enum DeadReplayCommand: Command {
    static let name = "replay"
    static let summary = "put dead letters back on their app's calls stream (after fixing the cause)"
    static let help = """
        usage: pushgw dead replay ID… [--app A] [--rate N/s] [--dry-run] [--config FILE]
               pushgw dead replay --all [--app A[,B…]] [--reason R] [--call ID] [--since T]
                                  [--rate N/s] [--dry-run] [--yes] [--config FILE]

        Puts each dead letter's event, unchanged, back on its app's stream PREFIX:{APP}:calls
        (fields event, replay = the dead letter's id, replays = how many times it has now been
        replayed), forgets the outcome recorded for its call id so the router routes it again,
        and deletes the dead letter — one atomic step per dead letter. If the event dies again,
        its new dead letter keeps the earlier attempts and its replay count grows.
        Fix the cause first (the app's key, topic or config) and restart the gateway with it.
        The router never sends a VoIP push after the call's deadline: a replayed call whose
        deadline passed gets the missed-call alert (or ends expired).

          ID…             dead letters as pushgw dead list prints them (APP/ID names the app)
          --all           every dead letter that passes the filters (the same as list shows)
          --app A[,B…]    only these apps
          --reason R      with --all: reasons equal to R or starting with it
          --call ID       with --all: the dead letters of this call id
          --since T       with --all: dead at or after T: \(TimeArgument.forms)
          --rate N/s      replays per second at most (default \(ReplayRate.default); N/m and N/h
                          too; from 1/h to 10000/s); whatever the rate, a replay waits while its
                          app's calls stream holds \(DeadLetterOperations.replayYieldsAtUnread) entries not read yet
          --dry-run       print what would be replayed and change nothing
          --yes           do not ask: --all asks for confirmation on a terminal and, without
                          one, refuses (exit 2) unless --yes is given
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Warns first (on stderr) of each app whose newest dead letters say APNs refused its
        credential (apns_credentials): the replayed calls will likely die again; fix the
        credential (and reload) first.
        Writes an audit record (who, when, which, how many, the filters) to stderr and to the
        stream PREFIX:audit. Exit status: 0 all replayed, 1 some were not (gone meanwhile, Redis
        failed, not confirmed), 2 bad usage or config error.

        Examples: pushgw dead replay 1764412345000-0 1764412346000-0
                  pushgw dead replay --all --app acme --reason apns_credentials --rate 20/s --yes
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, verb: name, flags: ["--all", "--dry-run", "--yes"],
                                                  options: ["--config", "--app", "--reason", "--call", "--since", "--rate"],
                                                  maxPositionals: 100_000) else {
                context.output.out(help)
                return 0
            }
            let selection = try a.selection(action: "replay", filterOptions: ["--reason", "--call", "--since"])
            var rate = ReplayRate.default
            if let text = a.value("--rate") {
                guard let parsed = ReplayRate(parsing: text) else {
                    throw a.usage("--rate must be \(ReplayRate.forms), not \(DeadFormat.quoted(text))")
                }
                rate = parsed
            }
            let change = try a.change(selection, action: "replay", asks: .withAll, interactive: context.terminal.isInteractive)
            let session = try DeadSession(verb: name, configFile: a.value("--config"), appFilter: change.filter.apps, context: context)
            defer { session.close() }
            let operations = session.operations
            // Replaying while APNs refuses an app's credential: said before anything runs.
            // (An id named without its app may be of any app the filter allows.)
            let named = change.references.map(\.app)
            let apps = change.all || named.contains(nil) ? change.filter.apps ?? operations.policies.keys.sorted()
                : Array(Set(named.compactMap { $0 })).sorted()
            for app in apps {
                if case let .success(record?) = session.wait({ operations.newestCredentialRefusal(app: app, completion: $0) }) {
                    context.output.err("pushgw dead replay: warning: " + TerminalText.field(DeadLetterOperations.credentialRefusalWarning(
                        app: app, reason: record.reason, atMs: record.deadAtMs, nowMs: change.nowMs)))
                }
            }
            let replay = operations.replayAudited(rate: rate, by: DeadSession.actor(context), filter: change.all ? change.filter : nil)
            let selected = try session.bulk(change, done: "replayed", dryRunNote: " at \(rate)", context: context, line: { r in
                "would replay \(TerminalText.field(r.app))/\(r.id)  call \(TerminalText.field(r.callID ?? "-"))  "
                    + "\(TerminalText.field(r.reason))  (replay #\(r.replays + 1)): " + operations.forecast(r, nowMs: change.nowMs).text(nowMs: change.nowMs)
            }, question: { "Replay \($0) to their calls streams at \(rate)?" }, act: { page, proceed in
                replay.replay(page.map { DeadLetterReference(app: $0.app, id: $0.id) }, onStep: { _, line in
                    context.output.out(TerminalText.field(line))
                }, completion: proceed)
            })
            guard let selected else { return 0 }
            let summary = replay.summary
            let replayed = summary.replayed
            let notDone = [summary.gone > 0 ? "\(summary.gone) gone meanwhile" : nil,
                           summary.skipped > 0 ? "\(summary.skipped) not replayable" : nil].compactMap { $0 }
            try session.finishAudited(replay.record(requested: selected.count, verb: session.auditVerb), failure: summary.failure,
                                      summary: "replayed \(replayed.count) of \(selected.what)"
                                          + (notDone.isEmpty ? "" : " (" + notDone.joined(separator: ", ") + ")"),
                                      context: context)
            return replayed.count == selected.count ? 0 : 1
        }
    }
}
