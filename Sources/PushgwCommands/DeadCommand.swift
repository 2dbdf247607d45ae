import DeadLetters
import EventLoop
import Foundation
import GatewayConfiguration

/// `pushgw dead`: the operators' dead-letter tools (README.md, "Operators"). One file per verb
/// (`DeadListCommand`, `DeadShowCommand`, `DeadReplayCommand`, `DeadPurgeCommand`,
/// `DeadStatsCommand`); this one dispatches and holds what they share. The dead letters
/// themselves are the DeadLetters module's (`DeadLetterRecord`, filters, replay, audit); Redis
/// is reached through `DeadLetterStore` in a `DeadSession`.
enum DeadCommand: Command {
    static let name = "dead"
    static let summary = "list, show, replay, purge dead letters and count them"

    static var verbs: [Verb] {
        [Verb(DeadListCommand.self), Verb(DeadShowCommand.self), Verb(DeadReplayCommand.self),
         Verb(DeadPurgeCommand.self), Verb(DeadStatsCommand.self)]
    }

    static var help: String {
        let lines = verbs.map { "  \($0.name.padding(toLength: 7, withPad: " ", startingAt: 0))  \($0.summary)" }
        return """
            usage: pushgw dead VERB [OPTIONS]

            The operators' tools for dead letters: call events a human must look at (invalid
            events, an app's wrong credentials or config, retries exhausted), kept per app in
            the stream PREFIX:{APP}:dead with the event, every attempt and the reason.

            verbs:
            \(lines.joined(separator: "\n"))

            Every verb reads the config as pushgw run does (--config FILE, default
            \(GatewayConfig.defaultFile); PUSHGW_REDIS_URL and PUSHGW_REDIS_PREFIX override it) and
            looks at every configured app unless --app A[,B…] names some. replay and purge
            write an audit record to stderr and to the stream PREFIX:audit.
            Run pushgw dead VERB --help for a verb's options.

            Exit status: 0 done, 1 failed (Redis unreachable, no such dead letter, not
            confirmed), 2 bad usage or config error.
            """
    }

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("dead needs a verb: \(verbs.map(\.name).joined(separator: ", "))", verb: name))
        }
        if ["--help", "-h", "help"].contains(sub) {
            context.output.out(help)
            return 0
        }
        guard let verb = verbs.first(where: { $0.name == sub }) else {
            let near = DidYouMean.nearest(sub, among: verbs.map(\.name)).map { "; did you mean \"\($0)\"?" } ?? ""
            return context.usage(UsageError("unknown dead verb \"\(sub)\"\(near) (known: \(verbs.map(\.name).joined(separator: ", ")))",
                                            verb: name))
        }
        return verb.run(Array(args.dropFirst()), context)
    }

    /// Runs a verb's body, turning its `DeadFailure` into the one line and exit status.
    static func running(_ context: CommandContext, _ body: () throws(DeadFailure) -> Int32) -> Int32 {
        do {
            return try body()
        } catch {
            return error.report(context)
        }
    }

    /// Asks the operator `question` on the terminal; true only for `y` or `yes`.
    static func confirm(_ question: String, context: CommandContext) -> Bool {
        context.terminal.prompt(question + " [y/N] ")
        let answer = context.terminal.readLine()?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        return answer == "y" || answer == "yes"
    }
}

/// The parsed arguments of one `pushgw dead` verb, with the checks the verbs share. Every
/// check runs before the config is read or Redis is reached.
struct DeadArguments {
    let arguments: Arguments
    /// `dead list`, … (what the usage line points at).
    let verb: String

    /// Parses `args` of `command verb` (`dead list`, `tokens show`, `audit` with no verb); nil
    /// when `--help` was asked for.
    static func parse(_ args: [String], command: String = "dead", verb: String, flags: [String] = [], options: [String] = [],
                      maxPositionals: Int = 0) throws(DeadFailure) -> DeadArguments? {
        let invocation = DeadSession.invocation(command, verb)
        do {
            switch try Arguments.parse(args, verb: invocation, flags: flags, options: options, maxPositionals: maxPositionals) {
            case .help: return nil
            case let .arguments(a): return DeadArguments(arguments: a, verb: invocation)
            }
        } catch {
            throw .usage(error)
        }
    }

    func usage(_ problem: String) -> DeadFailure { .usage(UsageError(problem, verb: verb)) }

    func flag(_ name: String) -> Bool { arguments.flags.contains(name) }
    func value(_ name: String) -> String? { arguments.values[name] }
    var positionals: [String] { arguments.positionals }

