import APNs
import EventLoop
import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// docs/app.md shows app developers the event and the two pushes it becomes: this writes the
/// event it shows and compares, byte for byte, what the APNs simulator received with the
/// payloads it shows (the deadline, a time, is set to now + 30 s in both), and checks the
/// headers its tables give.
final class AppDocTests: XCTestCase {
    private var h: RouterHarness?

    override func tearDown() {
        h?.close()
        h = nil
    }

    /// The one-line JSON of the code block after `<!-- app-doc: NAME -->`.
    private func example(_ name: String, in doc: String) throws -> String {
        let lines = doc.components(separatedBy: "\n")
        let marker = try XCTUnwrap(lines.firstIndex(of: "<!-- app-doc: \(name) -->"), "docs/app.md has the \(name) example")
        XCTAssertEqual(lines[marker + 1], "```json")
        XCTAssertEqual(lines[marker + 3], "```", "the \(name) example is one line")
        return lines[marker + 2]
    }

    func testThePayloadsOfDocsAppMdAreWhatThePhoneReceives() throws {
        let doc = try String(contentsOfFile: packageRoot + "/docs/app.md", encoding: .utf8)
        let eventText = try example("event", in: doc)
        let voipText = try example("voip payload", in: doc)
        let alertText = try example("alert payload", in: doc)
        let documentedDeadline = "1764412370012"
        XCTAssertTrue(eventText.contains(documentedDeadline) && voipText.contains(documentedDeadline))

        let h = try RouterHarness()
        self.h = h
        let deadline = Clock.unixMs() + 30_000
        let event = eventText.replacingOccurrences(of: documentedDeadline, with: String(deadline))

        // The VoIP push.
        h.xaddRaw("acme", event)
        h.waitForRecords(1)
        XCTAssertEqual(h.record("call-7f3a9c")?.outcome, .deliveredVoip)
        let voip = try XCTUnwrap(h.requests("a0a0a0a0").first)
        XCTAssertEqual(String(decoding: voip.body, as: UTF8.self), voipText.replacingOccurrences(of: documentedDeadline, with: String(deadline)),
                       "docs/app.md's VoIP payload")
        XCTAssertEqual(voip.header("apns-push-type"), "voip")
        XCTAssertEqual(voip.header("apns-topic"), h.sim.bundleID + ".voip")
        XCTAssertEqual(voip.header("apns-priority"), "10")
        XCTAssertEqual(voip.header("apns-expiration"), String(deadline / 1000), "the deadline in seconds, rounded down")

        // The missed-call alert: the same event in another app whose VoIP token is gone.
        h.sim.simulator.setScenario(.unregistered, for: "a0a0a0a0")
        h.xaddRaw("beta", event)
        h.waitForRecords(2)
        let alert = try XCTUnwrap(h.requests("a1e7a1e7").first)
        XCTAssertEqual(String(decoding: alert.body, as: UTF8.self), alertText, "docs/app.md's alert payload")
        XCTAssertEqual(alert.header("apns-push-type"), "alert")
        XCTAssertEqual(alert.header("apns-topic"), h.sim.bundleID)
        XCTAssertEqual(alert.header("apns-priority"), "10")
        let expiration = try XCTUnwrap(Int64(alert.header("apns-expiration") ?? ""))
        XCTAssertEqual(Double(expiration), Double(Clock.unixMs() / 1000 + 60), accuracy: 10,
                       "the fallback's start + the app's alert TTL (60 s in the harness)")
        XCTAssertEqual(alert.header("apns-collapse-id"), "call-7f3a9c")

        // The push that ends the call on another device: the event's tokens as two devices,
        // answered on the first.
        let endedText = try example("ended payload", in: doc)
        h.sim.simulator.setScenario(.ok, for: "a0a0a0a0")
        let devices = #""devices":[{"id":"phone","voip_token":"a0a0a0a0"},{"id":"ipad","voip_token":"b0b0b0b0","alert_token":"b1e7b1e7"}]"#
        let withDevices = event.replacingOccurrences(of: #""voip_token":"a0a0a0a0","alert_token":"a1e7a1e7""#, with: devices)
        XCTAssertNotEqual(withDevices, event, "the documented event names its tokens as the test expects")
        // The id was routed in acme above: its result goes, as a replay's does, so it routes again.
        h.forgetOutcome("acme", "call-7f3a9c")
        h.xaddRaw("acme", withDevices)
        XCTAssertTrue(h.runUntil("the iPad's VoIP push accepted") { !h.requests("b0b0b0b0").isEmpty && h.requests("b0b0b0b0")[0].status == 200 })
        h.xaddRaw("acme", #"{"v":1,"id":"call-7f3a9c","type":"call_answered","device":"phone"}"#)
        XCTAssertTrue(h.runUntil("the ended push") { !h.requests("b1e7b1e7").isEmpty })
        let ended = try XCTUnwrap(h.requests("b1e7b1e7").first)
        XCTAssertEqual(String(decoding: ended.body, as: UTF8.self), endedText, "docs/app.md's ended payload")
        XCTAssertEqual(ended.header("apns-push-type"), "background")
        XCTAssertEqual(ended.header("apns-topic"), h.sim.bundleID)
        XCTAssertEqual(ended.header("apns-priority"), "5")
        XCTAssertEqual(ended.header("apns-expiration"), String((deadline + 999) / 1000), "the deadline, rounded up")
    }
}
