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
final class TokensCLITests: DeadLetterHarnessTestCase {
    override class var configFixed: Bool { true }

    /// With ring receipts, `show` says what the guard against iOS's silent VoIP ban holds of a
    /// token: its suspicion (since when, until when) or its silent rings so far, as the record
    /// script leaves them (RingReceiptTests shows the script writing them).
    func testShowSaysWhetherAVoipTokenIsSuspectedOfTheSilentBanOrHowManySilentRingsItHad() throws {
        let keys = AppKeys(app: "acme")
        XCTAssertNotNil(h.send(["SET", keys.voipSuspected("5ec00000"), "1764584043120", "EX", "86400"]))
        XCTAssertNotNil(h.send(["SET", keys.voipSilentRings("5ec00001"), "2", "EX", "86400"]))
        let suspected = h.cli(["tokens", "show", "5EC00000", "--app", "acme"])
        XCTAssertEqual(suspected.status, 0, suspected.err.joined(separator: "\n"))
        XCTAssertTrue(suspected.text.contains("voip: suspected of iOS's silent VoIP ban since 2025-12-01T10:14:03.120Z"), suspected.text)
        XCTAssertTrue(suspected.text.contains("calls skip VoIP and go straight to the alert"), suspected.text)
        XCTAssertTrue(suspected.text.contains("mark lapses in "), suspected.text)
        let json = h.cli(["tokens", "show", "5ec00000", "--app", "acme", "--json"])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any])
        XCTAssertEqual((object["voip_suspected"] as? [String: Any])?["since_ms"] as? Int, 1_764_584_043_120)
        XCTAssertEqual(object["silent_rings"] as? Int, 0)
        let silent = h.cli(["tokens", "show", "5ec00001", "--app", "acme"])
        XCTAssertTrue(silent.text.contains("voip: 2 silent rings in a row (accepted by APNs, no ring receipt)"), silent.text)
        let clean = h.cli(["tokens", "show", "5ec00002", "--app", "acme", "--json"])
        let none = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(clean.text.utf8)) as? [String: Any])
        XCTAssertTrue(none["voip_suspected"] is NSNull, clean.text)
        XCTAssertFalse(h.cli(["tokens", "show", "5ec00002", "--app", "acme"]).text.contains("silent"))
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
