import EventLoop
import Routing

/// Which apps' streams the router reads next, and how many entries each (docs/architecture.md,
/// "Scheduling"): an app below its in-flight cap (`limits.max_in_flight`, else the router's
/// `perAppInFlight`) is read; an app with an event rate (`limits.events_per_second`, `burst`: a
/// `TokenBucket`) only once its bucket holds what the read may bring it, so it is held to its
/// rate and the rest waits in its stream — nothing is dropped. An app an operator paused
/// (`pushgw apps pause`: `paused`, as the router last read it from Redis) is not read at all,
/// and its calls wait in its stream likewise. One read's count is the same for every stream, so
/// it is the least room among the apps read.
///
/// An app with `waitingCap` or more pushes waiting for a stream in its reachable APNs pools
/// (`waiting`: queued behind the streams it holds) is left out too, as at its cap: what the
/// connections cannot take yet is not read ahead. Those calls would only wait in the queue, in
/// memory, behind the app's others, and every live call costs the router's tables and caches
/// (bench/ab.sh on loopback: 4,000 calls in flight where ~1,000 kept the same rate, at ×1.3 the
/// CPU per event and +9 MB). The cap still bounds an app whose pushes are on the wire; a pool
/// that is unreachable counts nothing, so an outage does not hold calls back in the stream.
///
/// A read that leaves an app out for its cap blocks only briefly (`Plan.leftOutAtCap`:
/// `RouterRoleSettings.capWaitMs`), as nothing wakes a blocked read when that app's calls
/// leave: the app is read again within that time of its room coming back, whatever `blockMs`
/// is. Reads batch themselves: one is in flight at a time, so the room freed meanwhile is read
/// in one. When no app can be read, a call that leaves asks for the next read; pushes that
/// leave the queue do not, so a plan that leaves an app out for its waiting pushes asks to be
/// made again after `waitingRecheckMs` (`Plan.wakeAfterMs`): calls that wait for an answer
/// further down their stream (a call with devices rings until one comes) must not wait for a
/// call to leave.
///
/// Pure but for the clock the caller passes. Per read, not per event: a dictionary look-up per
/// app with a rate.
struct AppIntake {
    /// A rated app's bucket, and how long it waited for tokens with entries left in its stream.
    struct Rate {
        var bucket: TokenBucket
        /// Its last read brought as many entries as asked: more are likely waiting.
        var backlogged = false
        /// Monotonic ms since when it waits for tokens while backlogged.
        var throttledSinceMs: Int64?
        var throttledMs: Int64 = 0
        /// Its backlog is held by its rate: a read left it out for want of tokens while
        /// backlogged, and no read since found its stream caught up (fewer entries than asked).
        /// What its reads bring meanwhile waited for the rate (`StreamHold.rate`).
        var holdsBacklog = false
    }

    /// One read: the apps it covers, its count, and when to plan again: a throttled app has its
    /// tokens, or an app left out for its waiting pushes may have moved them.
    struct Plan {
        var apps: [AppRuntime]
        var count: Int
        var wakeAfterMs: Int64?
        /// An app was left out for want of room below its in-flight cap: the read must not
        /// block long, or that app waits for it when its calls leave.
        var leftOutAtCap = false
    }

    private(set) var rates: [String: Rate] = [:]
    /// The apps paused now, as the router last read it (`pause`): left out of every read.
    private(set) var paused: Set<String> = []
    /// Apps whose stream a pause held: a read left them out while paused, and no read since
    /// found their stream caught up (fewer entries than asked). What their reads bring
    /// meanwhile waited for the pause (`StreamHold.paused`).
    private(set) var heldByPause: Set<String> = []

    init(_ apps: [AppRuntime]) { update(apps) }

    /// A reload: apps with an unchanged rate keep their bucket and throttled time; a changed
    /// rate starts a full bucket; an app without a rate has none.
    mutating func update(_ apps: [AppRuntime]) {
        var next: [String: Rate] = [:]
        for app in apps {
            guard let perSecond = app.limits.eventsPerSecond else { continue }
            let burst = app.limits.burst ?? perSecond
            if let kept = rates[app.id], kept.bucket.perSecond == perSecond, kept.bucket.burst == burst {
                next[app.id] = kept
            } else {
                var fresh = Rate(bucket: TokenBucket(perSecond: perSecond, burst: burst))
                fresh.throttledMs = rates[app.id]?.throttledMs ?? 0
                next[app.id] = fresh
            }
        }
        rates = next
    }

