// AdminEndpoint: observability and operators' access of a running gateway: the metrics
// (GatewayMetrics over the registry of Metrics.swift), the gateway snapshot, the HTTP admin
// server (AdminServer on evhttp) with its routes, access rules and guess limits, the Redis probe behind
// /readyz, and the wiring of the operators' console (GatewayConsole).
// Owns: what the process shows and lets operators do over HTTP (docs/operations.md).
// Must not: hold business rules or drive the roles: it reads the roles' objects (GatewayRoles)
// at scrape time and is told about events; the command line wires it into a process.
import HTTPMessages
import APNs
import FCM
import BuildVersion
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import OperatorsConsole
import CallStorage
import RedisClient
import Routing
import JSONOutput

/// The admin endpoint of a running gateway: `/metrics`, `/healthz`, `/readyz` and
/// the token-protected admin API, on the process's loop. Owns the HTTP server, the metrics and
/// the Redis probe; reads everything else from the service's objects at scrape time.
///
/// It is the router's `RouterObservations` (the owner sets `RouterRole.observations` to it):
/// what the router reports goes to the metrics and to the console's live figures.
///
/// Lifecycle: create it with the service's objects, `start()` before the loop runs, `close()`
/// after it stopped. A port already in use does not stop the gateway: the error is logged and
/// the bind is retried every `rebindEveryMs` (routing matters more than metrics; a health
/// probe that cannot connect says the rest). An unreadable token file closes the admin API
/// (403) instead of opening it. Loop-owned.
package final class GatewayAdmin {
    package struct Settings: Sendable {
        /// `/readyz` wants a successful PING at most this old.
        package var maxPingAgeMs: Int64 = 5_000
        package var probe = RedisProbe.Settings()
        /// Retry period of a failed bind.
        package var rebindEveryMs: Int64 = 5_000
        /// Idle connections and slow writes are closed after this many seconds (evhttp's timeout).
        package var idleTimeoutSeconds: Int32 = AdminServer.timeoutSeconds
        /// The bounds on the endpoint's connections; the caps come from the config
        /// (`admin.max_connections`, `admin.max_connections_per_client`).
        package var limits = AdminServer.Limits()
        /// `/metrics` serves the same rendering until it is this old: a scrape flood then costs
        /// the loop one rendering per interval, not one per request.
        package var metricsMaxAgeMs: Int64 = 1_000
        /// How often the Redis nodes' memory policy is read (`RedisEvictionCheck`).
        package var evictionCheckEveryMs: Int64 = 60_000
        /// The limits on wrong tokens (docs/operations.md, "Limits").
        var guesses = GuessThrottle.Settings()
        package init() {}
    }

    /// The metrics, fed by the router through this endpoint's `RouterObservations`.
    package let metrics = GatewayMetrics()
    /// The guess limits of every token check: the admin API's bearer and the console's
    /// sign-in (`openConsole` hands them to `GatewayConsole`).
    package let guesses: CredentialGuard
    /// Set while the service drains: `/readyz` then answers 503.
    package var draining = false

    private let loop: EventLoop
    private let config: AdminConfig
    private var apps: [AppRuntime]
    /// Per app, the tokens of the other environment seen since start, for the console's warning.
    private var mismatches: [String: ConsoleFigures.EnvironmentMismatches] = [:]
    private let store: CallStore
    private let pools: ApnsPools
    private let runner: RouterRole?
    /// The deadletters role, for retention figures; nil when this process runs none.
    package var deadLetters: DeadLettersRole?
    /// The webhooks role, for delivery figures; nil when this process runs none.
    package var webhooks: WebhooksRole? {
        didSet {
            webhooks?.onLatency = { [unowned self] app, ms in self.metrics.webhookLatency.observe([app], Double(ms) / 1000) }
        }
    }
    /// The process's other Redis clients (the retry mover's), and its sentinels, for the
    /// counts of nodes refused as untrusted.
    package var otherRedis: [RedisTopology] = []
    package var sentinels: RedisSentinels?
    /// Opens the operators' console with the admin token (`start` calls it when the token file
    /// is usable); nil: no console (`/console` answers 403).
    package var openConsole: ((AdminToken) -> GatewayConsole)?
    /// The console, once open.
    package private(set) var console: GatewayConsole?
    private let log: Log
    private let settings: Settings
    private let probe: RedisProbe
    /// The Redis nodes' eviction policy and evictions (a `/readyz` problem of its own).
    private let evictionCheck: RedisEvictionCheck
    private var server: AdminServer?
    private var routes: AdminRoutes?
    private let listening: ListenRetry
    private var endpoint: Endpoint?
    private var metricsText: RenderCache

    /// Switches to the apps of a reloaded config (metrics and backlog sampling follow them).
    package func updateApps(_ newApps: [AppRuntime]) {
        apps = newApps
        probe.apps = newApps.map(\.keys)
        metrics.preset(apps: newApps.map(\.id))
    }

    package init(loop: EventLoop, config: AdminConfig, apps: [AppRuntime], store: CallStore, pools: ApnsPools,
                runner: RouterRole?, log: Log, settings: Settings = Settings()) {
        self.loop = loop
        self.config = config
        self.apps = apps
        self.store = store
        self.pools = pools
        self.runner = runner
        self.log = log
        self.settings = settings
        metricsText = RenderCache(maxAgeMs: settings.metricsMaxAgeMs)
        guesses = CredentialGuard(loop: loop, log: log, settings: settings.guesses)
        probe = RedisProbe(loop: loop, store: store, apps: apps.map(\.keys), settings: settings.probe)
        evictionCheck = RedisEvictionCheck(loop: loop, store: store, log: log)
        evictionCheck.everyMs = settings.evictionCheckEveryMs
        listening = ListenRetry(loop: loop, everyMs: settings.rebindEveryMs, log: log, what: "admin endpoint",
                                fix: "set admin.listen (or PUSHGW_ADMIN_LISTEN) to a free address")
        metrics.preset(apps: apps.map(\.id))
    }

    /// The port the endpoint listens on; nil while it is not bound.
    package var port: Int? { server?.boundPort }

    /// Reads the token, opens the console, starts the probe and listens.
    package func start() {
        loop.assertInLoop()
        var token: AdminToken?
        if let file = config.tokenFile {
            do {
                token = try AdminToken.load(file: file)
            } catch {
                log.error("admin API closed: the token file is unusable", ["error": error.description])
            }
        }
        let routes = AdminRoutes(token: token, metrics: { [unowned self] in self.scrape() },
                                 readiness: { [unowned self] in self.readiness() }, guesses: guesses)
        routes.addRoute("/status") { [unowned self] _ in self.status() }
        routes.addSection("/console") { [weak self] request, answer in
            guard let console = self?.console else {
                return answer(.error(403, "the console is closed: no usable admin.token_file is configured"))
            }
            console.handle(request, answer: answer)
        }
        self.routes = routes
        if let token, let openConsole {
            let console = openConsole(token)
            console.start()
            self.console = console
        }
        var limits = settings.limits
        limits.maxConnections = config.maxConnections
        limits.maxConnectionsPerClient = config.maxConnectionsPerClient
        // The name in admin.listen is one clients reach the endpoint by, like admin.public_host.
        let listenHost = Endpoint(parsing: config.listen).map(\.host).map { [$0] } ?? []
        server = AdminServer(loop: loop, timeoutSeconds: settings.idleTimeoutSeconds, limits: limits,
                             publicHosts: config.publicHosts + listenHost, log: log, answering: routes.answer)
        probe.start()
        evictionCheck.start()
        guard let endpoint = Endpoint(parsing: config.listen) else {
            // `config check` refuses such a value; reaching here means a config built in code.
            log.error("admin endpoint not started: admin.listen is not host:port", ["listen": config.listen])
            return
        }
        self.endpoint = endpoint
        if !Endpoint.isLoopback(endpoint.host) {
            log.warn("admin endpoint listens beyond loopback: protect /metrics and /readyz with a firewall",
                     ["listen": endpoint.description])
        }
        if bind() {
            log.info("admin endpoint", ["listen": endpoint.description, "port": port ?? endpoint.port,
                                        "admin_api": token == nil ? "closed" : "open"])
        }
    }

    /// Stops listening and probing. What the router still reports keeps feeding the metrics,
    /// which is harmless.
    package func close() {
        listening.close()
        server?.close()
        server = nil
        console?.close()
        console = nil
        probe.close()
        evictionCheck.close()
        guesses.close()
    }

    /// True when it listens now.
    @discardableResult
    private func bind() -> Bool {
        guard let server, let endpoint else { return false }
        return listening.bind(server, to: endpoint)
    }

    // MARK: Answers

    /// `/readyz`.
    package func readiness() -> Readiness {
        let now = Clock.monotonicMs()
        let unreachable = pools.all.compactMap { key, client -> Readiness.UnreachablePool? in
            client.unreachableSinceMs.map {
                Readiness.UnreachablePool(credential: key.credential, environment: key.environment.rawValue, forMs: now - $0,
                                          reason: client.unreachableReason)
            }
        }
        var readiness = Readiness.evaluate(nowMs: now, lastPingOkMs: probe.lastPingOkMs, maxPingAgeMs: settings.maxPingAgeMs,
                                           lastPingError: probe.lastPingError, draining: draining, unreachablePools: unreachable,
                                           refusingWrites: probe.refusingWrites)
        readiness.problems += evictionCheck.problems
        return readiness
    }

    /// `/metrics`: the pulled figures copied in, then the registry rendered — at most once per
    /// `Settings.metricsMaxAgeMs`; scrapes in between get the same text.
    package func scrape() -> String {
        metricsText.text(nowMs: Clock.monotonicMs()) {
            metrics.update(snapshot())
            return metrics.render()
        }
    }

    /// The pulled figures of this moment.
    package func snapshot() -> GatewaySnapshot {
        let now = Clock.monotonicMs()
        var s = GatewaySnapshot()
        s.apps = apps.map(\.id)
        s.appsWithReceipts = apps.filter { $0.policy.ringReceiptTimeoutMs != nil }.map(\.id)
        s.process = ProcessFigures.read()
        if let runner {
            s.router = runner.stats
            s.callsInFlight = runner.inFlight
            s.callsInFlightByApp = runner.inFlightByApp
            s.throttledSecondsByApp = runner.throttledSecondsByApp
            s.unhealthyApps = runner.unhealthyApps
            s.pausedApps = runner.pausedApps
            s.appsMissingReceipts = runner.appsMissingReceipts
            s.withheldApps = runner.withheldApps.mapValues { (forMs: now - $0.sinceMs, nextProbeInMs: max(0, $0.nextProbeAtMs - now)) }
        }
        for (key, client) in pools.all {
            var pool = GatewaySnapshot.Pool(credential: key.credential, environment: key.environment.rawValue,
                                            stats: client.stats, inFlight: client.inFlightCount, queued: client.queuedCount,
                                            connectionsByState: client.connectionsByState)
            pool.unreachableForMs = client.unreachableSinceMs.map { now - $0 }
            s.pools.append(pool)
            // One source per key, shared by both environments' pools: the same figure twice.
            if case let .token(source) = client.settings.authentication {
                s.jwtRenewals[key.credential] = source.renewals
            }
        }
        s.redisLinks = store.links.map {
            GatewaySnapshot.RedisLink(name: $0.name, ready: $0.connection.isReady, stats: $0.connection.stats,
                                      writeRefusals: $0.connection.writeRefusals)
        }
        s.redisReachable = probe.lastPingOkMs.map { now - $0 <= settings.maxPingAgeMs } ?? false
        s.backlog = probe.backlog(nowMs: now)
        s.redisRefusedNodes = refusedNodes()
        s.redisEvictingNodes = evictionCheck.nodes.mapValues(\.evicts)
        s.redisEvictedKeys = evictionCheck.evicted
        if let webhooks { s.webhooks = webhooks.stats }
        if let deadLetters {
            s.deadLettersToTrim = deadLetters.aboutToRemove.mapValues(\.total)
            s.deadLettersTrimmed = deadLetters.retention.stats.mapValues { ($0.trimmedByAge, $0.trimmedByCount, $0.trimmedBySize) }
        }
        return s
    }

    /// Nodes refused as untrusted by kind, summed over every Redis client of the process; every
    /// kind present, so that a refusal shows as a rise from 0.
    private func refusedNodes() -> [String: Int] {
        var out = Dictionary(uniqueKeysWithValues: RedisNodeRefusal.Kind.allCases.map { ($0.rawValue, 0) })
        for topology in [store.topology, deadLetters?.topology, console?.topology].compactMap({ $0 }) + otherRedis {
            guard case .cluster(let cluster) = topology else { continue }
            for (kind, count) in cluster.stats.refused { out[kind.rawValue, default: 0] += count }
        }
        out[RedisNodeRefusal.Kind.sentinel.rawValue, default: 0] += sentinels?.refused ?? 0
        return out
    }

    /// The console overview's figures of this moment (no I/O).
    package func consoleFigures() -> ConsoleFigures {
        let s = snapshot()
        let apps = self.apps.map { a in
            var app = ConsoleFigures.App(id: a.id, bundleID: a.policy.bundleID, environment: a.policy.environment.rawValue,
                                         refusal: s.refusal(of: a.id), backlog: s.backlog[a.id]?.length,
                                         pending: s.backlog[a.id]?.pending, environmentMismatches: mismatches[a.id])
            app.ringReceipts = a.policy.ringReceiptTimeoutMs != nil
            app.receiptsMissing = s.appsMissingReceipts[a.id]
            if let runner {
                app.limits = ConsoleFigures.Limits(maxInFlight: a.limits.maxInFlight ?? runner.settings.perAppInFlight,
                                                   maxInFlightSet: a.limits.maxInFlight != nil,
                                                   eventsPerSecond: a.limits.eventsPerSecond,
                                                   burst: a.limits.eventsPerSecond.map { a.limits.burst ?? $0 },
                                                   inFlight: s.callsInFlightByApp[a.id] ?? 0,
                                                   throttledSeconds: s.throttledSecondsByApp[a.id])
            }
            return app
        }
        let problems = readiness().problems.map { p in
            [p.check, p.node, p.credential.map { "credential \($0)" }, p.detail].compactMap { $0 }.joined(separator: ": ")
        }
        return ConsoleFigures(apps: apps, redisReachable: s.redisReachable, callsInFlight: s.callsInFlight, readinessProblems: problems)
    }

    /// `GET /status` (admin API): what this process is doing, as JSON.
    private func status() -> HTTPResponse {
        let s = snapshot()
        let ready = readiness()
        var object: [String: Any] = [
            "version": BuildVersion.version,
            "commit": BuildVersion.commit,
            "apps": s.apps,
            "ready": ready.isReady,
            "draining": draining,
            "redis_reachable": s.redisReachable,
            "calls_in_flight": s.callsInFlight,
            "unhealthy_apps": s.unhealthyApps,
            "withheld_apps": s.withheldApps.mapValues { ["for_ms": $0.forMs, "next_probe_in_ms": $0.nextProbeInMs] },
            "receipts_missing_apps": s.appsMissingReceipts.mapValues { ["calls_without_receipt": $0] },
            "paused_apps": s.pausedApps.sorted(),
        ]
        object["pools"] = s.pools.sorted { ($0.credential, $0.environment) < ($1.credential, $1.environment) }.map { p -> [String: Any] in
            ["credential": p.credential, "environment": p.environment, "in_flight": p.inFlight, "queued": p.queued,
             "connections": p.connectionsByState, "sent": p.stats.sent, "answered": p.stats.answered]
        }
        object["backlog"] = s.backlog.mapValues { ["length": $0.length, "pending": $0.pending] }
        return HTTPResponse(status: 200, contentType: "application/json", body: OrderedJSON(loggable: object).text)
    }
}

