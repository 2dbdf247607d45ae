import DeadLetters
import EventLoop
import GatewayConfiguration
import CallStorage
import JSONOutput
import RedisClient
import VisibleText

/// `pushgw tokens`: what the gateway knows about one device token, and forgetting that it is
/// invalid (docs/operations.md, "Tokens"). A token APNs declared invalid is skipped by later
/// calls until its mark lapses (the app's `retention.invalid_token_ttl_s`, 30 days by default) or the event says it was registered again; after a
/// mistake (a wrong environment or bundle id, since fixed) an operator clears the mark here
/// instead of waiting. `show` reads through `CallLookup.token` (the console's search shares
/// it), `forget` through `TokenStore`, in a `DeadSession`, whose audit `forget` shares with
/// the dead-letter verbs.
enum TokensCommand: Command {
    static let name = "tokens"
    static let summary = "show what pushgw knows about a device token, forget that it is invalid"
    static let help = """
        usage: pushgw tokens show TOKEN [--app A[,B…]] [--json] [--config FILE]
               pushgw tokens forget TOKEN [--app A[,B…]] [--channel voip|alert] [--config FILE]

        show    for each app (every configured app unless --app names some): whether the token is
                known to be invalid on each channel, since when and why, when the mark lapses;
                with ring receipts on, whether its VoIP token is suspected of iOS's silent VoIP
                ban (its calls then go straight to the alert) or how many silent rings in a row
                it had; and the feedback entries that name it, newest first (each an APNs answer
                about the token: Unregistered, BadDeviceToken, …, environment_mismatch when it was
                accepted in the other environment, or voip_suspected_blocked), among the app's
                last \(CallLookup.feedbackScanned) feedback entries.
        forget  removes the token's known-invalid marks (both channels unless --channel), so
                the next call pushes to it again. Writes an audit record (who, when, which) to
                stderr and to the stream PREFIX:audit, as pushgw dead replay and purge do.

          TOKEN           the device token, hex (any case)
          --app A[,B…]    only these apps
          --channel C     forget: only the voip or the alert mark
          --json          show: one JSON object per app
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Exit status: 0 done, 1 failed (Redis unreachable; forget: no mark found), 2 bad usage or
        config error.

        Examples: pushgw tokens show 5a0d…e8f0 --app acme
                  pushgw tokens forget 5a0d…e8f0 --app acme
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("tokens needs a verb: show, forget", verb: name))
        }
        if ["--help", "-h", "help"].contains(sub) {
            context.output.out(help)
            return 0
        }
        guard sub == "show" || sub == "forget" else {
            let near = DidYouMean.nearest(sub, among: ["show", "forget"]).map { "; did you mean \"\($0)\"?" } ?? ""
            return context.usage(UsageError("unknown tokens verb \"\(sub)\"\(near) (known: show, forget)", verb: name))
        }
        return DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            let flags = sub == "show" ? ["--json"] : []
            let options = sub == "show" ? ["--config", "--app"] : ["--config", "--app", "--channel"]
            guard let a = try DeadArguments.parse(Array(args.dropFirst()), command: name, verb: sub, flags: flags, options: options,
                                                  maxPositionals: 1) else {
                context.output.out(help)
                return 0
            }
            guard let text = a.positionals.first else { throw a.usage("name the token (hex)") }
            guard let token = TokenStore.normalized(text) else {
                throw a.usage("\"\(TerminalText.field(String(text.prefix(64))))\" is not a device token (an even number of hex digits, at most 400)")
            }
            let apps = try a.apps()
            if sub == "show" {
                let session = try DeadSession(command: name, verb: "show", configFile: a.value("--config"), appFilter: apps,
                                              context: context)
                defer { session.close() }
                return try show(token, session: session, json: a.flag("--json"), context: context)
            }
            var channels = TokenChannel.apns
            if let channel = a.value("--channel") {
                guard let one = TokenChannel(rawValue: channel) else { throw a.usage("--channel must be voip or alert, not \"\(channel)\"") }
                channels = [one]
            }
            let session = try DeadSession(command: name, verb: "forget", configFile: a.value("--config"), appFilter: apps,
                                          context: context)
            defer { session.close() }
            return try forget(token, channels: channels, session: session, context: context)
        }
    }

    private static func show(_ token: String, session: DeadSession, json: Bool, context: CommandContext) throws(DeadFailure) -> Int32 {
        let lookup = CallLookup(operations: session.operations)
        let reports = try session.wait { lookup.token(token, apps: session.apps, completion: $0) }
        for report in reports {
            let (app, marks, suspicion, feedback) = (report.app, report.marks, report.suspicion, report.feedback)
            if json {
                context.output.out(jsonLine(app: app, token: token, marks: marks, suspicion: suspicion, feedback: feedback))
                continue
            }
            context.output.out("\(TerminalText.field(app)): token \(token)")
            for channel in TokenChannel.apns {
                context.output.out("  \(channel.rawValue): \(TerminalText.field(report.state(channel)))")
            }
            if let ban = report.voipBan { context.output.out("  voip: \(ban)") }
            if let last = feedback.first {
                context.output.out("  last feedback: \(line(last))")
            } else {
                context.output.out("  last feedback: none among the app's last \(CallLookup.feedbackScanned) feedback entries")
            }
            if !feedback.isEmpty {
                context.output.out("  APNs' answers about it, newest first:")
                for f in feedback.prefix(TokenReport.feedbackShown) { context.output.out("    \(line(f))") }
                if feedback.count > TokenReport.feedbackShown { context.output.out("    … \(feedback.count - TokenReport.feedbackShown) more") }
            }
        }
        return 0
    }

    private static func line(_ f: TokenStore.Feedback) -> String { TerminalText.field(TokenReport.describe(f)) }

    private static func jsonLine(app: String, token: String, marks: [TokenChannel: TokenStore.Mark],
                                 suspicion: TokenStore.VoipSuspicion, feedback: [TokenStore.Feedback]) -> String {
        let invalid = TokenChannel.allCases.compactMap { channel -> (String, OrderedJSON)? in
            guard let mark = marks[channel] else { return nil }
            return (channel.rawValue, .object([("since_ms", .int(mark.sinceMs)),
                                               ("expires_in_ms", mark.expiresInMs.map { .int($0) } ?? .null)]))
        }
        let entries = feedback.prefix(TokenReport.feedbackShown).map { f in
            OrderedJSON.object([("entry", .string(f.entryID)), ("channel", .string(f.channel)), ("reason", .string(f.reason)),
                                ("timestamp", f.timestampMs.map { .int($0) } ?? .null),
                                ("environment", f.environment.map { .string($0) } ?? .null)])
        }
        let suspected: OrderedJSON = suspicion.suspectedSinceMs.map { since in
            .object([("since_ms", .int(since)), ("expires_in_ms", suspicion.expiresInMs.map { .int($0) } ?? .null)])
        } ?? .null
        return OrderedJSON.object([("app", .string(app)), ("token", .string(token)), ("known_invalid", .object(invalid)),
                                   ("voip_suspected", suspected), ("silent_rings", .int(suspicion.silentRings)),
                                   ("feedback", .array(Array(entries))), ("feedback_found", .int(feedback.count))]).text
    }

    private static func forget(_ token: String, channels: [TokenChannel], session: DeadSession,
                               context: CommandContext) throws(DeadFailure) -> Int32 {
        let store = TokenStore(topology: session.topology)
        let prefix = session.config.redis.prefix
        var removed: [String] = []
        var failure: RedisError?
        for app in session.apps {
            var result: Result<[TokenChannel], RedisError>?
            store.forget(AppKeys(prefix: prefix, app: app), token: token, channels: channels) { result = $0 }
            session.loop.run(until: { result != nil })
            switch result! {
            case let .success(gone): removed += gone.map { "\(app)/\($0.rawValue)/\(token)" }
            case let .failure(error):
                failure = error
            }
            if failure != nil { break }
        }
        let requested = session.apps.count * channels.count
        try session.finishAudited(ids: removed, requested: requested, done: removed.count, filter: nil,
                                  options: [("channels", .array(channels.map { .string($0.rawValue) }))], failure: failure,
                                  summary: removed.isEmpty ? "no known-invalid mark of the token found; nothing forgotten"
                                      : "forgot \(removed.count) known-invalid \(removed.count == 1 ? "mark" : "marks"): "
                                          + removed.map { TerminalText.field($0) }.joined(separator: ", "),
                                  context: context)
        return removed.isEmpty ? 1 : 0
    }
}