    /// `--app A[,B…]`, nil when absent.
    func apps() throws(DeadFailure) -> [String]? {
        guard let text = value("--app") else { return nil }
        let list = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
        guard !list.contains(where: \.isEmpty) else { throw usage("--app needs app ids separated by commas, not \"\(text)\"") }
        return Array(Set(list)).sorted()
    }

    /// A time option (`--since`, `--older-than`) as unix ms, nil when absent.
    func instant(_ option: String, nowMs: Int64) throws(DeadFailure) -> Int64? {
        guard let text = value(option) else { return nil }
        guard let ms = TimeArgument.instant(text, nowMs: nowMs) else {
            throw usage("\(option) must be \(TimeArgument.forms), not \(DeadFormat.quoted(text))")
        }
        return ms
    }

    /// A whole-number option in `range`, `fallback` when absent.
    func integer(_ option: String, in range: ClosedRange<Int>, fallback: Int) throws(DeadFailure) -> Int {
        guard let text = value(option) else { return fallback }
        guard let n = Int(text), range.contains(n) else {
            throw usage("\(option) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \(DeadFormat.quoted(text))")
        }
        return n
    }

    /// `--reason`, `--call`, `--since`, `--older-than` and `--app` as a filter.
    func filter(nowMs: Int64) throws(DeadFailure) -> DeadLetterFilter {
        if let reason = value("--reason"), reason.isEmpty { throw usage("--reason needs a value") }
        if let call = value("--call"), call.isEmpty { throw usage("--call needs a value") }
        return DeadLetterFilter(apps: try apps(), reason: value("--reason"), callID: value("--call"),
                                sinceMs: try instant("--since", nowMs: nowMs), beforeMs: try instant("--older-than", nowMs: nowMs))
    }

    /// What a mutating verb (`replay`, `purge`) acts on: the named dead letters, or `--all`
    /// narrowed by `filterOptions` — never both, never neither, and no filter with names.
    func selection(action: String, filterOptions: [String]) throws(DeadFailure) -> (references: [DeadLetterReference], all: Bool) {
        let references = try references()
        let all = flag("--all")
        if all && !references.isEmpty { throw usage("name dead letters or give --all, not both") }
        if !all && references.isEmpty { throw usage("name the dead letters to \(action) (ID…) or give --all") }
        if !all, let option = filterOptions.first(where: { value($0) != nil }) {
            throw usage("\(option) selects dead letters for --all; with ids give only --app")
        }
        return (references, all)
    }

    /// Everything a mutating verb (`replay`, `purge`) was asked, checked: its `selection`, the
    /// filter as of now, `--dry-run`, and whether it must ask first — when the verb `asks`
    /// and neither a dry run nor `--yes`; refused when there is no terminal to ask on.
    func change(_ selection: (references: [DeadLetterReference], all: Bool), action: String, asks: DeadChange.Asking,
                interactive: Bool) throws(DeadFailure) -> DeadChange {
        let (references, all) = selection
        let now = Clock.unixMs()
        let filter = try filter(nowMs: now)
        let dryRun = flag("--dry-run")
        let mustConfirm = (asks == .always || all) && !dryRun && !flag("--yes")
        if mustConfirm && !interactive {
            throw usage("\(action)\(asks == .withAll ? " --all" : "") needs confirmation and stdin is not a terminal: add --yes")
        }
        return DeadChange(references: references, all: all, nowMs: now, filter: filter, dryRun: dryRun,
                          mustConfirm: mustConfirm)
    }

    /// The positionals as dead-letter references.
    func references() throws(DeadFailure) -> [DeadLetterReference] {
        var seen = Set<String>()
        var out: [DeadLetterReference] = []
        for text in positionals {
            guard let reference = DeadLetterReference(text) else {
                throw usage("\"\(text)\" is not a dead-letter id (MS-SEQ such as 1764412345000-0, or APP/MS-SEQ)")
            }
            if seen.insert(text).inserted { out.append(reference) }
        }
        return out
    }
}

/// What a mutating verb (`replay`, `purge`) was asked to do (`DeadArguments.change`).
struct DeadChange {
    /// When a verb asks for confirmation (unless a dry run or `--yes`).
    enum Asking {
        /// Every time (`purge`: nothing brings a purged dead letter back).
        case always
        /// With `--all` only (`replay`: named ids are what the operator chose one by one).
        case withAll
    }

    let references: [DeadLetterReference]
    let all: Bool
    /// When the verb started, unix ms: the filter's times and the ages it prints count from it.
    let nowMs: Int64
    let filter: DeadLetterFilter
    let dryRun: Bool
    let mustConfirm: Bool
}
