import Foundation
import Glibc

/// `pushgw demo`: the end-to-end demo of a source checkout (`scripts/demo.sh`, what
/// `make demo` runs), with this binary. The demo's producer is a Python script and its servers
/// are Debian packages, so it lives in the repository rather than in the binary.
enum DemoCommand: Command {
    static let name = "demo"
    static let summary = "run the gateway end to end against the APNs simulator (from a source checkout)"
    static let help = """
        usage: pushgw demo

        Runs scripts/demo.sh of the source checkout this binary was built in (or the current
        directory's): a private redis-server and the APNs simulator on free loopback ports,
        the gateway with the two apps of config/demo.json, one call event per path, each
        call's outcome and the dead letters. Stops everything it started. `make demo` does
        the same after installing what is missing and building.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        if args.contains("--help") || args.contains("-h") {
            context.output.out(help)
            return 0
        }
        guard args.isEmpty else {
            context.output.err(UsageError("unexpected argument \"\(args[0])\"", verb: name).line)
            return 2
        }
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let binDir = binary.deletingLastPathComponent().path
        // .build/<triple>/<config>/pushgw → the checkout is three levels up.
        let candidates = [binary.deletingLastPathComponent().deletingLastPathComponent()
                            .deletingLastPathComponent().deletingLastPathComponent().path,
                          context.workingDirectory]
        guard let root = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/scripts/demo.sh") }) else {
            context.output.err("pushgw demo: scripts/demo.sh not found: run it from a source checkout, or `make demo` there")
            return 2
        }
        var env = ProcessInfo.processInfo.environment
        env["PUSHGW_BIN_DIR"] = binDir
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [root + "/scripts/demo.sh"]
        process.environment = env
        do {
            try process.run()
        } catch {
            context.output.err("pushgw demo: cannot start scripts/demo.sh: \(error)")
            return 1
        }
        process.waitUntilExit()
        return process.terminationStatus == 0 ? 0 : 1
    }
}
