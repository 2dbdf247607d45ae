import APNsSimulator
import CallStorage
import EventLoop
import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// Each app's retention windows (`apps.APP.retention`, config/README.md) end to end: producer
/// XADD, a real redis-server, the router, the APNs simulator. acme's windows are short (2 s)
/// so a test can wait past them: the keys' expiry is Redis's own, waited for by watching the
/// key go; beta keeps the defaults, which are read with TTL. A call's first outcome outlives its
/// result key in its compact record (`AppKeys.outcomes`), up to a quarter of the window longer.
final class RetentionWindowsTests: XCTestCase {
    private var h: RouterHarness!
    private let short = RetentionWindows(resultSeconds: 2, cancelSeconds: 2, invalidTokenSeconds: 2)

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func start(_ scenarios: [String: Scenario] = [:], acme windows: RetentionWindows? = nil) throws {
        h = try RouterHarness(simulator: { $0.scenarios = scenarios }, retention: ["acme": windows ?? short])
    }

    /// Runs the loop until no outcomes bucket of `app` holds call `id` (its buckets expired).
    private func waitUntilForgotten(_ id: String, app: String = "acme", file: StaticString = #filePath, line: UInt = #line) {
        let pattern = h.keys(app).outcomes(0).dropLast() + "*"
        h.runUntil("the compact record of \(id) expired", timeoutMs: 20_000, file: file, line: line) {
            let buckets = self.h.command("KEYS", String(pattern), file: file, line: line)?.array?.compactMap(\.string) ?? []
            return buckets.allSatisfy { self.h.command("HEXISTS", $0, id, file: file, line: line)?.integer == 0 }
        }
    }

    /// The TTL Redis reports for `key`, seconds (-2: no key, -1: no TTL).
    private func ttl(_ key: String, file: StaticString = #filePath, line: UInt = #line) -> Int64 {
        h.command("TTL", key, file: file, line: line)?.integer ?? -3
    }

    /// Runs the loop until Redis has let `key` expire.
    private func waitUntilGone(_ key: String, file: StaticString = #filePath, line: UInt = #line) {
        h.runUntil("\(key) expired", timeoutMs: 10_000, file: file, line: line) {
            self.h.command("EXISTS", key, file: file, line: line)?.integer == 0
        }
    }

