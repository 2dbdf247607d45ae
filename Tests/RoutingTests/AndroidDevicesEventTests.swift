import FCM
@testable import Routing
import XCTest

/// `CallEvent.decode` of Android devices (docs/protocol.md, *Android devices*): an `fcm_token`
/// in `devices` or at the top level of the single-device form, for an app with an FCM credential.
final class AndroidDevicesEventTests: XCTestCase {
    private let voip = String(repeating: "a1", count: 32)
    /// FCM's tokens look like this: base64url with `:` and `-`, case-sensitive.
    private let pixel = "dGVzdA:APA91bH-Zx_Qk" + String(repeating: "Ab9-_", count: 28)

    private func android(_ policy: AppRoutingPolicy = Fixture.policy()) -> AppRoutingPolicy {
        var p = policy
        p.fcmCredential = "acme-firebase"
        return p
    }

    private func decode(_ json: String, policy: AppRoutingPolicy? = nil) throws(InvalidEvent) -> CallEvent {
        try CallEvent.decode(Array(json.utf8), entryTimeMs: Fixture.entry, policy: policy ?? android())
    }

    private func refusal(_ json: String, policy: AppRoutingPolicy? = nil, file: StaticString = #filePath,
                         line: UInt = #line) -> InvalidEvent? {
        do {
            let event = try decode(json, policy: policy)
            XCTFail("accepted as \(event)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testADeviceMayCarryAnFcmTokenKeptAsWritten() throws {
        let event = try decode("""
            {"id":"c1","type":"incoming_call","devices":[
             {"id":"bob-iphone","voip_token":"\(voip)"},
             {"id":"bob-pixel","fcm_token":"\(pixel)"}]}
            """)
        XCTAssertEqual(event.devices, [CallDevice(id: "bob-iphone", voipToken: voip, alertToken: nil),
                                       CallDevice(id: "bob-pixel", voipToken: nil, alertToken: nil, fcmToken: pixel)])
        XCTAssertTrue(event.ringsAndroid)
        XCTAssertEqual(event.event(of: event.devices[1]).fcmToken, pixel, "the device's own event carries its FCM token")
        XCTAssertNil(event.event(of: event.devices[0]).fcmToken)
        XCTAssertFalse(event.voipPayload.isEmpty, "the iPhone's VoIP payload is built as before")
    }

    func testASingleDeviceEventMayCarryATopLevelFcmToken() throws {
        let event = try decode(#"{"id":"c1","type":"incoming_call","fcm_token":"\#(pixel)"}"#)
        XCTAssertEqual(event.fcmToken, pixel)
        XCTAssertEqual(event.devices, [CallDevice(id: nil, voipToken: nil, alertToken: nil, fcmToken: pixel)])
        XCTAssertTrue(event.ringsAndroid)
        XCTAssertTrue(event.alertPayload.isEmpty, "no APNs alert for an Android device")
    }

    func testAnIOSOnlyEventRingsNoAndroidDevice() throws {
        let event = try decode(#"{"id":"c1","type":"incoming_call","voip_token":"\#(voip)"}"#, policy: Fixture.policy())
        XCTAssertNil(event.fcmToken)
        XCTAssertFalse(event.ringsAndroid)
    }

    func testBadFcmTokensNameTheFieldAndTheBound() {
        let long = String(repeating: "A", count: FcmMessage.maxTokenBytes + 1)
        let rows: [(String, String, String)] = [
            (#""fcm_token":"""#, "fcm_token", "empty"),
            (#""fcm_token":7"#, "fcm_token", "expected a string"),
            (#""fcm_token":"\#(long)""#, "fcm_token", "\(FcmMessage.maxTokenBytes + 1) bytes, over the \(FcmMessage.maxTokenBytes)-byte limit"),
            (#""fcm_token":"abc def""#, "fcm_token", "not visible ASCII at byte 3"),
            (#""fcm_token":"abc\u0000""#, "fcm_token", "not visible ASCII at byte 3"),
            (#""fcm_token":"abcé""#, "fcm_token", "not visible ASCII at byte 3"),
            (#""fcm_token":"\#(pixel)","voip_token":"\#(voip)""#, "fcm_token", "a device is an iPhone or an Android phone"),
            (#""devices":[{"id":"p","fcm_token":"\#(pixel)","alert_token":"\#(voip)"}]"#, "devices[0].fcm_token",
             "not with voip_token or alert_token"),
            (#""devices":[{"id":"p","fcm_token":" "}]"#, "devices[0].fcm_token", "not visible ASCII at byte 0"),
            (#""fcm_token":"\#(pixel)","devices":[{"id":"p","fcm_token":"\#(pixel)"}]"#, "fcm_token", "not with devices"),
        ]
        for (fields, field, fragment) in rows {
            let error = refusal(#"{"id":"c1","type":"incoming_call",\#(fields)}"#)
            XCTAssertEqual(error?.field, field, fields)
            XCTAssertTrue(error?.problem.contains(fragment) ?? false, "\(fields): \(String(describing: error))")
            XCTAssertEqual(error?.callID, "c1", "the dead letter keeps the id")
        }
    }

    func testAnAppWithoutAnFcmCredentialRefusesAnFcmTokenNamingTheFix() {
        for fields in [#""fcm_token":"\#(pixel)""#, #""devices":[{"id":"bob-pixel","fcm_token":"\#(pixel)"}]"#] {
            let error = refusal(#"{"id":"c1","type":"incoming_call",\#(fields)}"#, policy: Fixture.policy())
            XCTAssertEqual(error?.field.map { $0.hasSuffix("fcm_token") }, true, fields)
            XCTAssertEqual(error?.problem.contains("app acme has no fcm_credential"), true, "\(String(describing: error))")
            XCTAssertEqual(error?.problem.contains("fcm_credential, config/README.md"), true, "names the fix")
            XCTAssertEqual(error?.description.hasPrefix(fields.hasPrefix(#""devices"#) ? "devices[0].fcm_token: " : "fcm_token: "), true)
        }
    }
}
