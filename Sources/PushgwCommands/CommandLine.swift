// PushgwCommands: the `pushgw` command line: argument parsing, one file per verb (its help
// text, its checks, its exit status), the dead-letter tools' session and output, and the one
// place that wires a process together (GatewayProcess, for `pushgw run`).
// Owns: what a person types and reads. Depends on every module below it and is the only one
// that does; `Sources/pushgw/main.swift` only calls `pushgwMain`.
// Must not: hold business rules or logic another module needs (it is the top of the chain).
import BuildVersion
import Foundation
import GatewayConfiguration
import VisibleText

/// The `pushgw` executable: dispatches `args` (without the program name) to a verb and
/// returns the exit status. 0 success, 1 the verb's own failure (a problem found, a push
/// rejected), 2 bad usage, a config error, or a verb not in this build. Usage errors are one
/// line on stderr: `pushgw: <problem> (see pushgw <verb> --help)`.
///
/// Runs on the calling thread; `main.swift` calls it once and exits with its result.
package func pushgwMain(_ args: [String]) -> Int32 {
    pushgwMain(args, context: .process)
}

/// `pushgwMain` with its surroundings passed in, so tests can capture output and choose the
/// environment.
func pushgwMain(_ args: [String], context: CommandContext) -> Int32 {
    guard let verb = args.first else {
        return context.usage(UsageError("no verb given"))
    }
    let rest = Array(args.dropFirst())
    switch verb {
    case "help", "--help", "-h":
        return HelpCommand.run(verb == "help" ? rest : [], context: context)
    case "--version":
        guard rest.isEmpty else { return context.usage(UsageError("\(verb) takes no arguments")) }
        context.output.out(BuildVersion.line)
        return 0
    default:
        guard let command = commands.first(where: { $0.name == verb }) else {
            let near = DidYouMean.nearest(verb, among: commands.map(\.name)).map { "; did you mean \"\($0)\"?" } ?? ""
            return context.usage(UsageError("unknown verb \"\(verb)\"\(near)"))
        }
        return command.run(rest, context)
    }
}

/// The verbs, in the order `pushgw --help` lists them.
var commands: [Verb] {
    [Verb(RunCommand.self), Verb(PushCommand.self), Verb(CallsCommand.self), Verb(DeadCommand.self), Verb(TokensCommand.self), Verb(AppsCommand.self),
     Verb(AuditCommand.self), Verb(ExportCommand.self), Verb(WebhooksCommand.self), Verb(ConfigCommand.self), Verb(ApiKeyCommand.self), Verb(SimulatorCommand.self), Verb(DemoCommand.self),
     Verb(HelpCommand.self)]
}

/// A verb of the table, its `Command`'s statics captured. (A table of `any Command.Type`
/// crashes the Swift 6.3 compiler in SILGen.)
struct Verb {
    let name: String
    let summary: String
    let help: String
    let run: ([String], CommandContext) -> Int32

    init<C: Command>(_ command: C.Type) {
        name = C.name
        summary = C.summary
        help = C.help
        run = { C.run($0, context: $1) }
    }
}

/// One verb of `pushgw`. Its `run` validates every argument before any I/O, returns the exit
/// status, and writes only through `context.output`.
protocol Command {
    /// The verb as typed.
    static var name: String { get }
    /// One line for `pushgw --help`.
    static var summary: String { get }
    /// The full text of `pushgw <verb> --help`.
    static var help: String { get }
    static func run(_ args: [String], context: CommandContext) -> Int32
}

/// What a command may touch: its output streams, the environment, the working directory and
/// the operator's terminal (for confirmations).
struct CommandContext {
    var output: CommandOutput
    var environment: [String: String]
    var workingDirectory: String
    var terminal: Terminal = .standard

    /// The real process: stdout, stderr, `ProcessInfo`'s environment, the current directory.
    static var process: CommandContext {
        CommandContext(output: .standard, environment: ProcessInfo.processInfo.environment,
                       workingDirectory: FileManager.default.currentDirectoryPath)
    }

    /// Prints a usage error as its one line on stderr and returns 2.
    func usage(_ error: UsageError) -> Int32 {
        output.err(error.line)
        return 2
    }
}

/// Where a command writes: one call per line, without the newline.
///
/// Every line goes through `TerminalText.line` first: whatever text from Redis, a producer or
/// APNs a command prints, no control or bidi character reaches the terminal.
struct CommandOutput {
    private let write: (String) -> Void
    private let writeError: (String) -> Void

    init(out: @escaping (String) -> Void, err: @escaping (String) -> Void) {
        write = out
        writeError = err
    }

    /// One line (or several joined by line feeds) on stdout.
    func out(_ line: String) { write(TerminalText.line(line)) }

    /// One line on stderr.
    func err(_ line: String) { writeError(TerminalText.line(line)) }

    static var standard: CommandOutput {
        CommandOutput(out: { print($0) },
                      err: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
    }
}

/// Where a command asks the operator to confirm: whether stdin is a terminal, how to show
/// the question (without a newline), and the answer line (nil at end of input).
struct Terminal {
    var isInteractive: Bool
    var prompt: (String) -> Void
    var readLine: () -> String?

    static var standard: Terminal {
        Terminal(isInteractive: isatty(0) == 1,
                 prompt: { FileHandle.standardError.write(Data($0.utf8)) },
                 readLine: { Swift.readLine() })
    }

    /// No terminal: confirmations are refused (scripts must say `--yes`).
    static var none: Terminal { Terminal(isInteractive: false, prompt: { _ in }, readLine: { nil }) }
}

/// Bad usage of the command line: an unknown verb or option, a missing or malformed value.
/// Always exit status 2.
struct UsageError: Error, Equatable {
    let problem: String
    /// The verb whose help to point at; nil for the top level.
    let verb: String?

    init(_ problem: String, verb: String? = nil) {
        self.problem = problem
        self.verb = verb
    }

    /// `pushgw: <problem> (see pushgw <verb> --help)`.
    var line: String {
        "pushgw: \(problem) (see pushgw \(verb.map { "\($0) " } ?? "")--help)"
    }
}

/// `pushgw help [VERB]`, `pushgw --help`: what each verb is for.
enum HelpCommand: Command {
    static let name = "help"
    static let summary = "show this help, or a verb's help"
    static let help = """
        usage: pushgw help [VERB]

        Prints the list of verbs, or the help of VERB (the same as pushgw VERB --help).
        """

    static var overview: String {
        let width = commands.map(\.name.count).max() ?? 0
        let lines = commands.map { "  \($0.name.padding(toLength: width, withPad: " ", startingAt: 0))  \($0.summary)" }
        return """
            usage: pushgw VERB [OPTIONS]

            pushgw is a VoIP-first Apple push gateway: it takes incoming-call events from Redis,
            sends a PushKit VoIP push and falls back to an alert push when that fails.

            verbs:
            \(lines.joined(separator: "\n"))

            Run pushgw VERB --help for a verb's options; pushgw --version prints the version
            and the commit it was built from. Exit status: 0 success, 1 the verb failed
            (problems found, push rejected), 2 bad usage or config error.
            """
    }

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        switch args.count {
        case 0:
            context.output.out(overview)
            return 0
        case 1:
            if args[0] == "--help" || args[0] == "-h" {
                context.output.out(help)
                return 0
            }
            guard let command = commands.first(where: { $0.name == args[0] }) else {
                return context.usage(UsageError("no verb named \"\(args[0])\"", verb: name))
            }
            context.output.out(command.help)
            return 0
        default:
            return context.usage(UsageError("help takes at most one verb", verb: name))
        }
    }
}
