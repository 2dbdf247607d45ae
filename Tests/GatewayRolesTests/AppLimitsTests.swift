import EventLoop
import Foundation
import GatewayConfiguration
import GatewayTestSupport
@testable import GatewayRoles
import RedisClient
import Routing
import XCTest

/// An app's `limits` (config/README.md, docs/architecture.md "Scheduling"), over a real
/// redis-server and the simulator: an app over its `events_per_second` is read no faster
/// (counted over 10 s), what it could not read waits in its stream, and another app's calls
/// are routed meanwhile.
final class AppLimitsTests: XCTestCase {
    func testAnAppOverItsEventRateIsHeldToItAndTheRestWaitsInItsStream() throws {
        let h = try RouterHarness(limits: ["acme": AppLimits(eventsPerSecond: 20, burst: 20)])
        defer { h.close() }
        let startedMs = Clock.monotonicMs()
        for i in 0..<400 { h.call("flood-\(i)", voip: String(format: "aa%04x", i), deadlineInMs: 60_000) }
        for i in 0..<20 { h.call("quiet-\(i)", voip: String(format: "bb%04x", i), app: "beta") }
        h.runFor(10_000)
        let elapsedS = Double(Clock.monotonicMs() - startedMs) / 1000
        let acme = h.recorded.filter { $0.app == "acme" }.count
        let beta = h.recorded.filter { $0.app == "beta" }.count
        // The bucket held 20 at the router's start and refills 20 a second: no more can be read.
        let most = 20 + Int((20 * elapsedS).rounded(.up))
        XCTAssertLessThanOrEqual(acme, most, "acme routed \(acme) of its 400 in \(elapsedS) s; its rate allows \(most)")
        XCTAssertGreaterThan(acme, 0, "acme is read at its rate, not stopped")
        XCTAssertEqual(beta, 20, "beta's calls are routed while acme waits for its rate")
        XCTAssertEqual(h.runner.inFlightByApp["acme"] ?? 0, 0, "nothing of acme's waits in the process")
        guard case let .integer(left)? = h.command("XLEN", h.keys("acme").calls) else { return XFail("XLEN") }
        XCTAssertEqual(Int(left), 400 - acme, "what acme could not read is still in its stream: nothing dropped")
        XCTAssertGreaterThan(h.runner.throttledSecondsByApp["acme"] ?? 0, 0, "acme's wait for its rate is counted")
        XCTAssertNil(h.runner.throttledSecondsByApp["beta"], "beta has no rate")
    }

    /// Calls held in their stream by the app's rate past their deadline end as late calls do,
    /// with the cause `rate_limited`: the alert (`delivered_alert`) or, without an alert token,
    /// `expired`; never a VoIP push. A late call of an app without a rate says `deadline`.
    func testCallsTheRateHeldPastTheirDeadlineGetTheAlertWithCauseRateLimited() throws {
        let h = try RouterHarness(limits: ["acme": AppLimits(eventsPerSecond: 20, burst: 20)])
        defer { h.close() }
        for i in 0..<100 {
            h.call("held-\(i)", voip: String(format: "ad%04x", i), alert: i % 10 == 9 ? nil : String(format: "ae%04x", i),
                   deadlineInMs: 1_500)
        }
        h.call("late-beta", voip: "bf0001", alert: "bf0002", deadlineInMs: -1, app: "beta")
        h.runUntil("acme's 100 calls and beta's late one recorded", timeoutMs: 30_000) { h.recorded.count >= 101 }
        let acme = h.recorded.filter { $0.app == "acme" }.map(\.record)
        XCTAssertEqual(acme.count, 100)
        let rung = acme.filter { $0.outcome == .deliveredVoip }
        let held = acme.filter { $0.cause == .rateLimited }
        // 20 at once and 20 a second until the deadline 1.5 s on: about 50 ring, the rest are late.
        XCTAssertGreaterThan(rung.count, 0)
        XCTAssertGreaterThanOrEqual(held.count, 30, "\(rung.count) rang; the rest waited for acme's rate past their deadline")
        XCTAssertEqual(rung.count + held.count, 100, "every call either rang or was late for the rate: \(Set(acme.map(\.outcome)))")
        for r in held {
            let i = Int(r.id!.dropFirst("held-".count))!
            XCTAssertEqual(r.outcome, i % 10 == 9 ? .expired : .deliveredAlert, r.id!)
            XCTAssertTrue(h.requests(String(format: "ad%04x", i)).isEmpty, "\(r.id!): no VoIP push after its deadline")
            if i % 10 != 9 { XCTAssertEqual(h.requests(String(format: "ae%04x", i)).count, 1, "\(r.id!): its alert, once") }
        }
        for r in rung {
            XCTAssertEqual(h.requests(String(format: "ad%04x", Int(r.id!.dropFirst("held-".count))!)).count, 1, "\(r.id!) rang once")
        }
        let stored = h.results().filter { ($0["cause"] as? String) == "rate_limited" }
        XCTAssertEqual(stored.count, held.count, "the results stream says rate_limited")
        let alerts = held.filter { $0.outcome == .deliveredAlert }.count
        XCTAssertEqual(h.outcomes.fallbacks["acme"]?[.rateLimited], alerts, "the metrics' cause label: one fallback per alert")
        XCTAssertNil(h.outcomes.fallbacks["acme"]?[.deadline], "none of acme's late calls says deadline")
        XCTAssertEqual(h.record("late-beta")?.cause, .deadline, "an app without a rate: a late call is late, not rate_limited")
    }

