import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import Glibc
import RedisClient

/// `pushgw run`: the service (docs/architecture.md). Loads and checks the config, connects to
/// Redis, and runs the chosen roles on the process's one loop until SIGTERM or SIGINT, which
/// drain: no new reads, calls in flight finish or go to the retry schedule (bounded), the
/// mover stops.
enum RunCommand: Command {
    static let name = "run"
    static let summary = "run the gateway service"
    static let help = """
        usage: pushgw run [--config FILE] [--role router,retry,deadletters,webhooks] [--consumer NAME] [--log-level debug|info|warn|error]
                          [--drain-ms MS]

        Runs the gateway: reads call events from every app's stream, sends the VoIP push,
        falls back to the alert push, and records one result per event. Any number of
        processes may share one Redis (consumer groups); each needs a unique --consumer
        (default: host-pid): a name another live gateway uses is refused (exit 2), and a
        restart under its own name waits up to a lease (3 s) for the previous run's lease to
        lapse. SIGTERM or SIGINT drains and exits 0.

          --config FILE    the config file (default \(GatewayConfig.defaultFile)); PUSHGW_REDIS_URL,
                           PUSHGW_REDIS_PREFIX and PUSHGW_ADMIN_LISTEN override it. Check it first
                           with pushgw config check FILE; SIGHUP reads it again
          --log-level L    the least level logged: debug, info (default: a line per finished
                           call, at most the config's log.calls_per_second), warn, error.
                           One JSON object per line on stdout
          --consumer NAME  this process's name in the consumer groups (default: host-pid)
          --role ROLES     comma-separated modules to run (default: router,retry,deadletters,webhooks):
                             router       routes call events; a push to retry goes to the
                                          durable retry schedule in Redis
                             retry        moves due retries from the schedule back to work
                             deadletters  trims the apps' dead letters by count and age
                             webhooks     POSTs the results of apps with webhooks, signed
                           Without a retry role somewhere, scheduled retries wait.
          --drain-ms MS    how long a drain waits for calls in flight (default 10000, at most 3600000)

        Exit status: 0 stopped by SIGTERM or SIGINT after the drain; 2 bad usage, a config
        error (each problem on stderr), or --consumer taken by another live gateway (a
        restart would not fix any of these: the systemd unit does not restart on 2).
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        let parsed: Arguments.Parsed
        do {
            parsed = try Arguments.parse(args, verb: name, options: ["--config", "--role", "--consumer", "--log-level", "--drain-ms"])
        } catch {
            context.output.err(error.line)
            return 2
        }
        guard case let .arguments(a) = parsed else {
            context.output.out(help)
            return 0
        }
        func usage(_ problem: String) -> Int32 {
            context.output.err(UsageError(problem, verb: name).line)
            return 2
        }
        let roleNames = (a.values["--role"] ?? "router,retry,deadletters,webhooks").split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard roleNames.allSatisfy({ ServiceRole(rawValue: $0) != nil }) else {
            return usage("unknown role in \"\(a.values["--role"] ?? "")\" (available: router, retry, deadletters, webhooks)")
        }
        let roles = Set(roleNames.compactMap(ServiceRole.init(rawValue:)))
        guard let level = Log.Level(rawValue: a.values["--log-level"] ?? "info") else {
            return usage("--log-level must be debug, info, warn or error")
        }
        // Bounded: the drain's deadline is the monotonic clock plus this.
        let drainMs = Int64(a.values["--drain-ms"] ?? "10000") ?? -1
        guard (0...3_600_000).contains(drainMs) else {
            return usage("--drain-ms must be a whole number of milliseconds from 0 to 3600000 (an hour)")
        }
        let file = a.values["--config"] ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment, workingDirectory: context.workingDirectory)
        guard let config = report.config else {
            for problem in report.errors { context.output.err("pushgw run: \(problem)") }
            return 2
        }
        let redis: RedisConnection.Config
        do {
            redis = try config.redis.connection()
        } catch {
            context.output.err("pushgw run: \(file): redis.url: \(error)")
            return 2
        }
        var hostname = [CChar](repeating: 0, count: 256)
        gethostname(&hostname, hostname.count)
        let consumer = a.values["--consumer"] ?? "\(stringFromCBuffer(hostname))-\(getpid())"
        let log = Log(minimum: level)
        for warning in report.warnings { log.warn("config warning", ["error": warning.description]) }
        let descriptors = DescriptorLimit.raiseSoftToHard()
        if descriptors.after.soft > descriptors.before.soft {
            log.info("file descriptor limit raised", ["from": descriptors.before.soft, "to": descriptors.after.soft])
        }
        let service = GatewayProcess(config: config, redis: redis, roles: roles, consumer: consumer, drainMs: drainMs, log: log)
        service.loadConfig = {
            GatewayConfig.load(file: file, environment: context.environment, workingDirectory: context.workingDirectory)
        }
        service.onConsumerNameTaken = { problem in
            context.output.err("pushgw run: \(problem); give each process its own --consumer (default: host-pid)")
        }
        return service.run()
    }
}
