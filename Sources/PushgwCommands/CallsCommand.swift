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
/// for, a cancel, and whether its tokens are known to be invalid. Everything is read through
/// the stores of CallStorage (`CallHistoryStore`, `RetrySchedule.pending`, `TokenStore`) and
/// the dead-letter operations, in a `DeadSession`.
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

    /// Dead letters of the call shown at most.
    static let deadLettersShown = 10

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
                    guard let token = TokensCommand.normalized(String(item)) else {
                        throw a.usage("--token: \(DeadFormat.quoted(TerminalText.field(String(item)))) is not a device token (hex)")
                    }
                    extra.append(token)
                }
            }
            let session = try DeadSession(command: name, verb: "show", configFile: a.value("--config"), appFilter: [app], context: context)
            defer { session.close() }
            let view = try read(app: app, callID: callID, extraTokens: extra, session: session)
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

    /// Everything Redis holds about the call, read one store after the other.
    static func read(app: String, callID: String, extraTokens: [String], session: DeadSession) throws(DeadFailure) -> CallView {
        let keys = AppKeys(prefix: session.config.redis.prefix, app: app)
        let stored = try session.wait { CallHistoryStore(topology: session.topology).read(keys, callID: callID, completion: $0) }
        let dead = try session.newest(filter: DeadLetterFilter(apps: [app], callID: callID), limit: deadLettersShown)
        let schedule = RetrySchedule(topology: session.topology, config: .init(prefix: session.config.redis.prefix))
        let retry = try session.wait { schedule.pending(keys, callID: callID, completion: $0) }

        // The tokens, and where each was learnt: the dead letters' and the retry's events, then --token.
        var tokens: [(channel: TokenChannel?, token: String, source: String)] = []
        func add(_ channel: TokenChannel?, _ token: String?, _ source: String) {
            guard let token = token.flatMap(TokensCommand.normalized),
                  !tokens.contains(where: { $0.token == token && ($0.channel == channel || $0.channel == nil) }) else { return }
            tokens.append((channel, token, source))
        }
        for record in dead {
            add(.voip, record.voipToken, "dead letter \(record.id)")
            add(.alert, record.alertToken, "dead letter \(record.id)")
        }
        if let retry, let event = (try? JSONSerialization.jsonObject(with: Data(retry.event))) as? [String: Any] {
            add(.voip, event["voip_token"] as? String, "scheduled retry")
            add(.alert, event["alert_token"] as? String, "scheduled retry")
        }
        for token in extraTokens { add(nil, token, "--token") }
        let store = TokenStore(topology: session.topology)
        var states: [CallView.TokenState] = []
        for t in tokens {
            let marks = try session.wait { store.marks(keys, token: t.token, completion: $0) }
            for channel in t.channel.map({ [$0] }) ?? TokenChannel.apns {
                states.append(CallView.TokenState(channel: channel, token: t.token, source: t.source, mark: marks[channel]))
            }
        }
        return CallView(app: app, callID: callID, stored: stored, result: stored.resultJSON.flatMap(RecordedResult.init(json:)),
                        retry: retry, deadLetters: dead, tokens: states)
    }
}

/// What `calls show` found about one call, and how it prints it. Plain data.
struct CallView {
    struct TokenState {
        let channel: TokenChannel
        let token: String
        /// Where the token was learnt: `dead letter ID`, `scheduled retry`, `--token`.
        let source: String
        let mark: TokenStore.Mark?
    }

    let app: String
    let callID: String
    let stored: CallHistoryStore.Keys
    let result: RecordedResult?
    let retry: ScheduledRetry?
    let deadLetters: [DeadLetterRecord]
    let tokens: [TokenState]

    /// Anything at all: a result or claim, a dead letter, a retry, a cancel.
    var isKnown: Bool {
        stored.result != nil || stored.cancelResult != nil || stored.cancelled || retry != nil || !deadLetters.isEmpty
    }

    /// `finished`, `in_flight`, `waiting_for_retry`, `dead_lettered`, `cancelled` or `unknown`.
    var state: String {
        if let result { return result.outcome == "dead_lettered" ? "dead_lettered" : "finished" }
        if stored.inFlightGateway != nil { return "in_flight" }
        if retry != nil { return "waiting_for_retry" }
        if !deadLetters.isEmpty { return "dead_lettered" }
        if stored.cancelled || stored.cancelResult != nil { return "cancelled" }
        return "unknown"
    }

    func lines(nowMs: Int64) -> [String] {
        func at(_ ms: Int64) -> String { "\(DeadFormat.time(ms)) (\(DeadFormat.age(nowMs - ms)) ago)" }
        func field(_ label: String, _ value: String) -> String { "  " + (label + ":").padding(toLength: 14, withPad: " ", startingAt: 0) + value }
        var lines = ["call \(TerminalText.field(callID)) of app \(TerminalText.field(app))"]
        if let r = result {
            var what = r.outcome
            if let cause = r.cause { what += " (cause \(cause))" }
            if let reason = r.reason { what += ": \(reason)" }
            if let channel = r.channel { what += ", by \(channel)" + (r.apnsID.map { " apns-id \($0)" } ?? "") }
            if let env = r.environmentMismatch { what += ", accepted in \(env) (the other environment)" }
            lines.append(field("result", TerminalText.field(what)))
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
        } else if let gateway = stored.inFlightGateway {
            lines.append(field("result", "none yet: gateway \(TerminalText.field(gateway)) is routing it now"))
        } else if stored.result != nil {
            lines.append(field("result", "unreadable: the result key holds no result JSON"))
        } else {
            lines.append(field("result", "none under its result key (never seen, not routed yet, older than the result window, or an invalid event)"))
        }
        if let retry {
            lines.append(field("retry", "waiting, due \(DeadFormat.time(retry.dueAtMs))"
                               + (retry.dueAtMs > nowMs ? " (in \(DeadFormat.age(retry.dueAtMs - nowMs)))" : " (due now)")
                               + ", replaces calls entry \(TerminalText.field(retry.retryID))"))
        }
        if stored.cancelled || stored.cancelResult != nil {
            let own = stored.cancelResult.flatMap(RecordedResult.init(json:))
            let after = own?.cancelledAfter.map { ": too late, the call was \($0) already" } ?? ""
            lines.append(field("cancel", "a call_cancelled came\(after)" + (stored.cancelled ? "; no further push is sent" : "")))
        }
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
                let state = t.mark.map { m in
                    "known invalid since \(DeadFormat.time(m.sinceMs)): calls skip it unless registered again after that"
                        + (m.expiresInMs.map { "; mark lapses in \(DeadFormat.age($0))" } ?? "")
                } ?? "not known to be invalid"
                lines.append("    \(t.channel.rawValue) …\(t.token.suffix(8)) (from the \(TerminalText.field(t.source))): \(state)")
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
