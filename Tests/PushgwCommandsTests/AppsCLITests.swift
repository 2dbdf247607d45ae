import CallStorage
import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw apps pause|resume|status` against a real redis-server and a real router on the
/// simulator: a pause stops the router reading the app (its call is not pushed while app
/// `broken`'s is), `status` says who paused it, when and why, the resume lets the call ring,
/// and both verbs write the audit record the dead-letter verbs write.
final class AppsCLITests: DeadLetterHarnessTestCase {
    override class var configFixed: Bool { true }

    func testPauseHoldsTheAppsCallsStatusSaysWhyAndResumeLetsThemRingBothAudited() throws {
        try h.startRouter(fixed: true)
        let pause = h.cli(["apps", "pause", "acme", "--reason", "APNs key rotation"], user: "alice")
        XCTAssertEqual(pause.status, 0, pause.err.joined(separator: "\n"))
        XCTAssertTrue(pause.text.contains("paused app acme: its calls wait in its stream until pushgw apps resume acme"), pause.text)
        XCTAssertTrue(pause.err.contains { $0.contains(#""msg":"apps pause""#) && $0.contains(#""reason":"APNs key rotation""#) },
                      "an audit line in the log: \(pause.err)")
        var audit = h.entries(GatewayKeys().audit).map(\.fields)
        XCTAssertEqual(audit.last?["verb"], "apps pause")
        XCTAssertEqual(audit.last?["user"], "alice")
        XCTAssertEqual(audit.last?["ids"], #"["acme"]"#)
        XCTAssertEqual(audit.last?["done"], "1")
        XCTAssertEqual(audit.last?["options"], #"{"reason":"APNs key rotation"}"#)

        let status = h.cli(["apps", "status"])
        XCTAssertEqual(status.status, 0, status.err.joined(separator: "\n"))
        XCTAssertTrue(status.out.contains { $0.hasPrefix("acme: paused since ") && $0.hasSuffix(" by alice: APNs key rotation") }, status.text)
        XCTAssertTrue(status.out.contains("broken: running"), status.text)
        let json = h.cli(["apps", "status", "--app", "acme", "--json"])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any], json.text)
        XCTAssertEqual(object["paused"] as? Bool, true)
        XCTAssertEqual(object["user"] as? String, "alice")
        XCTAssertNotNil(object["since_ms"] as? Int)

        let again = h.cli(["apps", "pause", "acme", "--reason", "other"], user: "bob")
        XCTAssertEqual(again.status, 0)
        XCTAssertTrue(again.text.contains("was paused already") && again.text.contains("by alice: APNs key rotation"), again.text)
        audit = h.entries(GatewayKeys().audit).map(\.fields)
        XCTAssertEqual(audit.last?["done"], "0", "audited all the same, changing nothing")

        XCTAssertTrue(h.loop.run(waitingFor: "the router read the pause") { h.pausedApps == ["acme"] })
        h.call("acme", "held-1", voip: "a9e70001")
        h.call("broken", "other-1", voip: "a9e70002")
        h.waitForRecords(1)
        XCTAssertEqual(h.outcomes("other-1"), [.deliveredVoip], "another app's call rings meanwhile")
        XCTAssertEqual(h.outcomes("held-1"), [], "paused acme's call waits")
        XCTAssertTrue(h.sim.simulator.recorded.filter { $0.token == "a9e70001" }.isEmpty, "and is not pushed")

        let resume = h.cli(["apps", "resume", "acme"], user: "carol")
        XCTAssertEqual(resume.status, 0, resume.err.joined(separator: "\n"))
        XCTAssertTrue(resume.text.contains("resumed app acme (paused since ") && resume.text.contains("by alice"), resume.text)
        audit = h.entries(GatewayKeys().audit).map(\.fields)
        XCTAssertEqual(audit.last?["verb"], "apps resume")
        XCTAssertEqual(audit.last?["user"], "carol")
        XCTAssertEqual(audit.last?["done"], "1")
        h.waitForRecords(2)
        XCTAssertEqual(h.outcomes("held-1"), [.deliveredVoip], "rung after the resume")
        XCTAssertEqual(h.send(["EXISTS", AppKeys(app: "acme").paused])?.integer, 0)
        XCTAssertTrue(h.cli(["apps", "status", "--app", "acme"]).out.contains("acme: running"))

        let notPaused = h.cli(["apps", "resume", "acme"])
        XCTAssertEqual(notPaused.status, 0)
        XCTAssertTrue(notPaused.text.contains("app acme was not paused; nothing changed"), notPaused.text)
    }

    func testBadUsageIsRefusedBeforeAnythingChanges() {
        XCTAssertEqual(h.cli(["apps", "pause"]).status, 2, "no app named")
        XCTAssertEqual(h.cli(["apps", "pause", "nope"]).status, 2, "an app not in the config")
        XCTAssertEqual(h.cli(["apps", "paws", "acme"], config: "/nonexistent.json").status, 2)
        XCTAssertEqual(h.cli(["apps", "pause", "acme", "--reason", String(repeating: "x", count: 201)]).status, 2)
        XCTAssertEqual(h.cli(["apps", "resume", "acme", "--reason", "x"]).status, 2, "resume takes no reason")
        XCTAssertEqual(h.send(["EXISTS", AppKeys(app: "acme").paused])?.integer, 0, "nothing paused")
        XCTAssertTrue(h.entries(GatewayKeys().audit).isEmpty, "nothing audited")
    }
}
