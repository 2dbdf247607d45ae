import DeadLetters
import EventLoop
import GatewayConfiguration
import CallStorage
import JSONOutput
import RedisClient
import VisibleText

/// `pushgw tokens`: what the gateway knows about one device token, and forgetting that it is
/// invalid (docs/operations.md, "Tokens"). A token APNs declared invalid is skipped by later
/// calls until its mark lapses (the app's `retention.invalid_token_ttl_s`, 30 days by default)
/// or the event says it was registered again; after a mistake (a wrong environment or bundle
/// id, since fixed) an operator clears the mark here instead of waiting. Redis is reached through `TokenStore` in a `DeadSession`, whose audit
/// `forget` shares with the dead-letter verbs.
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
                last \(TokensCommand.scanned) feedback entries.
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

    /// Feedback entries read per app (newest first); the stream keeps about 100,000.
    static let scanned = 10_000
    /// Feedback entries printed per app.
    static let shown = 20

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
            guard let token = normalized(text) else {
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

    /// The token in lower case (as pushgw keys it), or nil when it is no hex token.
    static func normalized(_ text: String) -> String? {
        let lower = text.lowercased()
        guard !lower.isEmpty, lower.utf8.count % 2 == 0, lower.utf8.count <= 400,
              lower.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else { return nil }
        return lower
    }

    private static func show(_ token: String, session: DeadSession, json: Bool, context: CommandContext) throws(DeadFailure) -> Int32 {
        let store = TokenStore(topology: session.topology)
        let prefix = session.config.redis.prefix
        for app in session.apps {
            let keys = AppKeys(prefix: prefix, app: app)
            let marks = try session.wait { store.marks(keys, token: token, completion: $0) }
            let feedback = try session.wait { store.feedback(keys, token: token, scanning: scanned, completion: $0) }
            let suspicion = try session.wait { store.voipSuspicion(keys, token: token, completion: $0) }
            if json {
                context.output.out(jsonLine(app: app, token: token, marks: marks, suspicion: suspicion, feedback: feedback))
                continue
            }
            context.output.out("\(TerminalText.field(app)): token \(token)")
            for channel in TokenChannel.apns {
                guard let mark = marks[channel] else {
                    context.output.out("  \(channel.rawValue): not known to be invalid")
                    continue
                }
                let why = feedback.first { $0.channel == channel.rawValue && $0.environment == nil }.map {
                    TerminalText.field($0.reason)
                } ?? "reason no longer in the feedback stream"
                let lapses = mark.expiresInMs.map { "mark lapses in \(DeadFormat.age($0))" } ?? "mark has no expiry"
                context.output.out("  \(channel.rawValue): known invalid since \(DeadFormat.time(mark.sinceMs)) (\(why)); "
                                    + "calls skip it unless registered again after that; \(lapses)")
            }
            if let since = suspicion.suspectedSinceMs {
                let lapses = suspicion.expiresInMs.map { "mark lapses in \(DeadFormat.age($0))" } ?? "mark has no expiry"
                context.output.out("  voip: suspected of iOS's silent VoIP ban since \(DeadFormat.time(since)) (its last VoIP rings "
                                    + "were accepted and none rang); calls skip VoIP and go straight to the alert until a ring "
                                    + "receipt of the token; \(lapses)")
            } else if suspicion.silentRings > 0 {
                context.output.out("  voip: \(suspicion.silentRings) silent \(suspicion.silentRings == 1 ? "ring" : "rings") in a row "
                                    + "(accepted by APNs, no ring receipt)")
            }
            if let last = feedback.first {
                context.output.out("  last feedback: \(line(last))")
            } else {
                context.output.out("  last feedback: none among the app's last \(scanned) feedback entries")
            }
            if !feedback.isEmpty {
                context.output.out("  APNs' answers about it, newest first:")
                for f in feedback.prefix(shown) { context.output.out("    \(line(f))") }
                if feedback.count > shown { context.output.out("    … \(feedback.count - shown) more") }
            }
        }
        return 0
    }

    private static func line(_ f: TokenStore.Feedback) -> String {
        let when = f.timestampMs.map(DeadFormat.time) ?? "no time"
        let where_ = f.environment.map { " (accepted in \(TerminalText.field($0)): the token was kept)" } ?? ""
        return "\(when)  \(TerminalText.field(f.channel))  \(TerminalText.field(f.reason))\(where_)  entry \(f.entryID)"
    }

    private static func jsonLine(app: String, token: String, marks: [TokenChannel: TokenStore.Mark],
                                 suspicion: TokenStore.VoipSuspicion, feedback: [TokenStore.Feedback]) -> String {
        let invalid = TokenChannel.allCases.compactMap { channel -> (String, OrderedJSON)? in
            guard let mark = marks[channel] else { return nil }
            return (channel.rawValue, .object([("since_ms", .int(mark.sinceMs)),
                                               ("expires_in_ms", mark.expiresInMs.map { .int($0) } ?? .null)]))
        }
        let entries = feedback.prefix(shown).map { f in
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