extension GatewayAdmin: RouterObservations {
    package func eventsReceived(app: String, claimed: Bool, count: Int) {
        metrics.eventsReceived(app: app, claimed: claimed, count: count)
    }

    package func apnsAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {
        metrics.apnsAnswered(app: app, channel: channel, status: status, reason: reason, latencySeconds: latencySeconds)
    }

    package func apnsFailed(app: String, channel: PushChannel, error: ApnsClientError, latencySeconds: Double) {
        metrics.apnsFailed(app: app, channel: channel, error: error, latencySeconds: latencySeconds)
    }

    package func fcmAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {
        metrics.fcmAnswered(app: app, channel: channel, status: status, reason: reason, latencySeconds: latencySeconds)
    }

    package func fcmFailed(app: String, channel: PushChannel, error: FcmClientError, latencySeconds: Double) {
        metrics.fcmFailed(app: app, channel: channel, error: error, latencySeconds: latencySeconds)
    }

    package func fallback(app: String, cause: FallbackCause) {
        metrics.fallback(app: app, cause: cause)
    }

    package func voipSuspected(app: String, count: Int) {
        metrics.voipSuspected(app: app, count: count)
    }

    package func tokenFeedback(app: String, feedback: InvalidToken) {
        metrics.tokenFeedback(app: app, feedback: feedback)
        if let environment = feedback.environment {
            var seen = mismatches[app] ?? ConsoleFigures.EnvironmentMismatches(count: 0, acceptedIn: environment, lastAtMs: 0)
            seen.count += 1
            seen.acceptedIn = environment
            seen.lastAtMs = feedback.timestampMs
            mismatches[app] = seen
        }
    }

    package func callRecorded(app: String, record: OutcomeRecord) {
        metrics.callRecorded(app: app, record: record)
        console?.recorded(app: app, outcome: record.outcome.rawValue, cause: record.cause?.rawValue, latencyMs: record.latencyMs)
        if let console, record.devices != nil {
            for latencyMs in GatewayMetrics.ringLatenciesMs(record) { console.rang(app: app, latencyMs: latencyMs) }
        }
    }
}

/// A text rendered at most once per `maxAgeMs` and served again in between. Pure: the caller
/// passes the time.
struct RenderCache {
    let maxAgeMs: Int64
    private var last: (text: String, atMs: Int64)?

    init(maxAgeMs: Int64) {
        precondition(maxAgeMs >= 0, "a cache age is not negative")
        self.maxAgeMs = maxAgeMs
    }

    mutating func text(nowMs: Int64, render: () -> String) -> String {
        if let last, nowMs - last.atMs < maxAgeMs { return last.text }
        let text = render()
        last = (text, nowMs)
        return text
    }
}
