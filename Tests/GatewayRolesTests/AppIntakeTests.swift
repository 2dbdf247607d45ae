import GatewayConfiguration
@testable import GatewayRoles
import XCTest

/// `AppIntake` without sockets: which apps a read covers and with what count, and what a
/// reload (`update`) keeps.
final class AppIntakeTests: XCTestCase {
    private func app(_ id: String, share: Int, _ limits: AppLimits = AppLimits()) -> AppRuntime {
        var config = AppConfig(bundleId: "com.example.\(id)", credential: "key", environment: .production)
        config.limits = limits
        return AppRuntime(id: id, config: config, prefix: "pushgw", share: share)
    }

    func testARatedAppIsReadOnlyWithItsTokensAndTheCountIsTheLeastRoom() {
        let quiet = app("quiet", share: 0), rated = app("rated", share: 1, AppLimits(maxInFlight: 50, eventsPerSecond: 10, burst: 10))
        var intake = AppIntake([quiet, rated])
        var plan = intake.plan([quiet, rated], inFlight: ["quiet": 970], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertEqual(plan.apps.map(\.id), ["quiet", "rated"])
        XCTAssertEqual(plan.count, 10, "quiet has room for 30, rated 10 tokens")
        intake.read(rated, entries: 10, asked: 10, nowMs: 0)
        plan = intake.plan([quiet, rated], inFlight: ["quiet": 970], defaultCap: 1_000, readBatch: 100, nowMs: 100)
        XCTAssertEqual(plan.apps.map(\.id), ["quiet"], "rated has 1 token of the 10 the read may bring")
        XCTAssertEqual(plan.wakeAfterMs, 900, "its 10 tokens are there 900 ms on")
        XCTAssertEqual(intake.throttledSeconds(nowMs: 600)["rated"], 0.5, "backlogged (its read was full) and waiting")
        plan = intake.plan([rated], inFlight: ["rated": 50], defaultCap: 1_000, readBatch: 100, nowMs: 2_000)
        XCTAssertTrue(plan.apps.isEmpty, "at its max_in_flight")
        XCTAssertTrue(plan.leftOutAtCap)
    }

    func testAReadLeavingAnAppOutForItsCapSaysSo() {
        let busy = app("busy", share: 0, AppLimits(maxInFlight: 200)), quiet = app("quiet", share: 1)
        var intake = AppIntake([busy, quiet])
        var plan = intake.plan([busy, quiet], inFlight: ["busy": 200], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertEqual(plan.apps.map(\.id), ["quiet"])
        XCTAssertTrue(plan.leftOutAtCap, "so the read must not block long")
        plan = intake.plan([busy, quiet], inFlight: ["busy": 199], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertEqual(plan.apps.map(\.id), ["busy", "quiet"])
        XCTAssertEqual(plan.count, 1)
        XCTAssertFalse(plan.leftOutAtCap)
    }

    func testAnAppWithAReadsWorthOfPushesWaitingForStreamsIsLeftOutAsAtItsCap() {
        let busy = app("busy", share: 0), quiet = app("quiet", share: 1)
        var intake = AppIntake([busy, quiet])
        var waiting = ["busy": 100, "quiet": 0]
        var plan = intake.plan([busy, quiet], inFlight: ["busy": 300], defaultCap: 1_000, readBatch: 100, nowMs: 0,
                               waitingCap: 100) { waiting[$0.id]! }
        XCTAssertEqual(plan.apps.map(\.id), ["quiet"], "busy has room below its cap, but 100 pushes wait for streams")
        XCTAssertTrue(plan.leftOutAtCap, "so the read must not block long: busy is read again once its queue moves")
        XCTAssertEqual(plan.count, 100)
        // Alone, busy's plan names no app: no read goes out, and pushes leaving the queue ask for
        // none, so the plan says when to be made again (its calls may wait for an answer in the
        // stream, and no call leaves until one is read).
        plan = intake.plan([busy], inFlight: ["busy": 300], defaultCap: 1_000, readBatch: 100, nowMs: 0,
                           waitingCap: 100, waitingRecheckMs: 5) { waiting[$0.id]! }
        XCTAssertEqual(plan.apps.map(\.id), [])
        XCTAssertEqual(plan.wakeAfterMs, 5, "planned again in 5 ms")
        plan = intake.plan([busy], inFlight: ["busy": 1_000], defaultCap: 1_000, readBatch: 100, nowMs: 0,
                           waitingCap: 100, waitingRecheckMs: 5) { _ in 0 }
        XCTAssertNil(plan.wakeAfterMs, "at its in-flight cap a leaving call asks for the read")
        waiting["busy"] = 99
        plan = intake.plan([busy, quiet], inFlight: ["busy": 300], defaultCap: 1_000, readBatch: 100, nowMs: 0,
                           waitingCap: 100) { waiting[$0.id]! }
        XCTAssertEqual(plan.apps.map(\.id), ["busy", "quiet"])
        XCTAssertFalse(plan.leftOutAtCap)
        plan = intake.plan([busy, quiet], inFlight: ["busy": 300], defaultCap: 1_000, readBatch: 100, nowMs: 0) { _ in 10_000 }
        XCTAssertEqual(plan.apps.map(\.id), ["busy", "quiet"], "without a waiting cap the queue is not asked")
    }

    func testWhatAReadBringsWaitedForTheRateFromTheFirstHoldUntilTheStreamCaughtUp() {
        let rated = app("rated", share: 0, AppLimits(eventsPerSecond: 10, burst: 10))
        var intake = AppIntake([rated])
        _ = intake.plan([rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertNil(intake.read(rated, entries: 10, asked: 10, nowMs: 0), "the first read waited for nothing")
        XCTAssertTrue(intake.plan([rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 100).apps.isEmpty,
                      "held: a full read, then no tokens")
        XCTAssertEqual(intake.plan([rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 1_000).apps.map(\.id), ["rated"])
        XCTAssertEqual(intake.read(rated, entries: 10, asked: 10, nowMs: 1_000), .rate, "read after a hold: it waited for the rate")
        _ = intake.plan([rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 2_000)
        XCTAssertEqual(intake.read(rated, entries: 3, asked: 10, nowMs: 2_000), .rate, "the last of the backlog waited too")
        _ = intake.plan([rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 3_000)
        XCTAssertNil(intake.read(rated, entries: 1, asked: 10, nowMs: 3_000), "caught up: a new entry waited for nothing")
    }

    func testAPausedAppIsLeftOutAndWhatItsReadsBringAfterwardsWaitedForThePauseUntilCaughtUp() {
        let quiet = app("quiet", share: 0), rated = app("rated", share: 1, AppLimits(eventsPerSecond: 10, burst: 10))
        var intake = AppIntake([quiet, rated])
        intake.pause(["quiet", "rated"])
        var plan = intake.plan([quiet, rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertTrue(plan.apps.isEmpty, "paused apps are not read, whatever their room or tokens")
        XCTAssertNil(plan.wakeAfterMs, "a pause has no time to wake at: the resume reads again")
        intake.pause(["rated"])
        plan = intake.plan([quiet, rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertEqual(plan.apps.map(\.id), ["quiet"], "a resumed app is read again; the other stays paused")
        XCTAssertTrue(intake.holds(quiet), "an app without a rate is told to read after a pause")
        XCTAssertEqual(intake.read(quiet, entries: 100, asked: 100, nowMs: 0), .paused, "its calls waited for the pause")
        XCTAssertEqual(intake.read(quiet, entries: 4, asked: 100, nowMs: 0), .paused, "the last of them too")
        XCTAssertNil(intake.read(quiet, entries: 1, asked: 100, nowMs: 0), "caught up: a new call waited for nothing")
        XCTAssertFalse(intake.holds(quiet))
        intake.pause([])
        _ = intake.plan([rated], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertEqual(intake.read(rated, entries: 10, asked: 10, nowMs: 0), .paused, "a pause names the hold before a rate")
    }

    func testAReloadKeepsAnUnchangedBucketAndAppliesAChangedRate() {
        let before = app("rated", share: 0, AppLimits(eventsPerSecond: 10, burst: 10))
        var intake = AppIntake([before])
        intake.read(before, entries: 10, asked: 10, nowMs: 0)
        intake.update([app("rated", share: 0, AppLimits(eventsPerSecond: 10, burst: 10))])
        XCTAssertTrue(intake.plan([before], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 0).apps.isEmpty,
                      "unchanged: the spent bucket is kept")
        let faster = app("rated", share: 0, AppLimits(eventsPerSecond: 1_000, burst: 100))
        intake.update([faster])
        let plan = intake.plan([faster], inFlight: [:], defaultCap: 1_000, readBatch: 100, nowMs: 0)
        XCTAssertEqual(plan.apps.map(\.id), ["rated"], "a changed rate starts full")
        XCTAssertEqual(plan.count, 100)
        intake.update([app("rated", share: 0)])
        XCTAssertTrue(intake.rates.isEmpty, "a rate removed by the reload is gone")
    }
}
