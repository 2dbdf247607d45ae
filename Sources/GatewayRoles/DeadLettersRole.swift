import DeadLetters
import EventLoop
import GatewayConfiguration
import CallStorage
import RedisClient

/// The `deadletters` role of `pushgw run` (docs/architecture.md): dead-letter retention for
/// every configured app, on its own Redis connection. Trims are logged (never silent) and
/// `retention.aboutToRemove` is what the metrics endpoint reports before entries go.
///
/// Loop-owned. To run it in a service: `let role = DeadLettersRole(loop:config:redis:log:)`,
/// `role.start()` after the loop exists, `role.close()` on the way out.
package final class DeadLettersRole {
    /// Its own connection to one Redis, or its own cluster client (`redis.cluster`).
    package let topology: RedisTopology
    package let store: DeadLetterStore
    package let retention: DeadLetterRetention
    /// Per app, what the next trim will remove, sampled once per retention interval so that metrics
    /// show it before it happens; nil until the first sample.
    package private(set) var aboutToRemove: [String: DeadLetterStore.PendingTrim] = [:]
    private var sampler: LoopTimer!
    /// As often as retention runs: sampling costs a few commands per app.
    private var sampleEveryMs: Int64 { retention.intervalMs }

    /// `redis`: how to connect (`RedisConfig.connection`); `sentinels` the process's shared
    /// watch of them, if any; `cluster` the cluster client's settings on Redis Cluster.
    package init(loop: EventLoop, config: GatewayConfig, redis: RedisConnection.Config, sentinels: RedisSentinels? = nil,
                cluster clusterSettings: RedisCluster.Config? = nil, log: Log, intervalMs: Int64 = 60_000) {
        topology = .own(loop: loop, redis: redis, sentinels: sentinels, cluster: clusterSettings, clientName: "pushgw-deadletters")
        store = DeadLetterStore(topology: topology, prefix: config.redis.prefix, windows: config.retentionWindows)
        let apps = config.apps.keys.sorted().map { id in
            DeadLetterRetention.App(keys: AppKeys(prefix: config.redis.prefix, app: id), policy: config.apps[id]!.deadLetters)
        }
        retention = DeadLetterRetention(loop: loop, store: store, apps: apps, intervalMs: intervalMs)
        sampler = LoopTimer(loop: loop) { [unowned self] in self.sample() }
        retention.onTrim = { app, trim in
            log.warn("dead letters removed by retention", ["app": app, "by_age": trim.byAge, "by_count": trim.byCount,
                                                           "by_size": trim.bySize])
        }
        retention.onError = { app, error in
            log.warn("dead-letter retention failed; retried next interval", ["app": app, "error": "\(error)"], limited: true)
        }
    }

    package func start() {
        topology.start()
        retention.start()
        sample()
    }

    private func sample() {
        retention.aboutToRemove { [weak self] results in
            guard let self else { return }
            for (app, result) in results {
                if case let .success(pending) = result { self.aboutToRemove[app] = pending } else { self.aboutToRemove[app] = nil }
            }
            self.sampler.schedule(afterMs: self.sampleEveryMs)
        }
    }

    package func close() {
        sampler.close()
        retention.close()
        topology.close()
    }
}
