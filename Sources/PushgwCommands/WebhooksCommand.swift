import CallStorage
import DeadLetters
import Foundation
import GatewayConfiguration
import JSONOutput
import VisibleText

/// `pushgw webhooks dead APP` and `pushgw webhooks replay APP` (docs/webhooks.md, "Dead
/// letters"): the webhook deliveries given up on, listed, and put back to be sent again. Read
/// and changed through CallStorage's `WebhookStore`, in a `DeadSession`.
enum WebhooksCommand: Command {
    static let name = "webhooks"
    static let summary = "list and replay the webhook deliveries given up on"
    static let help = """
        usage: pushgw webhooks dead APP [--count N] [--json] [--config FILE]
               pushgw webhooks replay APP [--id ENTRY[,ENTRY]] [--count N] [--config FILE]

        A webhook delivery that a receiver refused (a 4xx other than 429), or that was retried
        past the app's webhooks.retry_for_seconds, lands in PREFIX:{APP}:webhooks:dead.

          dead     lists them, oldest first: entry, when it failed, attempts, why, the result's
                   outcome, call id and Idempotency-Key (its results entry)
          replay   puts them back on the app's deliveries (the oldest --count, or the --id
                   entries), each retried for retry_for_seconds again with the same
                   Idempotency-Key; the webhooks role of a running gateway sends them. Written
                   to the audit stream (pushgw audit) and as a JSON line on stderr

          --count N      at most N (default 100, at most 10000)
          --id ENTRY     replay only these dead entries (ids as dead lists them)
          --json         one JSON object per line: {"entry","failed_at_ms","attempts","reason",
                         "results_entry","result"}
          --config FILE  the config (default \(GatewayConfig.defaultFile))

        Exit status: 0 done, 1 Redis unreachable, 2 bad usage or config error.

        Example: pushgw webhooks replay acme --count 10
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("webhooks needs a verb: dead or replay", verb: name))
        }
        if ["--help", "-h", "help"].contains(sub) {
            context.output.out(help)
            return 0
        }
        guard sub == "dead" || sub == "replay" else {
            return context.usage(UsageError("unknown webhooks verb \(DeadFormat.quoted(TerminalText.field(sub))) (known: dead, replay)",
                                            verb: name))
        }
        return DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            let options = sub == "dead" ? ["--config", "--count"] : ["--config", "--count", "--id"]
            guard let a = try DeadArguments.parse(Array(args.dropFirst()), command: name, verb: sub,
                                                  flags: sub == "dead" ? ["--json"] : [], options: options, maxPositionals: 1) else {
                context.output.out(help)
                return 0
            }
            guard let app = a.positionals.first else { throw a.usage("name the app: webhooks \(sub) APP") }
            var count = 100
            if let text = a.value("--count") {
                guard let n = Int(text), (1...10_000).contains(n) else { throw a.usage("--count must be a number from 1 to 10000") }
                count = n
            }
            let ids = a.value("--id").map { $0.split(separator: ",").map(String.init) } ?? []
            for id in ids where !id.allSatisfy({ $0.isNumber || $0 == "-" }) || id.isEmpty {
                throw a.usage("--id: \(DeadFormat.quoted(TerminalText.field(id))) is not a stream entry id (such as 1700000000000-0)")
            }
            let session = try DeadSession(command: name, verb: sub, configFile: a.value("--config"), appFilter: [app], context: context)
            defer { session.close() }
            let keys = AppKeys(prefix: session.config.redis.prefix, app: app)
            let store = WebhookStore(topology: session.topology)
            if sub == "replay" {
                // One script: it moved all it found or nothing.
                let moved = try session.wait { store.replay(keys, entryIDs: ids, count: count, completion: $0) }
                let summary = "replayed \(moved) webhook deliver\(moved == 1 ? "y" : "ies") of app \(TerminalText.field(app))"
                    + (session.config.apps[app]?.webhooks == nil ? " (the app has no webhooks in the config: nothing sends them)" : "")
                try session.finishAudited(ids: ids.map { "\(app)/\($0)" }, requested: ids.isEmpty ? count : ids.count, done: moved,
                                          filter: nil, options: [("app", .string(app))], failure: nil, summary: summary,
                                          context: context)
                return 0
            }
            let dead = try session.wait { store.dead(keys, count: count, completion: $0) }
            for d in dead {
                let f = d.fields
                let result = (f["result"]).flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                if a.flag("--json") {
                    let embedded = f["result"].flatMap(EmbeddedJSON.init).map(OrderedJSON.embedded) ?? .null
                    context.output.out(OrderedJSON.object([
                        ("entry", .string(d.entryID)), ("failed_at_ms", .int(f["failed_at_ms"].flatMap { Int64($0) })),
                        ("attempts", .int(f["attempts"].flatMap { Int64($0) })), ("reason", .string(f["reason"])),
                        ("results_entry", .string(f["results_entry"])), ("result", embedded),
                    ]).text)
                } else {
                    let line = [d.entryID, "attempts \(f["attempts"] ?? "?")", f["reason"] ?? "",
                                "outcome \(result?["outcome"] as? String ?? "?")", "id \(result?["id"] as? String ?? "?")",
                                "idempotency_key \(f["results_entry"] ?? "?")"]
                    context.output.out(line.map(TerminalText.field).joined(separator: "  "))
                }
            }
            if !a.flag("--json") && dead.isEmpty { context.output.out("no webhook dead letters for app \(TerminalText.field(app))") }
            return 0
        }
    }
}