    func testADuplicateInsideTheResultWindowIsAnsweredDuplicateAndOneAfterItRingsAgain() throws {
        try start()
        let result = h.keys("acme").result("dup")
        h.call("dup", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertTrue((1...2).contains(ttl(result)), "the result lives for acme's result window, 2 s: \(ttl(result))")

        h.call("dup", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.results().last?["outcome"] as? String, "duplicate", "inside the window: answered duplicate")
        XCTAssertEqual(h.results().last?["first_outcome"] as? String, "delivered_voip")
        XCTAssertEqual(h.requests("a0a0").count, 1, "and not pushed")

        waitUntilGone(result)
        waitUntilForgotten("dup")
        h.call("dup", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.results().last?["outcome"] as? String, "delivered_voip", "after the window: routed again")
        XCTAssertEqual(h.requests("a0a0").count, 2, "and it rings at APNs once more")
        XCTAssertEqual(h.runner.stats.duplicates, 1)

        h.call("dup", voip: "b0b0", app: "beta")
        XCTAssertTrue(h.waitForRecords(4))
        XCTAssertTrue((86_000...86_400).contains(ttl(h.keys("beta").result("dup"))),
                      "beta keeps the default: the whole result for the window, 24 h")
        let bucket = h.keys("beta").outcomes(RetentionWindows.defaults.buckets.bucket(atUnixSeconds: Clock.unixMs() / 1000))
        XCTAssertEqual(h.command("EXISTS", bucket)?.integer, 0, "and no compact record (off by default)")
    }

    /// A duplicate whose result's detail expired (result_detail_s, 1 s here) but whose window
    /// (8 s) has not is still answered `duplicate` with its first outcome, from the compact
    /// record, and not pushed; once the window (and its quarter) is over, it is routed again.
    func testADuplicateAfterTheDetailExpiredIsAnsweredFromTheCompactRecordAndRoutedAfterTheWindow() throws {
        try start(acme: RetentionWindows(resultSeconds: 8, resultDetailSeconds: 1, cancelSeconds: 8, invalidTokenSeconds: 8,
                                         compactRecord: true))
        let result = h.keys("acme").result("late")
        h.call("late", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(ttl(result), 1, "the detail lives result_detail_s")
        waitUntilGone(result)

        h.call("late", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.results().last?["outcome"] as? String, "duplicate", "inside the window, detail expired: answered duplicate")
        XCTAssertEqual(h.results().last?["first_outcome"] as? String, "delivered_voip", "with the first outcome of the compact record")
        XCTAssertEqual(h.requests("a0a0").count, 1, "and not pushed")
        XCTAssertEqual(h.command("EXISTS", result)?.integer, 0, "the duplicate took no claim and wrote no result key")

        waitUntilForgotten("late")
        h.call("late", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.results().last?["outcome"] as? String, "delivered_voip", "after the window: routed again")
        XCTAssertEqual(h.requests("a0a0").count, 2, "and it rings at APNs once more")
    }

    /// Every outcome a call can be recorded with has a code in the compact record's table
    /// (`duplicate` is never stored).
    func testEveryStoredOutcomeHasACode() {
        for outcome in CallOutcome.allCases where outcome != .duplicate {
            XCTAssertNotNil(CompactOutcome.code(of: outcome.rawValue), "\(outcome) has no code")
        }
        XCTAssertNil(CompactOutcome.code(of: CallOutcome.duplicate.rawValue))
        XCTAssertEqual(CompactOutcome.codes.count, CallOutcome.allCases.count - 1, "and the table names no other")
    }

    func testAnInvalidTokenIsForgottenAfterTheAppsTTL() throws {
        try start(["dead0001": .unregistered])
        let invalid = h.keys("acme").invalidPrefix(.voip) + "dead0001"
        h.call("first", voip: "dead0001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertTrue((1...2).contains(ttl(invalid)), "known invalid for acme's invalid_token_ttl_s, 2 s: \(ttl(invalid))")
        h.call("second", voip: "dead0001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests("dead0001").count, 1, "while it is known invalid, its calls skip it")

        waitUntilGone(invalid)
        h.call("third", voip: "dead0001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.requests("dead0001").count, 2, "forgotten after the TTL: its VoIP push is tried again")

        h.call("beta-first", voip: "dead0001", alert: "a1e7", app: "beta")
        XCTAssertTrue(h.waitForRecords(4))
        let betaTTL = ttl(h.keys("beta").invalidPrefix(.voip) + "dead0001")
        XCTAssertTrue((2_591_000...2_592_000).contains(betaTTL), "beta keeps the default 30 days: \(betaTTL)")
    }

    func testACancellationStopsItsCallInsideTheCancelWindowAndNotAfterIt() throws {
        try start()
        let marker = h.keys("acme").cancelled("early")
        // The cancel is read before its call (a producer's streams are not ordered across events' retries).
        h.xadd("acme", ["v": 1, "id": "early", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertTrue((1...2).contains(ttl(marker)), "the marker lives for acme's cancel window, 2 s: \(ttl(marker))")
        h.call("early", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.record("early")?.outcome, .cancelled, "inside the window the call is not pushed")
        XCTAssertTrue(h.requests("a0a0").isEmpty)

        h.xadd("acme", ["v": 1, "id": "later", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(3))
        waitUntilGone(h.keys("acme").cancelled("later"))
        h.call("later", voip: "a0a1")
        XCTAssertTrue(h.waitForRecords(4))
        XCTAssertEqual(h.record("later")?.outcome, .deliveredVoip, "after the window the cancellation is forgotten")
        XCTAssertEqual(h.requests("a0a1").count, 1)

        h.xadd("beta", ["v": 1, "id": "early", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(5))
        XCTAssertGreaterThan(ttl(h.keys("beta").cancelled("early")), 86_000, "beta keeps the default cancel window, 24 h")
    }

    func testAReloadGivesTheNewWindowsToKeysWrittenFromThenOn() throws {
        try start()
        h.call("before", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertTrue((1...2).contains(ttl(h.keys("acme").result("before"))))
        // What pushgw run's reload (SIGHUP) does with the new config's windows.
        h.store.updateApps(h.apps.map(\.keys), windows: ["acme": RetentionWindows(resultSeconds: 600, cancelSeconds: 700)])
        h.call("after", voip: "a0a1")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertTrue((590...600).contains(ttl(h.keys("acme").result("after"))), "the reloaded result window, 600 s (the detail's 900 s cut to it)")
        h.xadd("acme", ["v": 1, "id": "after", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertTrue((690...700).contains(ttl(h.keys("acme").cancelled("after"))), "and cancel window, 700 s (the cancel step's)")
    }

    func testAnInvalidFcmTokenIsForgottenAfterTheAppsTTLToo() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase", retention: ["acme": short])
        // Lower case: the simulator's scenarios are keyed by the lower-cased token.
        let pixel = "dgvzda:apa91bh-zx_qk-pixel"
        h.sim.simulator.setScenario(.unregistered, for: pixel)
        let invalid = h.keys("acme").invalidPrefix(.fcm) + pixel
        func ring(_ id: String) {
            h.xaddRaw("acme", #"{"v":1,"id":"\#(id)","type":"incoming_call","fcm_token":"\#(pixel)","#
                      + #""deadline":\#(Clock.unixMs() + 20_000),"voip":{"caller":"+15551234567","callerName":"Alice"}}"#)
        }
        ring("android-1")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertTrue((1...2).contains(ttl(invalid)), "FCM's UNREGISTERED is known invalid for acme's TTL, 2 s: \(ttl(invalid))")
        ring("android-2")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests(pixel).count, 1, "skipped while known invalid")
        waitUntilGone(invalid)
        ring("android-3")
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.requests(pixel).count, 2, "forgotten after the TTL: FCM is asked again")
    }
}