    func testAnAppsInFlightCapHoldsItsCallsInItsStream() throws {
        let h = try RouterHarness(simulator: { $0.defaultScenario = .slow(300) },
                                  limits: ["acme": AppLimits(maxInFlight: 5)])
        defer { h.close() }
        for i in 0..<30 { h.call("capped-\(i)", voip: String(format: "ac%04x", i), deadlineInMs: 60_000) }
        var peak = 0
        h.runUntil("acme's 30 calls recorded", timeoutMs: 20_000) {
            peak = max(peak, h.runner.inFlightByApp["acme"] ?? 0)
            return h.recorded.filter { $0.app == "acme" }.count == 30
        }
        XCTAssertLessThanOrEqual(peak, 5, "at most max_in_flight of acme's calls in the process")
        XCTAssertEqual(Set(h.recorded.map(\.record.outcome)), [.deliveredVoip])
    }

    /// A read that leaves an app out for its cap blocks only `capWaitMs`: nothing wakes a blocked
    /// read when the app's calls leave, so with a 30 s `blockMs`, beta idle and pushes answered in
    /// 50 ms (acme is at its cap when the next read is made), acme's 200 calls at a cap of 10 would
    /// be read 10 per 30 s block (10 minutes) were the read to block that long.
    func testAnAppAtItsCapIsReadAgainSoonAfterItsCallsLeaveWhileAnotherAppsReadBlocks() throws {
        let h = try RouterHarness(simulator: { $0.defaultScenario = .slow(50) }, limits: ["acme": AppLimits(maxInFlight: 10)],
                                  settings: { $0.blockMs = 30_000 })
        defer { h.close() }
        h.runFor(300)  // beta's read is blocking: nothing of either app yet
        for i in 0..<200 { h.call("capped-\(i)", voip: String(format: "ca%04x", i), deadlineInMs: 120_000) }
        var peak = 0
        h.runUntil("acme's 200 calls recorded", timeoutMs: 60_000) {
            peak = max(peak, h.runner.inFlightByApp["acme"] ?? 0)
            return h.recorded.filter { $0.app == "acme" }.count == 200
        }
        XCTAssertLessThanOrEqual(peak, 10, "at most max_in_flight of acme's calls in the process")
        XCTAssertEqual(Set(h.recorded.map(\.record.outcome)), [.deliveredVoip])
        for i in 0..<200 { XCTAssertEqual(h.requests(String(format: "ca%04x", i)).count, 1, "capped-\(i) rang once") }
    }

    private func XFail(_ what: String) { XCTFail("\(what) gave no integer") }
}
