import AdminEndpoint
import BuildVersion
import IngestEndpoint
import EventLoop
import GatewayConfiguration
import GatewayRoles
import Glibc
import CallStorage
import RedisClient

/// The running service, and the one place that wires a pushgw process together: it owns the
/// loop and every long-lived object (the store, the APNs pools, the roles, the admin
/// endpoint), connects them to each other, keeps them out of top-level code (C callbacks
/// must not touch globals), and tears them down in order. `pushgw run` (`RunCommand`) parses
/// the command line and hands the checked config here.
final class GatewayProcess {
    private let loop = EventLoop()
    private var config: GatewayConfig
    /// systemd's view of the service (`Type=notify`): ready, reloading, stopping, alive.
    private lazy var notifications = ServiceNotifications(loop: loop)
    /// Reads the config file again (SIGHUP), with the same path and environment as at start.
    var loadConfig: (() -> ConfigReport)?
    /// The router role's parts (nil without it).
    private let store: CallStore
    private let pools: ApnsPools
    /// The FCM clients (per FCM credential) the router rings Android devices with.
    private let fcmPools: FcmPools
    private let runner: RouterRole?
    /// The sentinels, when Redis runs under Sentinel: one watch shared by every connection.
    private let sentinels: RedisSentinels?
    /// The retry role's parts: the mover has a connection (or cluster client) of its own, so its
    /// looks never wait behind the router's commands (nil without the role).
    private let moverTopology: RedisTopology?
    private let mover: RetryRole?
    private let log: Log
    private let drainMs: Int64
    private var signals: [SignalWatch] = []
    private var draining = false
    private let deadLetters: DeadLettersRole?
    /// The webhooks role, when asked for and some app has `webhooks`.
    private let webhooks: WebhooksRole?
    private let admin: GatewayAdmin
    /// The producers' HTTP API (`ingest`), when configured.
    private let ingest: IngestEndpoint?
    /// Told why the service refuses to run: its consumer name is another live gateway's.
    var onConsumerNameTaken: ((String) -> Void)?
    private var exitStatus: Int32 = 0

