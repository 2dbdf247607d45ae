import CallStorage
import DeadLetters
import EventLoop
import GatewayConfiguration
import JSONOutput
import VisibleText

/// `pushgw apps pause|resume|status` (docs/operations.md, "Pausing an app"): an operator stops
/// the gateways reading one app's calls and lets them read again, through CallStorage's
/// `AppPauseStore`, in a `DeadSession`, whose audit pause and resume share with the dead-letter
/// verbs. Every router of the fleet reads the pause at its next heartbeat.
enum AppsCommand: Command {
    static let name = "apps"
    static let summary = "pause and resume an app's calls, and show which apps are paused"
    static let help = """
        usage: pushgw apps pause APP [--reason TEXT] [--config FILE]
               pushgw apps resume APP [--config FILE]
               pushgw apps status [--app A[,B…]] [--json] [--config FILE]

        pause   stops every gateway reading the app's calls stream, within a second or two (each
                router reads the pause at its heartbeat; calls already being routed finish).
                Its calls wait in the stream, nothing is dropped, other apps go on. A call whose
                deadline passes meanwhile gets its missed-call alert after the resume, with the
                cause paused (expired with cause paused without an alert token), never a late
                VoIP push. Pausing a paused app keeps the first pause (who, when, why).
        resume  lets the gateways read the app's calls again: those that waited are routed.
        status  for each app (every configured app unless --app names some): paused since
                when, by whom and why, or running.
        pause and resume write an audit record (who, when, which app, why) to stderr and to
        the stream PREFIX:audit, as pushgw dead replay and purge do (see pushgw audit).

          APP             a configured app id
          --reason TEXT   pause: why, for the status, the console and the audit (at most \(AppPauseStore.maxReason) characters)
          --app A[,B…]    status: only these apps
          --json          status: one JSON object per app: {"app","paused","since_ms","user","reason"}
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Exit status: 0 done (also when the app already was paused, or was not paused), 1 Redis
        unreachable, 2 bad usage or config error.

        Examples: pushgw apps pause acme --reason "APNs key rotation"
                  pushgw apps resume acme
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("apps needs a verb: pause, resume, status", verb: name))
        }
        if ["--help", "-h", "help"].contains(sub) {
            context.output.out(help)
            return 0
        }
        let verbs = ["pause", "resume", "status"]
        guard verbs.contains(sub) else {
            let near = DidYouMean.nearest(sub, among: verbs).map { "; did you mean \"\($0)\"?" } ?? ""
            return context.usage(UsageError("unknown apps verb \(DeadFormat.quoted(TerminalText.field(sub)))\(near) (known: pause, resume, status)",
                                            verb: name))
        }
        return DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            let flags = sub == "status" ? ["--json"] : []
            let options = sub == "status" ? ["--config", "--app"] : sub == "pause" ? ["--config", "--reason"] : ["--config"]
            guard let a = try DeadArguments.parse(Array(args.dropFirst()), command: name, verb: sub, flags: flags, options: options,
                                                  maxPositionals: sub == "status" ? 0 : 1) else {
                context.output.out(help)
                return 0
            }
            if sub == "status" {
                let session = try DeadSession(command: name, verb: sub, configFile: a.value("--config"), appFilter: try a.apps(),
                                              context: context)
                defer { session.close() }
                return try status(session: session, json: a.flag("--json"), context: context)
            }
            guard let app = a.positionals.first else { throw a.usage("name the app: apps \(sub) APP") }
            let reason = a.value("--reason") ?? ""
            guard reason.count <= AppPauseStore.maxReason else { throw a.usage("--reason is longer than \(AppPauseStore.maxReason) characters") }
            let session = try DeadSession(command: name, verb: sub, configFile: a.value("--config"), appFilter: [app], context: context)
            defer { session.close() }
            let keys = AppKeys(prefix: session.config.redis.prefix, app: app)
            let store = AppPauseStore(topology: session.topology)
            let shown = TerminalText.field(app)
            if sub == "pause" {
                let actor = DeadSession.actor(context)
                let pause = AppPauseStore.Pause(sinceMs: Clock.unixMs(), user: actor.user, reason: reason)
                let earlier = try session.wait { store.pause(keys, pause, completion: $0) }
                let summary = earlier.map { "app \(shown) was paused already: \(describe($0)); nothing changed" }
                    ?? "paused app \(shown): its calls wait in its stream until pushgw apps resume \(shown)"
                try session.finishAudited(ids: [app], requested: 1, done: earlier == nil ? 1 : 0, filter: nil,
                                          options: [("reason", .string(reason))], failure: nil, summary: summary, context: context)
                return 0
            }
            let removed = try session.wait { store.resume(keys, completion: $0) }
            let summary = removed.map { "resumed app \(shown) (\(describe($0))): its waiting calls are routed" }
                ?? "app \(shown) was not paused; nothing changed"
            try session.finishAudited(ids: [app], requested: 1, done: removed == nil ? 0 : 1, filter: nil,
                                      options: [("reason", .string(removed?.reason ?? ""))], failure: nil, summary: summary,
                                      context: context)
            return 0
        }
    }

    /// "paused since TIME by USER: REASON".
    static func describe(_ pause: AppPauseStore.Pause) -> String {
        "paused since \(DeadFormat.time(pause.sinceMs)) by \(TerminalText.field(pause.user))"
            + (pause.reason.isEmpty ? "" : ": \(TerminalText.field(pause.reason))")
    }

    private static func status(session: DeadSession, json: Bool, context: CommandContext) throws(DeadFailure) -> Int32 {
        let store = AppPauseStore(topology: session.topology)
        let prefix = session.config.redis.prefix
        let pauses = try session.wait { store.pauses(session.apps.map { AppKeys(prefix: prefix, app: $0) }, completion: $0) }
        for app in session.apps {
            let pause = pauses[AppKeys(prefix: prefix, app: app)] ?? nil
            if json {
                context.output.out(OrderedJSON.object([
                    ("app", .string(app)), ("paused", .bool(pause != nil)), ("since_ms", pause.map { .int($0.sinceMs) } ?? .null),
                    ("user", pause.map { .string($0.user) } ?? .null), ("reason", pause.map { .string($0.reason) } ?? .null),
                ]).text)
            } else {
                context.output.out("\(TerminalText.field(app)): \(pause.map(describe) ?? "running")")
            }
        }
        return 0
    }
}
