import HTTPMessages
import DeadLetters
import EventLoop
import GatewayConfiguration
import GatewayRoles
import OperatorsConsole
import BuildVersion
import CallStorage
import RedisClient

/// The operators' console of a running gateway (docs/operations.md, "Console"): the
/// `OperatorsConsole` module's pages, given a Redis connection of their own (a page's reads
/// never queue behind the router's writes), the dead-letter operations of `pushgw dead`, the
/// tokens, and the admin endpoint's figures. `GatewayAdmin` routes `/console/…` here.
///
/// Loop-owned: `start` after the loop exists (the connection connects lazily), `close` at the end.
package final class GatewayConsole {
    /// Its own connection to one Redis, or its own cluster client (`redis.cluster`).
    package let topology: RedisTopology
    let console: OperatorsConsole
    private let operations: DeadLetterOperations
    /// Adds this process's counts to the fleet's every `fleetFlushEveryMs` (`OperatorsConsole+Fleet`).
    private var fleetTimer: LoopTimer?
    static let fleetFlushEveryMs: Int64 = 5_000

    /// It needs the admin token (read by `GatewayAdmin`) and the endpoint's guess limits
    /// (`GatewayAdmin.guesses`: a sign-in draws on the same counts as a bearer check). An
    /// unreadable or weak read-only token file leaves read-only access off (logged).
    package init(loop: EventLoop, config: GatewayConfig, redis: RedisConnection.Config, sentinels: RedisSentinels?,
                 cluster clusterSettings: RedisCluster.Config? = nil, adminToken: AdminToken, guesses: CredentialGuard,
                 log: Log, gateway: (name: String, roles: [String]), figures: @escaping () -> ConsoleFigures) {
        topology = .own(loop: loop, redis: redis, sentinels: sentinels, cluster: clusterSettings, clientName: "pushgw-console")
        log.follow(topology, name: "console")
        let operations = DeadLetterOperations(loop: loop, store: DeadLetterStore(topology: topology, prefix: config.redis.prefix, windows: config.retentionWindows),
                                              policies: config.apps.mapValues(\.deadLetters), ringTimeoutsMs: config.ringTimeoutsMs)
        self.operations = operations
        var readonly: AdminToken?
        if let file = config.admin.readonlyTokenFile {
            do {
                readonly = try AdminToken.load(file: file)
            } catch {
                log.error("console read-only access off: the token file is unusable", ["error": "\(error)"])
            }
        }
        let admin = adminToken
        console = OperatorsConsole(loop: loop, operations: operations, readOnlyAvailable: readonly != nil, signIn: { presented, request in
            if case let .wait(seconds) = guesses.admit(request.peer) { return .throttled(retryAfterSeconds: seconds) }
            if admin.matches(presented: presented) { return .signedIn(.admin) }
            if readonly?.matches(presented: presented) == true { return .signedIn(.readOnly) }
            guesses.failed(request.peer, via: "console sign-in")
            return .wrong
        }, figures: figures)
        console.fleet = FleetFigureStore(topology: topology, prefix: config.redis.prefix)
        let startedMs = Clock.unixMs()
        console.fleetCard = {
            GatewayCard(name: gateway.name, roles: gateway.roles, version: BuildVersion.version, startedMs: startedMs, seenMs: Clock.unixMs(),
                        callsInFlight: figures().callsInFlight)
        }
        let tokens = TokenStore(topology: topology)
        let prefix = config.redis.prefix
        console.suspectedVoipTokens = { app, limit, completion in
            tokens.suspectedVoipTokens(AppKeys(prefix: prefix, app: app), limit: limit) { completion($0.mapError { ConsoleReadError("\($0)") }) }
        }
        console.log = { level, message, fields in
            let object = Dictionary(fields, uniquingKeysWith: { a, _ in a }) as [String: Any]
            switch level {
            case .info: log.info(message, object)
            case .warn: log.warn(message, object, limited: true)
            }
        }
    }

    package func start() {
        topology.start()
        let timer = LoopTimer(loop: console.loop) { [weak self] in
            guard let self else { return }
            self.console.flushFleetFigures()
            self.fleetTimer?.schedule(afterMs: Self.fleetFlushEveryMs)
        }
        fleetTimer = timer
        timer.schedule(afterMs: Self.fleetFlushEveryMs)
    }

    /// The apps of a reloaded config (their dead-letter policies and ring timeouts).
    package func updateApps(_ config: GatewayConfig) {
        operations.policies = config.apps.mapValues(\.deadLetters)
        operations.ringTimeoutsMs = config.ringTimeoutsMs
    }

    package func close() {
        fleetTimer?.cancel()
        fleetTimer?.close()
        fleetTimer = nil
        console.close()
        topology.close()
    }

    /// The router's record hook: one call counted in the overview's last hour.
    func recorded(app: String, outcome: String, cause: String?, latencyMs: Int64?) {
        console.recordOutcome(app: app, outcome: outcome, cause: cause, latencyMs: latencyMs)
    }

    /// A device's ring: its receipt `latencyMs` after its call's XADD.
    func rang(app: String, latencyMs: Int64) {
        console.recordRing(app: app, latencyMs: latencyMs)
    }

    /// Answers a `/console…` request of the admin endpoint: the same request and response
    /// values, every header line kept (two `Set-Cookie` reach the client as two).
    func handle(_ request: HTTPRequest, answer: @escaping (HTTPResponse) -> Void) {
        console.handle(request, respond: answer)
    }
}
