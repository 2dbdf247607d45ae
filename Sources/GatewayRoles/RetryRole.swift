import EventLoop
import CallStorage
import Retry

/// Settings of the retry role.
package struct RetryRoleSettings: Sendable {
    /// The longest sleep between two looks at the due index, ms (`MoverPacing.idlePollMs`):
    /// an idle mover sends at most `1000 / idlePollMs` commands a second.
    package var idlePollMs: Int64 = 50
    /// Apps read from the due index per look (the earliest first).
    var appsPerLook = 100
    /// Retries moved per app per step; a full batch makes the mover look again at once.
    var moveBatch = 500
    /// How long to wait after a Redis error before the next look, ms.
    var errorBackoffMs: Int64 = 200
    /// How often the due index is repaired from the apps' schedules (`RetrySchedule.repairDueIndex`,
    /// one read per app): it finds the retries of a process that died between a schedule step
    /// and its index command. Also once at start.
    var repairEveryMs: Int64 = 300_000

    package init() {}
}

/// The retry role: moves due retries from the durable schedule in Redis back to their
/// app's calls stream, where any router resumes them. It decides nothing about routing and
/// reads no event: it only watches time (`MoverPacing`) and runs `RetrySchedule`'s steps.
///
/// At start and every `repairEveryMs`, the due index is repaired from the configured apps'
/// schedules first (RetrySchedule.swift: the index is a hint kept beside the schedule's steps).
///
/// One look = one `ZRANGE` of the due index (each app's earliest due time); every app already
/// due then gets one move step (a Lua script that XADDs and removes up to `moveBatch` retries
/// and refreshes the app's index score). Several movers may run against one Redis: a move is
/// atomic, so two movers never move one retry twice, and the loser of a race moves nothing.
///
/// Loop-owned: call everything on the loop thread. The caller owns the schedule's connection.
package final class RetryRole {
    /// Counters for metrics, tests and the bench.
    package struct Stats: Equatable, Sendable {
        /// Looks at the due index (one Redis command each).
        package var looks = 0
        /// Move steps run (one Lua script each).
        package var moveSteps = 0
        /// Retries moved back to a calls stream.
        package var moved = 0
        /// Retries dropped for missing data (should stay 0).
        package var dropped = 0
        /// Moved later than 50 ms after their due time (docs/architecture.md), and the worst lateness.
        var movedLate = 0
        var maxLatenessMs: Int64 = 0
        package var redisErrors = 0
    }

    private let loop: EventLoop
    private let schedule: RetrySchedule
    private let settings: RetryRoleSettings
    private let log: Log
    private var pacing: MoverPacing
    private var timer: LoopTimer!
    private var running = false
    private var looking = false
    /// Monotonic ms of the last repair of the due index; nil before the first.
    private var lastRepairMs: Int64?
    /// The configured apps, whose schedules the repair reads (set at start and on a reload).
    package var apps: [AppKeys] = []
    package private(set) var stats = Stats()
    /// Called after each move step with the app id and the lateness (move time − due time, ms)
    /// of each retry it moved.
    package var onMoved: ((String, [Int64]) -> Void)?

    package init(loop: EventLoop, schedule: RetrySchedule, settings: RetryRoleSettings = RetryRoleSettings(), log: Log) {
        self.loop = loop
        self.schedule = schedule
        self.settings = settings
        self.log = log
        pacing = MoverPacing(idlePollMs: settings.idlePollMs)
        timer = LoopTimer(loop: loop) { [unowned self] in self.look() }
    }

    /// Starts looking (at once).
    package func start() {
        running = true
        look()
    }

    /// Stops looking; a move step in flight completes in Redis either way. Idempotent.
    package func stop() {
        running = false
        timer.cancel()
    }

    /// Stops and frees the timer; the mover cannot start again.
    package func close() {
        stop()
        timer.close()
    }

    /// A router of this process scheduled a retry due at `dueAtMs`: wake up for it if that is
    /// before the next planned look (retries scheduled elsewhere are seen at the next look).
    package func retryScheduled(dueAtMs: Int64) {
        guard running else { return }
        if let delay = pacing.retryScheduled(dueAtMs: dueAtMs, now: Clock.unixMs()) { timer.schedule(afterMs: delay) }
    }

    private func look() {
        guard running, !looking else { return }
        let nowMs = Clock.monotonicMs()
        if !apps.isEmpty, lastRepairMs.map({ nowMs - $0 >= settings.repairEveryMs }) ?? true {
            lastRepairMs = nowMs
            looking = true
            schedule.repairDueIndex(apps) { [unowned self] result in
                if case let .failure(error) = result {
                    self.stats.redisErrors += 1
                    self.log.warn("repairing the retry due index failed", ["error": "\(error)"], limited: true)
                }
                self.looking = false
                self.look()
            }
            return
        }
        looking = true
        pacing.lookStarted()
        stats.looks += 1
        schedule.earliest(limit: settings.appsPerLook) { [unowned self] result in
            switch result {
            case let .failure(error):
                self.stats.redisErrors += 1
                self.log.warn("reading the retry due index failed", ["error": "\(error)"], limited: true)
                self.lookDone(earliest: nil, more: false, error: true)
            case let .success(apps):
                self.moveDue(apps)
            }
        }
    }

    /// Moves every app of `apps` (earliest first) that is due now, all steps pipelined.
    private func moveDue(_ apps: [DueApp]) {
        let now = Clock.unixMs()
        let due = apps.filter { $0.dueAtMs <= now }
        var earliest = apps.first { $0.dueAtMs > now }?.dueAtMs
        // Every app read was due: apps beyond the look's limit may be due too.
        var more = !due.isEmpty && due.count == settings.appsPerLook
        var error = false
        var remaining = due.count
        guard remaining > 0 else { return lookDone(earliest: earliest, more: more, error: false) }
        for app in due {
            let keys = AppKeys(prefix: schedule.config.prefix, app: app.app)
            schedule.moveDue(keys, nowMs: now, limit: settings.moveBatch) { [unowned self] result in
                self.stats.moveSteps += 1
                switch result {
                case let .success(report):
                    let movedAt = Clock.unixMs()
                    let lateness = report.movedDueAtMs.map { movedAt - $0 }
                    self.stats.moved += lateness.count
                    self.stats.movedLate += lateness.filter { $0 > 50 }.count
                    self.stats.maxLatenessMs = max(self.stats.maxLatenessMs, lateness.max() ?? 0)
                    if !report.dropped.isEmpty {
                        self.stats.dropped += report.dropped.count
                        self.log.error("scheduled retries without data dropped", ["app": app.app, "ids": report.dropped], limited: true)
                    }
                    if report.more { more = true }
                    if let next = report.nextDueAtMs { earliest = min(earliest ?? next, next) }
                    if !lateness.isEmpty { self.onMoved?(app.app, lateness) }
                case let .failure(failure):
                    self.stats.redisErrors += 1
                    error = true
                    self.log.warn("moving due retries failed", ["app": app.app, "error": "\(failure)"], limited: true)
                }
                remaining -= 1
                if remaining == 0 { self.lookDone(earliest: earliest, more: more, error: error) }
            }
        }
    }

    private func lookDone(earliest: Int64?, more: Bool, error: Bool) {
        looking = false
        guard running else { return }
        let delay = pacing.lookDone(now: Clock.unixMs(), earliestDueMs: earliest, more: more, random: Double.random(in: 0..<1))
        timer.schedule(afterMs: error ? max(delay, settings.errorBackoffMs) : delay)
    }
}
