import DeadLetters
import Foundation
import GatewayTestSupport
import CallStorage
import Routing
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw tokens show` and `forget` on marks and feedback a real router wrote: APNs answers
/// `Unregistered` for one token, which becomes known-invalid; `show` says since when and why,
/// `forget` clears the mark (audited) and the next call pushes to the token again.
final class TokensCLITests: XCTestCase {
    private var h: DeadLetterHarness!

    override func setUpWithError() throws {
        h = try DeadLetterHarness()
        try h.writeConfigFile(fixed: true)
    }

    override func tearDown() {
        h?.close()
        h = nil
    }

    func testShowSaysSinceWhenAndWhyAndForgetLetsTheNextCallPush() throws {
        h.sim.simulator.setScenario(.unregistered, for: "dead0001")
        try h.startRouter(fixed: true)
        h.call("acme", "gone-1", voip: "dead0001", alert: "a1e70001")
        h.waitForRecords(1)
        XCTAssertEqual(h.outcomes("gone-1"), [.deliveredAlert])

        let show = h.cli(["tokens", "show", "DEAD0001", "--app", "acme"])
        XCTAssertEqual(show.status, 0, show.err.joined(separator: "\n"))
        XCTAssertTrue(show.text.contains("voip: known invalid since "), show.text)
        XCTAssertTrue(show.text.contains("(Unregistered)"), "why: \(show.text)")
        XCTAssertTrue(show.text.contains("mark lapses in "), show.text)
        XCTAssertTrue(show.text.contains("alert: not known to be invalid"), show.text)
        XCTAssertTrue(show.text.contains("last feedback: ") && show.text.contains("voip  Unregistered"), show.text)

        let json = h.cli(["tokens", "show", "dead0001", "--app", "acme", "--json"])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any])
        let invalid = try XCTUnwrap(object["known_invalid"] as? [String: Any])
        XCTAssertNotNil((invalid["voip"] as? [String: Any])?["since_ms"])
        XCTAssertNil(invalid["alert"])
        XCTAssertEqual((object["feedback"] as? [[String: Any]])?.first?["reason"] as? String, "Unregistered")

        let forget = h.cli(["tokens", "forget", "dead0001", "--app", "acme"], user: "alice")
        XCTAssertEqual(forget.status, 0, forget.err.joined(separator: "\n"))
        XCTAssertTrue(forget.text.contains("forgot 1 known-invalid mark: acme/voip/dead0001"), forget.text)
        XCTAssertEqual(h.send(["EXISTS", "pushgw:{acme}:invalid:voip:dead0001"])?.integer, 0)
        let audit = h.entries(GatewayKeys().audit).map(\.fields)
        XCTAssertEqual(audit.last?["verb"], "tokens forget")
        XCTAssertEqual(audit.last?["user"], "alice")
        XCTAssertEqual(audit.last?["ids"], #"["acme/voip/dead0001"]"#)
        XCTAssertTrue(forget.err.contains { $0.contains(#""msg":"tokens forget""#) }, "an audit line in the log: \(forget.err)")

        let again = h.cli(["tokens", "forget", "dead0001", "--app", "acme"])
        XCTAssertEqual(again.status, 1, "nothing left to forget")
        XCTAssertEqual(h.entries(GatewayKeys().audit).count, 2, "audited all the same")

        // The token is pushed again (and is still gone, so it is marked again).
        let before = h.sim.simulator.recorded.filter { $0.token == "dead0001" }.count
        h.call("acme", "gone-2", voip: "dead0001", alert: "a1e70001")
        h.waitForRecords(2)
        XCTAssertEqual(h.sim.simulator.recorded.filter { $0.token == "dead0001" }.count, before + 1, "pushed again after forget")
    }

    func testBadUsageIsRefusedBeforeReadingTheConfig() {
        let notHex = h.cli(["tokens", "show", "xyz"], config: "/nonexistent.json")
        XCTAssertEqual(notHex.status, 2)
        XCTAssertTrue(notHex.err.first?.contains("is not a device token") ?? false, "\(notHex.err)")
        XCTAssertEqual(h.cli(["tokens", "forget", "ab", "--channel", "sms"], config: "/nonexistent.json").status, 2)
        XCTAssertEqual(h.cli(["tokens", "shw", "ab"], config: "/nonexistent.json").status, 2)
        XCTAssertEqual(h.cli(["tokens", "show", "ab", "--app", "nope"]).status, 2, "an app not in the config")
    }
}
