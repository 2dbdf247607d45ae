import DeadLetters
import GatewayConfiguration
import JSONOutput

/// `pushgw config check [--config F | F] [--json]`: validates a config file and prints every
/// problem, one per line, with its JSON path and fix.
enum ConfigCommand: Command {
    static let name = "config"
    static let summary = "check a config file and name every problem"
    static let help = """
        usage: pushgw config check [--config FILE | FILE] [--json]

        Reads the config (default \(GatewayConfig.defaultFile)), applies the PUSHGW_* environment
        overrides, and prints every problem on its own line:
          FILE: JSON.PATH: [warning: ]PROBLEM; FIX
        followed by a summary line. Key files are checked by their header only; no secret is
        ever printed.

          --config FILE   the config file (or give it as the only argument)
          --json          print one JSON object instead:
                          {"file":…,"ok":…,"errors":N,"warnings":N,"problems":[{"severity":…,
                           "path":…,"problem":…,"fix":…}]}

        Exit status: 0 when the config is usable (warnings alone do not fail it), 1 when it has
        errors, 2 on bad usage.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        guard let sub = args.first else {
            return context.usage(UsageError("config needs a subcommand: check", verb: name))
        }
        switch sub {
        case "--help", "-h", "help":
            context.output.out(help)
            return 0
        case "check":
            return check(Array(args.dropFirst()), context: context)
        default:
            return context.usage(UsageError("unknown config subcommand \"\(sub)\" (known: check)", verb: name))
        }
    }

    private static func check(_ args: [String], context: CommandContext) -> Int32 {
        let arguments: Arguments
        do {
            switch try Arguments.parse(args, verb: name, flags: ["--json"], options: ["--config"], maxPositionals: 1) {
            case .help:
                context.output.out(help)
                return 0
            case let .arguments(parsed):
                arguments = parsed
            }
        } catch {
            return context.usage(error)
        }
        if arguments.values["--config"] != nil && !arguments.positionals.isEmpty {
            return context.usage(UsageError("give the config file either with --config or as an argument, not both", verb: name))
        }
        let file = arguments.values["--config"] ?? arguments.positionals.first ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment,
                                        workingDirectory: context.workingDirectory)
        if arguments.flags.contains("--json") {
            context.output.out(jsonReport(report, file: file))
        } else {
            report.problems.forEach { context.output.out($0.description) }
            context.output.out(summary(report, file: file))
        }
        return report.errors.isEmpty ? 0 : 1
    }

    static func summary(_ report: ConfigReport, file: String) -> String {
        let warnings = report.warnings.count
        let warningText = warnings == 1 ? "1 warning" : "\(warnings) warnings"
        if let config = report.config {
            let fcm = config.fcmCredentials.isEmpty ? "" : " (\(config.fcmCredentials.count) of them FCM)"
            let count = config.credentials.count + config.fcmCredentials.count
            return "\(file): usable: \(config.apps.count) apps, \(count) credentials\(fcm), \(warningText)"
        }
        let errors = report.errors.count
        return "\(file): not usable: \(errors == 1 ? "1 error" : "\(errors) errors"), \(warningText)"
    }

    static func jsonReport(_ report: ConfigReport, file: String) -> String {
        let problems = report.problems.map {
            OrderedJSON.object([("severity", .string($0.severity.rawValue)), ("path", .string($0.path)),
                                ("problem", .string($0.problem)), ("fix", .string($0.fix))])
        }
        return OrderedJSON.object([("file", .string(file)), ("ok", .bool(report.errors.isEmpty)),
                                   ("errors", .int(report.errors.count)), ("warnings", .int(report.warnings.count)),
                                   ("problems", .array(problems))]).text
    }
}
