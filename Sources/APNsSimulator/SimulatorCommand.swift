import EventLoop
import Glibc

/// The `pushgw simulator --config FILE [--port N]` verb: runs an `ApnsSimulator` on its own
/// loop until SIGTERM or SIGINT.
///
/// Once listening it prints one JSON line, `{"listening":"127.0.0.1:PORT"}`, so a script can
/// read the port it got. Returns the exit code: 0 after a signal, 2 for bad usage or a bad
/// config (one line on stderr), 1 when the simulator cannot start. `arguments` excludes the
/// executable and the verb.
public func runSimulatorCommand(arguments: [String]) -> Int32 {
    let options: SimulatorCommandOptions
    let config: SimulatorConfig
    do {
        options = try SimulatorCommandOptions(parsing: arguments)
        config = try options.loadConfig()
    } catch {
        printError("pushgw simulator: \(error)")
        return 2
    }
    let loop = EventLoop()
    defer { loop.close() }
    let simulator: ApnsSimulator
    do {
        simulator = try ApnsSimulator(loop: loop, config: config)
        try simulator.start()
    } catch {
        printError("pushgw simulator: \(error)")
        return 1
    }
    // Written unbuffered: a script waits for this line before it connects.
    writeLine("{\"listening\":\"\(config.host):\(simulator.port)\"}", to: STDOUT_FILENO)
    var stopping = false
    let watches = [SIGTERM, SIGINT].map { SignalWatch(loop: loop, signal: $0) { _ in stopping = true } }
    loop.run(until: { stopping })
    for watch in watches { watch.close() }
    simulator.close()
    return 0
}

/// The verb's arguments, checked before any I/O.
struct SimulatorCommandOptions: Equatable {
    var configFile: String
    var port: Int?

    static let usage = "usage: pushgw simulator --config FILE [--port N]"

    init(parsing arguments: [String]) throws(SimulatorUsageError) {
        var configFile: String?
        var port: Int?
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            switch flag {
            case "--config":
                guard let value = rest.popFirst(), !value.isEmpty else { throw SimulatorUsageError("--config needs a file. \(Self.usage)") }
                configFile = value
            case "--port":
                guard let value = rest.popFirst(), let n = Int(value), (0...65535).contains(n) else {
                    throw SimulatorUsageError("--port needs a number in 0...65535. \(Self.usage)")
                }
                port = n
            default:
                throw SimulatorUsageError("unknown argument \(flag). \(Self.usage)")
            }
        }
        guard let configFile else { throw SimulatorUsageError("--config is required. \(Self.usage)") }
        self.configFile = configFile
        self.port = port
    }

    /// The config file with `--port` applied.
    func loadConfig() throws(SimulatorConfigError) -> SimulatorConfig {
        var config = try SimulatorConfig.load(jsonFile: configFile)
        if let port { config.port = port }
        return config
    }
}

/// A command line the `simulator` verb cannot run.
struct SimulatorUsageError: Error, Equatable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func printError(_ line: String) {
    writeLine(line, to: STDERR_FILENO)
}

private func writeLine(_ line: String, to fd: Int32) {
    writeAll(Array((line + "\n").utf8), to: fd)
}
