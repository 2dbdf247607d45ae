import APNsSimulator

/// `pushgw simulator`: the fault-injecting APNs stand-in from module APNsSimulator, which
/// owns its options and its `--help`.
enum SimulatorCommand: Command {
    static let name = "simulator"
    static let summary = "run the APNs simulator (tests, the demo, benchmarks; never production)"
    static let help = """
        usage: pushgw simulator --config FILE [--port N]

        Runs the fault-injecting APNs stand-in on 127.0.0.1 (HTTP/2 over TLS) until SIGTERM or
        SIGINT. Prints {"listening":"127.0.0.1:PORT"} once it accepts connections. The config
        file (certificate, token keys, per-token scenarios) is described in docs/simulator.md.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        if args.contains("--help") || args.contains("-h") {
            context.output.out(help)
            return 0
        }
        return runSimulatorCommand(arguments: args)
    }
}
