import EventLoop
import Foundation
import GatewayRoles
import CallStorage
import RedisClient

/// `pushgw-bench retry-timing`: the durable retry schedule's timing figure
/// (docs/architecture.md): a retry fires within 50 ms of its due time, p99, with 10,000 retries
/// scheduled across 100 apps.
///
/// 1. `--retries` calls entries across `--apps` apps are written and read by consumer `bench`
///    (pending, as a router holds them), then each is put in the schedule by the router's own
///    step (`RetrySchedule.schedule`) with a due time spread uniformly over `--spread-ms`,
///    starting `--lead-ms` after the scheduling began.
/// 2. One `RetryRole` with the production settings moves them back; the lateness of each
///    retry is the time its move step answered minus its due time (an upper bound: the entry
///    was back in its stream slightly earlier). Prints p50, p99 and the worst.
/// 3. With the schedule empty, the mover's own commands per second over `--idle-s` seconds.
///    (`bench/run.sh` counts a whole idle `pushgw run` separately, with MONITOR.)
enum RetryTiming {
    static func run(_ o: Options) {
        let loop = EventLoop()
        let appCount = o.int("apps", 100)
        let total = o.int("retries", 10_000)
        let spreadMs = Int64(o.int("spread-ms", 3_000))
        let leadMs = Int64(o.int("lead-ms", 1_500))
        let idleSeconds = o.int("idle-s", 2)
        let url: RedisURL
        do { url = try RedisURL(parsing: o.string("redis")) } catch { fatalError("\(error)") }
        let apps = (0..<appCount).map { AppKeys(app: "rt\($0)") }
        let store = CallStore(config: CallStore.Config(), apps: apps,
                              topology: .own(loop: loop, redis: RedisConnection.Config(url: url), cluster: nil, clientName: "pushgw-write"))
        store.start()
        func wait(_ what: String, timeoutMs: Int64 = 60_000, until condition: () -> Bool) {
            let end = Clock.monotonicMs() + timeoutMs
            let tick = LoopTimer(loop: loop) {}
            loop.run(until: {
                if condition() || Clock.monotonicMs() > end { return true }
                if !tick.isScheduled { tick.schedule(afterMs: 2) }
                return false
            })
            tick.close()
            guard condition() else { fail("timed out: \(what)") }
        }

        // 1. Entries pending for consumer `bench`, then scheduled.
        var groups = 0
        for app in apps { store.ensureGroup(app) { if case .success = $0 { groups += 1 } } }
        wait("consumer groups") { groups == apps.count }
        var written = 0
        for i in 0..<total {
            let app = apps[i % apps.count]
            let event = #"{"v":1,"id":"rt-\#(i)","type":"incoming_call","voip_token":"abab"}"#
            store.topology.send(["XADD", app.calls, "*", "event", event], key: app.calls) { if case .success = $0 { written += 1 } }
        }
        wait("XADD") { written == total }
        var pending: [(AppKeys, StreamEntry)] = []
        var reading = false
        wait("reading") {
            if !reading && pending.count < total {
                reading = true
                store.readNew(apps: apps, consumer: "bench", count: 1_000, blockMs: nil) { result in
                    reading = false
                    if case let .success(byApp) = result {
                        for (app, entries) in byApp { for e in entries { pending.append((app, e)) } }
                    }
                }
            }
            return pending.count >= total
        }
        let firstDue = Clock.unixMs() + leadMs
        var dues: [Int64] = []
        var scheduled = 0
        for (app, entry) in pending {
            let due = firstDue + Int64.random(in: 0..<max(1, spreadMs))
            dues.append(due)
            let retry = ScheduledRetry(retryID: entry.id, callID: entry.id, dueAtMs: due, event: entry.fields["event"] ?? "",
                                       state: #"{"due":\#(due)}"#)
            store.retries.schedule(app, consumer: "bench", retry: retry) { if case .success(.scheduled) = $0 { scheduled += 1 } }
        }
        wait("scheduling") { scheduled == total }
        let scheduledBy = Clock.unixMs()
        if scheduledBy > firstDue { fail("scheduling took past the first due time; raise --lead-ms") }

        // 2. The mover.
        let connection = RedisConnection(loop: loop, config: .init(url: url, clientName: "pushgw-retry"))
        connection.start()
        let mover = RetryRole(loop: loop, schedule: RetrySchedule(topology: .single(connection), config: .init()),
                               log: Log(minimum: .error))
        var lateness: [Int64] = []
        lateness.reserveCapacity(total)
        mover.onMoved = { _, late in lateness.append(contentsOf: late) }
        mover.start()
        wait("moving", timeoutMs: leadMs + spreadMs + 30_000) { lateness.count >= total }
        lateness.sort()
        func pct(_ p: Double) -> Int64 { lateness[min(lateness.count - 1, Int(Double(lateness.count) * p))] }
        let moveSteps = mover.stats.moveSteps

        // 3. Idle: nothing scheduled any more.
        let looksBefore = mover.stats.looks
        var idleDone = false
        let idleTimer = LoopTimer(loop: loop) { idleDone = true }
        idleTimer.schedule(afterMs: Int64(idleSeconds) * 1000)
        loop.run(until: { idleDone })
        idleTimer.close()
        let idleLooks = Double(mover.stats.looks - looksBefore) / Double(idleSeconds)

        print(#"{"retries":\#(total),"apps":\#(appCount),"spread_ms":\#(spreadMs),"move_steps":\#(moveSteps),"p50_late_ms":\#(pct(0.5)),"p99_late_ms":\#(pct(0.99)),"max_late_ms":\#(lateness.last ?? 0),"late_over_50ms":\#(lateness.filter { $0 > 50 }.count),"idle_mover_commands_per_s":\#(String(format: "%.1f", idleLooks))}"#)
        mover.close()
        connection.close()
        store.close()
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("pushgw-bench retry-timing: \(message)\n".utf8))
        exit(1)
    }
}
