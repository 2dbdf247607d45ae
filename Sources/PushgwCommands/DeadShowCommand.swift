import DeadLetters
import EventLoop
import GatewayConfiguration
import VisibleText

/// `pushgw dead show ID`: one dead letter's whole history, for a person or a script.
enum DeadShowCommand: Command {
    static let name = "show"
    static let summary = "one dead letter's whole history: the event, every attempt, the reason"
    static let help = """
        usage: pushgw dead show ID [--app A] [--json] [--config FILE]

        Shows the dead letter ID (as pushgw dead list prints it; APP/ID names the app too):
        the reason, the call and the calls entry it came in (what the producer's XADD
        returned), when it failed first and last, how often it was replayed, every
        attempt on its own line (time, round, channel, the token's last 8 characters, APNs'
        status and reason or the transport error, apns-id) and the event, pretty-printed.
        A dead letter of a replayed event carries the attempts of its earlier rounds.

          --app A         look in app A only (needed when two apps have the same id)
          --json          one JSON object: the keys of list --json, then "rounds", "attempts"
                          (each with "round") and "event" (the event's JSON, or its text when
                          it is not JSON; for bytes that are not UTF-8, the text with U+FFFD
                          and "event_base64", the exact bytes)
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Example: pushgw dead show 1764412345000-0
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, verb: name, flags: ["--json"], options: ["--config", "--app"],
                                                  maxPositionals: 1) else {
                context.output.out(help)
                return 0
            }
            guard let reference = try a.references().first else { throw a.usage("name the dead letter to show: show ID") }
            let apps = try a.apps()
            guard apps == nil || apps!.count == 1 else { throw a.usage("show looks in one app: --app A") }
            let session = try DeadSession(verb: name, configFile: a.value("--config"), appFilter: apps, context: context)
            defer { session.close() }
            let record = try session.find([reference])[0]
            let now = Clock.unixMs()
            if a.flag("--json") {
                context.output.out(record.detailJSON(nowMs: now).text)
            } else {
                render(record, ringTimeoutMs: session.operations.ringTimeoutMs(record.app), nowMs: now).forEach(context.output.out)
            }
            return 0
        }
    }

    /// The human rendering: a header block, the rounds of a replayed event, one line per
    /// attempt, then the event.
    static func render(_ r: DeadLetterRecord, ringTimeoutMs: Int64, nowMs: Int64) -> [String] {
        func at(_ ms: Int64?) -> String { ms.map { "\(DeadFormat.time($0)) (\(DeadFormat.age(nowMs - $0)) ago)" } ?? "-" }
        var lines = ["dead letter \(r.id) of app \(TerminalText.field(r.app))"]
        let call = r.callID.map { id in r.eventType.map { "\(TerminalText.field(id)) (\(TerminalText.field($0)))" } ?? TerminalText.field(id) }
            ?? "- (the event has no readable id)"
        var header: [(String, String)] = [
            ("reason", TerminalText.field(r.reason)),
            ("call", call),
            ("calls entry", r.callsEntry.map(TerminalText.field) ?? "-"),
            ("dead since", at(r.deadAtMs)),
            ("first failure", at(r.firstFailureMs)),
            ("last failure", at(r.lastFailureMs)),
            ("replays", String(r.replays)),
        ]
        if let device = r.device {
            header.insert(("device", TerminalText.field(device) + " (this device's ring alone: the call has its own result)"), at: 3)
        }
        header.append(("deadline", TerminalText.field(DeadFormat.deadline(r, ringTimeoutMs: ringTimeoutMs, nowMs: nowMs))))
        for (label, value) in header {
            lines.append("  " + (label + ":").padding(toLength: 15, withPad: " ", startingAt: 0) + value)
        }
        if r.rounds.count > 1 {
            lines.append("  rounds (a replayed event keeps the history of its earlier dead letters):")
            let rows = r.rounds.map { round in
                ["    \(round.round)", round.round == r.rounds.count ? "\(round.deadEntryID) (this one)" : "\(round.deadEntryID) (replayed)",
                 DeadFormat.count(round.attempts.count, "attempt"), round.reason]
            }
            lines += DeadFormat.table(["    ROUND", "DEAD LETTER", "ATTEMPTS", "REASON"], rows)
        }
        let attempts = r.attempts
        if attempts.isEmpty {
            lines.append("  attempts: none (nothing was sent)")
        } else {
            lines.append("  attempts (\(attempts.count)):")
            let rows = attempts.map { a in
                ["    " + (a.timeMs.map(DeadFormat.time) ?? "-"), String(a.round), a.channel ?? "-", a.token ?? "-",
                 a.status.map(String.init) ?? "-", a.reason ?? a.error ?? "-", a.apnsID ?? "-"]
            }
            lines += DeadFormat.table(["    TIME", "ROUND", "CHANNEL", "TOKEN", "STATUS", "REASON", "APNS-ID"], rows)
        }
        lines.append("  event:" + (DeadFormat.cutNote(r).map { " (\($0))" } ?? ""))
        // Each line of the event as a field: its strings may hold control and bidi characters.
        if let text = r.eventText, let pretty = PrettyJSON.pretty(text, margin: "    ") {
            lines += ("    " + pretty).split(separator: "\n", omittingEmptySubsequences: false).map { TerminalText.field(String($0)) }
        } else {
            lines.append(r.eventText == nil ? "    (not UTF-8; each invalid byte is shown as \\xNN)" : "    (not JSON, shown as stored)")
            lines += r.event.split(separator: 0x0A, omittingEmptySubsequences: false).map { "    " + TerminalText.field(bytes: Array($0)) }
        }
        return lines
    }
}
