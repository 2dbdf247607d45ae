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

    private func XFail(_ what: String) { XCTFail("\(what) gave no integer") }
}
