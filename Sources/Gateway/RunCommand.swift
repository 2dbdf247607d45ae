import APNs
import EventLoop
import Foundation
import Glibc
import RedisStreams

/// `pushgw run`: the service (DESIGN.md §4, "Roles"). Loads and checks the config, connects to
/// Redis, and runs the router on the process's one loop until SIGTERM or SIGINT, which drain:
/// no new reads, calls in flight finish (bounded), waiting retries are handed back to Redis.
enum RunCommand: Command {
    static let name = "run"
    static let summary = "run the gateway service"
    static let help = """
        usage: pushgw run [--config FILE] [--role router] [--consumer NAME] [--log-level debug|info|warn|error]

        Runs the gateway: reads call events from every app's stream, sends the VoIP push,
        falls back to the alert push, and records one result per event. Any number of
        processes may share one Redis (consumer groups); each needs a unique --consumer
        (default: host-pid). SIGTERM or SIGINT drains and exits 0.

          --role ROLES     comma-separated modules to run; today only "router" (which
                           includes in-process retries). "retry" and "deadletters" come with #4.
          --drain-ms MS    how long a drain waits for calls in flight (default 10000)
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        let parsed: Arguments.Parsed
        do {
            parsed = try Arguments.parse(args, verb: name, options: ["--config", "--role", "--consumer", "--log-level", "--drain-ms"])
        } catch {
            context.console.err(error.line)
            return 2
        }
        guard case let .arguments(a) = parsed else {
            context.console.out(help)
            return 0
        }
        func usage(_ problem: String) -> Int32 {
            context.console.err(UsageError(problem, verb: name).line)
            return 2
        }
        let roles = Set((a.values["--role"] ?? "router").split(separator: ",").map(String.init))
        guard roles == ["router"] else {
            return usage("unknown or not yet available role in \"\(a.values["--role"] ?? "")\" (available: router)")
        }
        guard let level = Log.Level(rawValue: a.values["--log-level"] ?? "info") else {
            return usage("--log-level must be debug, info, warn or error")
        }
        let drainMs = Int64(a.values["--drain-ms"] ?? "10000") ?? -1
        guard drainMs >= 0 else { return usage("--drain-ms must be a number of milliseconds") }
        let file = a.values["--config"] ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment, workingDirectory: context.workingDirectory)
        guard let config = report.config else {
            for problem in report.errors { context.console.err("pushgw run: \(problem)") }
            return 2
        }
        let redisURL: RedisURL
        do {
            redisURL = try RedisURL(parsing: config.redis.url)
        } catch {
            context.console.err("pushgw run: \(file): redis.url: \(error)")
            return 2
        }
        var hostname = [CChar](repeating: 0, count: 256)
        gethostname(&hostname, hostname.count)
        let consumer = a.values["--consumer"] ?? "\(stringFromCBuffer(hostname))-\(getpid())"
        let log = Log(minimum: level)
        for warning in report.warnings { log.warn("config warning", ["problem": warning.description]) }
        return Service(config: config, redisURL: redisURL, consumer: consumer, drainMs: drainMs, log: log).run()
    }
}

/// The running service: owns the loop and every long-lived object, keeps them out of
/// top-level code (C callbacks must not touch globals), and tears them down in order.
final class Service {
    private let loop = EventLoop()
    private let config: GatewayConfig
    private let store: CallStore
    private let pools: ApnsPools
    private let runner: RoutingRunner
    private let log: Log
    private let drainMs: Int64
    private var signals: [SignalWatch] = []
    private var draining = false
    private let admin: GatewayAdmin  // admin endpoint (issue 5)

    init(config: GatewayConfig, redisURL: RedisURL, consumer: String, drainMs: Int64, log: Log) {
        self.config = config
        self.log = log
        self.drainMs = drainMs
        let apps = AppRuntime.all(config)
        store = CallStore(loop: loop, config: CallStore.Config(url: redisURL, prefix: config.redis.prefix),
                          apps: apps.map(\.keys))
        pools = ApnsPools(loop: loop, config: config)
        runner = RoutingRunner(loop: loop, store: store, pools: pools, apps: apps,
                               settings: RoutingRunnerSettings(consumer: consumer), log: log)
        admin = GatewayAdmin(loop: loop, config: config.admin, apps: apps, store: store, pools: pools,  // admin endpoint (issue 5)
                             runner: runner, log: log)                                                // admin endpoint (issue 5)
        log.info("pushgw starting", ["apps": apps.map(\.id), "consumer": consumer, "redis": config.redis.redactedURL])
    }

    /// Runs until a signal drained the service; returns the exit status.
    func run() -> Int32 {
        for sig in [SIGTERM, SIGINT] {
            signals.append(SignalWatch(loop: loop, signal: sig) { [unowned self] s in self.shutdown(signal: s) })
        }
        admin.start()  // admin endpoint (issue 5)
        store.start()
        runner.start()
        loop.run()
        admin.close()  // admin endpoint (issue 5)
        for s in signals { s.close() }
        pools.close()
        store.close()
        log.info("pushgw stopped", ["finished": runner.stats.finished])
        return 0
    }

    private func shutdown(signal: Int32) {
        guard !draining else { return }
        draining = true
        admin.draining = true  // admin endpoint (issue 5): /readyz answers 503 while draining
        log.info("draining", ["signal": signal, "in_flight": runner.inFlight])
        runner.drain(timeoutMs: drainMs) { [unowned self] in self.loop.stop() }
    }
}