    /// `redis`: how every Redis connection of the process connects (`RedisConfig.connection`).
    init(config: GatewayConfig, redis: RedisConnection.Config, roles: Set<ServiceRole>, consumer: String, drainMs: Int64, log: Log) {
        self.config = config
        self.log = log
        self.drainMs = drainMs
        let apps = AppRuntime.all(config)
        let loop = self.loop
        let sentinels = redis.sentinel.map { RedisSentinels(loop: loop, options: $0, tls: redis.tls, watchdogMs: redis.watchdogMs) }
        self.sentinels = sentinels
        // The store and the pools serve the admin endpoint (readiness, backlog) in every role.
        let clusterConfig = try? config.redis.cluster(clientName: "pushgw-write")
        let store = CallStore(config: CallStore.Config(prefix: config.redis.prefix, windows: config.retentionWindows), apps: apps.map(\.keys),
                              topology: .own(loop: loop, redis: redis, sentinels: sentinels, cluster: clusterConfig,
                                             clientName: "pushgw-write"))
        let pools = ApnsPools(loop: loop, config: config, log: log)
        let fcmPools = FcmPools(loop: loop, config: config, log: log)
        self.store = store
        self.pools = pools
        self.fcmPools = fcmPools
        var routerSettings = RouterRoleSettings(consumer: consumer)
        routerSettings.callLinesPerSecond = config.log.callsPerSecond
        runner = roles.contains(.router)
            ? RouterRole(loop: loop, store: store, pools: pools, fcmPools: fcmPools, apps: apps,
                            settings: routerSettings, log: log)
            : nil
        if roles.contains(.retry) {
            let topology = RedisTopology.own(loop: loop, redis: redis, sentinels: sentinels, cluster: clusterConfig,
                                             clientName: "pushgw-retry")
            moverTopology = topology
            let retryRole = RetryRole(loop: loop, schedule: RetrySchedule(topology: topology, config: .init(prefix: config.redis.prefix)),
                                      log: log)
            retryRole.apps = apps.map(\.keys)
            mover = retryRole
        } else {
            moverTopology = nil
            mover = nil
        }
        if let runner, let mover {
            runner.onRetryScheduled = { [unowned mover] due in mover.retryScheduled(dueAtMs: due) }
        }
        deadLetters = roles.contains(.deadletters)
            ? DeadLettersRole(loop: loop, config: config, redis: redis, sentinels: sentinels, cluster: clusterConfig, log: log)
            : nil
        let webhooksRole = roles.contains(.webhooks)
            ? WebhooksRole(loop: loop, config: config, redis: redis, sentinels: sentinels, cluster: clusterConfig, consumer: consumer,
                           log: log)
            : nil
        webhooks = webhooksRole?.isActive == true ? webhooksRole : nil
        if let webhooksRole, !webhooksRole.isActive { webhooksRole.close() }
        switch store.topology {
        case .cluster(let cluster): log.follow(cluster, name: "write")
        case .single: for link in store.links { log.follow(link.connection, name: link.name) }
        }
        if let moverTopology { log.follow(moverTopology, name: "retry") }
        if let sentinels { log.follow(sentinels) }
        if let deadLetters { log.follow(deadLetters.topology, name: "deadletters") }
        if let webhooks { log.follow(webhooks.topology, name: "webhooks") }
        admin = GatewayAdmin(loop: loop, config: config.admin, apps: apps, store: store, pools: pools,
                             runner: runner, log: log)
        admin.deadLetters = deadLetters
        admin.webhooks = webhooks
        admin.otherRedis = [moverTopology].compactMap { $0 }
        admin.sentinels = sentinels
        admin.metrics.certificateExpiries(config.certificateExpiries(nowS: Clock.unixMs() / 1000))
        runner?.observations = admin
        admin.openConsole = { [unowned admin = self.admin] token in
            GatewayConsole(loop: loop, config: config, redis: redis, sentinels: sentinels, cluster: clusterConfig,
                           adminToken: token, guesses: admin.guesses, log: log,
                           gateway: (consumer, ServiceRole.allCases.filter(roles.contains).map(\.rawValue)),
                           figures: { admin.consoleFigures() })
        }
        ingest = config.ingest.map { IngestEndpoint(loop: loop, config: $0, apps: apps, topology: store.topology, log: log) }
        log.info("pushgw starting", ["version": BuildVersion.version, "commit": BuildVersion.commit,
                                     "apps": apps.map(\.id), "roles": ServiceRole.allCases.filter(roles.contains).map(\.rawValue),
                                     "consumer": consumer, "redis": config.redis.redactedURL])
    }

    /// What systemd shows for the running service (`systemctl status`).
    private var statusLine: String {
        "running for \(config.apps.count) app\(config.apps.count == 1 ? "" : "s")"
    }

    /// Runs until a signal drained the service; returns the exit status.
    func run() -> Int32 {
        for sig in [SIGTERM, SIGINT] {
            signals.append(SignalWatch(loop: loop, signal: sig) { [unowned self] s in self.shutdown(signal: s) })
        }
        signals.append(SignalWatch(loop: loop, signal: SIGHUP) { [unowned self] _ in self.reload() })
        runner?.onConsumerNameTaken = { [unowned self] problem in
            self.onConsumerNameTaken?(problem)
            self.exitStatus = 2
            self.draining = true
            self.mover?.stop()
            self.loop.stop()
        }
        admin.start()
        ingest?.start()
        store.start()
        moverTopology?.start()
        runner?.start()
        mover?.start()
        deadLetters?.start()
        webhooks?.start()
        notifications.start(status: statusLine)
        loop.run()
        notifications.close()
        ingest?.close()
        admin.close()
        for s in signals { s.close() }
        mover?.close()
        moverTopology?.close()
        deadLetters?.close()
        webhooks?.close()
        pools.close()
        fcmPools.close()
        store.close()
        sentinels?.close()
        for (name, topology) in [("write", store.topology), ("retry", moverTopology)] {
            guard case .cluster(let client)? = topology else { continue }
            let stats = client.stats
            log.info("redis cluster redirects followed", ["connection": name, "moved": stats.moved, "asked": stats.asked,
                                                          "retried_later": stats.retriedLater, "map_refreshes": stats.refreshes])
        }
        log.info("pushgw stopped", ["finished": runner?.stats.finished ?? [:], "retries_moved": mover?.stats.moved ?? 0])
        return exitStatus
    }

