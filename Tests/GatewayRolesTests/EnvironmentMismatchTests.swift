import APNs
import APNsSimulator
import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// APNs answers `BadDeviceToken` both for a wrong token and for a token of the other
/// environment: before a token is called invalid it is tried once in the other environment
/// (docs/protocol.md, *Feedback*). Two simulators play the two environments; token `5a0d`
/// belongs to the sandbox (`token_environments`), app `acme` is a production app.
final class EnvironmentMismatchTests: XCTestCase {
    private var h: RouterHarness?

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func start(_ scenarios: [String: Scenario] = [:]) throws -> RouterHarness {
        let h = try RouterHarness(simulator: {
            $0.tokenEnvironments = ["5a0d": .sandbox]
            $0.scenarios = scenarios
        }, separateSandbox: true)
        self.h = h
        return h
    }

    private func sandboxRequests(_ h: RouterHarness, _ token: String) -> Int {
        h.sandboxSim?.recorded.filter { $0.token == token }.count ?? 0
    }

    func testASandboxTokenSentToProductionIsDeliveredThroughTheSandboxAndKept() throws {
        let h = try start()
        h.call("mixed-up", voip: "5a0d", alert: "a1e7")
        h.waitForRecords(1)
        let record = try XCTUnwrap(h.record("mixed-up"))
        XCTAssertEqual(record.outcome, .deliveredVoip, "the phone rang")
        XCTAssertEqual(record.environmentMismatch, .sandbox, "the result names the environment that worked")
        XCTAssertEqual(record.attempts.map(\.status), [400, 200])
        XCTAssertEqual(record.attempts.map(\.reason), ["BadDeviceToken", nil])
        XCTAssertEqual(record.attempts.map(\.environment), [nil, .sandbox])
        XCTAssertEqual(h.requests("5a0d").count, 1, "one push to production")
        XCTAssertEqual(sandboxRequests(h, "5a0d"), 1, "one to the sandbox")
        XCTAssertTrue(h.requests("a1e7").isEmpty, "no missed-call alert")
        let stored = h.results().first { $0["id"] as? String == "mixed-up" }
        XCTAssertEqual(stored?["environment_mismatch"] as? String, "sandbox")

        let feedback = h.entries(h.keys("acme").feedback).map(\.fields)
        XCTAssertEqual(feedback.count, 1)
        XCTAssertEqual(feedback.first?["reason"], "environment_mismatch")
        XCTAssertEqual(feedback.first?["environment"], "sandbox")
        XCTAssertEqual(feedback.first?["token"], "5a0d")
        XCTAssertEqual(h.command("EXISTS", "pushgw:{acme}:invalid:voip:5a0d")?.integer, 0, "the token is not marked invalid")
        XCTAssertEqual(h.outcomes.feedback.map(\.feedback.reason), ["environment_mismatch"], "counted for the metrics")

        // The next call with the same token rings again: nothing skips it.
        h.call("mixed-up-2", voip: "5a0d", alert: "a1e7")
        h.waitForRecords(2)
        XCTAssertEqual(h.record("mixed-up-2")?.outcome, .deliveredVoip)
        XCTAssertEqual(sandboxRequests(h, "5a0d"), 2)
    }

    func testATokenRefusedByBothEnvironmentsIsInvalid() throws {
        let h = try start(["dead00": .badToken])
        h.call("wrong", voip: "dead00", alert: "a1e7")
        h.waitForRecords(1)
        let record = try XCTUnwrap(h.record("wrong"))
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.cause, .voipTokenInvalid)
        XCTAssertNil(record.environmentMismatch)
        XCTAssertEqual(record.attempts.map(\.environment), [nil, .sandbox, nil], "tried once in each environment, then the alert")
        XCTAssertEqual(h.requests("dead00").count, 1)
        XCTAssertEqual(sandboxRequests(h, "dead00"), 1)
        let feedback = h.entries(h.keys("acme").feedback).map(\.fields)
        XCTAssertEqual(feedback.map { $0["reason"] }, ["BadDeviceToken"])
        XCTAssertNil(feedback.first?["environment"] ?? nil)
        XCTAssertNotNil(h.command("GET", "pushgw:{acme}:invalid:voip:dead00")?.string, "marked invalid")

        h.call("wrong-2", voip: "dead00", alert: "a1e7")
        h.waitForRecords(2)
        XCTAssertEqual(h.record("wrong-2")?.cause, .voipTokenInvalid)
        XCTAssertEqual(h.requests("dead00").count + sandboxRequests(h, "dead00"), 2, "a known-invalid token is skipped")
    }

    func testAnAlertTokenOfTheOtherEnvironmentIsDeliveredThere() throws {
        let h = try start()
        h.call("alert-only", alert: "5a0d")
        h.waitForRecords(1)
        let record = try XCTUnwrap(h.record("alert-only"))
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.environmentMismatch, .sandbox)
        XCTAssertEqual(h.entries(h.keys("acme").feedback).first?.fields["channel"], "alert")
        XCTAssertEqual(h.command("EXISTS", "pushgw:{acme}:invalid:alert:5a0d")?.integer, 0)
    }

    /// With ring receipts on, a device accepted only in the other environment is escalated
    /// there: its second VoIP push and its alert go where its token belongs, not to the app's
    /// configured environment (where they would be refused as BadDeviceToken). Counted per token
    /// at each simulator.
    func testWithRingReceiptsTheEscalationGoesToTheEnvironmentThatAcceptedTheToken() throws {
        let h = try RouterHarness(simulator: { $0.tokenEnvironments = ["5a0d": .sandbox, "a1e7": .sandbox] },
                                  separateSandbox: true, ringReceiptTimeoutMs: 500)
        self.h = h
        h.call("silent-sandbox", voip: "5a0d", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(1))
        let record = try XCTUnwrap(h.record("silent-sandbox"))
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.cause, .noReceipt)
        XCTAssertEqual(record.attempts.map(\.kind), [nil, nil, .noReceipt, .noReceipt])
        XCTAssertEqual(record.attempts.map(\.environment), [nil, .sandbox, .sandbox, .sandbox])
        XCTAssertEqual(record.attempts.map(\.status), [400, 200, 200, 200])
        XCTAssertEqual(h.requests("5a0d").count, 1, "production saw only the first push")
        XCTAssertEqual(h.requests("a1e7").count, 0, "and no alert")
        XCTAssertEqual(sandboxRequests(h, "5a0d"), 2, "the ring and the escalation's VoIP push, both in the sandbox")
        XCTAssertEqual(sandboxRequests(h, "a1e7"), 1, "the escalation's alert too")
    }
}
