import CallStorage
import EventLoop
import Foundation
import GatewayTestSupport
@testable import GatewayRoles
import RedisClient
import Routing
import XCTest

/// Pausing an app (docs/operations.md, "Pausing an app"), over a real redis-server and the
/// simulator: while acme's pause key is set the router reads nothing of acme's stream (its calls
/// wait there, none is pushed, none is delivered to a consumer) and beta's calls are routed;
/// after the resume acme's calls are routed, and one whose deadline passed meanwhile gets its
/// missed-call alert with the cause `paused` and never a VoIP push.
final class AppPauseTests: XCTestCase {
    private func resume(_ h: RouterHarness, _ app: String, file: StaticString = #filePath, line: UInt = #line) {
        let store = AppPauseStore(topology: h.store.topology)
        var answer: Result<AppPauseStore.Pause?, RedisError>?
        store.resume(h.keys(app)) { answer = $0 }
        h.runUntil("the resume written", file: file, line: line) { answer != nil }
        guard case .success(let removed?)? = answer else { return XCTFail("resume: \(String(describing: answer))", file: file, line: line) }
        XCTAssertEqual(removed.user, "tester", "the resume answers the pause it removed", file: file, line: line)
        h.runUntil("the router saw the resume", file: file, line: line) { !h.runner.pausedApps.contains(app) }
    }

    func testAPausedAppsCallsWaitInItsStreamWhileAnotherAppsAreRoutedAndAreRoutedAfterTheResume() throws {
        let h = try RouterHarness()
        defer { h.close() }
        h.pause("acme")
        let deadline = Clock.unixMs() + 1_500
        h.call("waits", voip: "a10001", alert: "a10002", deadlineInMs: 60_000)
        h.call("late-alert", voip: "a20001", alert: "a20002", extra: ["deadline": deadline])
        h.call("late-expired", voip: "a30001", extra: ["deadline": deadline])
        // beta's calls come after acme's: the reads that bring them would have brought acme's.
        for i in 0..<3 { h.call("beta-\(i)", voip: String(format: "b1%04x", i), app: "beta") }
        h.runUntil("beta's calls recorded") { h.recorded.filter { $0.app == "beta" }.count == 3 }
        h.runUntil("acme's short deadline passed while paused") { Clock.unixMs() > deadline + 200 }
        XCTAssertTrue(h.recorded.filter { $0.app == "acme" }.isEmpty, "nothing of paused acme is routed")
        for token in ["a10001", "a10002", "a20001", "a20002", "a30001"] {
            XCTAssertTrue(h.requests(token).isEmpty, "no push to \(token) while acme is paused")
        }
        guard case let .integer(left)? = h.command("XLEN", h.keys("acme").calls) else { return XCTFail("XLEN") }
        XCTAssertEqual(left, 3, "acme's calls wait in its stream: nothing dropped")
        guard case let .array(summary)? = h.command("XPENDING", h.keys("acme").calls, GatewayKeys.routersGroup),
              case let .integer(pending)? = summary.first else { return XCTFail("XPENDING") }
        XCTAssertEqual(pending, 0, "no consumer read them")
        XCTAssertEqual(h.runner.inFlightByApp["acme"] ?? 0, 0)

        resume(h, "acme")
        h.runUntil("acme's calls recorded after the resume") { h.recorded.filter { $0.app == "acme" }.count == 3 }
        XCTAssertEqual(h.record("waits")?.outcome, .deliveredVoip, "a call still in time rings after the resume")
        XCTAssertEqual(h.requests("a10001").count, 1)
        XCTAssertEqual(h.record("late-alert")?.outcome, .deliveredAlert)
        XCTAssertEqual(h.record("late-alert")?.cause, .paused, "its deadline passed while its app was paused")
        XCTAssertEqual(h.requests("a20002").count, 1, "its missed-call alert, once")
        XCTAssertTrue(h.requests("a20001").isEmpty, "never a VoIP push after its deadline")
        XCTAssertEqual(h.record("late-expired")?.outcome, .expired)
        XCTAssertEqual(h.record("late-expired")?.cause, .paused, "without an alert token: expired, and says why")
        XCTAssertTrue(h.requests("a30001").isEmpty)
        let stored = h.results().filter { ($0["cause"] as? String) == "paused" }
        XCTAssertEqual(stored.count, 2, "the results stream says paused")
        XCTAssertEqual(h.outcomes.fallbacks["acme"]?[.paused], 1, "the metrics' cause label: one fallback, the alert")
        XCTAssertNil(h.outcomes.fallbacks["acme"]?[.deadline], "none of acme's late calls says deadline")

        // Caught up: a late call written now waited for nothing but its own lateness.
        h.call("late-now", voip: "a40001", alert: "a40002", deadlineInMs: -1)
        h.runUntil("the late call recorded") { h.record("late-now") != nil }
        XCTAssertEqual(h.record("late-now")?.cause, .deadline, "after the stream caught up, a late call is late, not paused")
    }

    /// An app a reload adds while it is paused is not read, not even by the read right after
    /// the reload: the pauses are read again first.
    func testAnAppAReloadAddsWhilePausedIsNotRead() throws {
        let h = try RouterHarness()
        defer { h.close() }
        h.runner.updateApps(h.apps.filter { $0.id != "beta" })
        h.runUntil("the router read the pauses after the reload") { h.runner.pausesKnown }
        h.command("HSET", h.keys("beta").paused, "since_ms", "1", "user", "tester", "reason", "")
        h.call("beta-held", voip: "d10001", deadlineInMs: 60_000, app: "beta")
        h.call("acme-1", voip: "d20001")
        h.runner.updateApps(h.apps)
        h.runUntil("acme's call recorded") { h.record("acme-1") != nil }
        h.runUntil("the router saw beta's pause") { h.runner.pausedApps.contains("beta") }
        h.call("acme-2", voip: "d20002")
        h.runUntil("acme's next call recorded") { h.record("acme-2") != nil }
        XCTAssertTrue(h.requests("d10001").isEmpty, "beta, added paused, was not read")
        resume(h, "beta")
        h.runUntil("beta's call recorded") { h.record("beta-held") != nil }
    }

    /// A router that starts while an app is paused reads none of its calls, not even once.
    func testARouterStartingWhileAnAppIsPausedNeverReadsIt() throws {
        let h = try RouterHarness(startRouter: false)
        defer { h.close() }
        let store = AppPauseStore(topology: h.store.topology)
        var answer: Result<AppPauseStore.Pause?, RedisError>?
        store.pause(h.keys("acme"), .init(sinceMs: Clock.unixMs(), user: "tester", reason: "")) { answer = $0 }
        h.runUntil("the pause written") { answer != nil }
        h.call("before-start", voip: "c10001", deadlineInMs: 60_000)
        h.call("beta-1", voip: "c20001", app: "beta")
        h.runner.start()
        h.runUntil("beta's call recorded") { h.record("beta-1") != nil }
        XCTAssertTrue(h.requests("c10001").isEmpty, "paused acme's call was not pushed")
        XCTAssertEqual(h.runner.pausedApps, ["acme"])
        resume(h, "acme")
        h.runUntil("acme's call recorded") { h.record("before-start") != nil }
        XCTAssertEqual(h.record("before-start")?.outcome, .deliveredVoip)
    }
}
