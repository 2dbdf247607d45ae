@testable import Routing
import XCTest

/// `CallEvent.decode` of the devices contract (docs/protocol.md, *Devices*): `devices` on an
/// `incoming_call`, and `call_answered` / `call_declined`.
final class CallDevicesEventTests: XCTestCase {
    private let a = String(repeating: "a1", count: 32), b = String(repeating: "b2", count: 32)

    private func decode(_ json: String) throws(InvalidEvent) -> CallEvent {
        try CallEvent.decode(Array(json.utf8), entryTimeMs: Fixture.entry, policy: Fixture.policy())
    }

    private func refusal(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> InvalidEvent? {
        do {
            let event = try decode(json)
            XCTFail("accepted as \(event)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testDevicesAreReadInOrderEachWithItsTokensAndTheEventsSandboxByDefault() throws {
        let event = try decode("""
            {"id":"c1","type":"incoming_call","sandbox":true,"devices":[
             {"id":"phone","voip_token":"\(a.uppercased())","alert_token":"\(b)"},
             {"id":"ipad","alert_token":"\(a)","sandbox":false}]}
            """)
        XCTAssertEqual(event.devices, [CallDevice(id: "phone", voipToken: a, alertToken: b, sandbox: true),
                                       CallDevice(id: "ipad", voipToken: nil, alertToken: a, sandbox: false)])
        XCTAssertNil(event.voipToken, "a call with devices has no top-level token")
        XCTAssertFalse(event.alertPayload.isEmpty, "a device has an alert token: the alert is built")
        XCTAssertEqual(event.event(of: event.devices[1]).alertToken, a)
        XCTAssertNil(event.event(of: event.devices[1], alert: false).alertToken)
        XCTAssertTrue(event.event(of: event.devices[1], alert: false).alertPayload.isEmpty)
    }

    func testTheSingleDeviceFormIsOneDeviceWithoutAnID() throws {
        let event = try decode(#"{"id":"c1","type":"incoming_call","voip_token":"\#(a)"}"#)
        XCTAssertEqual(event.devices, [CallDevice(id: nil, voipToken: a, alertToken: nil)])
        XCTAssertTrue(event.listedDevices.isEmpty)
        XCTAssertEqual(event.event(of: event.devices[0]), event, "its device's event is the event itself")
    }

    func testBadDeviceListsNameTheDeviceAndTheField() {
        let device = { (id: String) in #"{"id":"\#(id)","voip_token":"\#(self.a)"}"# }
        let rows: [(String, String, String)] = [
            (#""devices":[]"#, "devices", "empty"),
            (#""devices":{}"#, "devices", "expected an array"),
            (#""devices":["#+(0...16).map { device("d\($0)") }.joined(separator: ",")+"]", "devices", "17 devices, over the 16"),
            (#""devices":[7]"#, "devices[0]", "expected an object"),
            (#""devices":[{"voip_token":"\#(a)"}]"#, "devices[0].id", "required"),
            (#""devices":[{"id":"","voip_token":"\#(a)"}]"#, "devices[0].id", "empty"),
            (#""devices":[\#(device("x")),\#(device("x"))]"#, "devices[1].id", "names two devices"),
            (#""devices":[{"id":"x"}]"#, "devices[0].voip_token", "a device needs at least one token"),
            (#""devices":[{"id":"x","alert_token":"zz"}]"#, "devices[0].alert_token", "not a hex string"),
            (#""devices":[{"id":"x","voip_token":"\#(a)","sandbox":"yes"}]"#, "devices[0].sandbox", "expected a boolean"),
            (#""voip_token":"\#(a)","devices":[\#(device("x"))]"#, "voip_token", "not with devices"),
        ]
        for (fields, field, fragment) in rows {
            let error = refusal(#"{"id":"c1","type":"incoming_call",\#(fields)}"#)
            XCTAssertEqual(error?.field, field, fields)
            XCTAssertTrue(error?.problem.contains(fragment) ?? false, "\(fields): \(String(describing: error))")
            XCTAssertEqual(error?.callID, "c1", "the dead letter keeps the id")
        }
    }

    func testAnswersAndDeclinesNameTheirDevice() throws {
        let answered = try decode(#"{"id":"c1","type":"call_answered","device":"phone"}"#)
        XCTAssertEqual(answered.kind, .callAnswered)
        XCTAssertEqual(answered.device, "phone")
        XCTAssertEqual(answered.devices, [], "an answer rings nothing")
        XCTAssertEqual(try decode(#"{"id":"c1","type":"call_declined","device":"ipad"}"#).kind, .callDeclined)
        XCTAssertEqual(refusal(#"{"id":"c1","type":"call_answered"}"#)?.description, "device: required")
        XCTAssertEqual(refusal(#"{"id":"c1","type":"call_declined","device":""}"#)?.description, "device: empty")
        XCTAssertEqual(refusal(#"{"id":"c1","type":"call_answered","device":3}"#)?.field, "device")
    }

    func testARingReceiptNamesItsDeviceOrNoneForTheSingleDeviceForm() throws {
        let receipt = try decode(#"{"v":1,"id":"c1","type":"call_ringing","device":"phone"}"#)
        XCTAssertEqual(receipt.kind, .callRinging)
        XCTAssertEqual(receipt.device, "phone")
        XCTAssertEqual(receipt.devices, [], "a receipt rings nothing")
        XCTAssertNil(receipt.end, "nor ends the ring")
        XCTAssertFalse(receipt.kind.endsRing)
        XCTAssertNil(try decode(#"{"id":"c1","type":"call_ringing"}"#).device, "the single-device form's receipt")
        XCTAssertEqual(refusal(#"{"id":"c1","type":"call_ringing","device":""}"#)?.description, "device: empty")
        XCTAssertEqual(refusal(#"{"id":"c1","type":"call_ringing","device":["phone"]}"#)?.field, "device")
        XCTAssertEqual(refusal(#"{"id":"c1","type":"call_ringing","device":"\#(String(repeating: "d", count: 129))"}"#)?.description,
                       "device: 129 characters, over 128")
        XCTAssertEqual(refusal(#"{"type":"call_ringing","device":"phone"}"#)?.description, "id: required")
    }
}
