/// Verbs whose modules are not in this build yet. Each prints what it will do under
/// `--help`, and otherwise says it is not implemented and exits 2.
protocol PendingCommand: Command {
    /// Where the work is tracked. TODO(integrator): put the issue numbers here.
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

/// `pushgw run`: the service. NOT IMPLEMENTED YET.
enum RunCommand: PendingCommand {
    static let name = "run"
    static let summary = "run the gateway service (not implemented yet)"
    static let issue = "TBD: service roles"
    static let help = """
        usage: pushgw run [--config FILE] [--role router,retry,dead]

        NOT IMPLEMENTED YET. Will run the router, the retry mover and dead-letter maintenance
        in one process (--role picks a subset); any number of processes may share one Redis.
        """
}

/// `pushgw dead`: the dead-letter tools. NOT IMPLEMENTED YET.
enum DeadCommand: PendingCommand {
    static let name = "dead"
    static let summary = "list, show, replay, purge dead letters (not implemented yet)"
    static let issue = "TBD: dead-letter tooling"
    static let help = """
        usage: pushgw dead list|show|replay|purge|stats [--config FILE] [--app A] [--json]

        NOT IMPLEMENTED YET. Will work on the dead-letter streams PREFIX:{APP}:dead.
        """
}

/// `pushgw demo`: the end-to-end demo. NOT IMPLEMENTED YET.
enum DemoCommand: PendingCommand {
    static let name = "demo"
    static let summary = "run the gateway end to end against the APNs simulator (not implemented yet)"
    static let issue = "TBD: demo"
    static let help = """
        usage: pushgw demo [--config FILE]

        NOT IMPLEMENTED YET. Will run the gateway against the APNs simulator with
        config/demo.json and show each call event's journey.
        """
}

/// `pushgw simulator`: the fault-injecting APNs stand-in from module APNsSimulator.
enum SimulatorCommand: Command {
    static let name = "simulator"
    static let summary = "run the APNs simulator (not available in this build)"
    static let help = """
        usage: pushgw simulator [OPTIONS]

        Runs the fault-injecting APNs stand-in used by the tests, the demo and the benchmarks.
        NOT AVAILABLE IN THIS BUILD: the APNsSimulator module is not merged yet.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        // TODO(integrator): once APNsSimulator lands, `import APNsSimulator` and replace the
        // rest of this function with `return runSimulatorCommand(arguments: args)`; it owns
        // its options and its --help.
        if args == ["--help"] || args == ["-h"] {
            context.console.out(help)
            return 0
        }
        context.console.err("pushgw simulator: not available in this build")
        return 2
    }
}
