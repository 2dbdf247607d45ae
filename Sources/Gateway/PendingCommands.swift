/// Verbs whose modules are not in this build yet. Each prints what it will do under
/// `--help`, and otherwise says it is not implemented and exits 2.
protocol PendingCommand: Command {
    /// The issue that tracks the verb.
    static var issue: String { get }
}

extension PendingCommand {
    static func run(_ args: [String], context: CommandContext) -> Int32 {
        if args.contains("--help") || args.contains("-h") {
            context.console.out(help)
            return 0
        }
        context.console.err("pushgw \(name): not implemented yet (issue \(issue))")
        return 2
    }
}

/// `pushgw demo`: the end-to-end demo. NOT IMPLEMENTED YET.
enum DemoCommand: PendingCommand {
    static let name = "demo"
    static let summary = "run the gateway end to end against the APNs simulator (not implemented yet)"
    static let issue = "#5"
    static let help = """
        usage: pushgw demo [--config FILE]

        NOT IMPLEMENTED YET. Will run the gateway against the APNs simulator with
        config/demo.json and show each call event's journey.
        """
}

