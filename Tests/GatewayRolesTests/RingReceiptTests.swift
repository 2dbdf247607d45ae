import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import Retry
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// Ring receipts (`ring_receipt_timeout_ms`, docs/protocol.md, *Ring receipts*) end to end: the
/// real router against the APNs simulator and a real redis-server, the test playing the device:
/// it reads the VoIP push the simulator was delivered (the call id in its payload) and adds
/// `call_ringing`, as the app's backend would once the app reported the call to CallKit.
final class RingReceiptTests: XCTestCase {
    private var h: RouterHarness!
    private static let voip = ["5ec00000", "5ec00001"]
    private static let alert = ["a5ec0000", "a5ec0001"]
    private static let ids = ["carol-iphone", "carol-ipad"]

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func ring(_ id: String, devices: Int? = nil, deadlineInMs: Int64 = 30_000) {
        var event: [String: Any] = ["v": 1, "id": id, "type": "incoming_call", "deadline": Clock.unixMs() + deadlineInMs,
                                    "voip": ["caller": "+15551234567", "callerName": "Alice"]]
        if let devices {
            event["devices"] = (0..<devices).map { ["id": Self.ids[$0], "voip_token": Self.voip[$0], "alert_token": Self.alert[$0]] }
        } else {
            (event["voip_token"], event["alert_token"]) = (Self.voip[0], Self.alert[0])
        }
        h.xadd("acme", event)
    }

    private func voipPushes(_ i: Int) -> [RecordedRequest] { h.requests(Self.voip[i]).filter { $0.status == 200 } }

