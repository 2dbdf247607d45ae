import CallStorage
import DeadLetters
import EventLoop
import Foundation
import GatewayConfiguration
import JSONOutput
import RedisClient
import VisibleText

/// `pushgw calls show APP/ID`: what happened to one call, in one command (docs/operations.md,
/// "Calls"): its result (the result key), every attempt, its dead letters, a retry it waits
/// for, a cancel, and whether its tokens are known to be invalid. Everything is read by
/// `CallLookup`, the reading the console's search shares, in a `DeadSession`.
enum CallsCommand: Command {
    static let name = "calls"
    static let summary = "what happened to one call: its result, attempts, dead letter and tokens"
    static let help = """
        usage: pushgw calls show APP/ID [--token HEX[,HEX]] [--json] [--config FILE]

        Shows what pushgw knows about call ID of app APP (the event's "id"):
          result       the outcome recorded under PREFIX:{APP}:result:ID (kept for the app's
                       result window, 24 h by default: apps.APP.retention): delivered
                       by VoIP or alert (and why the alert), undeliverable, expired, cancelled,
                       dead-lettered (and why), the calls entry it answers and the latency; or
                       the gateway routing it right now
          attempts     every push of the result: time, channel, APNs' status and reason or the
                       transport error, apns-id
          retry        the retry the call waits for, and when it is due
          cancel       whether a call_cancelled came for it, and its own result
          dead letters the call's dead letters, with their attempts (pushgw dead show ID for all)
          tokens       for each token known (the dead letter's or the retry's event, and --token):
                       whether calls skip it as known invalid, since when, until when

          --token HEX[,HEX]  also tell the state of these tokens (results do not keep tokens)
          --json             one JSON object: {"app","id","state","result","in_flight_gateway",
                             "attempts","retry","cancelled","cancel_result","dead_letters","tokens"}
          --config FILE      the config (default \(GatewayConfig.defaultFile))

        state is one of finished, in_flight, waiting_for_retry, dead_lettered, cancelled, unknown.

        Exit status: 0 the call is known, 1 nothing is known about it (never seen, its result
        older than its result window and no dead letter) or Redis unreachable, 2 bad usage or config error.

        Example: pushgw calls show acme/call-7f3a91
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("calls needs a verb: show", verb: name))
        }
        if ["--help", "-h", "help"].contains(sub) {
            context.output.out(help)
            return 0
        }
        guard sub == "show" else {
            return context.usage(UsageError("unknown calls verb \(DeadFormat.quoted(TerminalText.field(sub))) (known: show)", verb: name))
        }
        return DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(Array(args.dropFirst()), command: name, verb: "show", flags: ["--json"],
                                                  options: ["--config", "--token"], maxPositionals: 1) else {
                context.output.out(help)
                return 0
            }
            guard let text = a.positionals.first else { throw a.usage("name the call: calls show APP/ID") }
            guard let slash = text.firstIndex(of: "/"), slash != text.startIndex, text.index(after: slash) != text.endIndex else {
                throw a.usage("\(DeadFormat.quoted(TerminalText.field(text))) is not APP/ID (the app of the config, a slash, the call's id)")
            }
            let app = String(text[..<slash])
            let callID = String(text[text.index(after: slash)...])
            var extra: [String] = []
            if let list = a.value("--token") {
                for item in list.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let token = TokenStore.normalized(String(item)) else {
                        throw a.usage("--token: \(DeadFormat.quoted(TerminalText.field(String(item)))) is not a device token (hex)")
                    }
                    extra.append(token)
                }
            }
            let session = try DeadSession(command: name, verb: "show", configFile: a.value("--config"), appFilter: [app], context: context)
            defer { session.close() }
            let lookup = CallLookup(operations: session.operations)
            let view = try session.wait { lookup.call(app: app, callID: callID, extraTokens: extra, completion: $0) }
            if a.flag("--json") {
                context.output.out(view.json(nowMs: Clock.unixMs()).text)
            } else {
                view.lines(nowMs: Clock.unixMs()).forEach(context.output.out)
            }
            guard view.isKnown else {
                throw .failed("pushgw calls show: nothing known about call \(TerminalText.field(callID)) of app \(TerminalText.field(app)): "
                              + "no result (kept for the app's result window), no dead letter, no retry, no cancel")
            }
            return 0
        }
    }
}

/// How `calls show` prints what `CallLookup` found.
extension CallReport {
    func lines(nowMs: Int64) -> [String] {
        func at(_ ms: Int64) -> String { "\(DeadFormat.time(ms)) (\(DeadFormat.age(nowMs - ms)) ago)" }
        func field(_ label: String, _ value: String) -> String { "  " + (label + ":").padding(toLength: 14, withPad: " ", startingAt: 0) + value }
        var lines = ["call \(TerminalText.field(callID)) of app \(TerminalText.field(app))"]
        if let r = result {
            lines.append(field("result", TerminalText.field(CallReport.summary(r))))
            if let entry = r.entry {
                let when = DeadLetterRecord.timeMs(ofID: entry).map { ", added \(at($0))" } ?? ""
                lines.append(field("calls entry", TerminalText.field(entry) + when))
            }
            if let latency = r.latencyMs { lines.append(field("latency", "\(latency) ms from the XADD to APNs' answer")) }
            if r.attempts.isEmpty {
                lines.append("  attempts: none (nothing was sent)")
            } else {
                lines.append("  attempts (\(r.attempts.count)):")
                lines += DeadFormat.table(["    TIME", "CHANNEL", "STATUS", "REASON", "APNS-ID"], r.attempts.map { a in
                    ["    " + (a.timeMs.map(DeadFormat.time) ?? "-"), a.channel ?? "-", a.status.map(String.init) ?? "-",
                     a.reason ?? a.error ?? "-", a.apnsID ?? "-"]
                })
            }
        } else if let none = noResult {
            lines.append(field("result", TerminalText.field(none)))
        }
        if let retry {
            lines.append(field("retry", "waiting, due \(DeadFormat.time(retry.dueAtMs))"
                               + (retry.dueAtMs > nowMs ? " (in \(DeadFormat.age(retry.dueAtMs - nowMs)))" : " (due now)")
                               + ", replaces calls entry \(TerminalText.field(retry.retryID))"))
        }
        if let cancel { lines.append(field("cancel", TerminalText.field(cancel))) }
        if deadLetters.isEmpty {
            lines.append(field("dead letter", "none"))
        } else {
            for d in deadLetters {
                lines.append(field("dead letter", "\(TerminalText.field(d.app))/\(d.id) \(at(d.deadAtMs)): \(TerminalText.field(d.reason)); "
                                   + "\(DeadFormat.count(d.attempts.count, "attempt")), \(DeadFormat.count(d.replays, "replay"))"
                                   + " (pushgw dead show \(TerminalText.field(d.app))/\(d.id))"))
            }
        }
        if tokens.isEmpty {
            lines.append(field("tokens", "none known (results keep no token: --token HEX tells a token's state)"))
        } else {
            lines.append("  tokens:")
            for t in tokens {
                lines.append("    \(t.channel.rawValue) …\(t.token.suffix(8)) (from the \(TerminalText.field(t.source))): \(t.stateText)")
            }
        }
        return lines
    }

    func json(nowMs: Int64) -> OrderedJSON {
        func embedded(_ text: String?) -> OrderedJSON { text.flatMap(EmbeddedJSON.init).map { .embedded($0) } ?? .string(text) }
        let retryJSON: OrderedJSON = retry.map { .object([("due_ms", .int($0.dueAtMs)), ("retry_id", .string($0.retryID))]) } ?? .null
        return .object([
            ("app", .string(app)), ("id", .string(callID)), ("state", .string(state)),
            ("result", embedded(stored.resultJSON)), ("in_flight_gateway", .string(stored.inFlightGateway)),
            ("first_outcome", .string(stored.compactOutcome)),
            ("attempts", .array((result?.attempts ?? []).map(\.json))),
            ("retry", retryJSON), ("cancelled", .bool(stored.cancelled)), ("cancel_result", embedded(stored.cancelResult)),
            ("dead_letters", .array(deadLetters.map { $0.summaryJSON(nowMs: nowMs) })),
            ("tokens", .array(tokens.map { t in
                .object([("channel", .string(t.channel.rawValue)), ("token", .string(t.token)), ("source", .string(t.source)),
                         ("known_invalid_since_ms", .int(t.mark?.sinceMs)), ("mark_expires_in_ms", .int(t.mark?.expiresInMs))])
            })),
        ])
    }
}
