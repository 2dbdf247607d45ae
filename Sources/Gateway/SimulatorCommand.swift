import APNsSimulator

/// `pushgw simulator`: the fault-injecting APNs stand-in from module APNsSimulator, which
/// owns its options and its `--help`.
enum SimulatorCommand: Command {
    static let name = "simulator"
    static let summary = "run the APNs simulator (tests, the demo, benchmarks; never production)"
    static let help = "usage: pushgw simulator --config FILE [--port N]   (see docs/simulator.md)"

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        runSimulatorCommand(arguments: args)
    }
}