    /// Plays device `i`: waits until the simulator accepted `count` VoIP pushes for it, reads
    /// the call id from the last one's payload, and adds its `call_ringing` (with `device` for a
    /// call with devices). Returns the receipt entry's time, its `rang_at`.
    @discardableResult
    private func deviceRings(_ i: Int, afterPushes count: Int = 1, named: Bool = false,
                             file: StaticString = #filePath, line: UInt = #line) throws -> Int64 {
        XCTAssertTrue(h.runUntil("\(count) VoIP pushes of device \(i) accepted", file: file, line: line) {
            self.voipPushes(i).count >= count
        }, file: file, line: line)
        let payload = try XCTUnwrap(voipPushes(i).last.flatMap { try JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] },
                                    file: file, line: line)
        let callID = try XCTUnwrap(payload["id"] as? String, "the VoIP payload names the call", file: file, line: line)
        var receipt: [String: Any] = ["v": 1, "id": callID, "type": "call_ringing"]
        if named { receipt["device"] = Self.ids[i] }
        let entry = h.xadd("acme", receipt)
        return try XCTUnwrap(Int64(entry.prefix { $0 != "-" }), file: file, line: line)
    }

    private func receiptRecords() -> [OutcomeRecord] { h.recorded.map(\.record).filter { $0.type == .callRinging } }

    func testAReceiptInTimeEscalatesNothingAndTheResultHasTheRingTime() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 20_000)
        ring("r-in-time")
        let rangAt = try deviceRings(0)
        XCTAssertTrue(h.waitForRecords(2), "the receipt's own result and the call's")
        let call = try XCTUnwrap(h.record("r-in-time"))
        XCTAssertEqual(call.outcome, .deliveredVoip)
        XCTAssertEqual(call.channel, .voip)
        XCTAssertEqual(call.devices?.first?.rangAtMs, rangAt, "the ring time is the receipt's")
        XCTAssertEqual(voipPushes(0).count, 1, "no escalation")
        XCTAssertEqual(h.requests(Self.alert[0]).count, 0)
        let receipt = try XCTUnwrap(receiptRecords().first)
        XCTAssertEqual(receipt.outcome, .ringing)
        XCTAssertEqual(receipt.rangAtMs, rangAt)
        XCTAssertNil(receipt.device, "the single-device form names no device")
        let stored = try XCTUnwrap(h.command("GET", h.keys("acme").ringResult("r-in-time", device: nil))?.string)
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"ringing","id":"r-in-time","type":"call_ringing""#), stored)
        XCTAssertTrue(stored.contains(#""rang_at":\#(rangAt)"#), stored)
    }

    func testNoReceiptOneMoreVoipPushThenTheAlertWithCauseNoReceipt() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 500)
        ring("r-silent")
        XCTAssertTrue(h.waitForRecords(1), "recorded once the escalation is done, before the deadline")
        XCTAssertEqual(voipPushes(0).count, 2, "one more VoIP push")
        let alerts = h.requests(Self.alert[0])
        XCTAssertEqual(alerts.count, 1, "then the alert")
        XCTAssertEqual(alerts.first?.header("apns-push-type"), "alert")
        XCTAssertEqual(alerts.first?.header("apns-collapse-id"), "r-silent")
        let call = try XCTUnwrap(h.record("r-silent"))
        XCTAssertEqual(call.outcome, .deliveredAlert, "no phone said it rang")
        XCTAssertEqual(call.cause, .noReceipt)
        XCTAssertEqual(call.attempts.map(\.kind), [nil, .noReceipt, .noReceipt])
        XCTAssertEqual(call.attempts.map(\.channel), [.voip, .voip, .alert])
        XCTAssertNil(call.devices?.first?.rangAtMs)
    }

    func testAReceiptDuringTheEscalationStopsIt() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 1_500)
        ring("r-late")
        // The device stays silent after the first push and rings at the second.
        let rangAt = try deviceRings(0, afterPushes: 2)
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests(Self.alert[0]).count, 0, "the alert step was stopped")
        let call = try XCTUnwrap(h.record("r-late"))
        XCTAssertEqual(call.outcome, .deliveredVoip)
        XCTAssertEqual(call.devices?.first?.rangAtMs, rangAt)
        XCTAssertEqual(call.attempts.map(\.kind), [nil, .noReceipt])
    }

    func testMultiDeviceOnlyTheSilentDeviceIsEscalated() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 1_000)
        ring("r-two", devices: 2)
        try deviceRings(0, named: true)
        XCTAssertTrue(h.runUntil("the silent iPad's alert") { self.h.requests(Self.alert[1]).contains { $0.status == 200 } })
        h.xadd("acme", ["v": 1, "id": "r-two", "type": "call_answered", "device": Self.ids[0]])
        XCTAssertTrue(h.waitForRecords(3), "the receipt's, the answer's and the call's")
        XCTAssertEqual(voipPushes(0).count, 1, "the phone that rang is not escalated")
        XCTAssertEqual(h.requests(Self.alert[0]).count, 0, "and, having answered, gets nothing")
        XCTAssertEqual(voipPushes(1).count, 2, "the silent one: one more VoIP push")
        XCTAssertEqual(h.requests(Self.alert[1]).map { $0.header("apns-push-type") }, ["alert", "background"],
                       "then its alert; then the answer elsewhere ends its call")
        let call = try XCTUnwrap(h.record("r-two"))
        XCTAssertEqual(call.devices?.map(\.outcome), [.deliveredVoip, .deliveredAlert])
        XCTAssertEqual(call.devices?.map(\.cause), [nil, .noReceipt])
        XCTAssertEqual(call.devices?.map { $0.rangAtMs != nil }, [true, false])
        XCTAssertEqual(receiptRecords().first?.device, Self.ids[0], "the receipt's own result names its device")
        XCTAssertNotNil(h.command("GET", h.keys("acme").ringResult("r-two", device: Self.ids[0]))?.string)
    }

    func testAReceiptAnotherGatewayReadIsHeardAtTheNextRecheck() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 20_000)
        ring("r-elsewhere")
        XCTAssertTrue(h.runUntil("the VoIP push accepted") { !self.voipPushes(0).isEmpty })
        // What another gateway's record of the receipt leaves: its own result.
        h.command("SET", h.keys("acme").ringResult("r-elsewhere", device: nil),
                  #"{"outcome":"ringing","id":"r-elsewhere","type":"call_ringing","app":"acme","rang_at":1764412345678}"#, "EX", "60")
        XCTAssertTrue(h.waitForRecords(1))
        let call = try XCTUnwrap(h.record("r-elsewhere"))
        XCTAssertEqual(call.devices?.first?.rangAtMs, 1_764_412_345_678, "heard through the key, with its ring time")
        XCTAssertEqual(voipPushes(0).count, 1)
    }

    func testReceiptsOffARingReceiptIsRecordedAndChangesNothing() throws {
        h = try RouterHarness()
        ring("r-off")
        XCTAssertTrue(h.waitForRecords(1), "off: recorded once APNs accepted, as before")
        XCTAssertNil(h.record("r-off")?.devices, "the single-device result as before")
        try deviceRings(0)
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(receiptRecords().first?.outcome, .ringing)
        XCTAssertEqual(voipPushes(0).count, 1)
    }
}