    /// SIGHUP: applies a new config without a restart. A config with errors is refused and the
    /// running one stays. Pools of unchanged credentials keep their connections; apps are
    /// added, changed and removed for new reads (calls in flight finish as they started).
    /// Redis and the admin endpoint are not reloaded: they need a restart, and a config that
    /// changes them is refused so the operator is not misled.
    private func reload() {
        guard !draining, let loadConfig else { return }
        notifications.reloading()
        defer { notifications.reloaded(status: statusLine) }
        let report = loadConfig()
        guard let newConfig = report.config else {
            log.error("config reload refused; the running config stays",
                      ["problems": report.errors.map(\.description)])
            return
        }
        let sameIngest = switch (config.ingest, newConfig.ingest) {
        case (nil, nil): true
        case let (old?, new?): new.listensAs(old)
        default: false
        }
        guard newConfig.redis == config.redis, newConfig.admin == config.admin, sameIngest else {
            log.error("config reload refused; the running config stays",
                      ["problems": ["redis, admin and ingest listener settings change only with a restart (ingest's apps, keys and rates reload)"]])
            return
        }
        let webhooksChanged = Set(config.apps.keys).union(newConfig.apps.keys).filter {
            config.apps[$0]?.webhooks != newConfig.apps[$0]?.webhooks
        }
        guard webhooksChanged.isEmpty else {
            log.error("config reload refused; the running config stays",
                      ["problems": ["webhooks change only with a restart (apps \(webhooksChanged.sorted().joined(separator: ", ")))"]])
            return
        }
        for warning in report.warnings { log.warn("config warning", ["error": warning.description]) }
        let pooled = pools.apply(newConfig)
        let fcmPooled = fcmPools.apply(newConfig)
        let apps = AppRuntime.all(newConfig)
        store.updateApps(apps.map(\.keys), windows: newConfig.retentionWindows)
        mover?.apps = apps.map(\.keys)
        runner?.updateApps(apps)
        runner?.updateCallLinesPerSecond(newConfig.log.callsPerSecond)
        admin.updateApps(apps)
        if let ingest, let newIngest = newConfig.ingest { _ = ingest.apply(newIngest, apps: apps) }
        admin.metrics.certificateExpiries(newConfig.certificateExpiries(nowS: Clock.unixMs() / 1000))
        admin.console?.updateApps(newConfig)
        let before = Set(config.apps.keys), after = Set(newConfig.apps.keys)
        let changed = before.intersection(after).filter { config.apps[$0] != newConfig.apps[$0] }
        log.info("config reloaded", ["apps_added": after.subtracting(before).sorted(),
                                     "apps_removed": before.subtracting(after).sorted(),
                                     "apps_changed": changed.sorted(), "credentials_reopened": (pooled.reopened + fcmPooled.reopened).sorted(),
                                     "credentials_closed": (pooled.closed + fcmPooled.closed).sorted()])
        config = newConfig
    }

    /// Stops the mover at once (a move in flight completes in Redis either way) and drains the
    /// router; the loop stops when the router is done.
    private func shutdown(signal: Int32) {
        guard !draining else { return }
        draining = true
        admin.draining = true  // /readyz answers 503 while draining
        notifications.stopping()
        log.info("draining", ["signal": signal, "in_flight": runner?.inFlight ?? 0])
        mover?.stop()
        guard let runner else { return loop.stop() }
        runner.drain(timeoutMs: drainMs) { [unowned self] in self.loop.stop() }
    }
}
