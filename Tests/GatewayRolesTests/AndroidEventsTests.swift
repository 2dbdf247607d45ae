import GatewayTestSupport
import Routing
import XCTest
@testable import GatewayRoles

/// Calls with an Android device (`fcm_token`), routed by the real router: until the router
/// rings Android devices, such a call is kept whole as a dead letter naming why, and no device
/// of it is rung (docs/protocol.md, *Android devices*).
final class AndroidEventsTests: XCTestCase {
    private var h: RouterHarness!
    private let pixel = "dGVzdA:APA91bH-Zx_Qk-pixel"

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func mixedCall(_ id: String) -> String {
        #"{"v":1,"id":"\#(id)","type":"incoming_call","devices":[{"id":"bob-iphone","voip_token":"a0a1"},"#
            + #"{"id":"bob-pixel","fcm_token":"\#(pixel)"}]}"#
    }

    func testAnAppWithoutAnFcmCredentialDeadLettersAnAndroidCallNamingTheFix() throws {
        h = try RouterHarness()
        h.xaddRaw("acme", #"{"v":1,"id":"single","type":"incoming_call","fcm_token":"\#(pixel)"}"#)
        h.xaddRaw("acme", mixedCall("mixed"))
        h.call("neighbour", voip: "b0b1")
        XCTAssertTrue(h.waitForRecords(3), "one outcome per entry: \(h.recorded.map(\.record.id))")
        XCTAssertEqual(h.record("neighbour")?.outcome, .deliveredVoip, "an iOS call beside them rings as before")
        XCTAssertTrue(h.requests("a0a1").isEmpty, "the mixed call's iPhone is not rung: the call is kept whole")
        let reasons = h.entries(h.keys("acme").dead).map { $0.fields["reason"] ?? "" }
        XCTAssertEqual(reasons, [
            "invalid_event: fcm_token: app acme has no fcm_credential, so it cannot ring Android devices "
                + "(name an FCM service account of credentials in the app's fcm_credential, config/README.md)",
            "invalid_event: devices[1].fcm_token: app acme has no fcm_credential, so it cannot ring Android devices "
                + "(name an FCM service account of credentials in the app's fcm_credential, config/README.md)",
        ])
    }

    func testAnAppWithAnFcmCredentialKeepsAnAndroidCallAsADeadLetterUntilTheRouterRingsAndroid() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase")
        h.xaddRaw("acme", mixedCall("mixed"))
        XCTAssertTrue(h.waitForRecords(1), "one outcome: \(h.recorded.map(\.record.id))")
        XCTAssertTrue(h.requests("a0a1").isEmpty, "nothing of the call is rung")
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.map { $0.fields["reason"] ?? "" }, [
            "invalid_event: fcm_token: this gateway does not ring Android devices yet "
                + "(the call is kept as a dead letter: replay it once it does)",
        ])
        XCTAssertEqual(dead.first?.values["event"], Array(mixedCall("mixed").utf8), "kept byte for byte, replayable")
    }
}
