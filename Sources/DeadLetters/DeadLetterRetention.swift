import EventLoop
import CallStorage
import RedisClient

/// Dead-letter retention, the periodic work of the `deadletters` role: every `intervalMs` it
/// trims each app's dead stream to the app's maximum count and age (exact XTRIM MINID, then
/// MAXLEN, Redis-server clock) and then its maximum size (the oldest entries, as long as the
/// stream's memory is over it), in one script per app.
///
/// Trimming is never silent (sidekiq discussions #5011, #6428: dead jobs lost at a cap nobody
/// watched): `onTrim` reports every trim that removed entries, `stats` counts them, and
/// `aboutToRemove` tells the metrics endpoint, *before* it happens, how many entries the next
/// trim will remove — those past the age limit by the time it runs, and those beyond the count.
/// Several processes may run it against one Redis: trims are idempotent.
///
/// Loop-owned: create, `start()`, call everything on the loop thread, `close()` at the end.
/// The store's connection belongs to the caller.
public final class DeadLetterRetention {
    /// One app's stream and policy.
    public struct App: Sendable {
        public let keys: AppKeys
        public let policy: DeadLetterRetentionPolicy

        public init(keys: AppKeys, policy: DeadLetterRetentionPolicy) {
            self.keys = keys
            self.policy = policy
        }
    }

    /// What retention removed from one app since start.
    public struct AppStats: Equatable, Sendable {
        public var trimmedByAge: Int64 = 0
        public var trimmedByCount: Int64 = 0
        public var trimmedBySize: Int64 = 0
        /// Trims that failed (Redis unreachable, …); retried at the next interval.
        public var failures = 0
        /// Redis-server unix ms of the last successful trim.
        public var lastTrimMs: Int64?
    }

    public let apps: [App]
    /// Time between two trims of every app, ms.
    public let intervalMs: Int64
    /// Called after each app's trim that removed entries: the app id and what went.
    public var onTrim: ((String, DeadLetterStore.Trim) -> Void)?
    /// Called when an app's trim failed.
    public var onError: ((String, RedisError) -> Void)?
    public private(set) var stats: [String: AppStats] = [:]

    private let loop: EventLoop
    private let store: DeadLetterStore
    private var timer: LoopTimer!
    private var running = false
    private var closed = false

    public init(loop: EventLoop, store: DeadLetterStore, apps: [App], intervalMs: Int64 = 60_000) {
        precondition(intervalMs > 0, "the retention interval must be positive")
        self.loop = loop
        self.store = store
        self.apps = apps
        self.intervalMs = intervalMs
        for app in apps { stats[app.keys.app] = AppStats() }
        timer = LoopTimer(loop: loop) { [unowned self] in self.tick() }
    }

    /// Trims once now, then every `intervalMs`.
    public func start() {
        loop.assertInLoop()
        timer.schedule(afterMs: 0)
    }

    /// Stops the timer; a pass in flight completes but schedules nothing.
    public func close() {
        closed = true
        timer.close()
    }

    private func tick() {
        guard !closed else { return }
        trimNow { [weak self] _ in
            guard let self, !self.closed else { return }
            self.timer.schedule(afterMs: self.intervalMs)
        }
    }

    /// Trims every app once now (apps in parallel on the connection's pipeline) and reports
    /// each app's result. A pass already running is not doubled: the call waits for nothing
    /// and completes with an empty dictionary.
    public func trimNow(completion: @escaping ([String: Result<DeadLetterStore.Trim, RedisError>]) -> Void) {
        loop.assertInLoop()
        guard !running, !apps.isEmpty else { return completion([:]) }
        running = true
        var results: [String: Result<DeadLetterStore.Trim, RedisError>] = [:]
        var remaining = apps.count
        for app in apps {
            let id = app.keys.app
            store.trim(app.keys, maxEntries: app.policy.maxEntries, maxAgeMs: Int64(app.policy.maxAgeSeconds) * 1000,
                       maxBytes: app.policy.maxBytes) { [weak self] result in
                guard let self else { return }
                results[id] = result
                switch result {
                case let .success(trim):
                    self.stats[id, default: AppStats()].trimmedByAge += trim.byAge
                    self.stats[id, default: AppStats()].trimmedByCount += trim.byCount
                    self.stats[id, default: AppStats()].trimmedBySize += trim.bySize
                    self.stats[id, default: AppStats()].lastTrimMs = trim.serverTimeMs
                    if trim.total > 0 { self.onTrim?(id, trim) }
                case let .failure(error):
                    self.stats[id, default: AppStats()].failures += 1
                    self.onError?(id, error)
                }
                remaining -= 1
                if remaining == 0 {
                    self.running = false
                    completion(results)
                }
            }
        }
    }

    /// Per app: the dead stream's length and how many entries the next trim will remove —
    /// by age, those that will be past the limit `horizonMs` from now (default: one
    /// interval, the latest the next trim runs), by count, those beyond the maximum, and by
    /// size, the oldest of the rest over the maximum memory.
    /// Changes nothing; for metrics and `pushgw dead stats`.
    public func aboutToRemove(horizonMs: Int64? = nil,
                              completion: @escaping ([String: Result<DeadLetterStore.PendingTrim, RedisError>]) -> Void) {
        loop.assertInLoop()
        DeadLetterRetention.pendingTrims(store: store, apps: apps, horizonMs: horizonMs ?? intervalMs, completion: completion)
    }

    /// `aboutToRemove` without a runner (the CLI has no timer).
    public static func pendingTrims(store: DeadLetterStore, apps: [App], horizonMs: Int64,
                                    completion: @escaping ([String: Result<DeadLetterStore.PendingTrim, RedisError>]) -> Void) {
        guard !apps.isEmpty else { return completion([:]) }
        var results: [String: Result<DeadLetterStore.PendingTrim, RedisError>] = [:]
        var remaining = apps.count
        for app in apps {
            store.pendingTrim(app.keys, maxEntries: app.policy.maxEntries, maxAgeMs: Int64(app.policy.maxAgeSeconds) * 1000,
                              maxBytes: app.policy.maxBytes, horizonMs: horizonMs, scanLimit: app.policy.maxEntries + 1000) { result in
                results[app.keys.app] = result
                remaining -= 1
                if remaining == 0 { completion(results) }
            }
        }
    }
}
