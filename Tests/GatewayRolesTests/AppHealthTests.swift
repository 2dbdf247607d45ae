import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// An app whose credential APNs refuses, against real parts: after a few refusals in a row its
/// calls are dead-lettered at once without reaching APNs, one push a period probes it, an
/// accepted probe makes it healthy, a reload starts it afresh, and another app is untouched.
final class AppHealthTests: XCTestCase {
    private var h: RouterHarness?

    override func tearDown() {
        h?.close()
        h = nil
    }

    /// `invalid_provider_token` tokens get 403 InvalidProviderToken (the key as if revoked), the
    /// others 200: the same app is refused, then accepted again.
    func testAnAppRefusedAgainAndAgainIsWithheldProbedAndHealthyAgain() throws {
        let refused = (1...3).map { String(format: "bad0%04x", $0) }
        let h = try RouterHarness(simulator: { c in for t in refused { c.scenarios[t] = .invalidProviderToken } },
                                  settings: { $0.credentialHealth = AppCredentialHealth.Policy(refusalsToWithhold: 3, probeEveryMs: 800) })
        self.h = h
        for (i, token) in refused.enumerated() { h.call("refused-\(i)", voip: token) }
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.recorded.map(\.record.reason), Array(repeating: "apns_credentials: InvalidProviderToken", count: 3))
        XCTAssertEqual(h.runner.withheldApps.keys.sorted(), ["acme"], "three refusals in a row: withheld")
        XCTAssertEqual(h.runner.unhealthyApps["acme"], "apns_credentials: InvalidProviderToken")

        // Calls now are dead-lettered at once, their pushes never sent, the alert neither.
        let before = h.sim.simulator.recorded.count
        for i in 0..<20 { h.call("withheld-\(i)", voip: String(format: "0c0c%04x", i), alert: String(format: "0a0a%04x", i)) }
        h.call("other-app", voip: "0b0b0001", app: "beta")
        XCTAssertTrue(h.waitForRecords(24))
        let withheld = (0..<20).compactMap { h.record("withheld-\($0)") }
        XCTAssertEqual(Set(withheld.map(\.outcome)), [.deadLettered])
        XCTAssertTrue(withheld.allSatisfy { $0.reason?.hasPrefix("apns_credentials: InvalidProviderToken (not sent: ") == true },
                      withheld.first?.reason ?? "")
        XCTAssertTrue(withheld.allSatisfy { $0.attempts.isEmpty }, "nothing was sent")
        XCTAssertEqual(h.record("other-app")?.outcome, .deliveredVoip, "another app is untouched")
        XCTAssertEqual(h.sim.simulator.recorded.count - before, 1, "only the other app's push reached APNs")
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 23, "every call dead-lettered, with its reason")

        // A period after the withholding, the next call's push goes as a probe; accepted, the
        // app is healthy and its calls go again.
        h.runFor(900)
        h.call("probe", voip: "0d0d0001")
        XCTAssertTrue(h.waitForRecords(25))
        XCTAssertEqual(h.record("probe")?.outcome, .deliveredVoip)
        XCTAssertTrue(h.runner.withheldApps.isEmpty)
        XCTAssertNil(h.runner.unhealthyApps["acme"])
        h.call("after", voip: "0d0d0002")
        XCTAssertTrue(h.waitForRecords(26))
        XCTAssertEqual(h.record("after")?.outcome, .deliveredVoip)
    }

    /// A refused probe keeps the app withheld, and the next probe goes a period later; a reload
    /// of the config (the operator's fix) starts every app afresh at once.
    func testARefusedProbeWaitsAPeriodAndAReloadStartsAfresh() throws {
        let h = try RouterHarness(settings: { $0.credentialHealth = AppCredentialHealth.Policy(refusalsToWithhold: 2, probeEveryMs: 600) })
        self.h = h
        h.call("b1", voip: "a0a00001", app: "broken")
        h.call("b2", voip: "a0a00002", app: "broken")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.runner.withheldApps.keys.sorted(), ["broken"])
        h.runFor(700)
        h.call("probe-1", voip: "a0a00003", app: "broken")
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.requests("a0a00003").count, 1, "the probe reached APNs")
        XCTAssertEqual(h.record("probe-1")?.reason, "apns_credentials: InvalidProviderToken", "and was refused")
        h.call("soon", voip: "a0a00004", app: "broken")
        XCTAssertTrue(h.waitForRecords(4))
        XCTAssertEqual(h.requests("a0a00004").count, 0, "no second probe within the period")
        h.runner.updateApps(h.apps)
        XCTAssertTrue(h.runner.withheldApps.isEmpty && h.runner.unhealthyApps.isEmpty, "a reload starts afresh")
        h.call("reloaded", voip: "a0a00005", app: "broken")
        XCTAssertTrue(h.waitForRecords(5))
        XCTAssertEqual(h.requests("a0a00005").count, 1, "sent again after the reload")
    }
}