    /// The apps paused from now on (the router's periodic read of their pause keys).
    mutating func pause(_ apps: Set<String>) { paused = apps }

    /// The next read over `apps`, with `inFlight` calls of each in the process and `waiting(app)`
    /// of its pushes waiting for a stream.
    mutating func plan(_ apps: [AppRuntime], inFlight: [String: Int], defaultCap: Int, readBatch: Int, nowMs: Int64,
                       waitingCap: Int = .max, waitingRecheckMs: Int64 = 5, waiting: (AppRuntime) -> Int = { _ in 0 }) -> Plan {
        var plan = Plan(apps: [], count: readBatch, wakeAfterMs: nil)
        var rated: [(AppRuntime, Int)] = []
        for app in apps {
            if !paused.isEmpty && paused.contains(app.id) {
                heldByPause.insert(app.id)
                continue
            }
            let room = (app.limits.maxInFlight ?? defaultCap) - (inFlight[app.id] ?? 0)
            guard room > 0 else {
                plan.leftOutAtCap = true
                continue
            }
            guard waitingCap == .max || waiting(app) < waitingCap else {
                plan.leftOutAtCap = true
                plan.wakeAfterMs = min(plan.wakeAfterMs ?? waitingRecheckMs, waitingRecheckMs)
                continue
            }
            if rates[app.id] != nil {
                rated.append((app, room))
            } else {
                plan.apps.append(app)
                plan.count = min(plan.count, room)
            }
        }
        for (app, room) in rated {
            var rate = rates[app.id]!
            let have = rate.bucket.available(nowMs: nowMs)
            let need = max(1, min(plan.count, room, rate.bucket.burst))
            if have >= need {
                plan.apps.append(app)
                plan.count = min(plan.count, room, have)
                if let since = rate.throttledSinceMs {
                    rate.throttledMs += nowMs - since
                    rate.throttledSinceMs = nil
                }
            } else {
                let wait = max(1, rate.bucket.msUntil(need))
                plan.wakeAfterMs = min(plan.wakeAfterMs ?? wait, wait)
                if rate.backlogged && rate.throttledSinceMs == nil { rate.throttledSinceMs = nowMs }
                if rate.backlogged { rate.holdsBacklog = true }
            }
            rates[app.id] = rate
        }
        plan.count = max(1, plan.count)
        return plan
    }

    /// Whether a read of `app` must be told to `read`: it has a rate, or a pause held it.
    func holds(_ app: AppRuntime) -> Bool {
        app.limits.eventsPerSecond != nil || (!heldByPause.isEmpty && heldByPause.contains(app.id))
    }

    /// A read asking `asked` entries of each stream brought `entries` of `app` (one that
    /// `holds`). Returns what held them in the stream, if anything: a pause (their app was
    /// paused since its stream last caught up), else the app's rate (its backlog was held by
    /// it). A deadline they missed is that hold's (`StreamHold.cause`).
    @discardableResult
    mutating func read(_ app: AppRuntime, entries: Int, asked: Int, nowMs: Int64) -> StreamHold? {
        var hold: StreamHold?
        if heldByPause.contains(app.id) {
            hold = .paused
            if entries < asked { heldByPause.remove(app.id) }
        }
        guard var rate = rates[app.id] else { return hold }
        if rate.holdsBacklog { hold = hold ?? .rate }
        rate.bucket.take(entries, nowMs: nowMs)
        rate.backlogged = entries >= asked
        if !rate.backlogged { rate.holdsBacklog = false }
        rates[app.id] = rate
        return hold
    }

    /// Seconds each rated app waited for tokens with entries in its stream, up to `nowMs`.
    func throttledSeconds(nowMs: Int64) -> [String: Double] {
        rates.mapValues { Double($0.throttledMs + ($0.throttledSinceMs.map { nowMs - $0 } ?? 0)) / 1000 }
    }
}
