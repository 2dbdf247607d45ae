import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import RedisClient
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

    private func ring(_ id: String, devices: Int? = nil, token t: Int = 0, deadlineInMs: Int64 = 30_000) {
        var event: [String: Any] = ["v": 1, "id": id, "type": "incoming_call", "deadline": Clock.unixMs() + deadlineInMs,
                                    "voip": ["caller": "+15551234567", "callerName": "Alice"]]
        if let devices {
            event["devices"] = (0..<devices).map { ["id": Self.ids[$0], "voip_token": Self.voip[$0], "alert_token": Self.alert[$0]] }
        } else {
            (event["voip_token"], event["alert_token"]) = (Self.voip[t], Self.alert[t])
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

    /// Plays the single-device form's device of token `i` for call `callID`: waits until the
    /// simulator accepted a VoIP push of that call for it and adds the call's `call_ringing`.
    private func deviceRings(_ i: Int, call callID: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(h.runUntil("a VoIP push of \(callID) accepted for token \(i)", file: file, line: line) {
            self.voipPushes(i).contains { self.callID(of: $0) == callID }
        }, file: file, line: line)
        h.xadd("acme", ["v": 1, "id": callID, "type": "call_ringing"])
    }

    private func callID(of push: RecordedRequest) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(push.body)) as? [String: Any])?["id"] as? String
    }

    /// The feedback entries saying a token is suspected of iOS's silent VoIP ban.
    private func suspicionFeedback() -> [StreamEntry] {
        h.entries(h.keys("acme").feedback).filter { $0.values["reason"] == Array("voip_suspected_blocked".utf8) }
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

    // MARK: The guard against iOS's silent VoIP ban

    func testThreeSilentRingsSuspectTheTokenTheFourthCallGoesStraightToTheAlertAndAReceiptClearsIt() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 1_000)
        let keys = h.keys("acme")
        var records = 0
        // Token 0's phone stays silent; token 1's rings each time, so the app's backend is seen
        // sending receipts: the silence is the token's.
        for n in 1...3 {
            ring("s-silent-\(n)")
            records += 1
            XCTAssertTrue(h.waitForRecords(records), "silent call \(n): escalated, then recorded")
            XCTAssertEqual(h.record("s-silent-\(n)")?.cause, .noReceipt)
            if n == 3 { break }
            ring("s-rings-\(n)", token: 1)
            deviceRings(1, call: "s-rings-\(n)")
            records += 2
            XCTAssertTrue(h.waitForRecords(records), "the ringing call's receipt and record")
            XCTAssertEqual(h.record("s-rings-\(n)")?.outcome, .deliveredVoip)
            XCTAssertNil(h.command("GET", keys.voipSuspected(Self.voip[0]))?.string, "not yet suspected after \(n)")
        }
        XCTAssertEqual(voipPushes(0).count, 6, "each silent call: its ring and the escalation's VoIP push")
        XCTAssertNotNil(h.command("GET", keys.voipSuspected(Self.voip[0]))?.string, "three silent rings in a row: suspected")
        XCTAssertNil(h.command("GET", keys.voipSuspected(Self.voip[1]))?.string, "the phone that rang is not")
        let said = suspicionFeedback()
        XCTAssertEqual(said.count, 1, "the feedback stream says so once")
        XCTAssertEqual(said.first?.values["token"], Array(Self.voip[0].utf8))
        XCTAssertEqual(said.first?.values["channel"], Array("voip".utf8))
        XCTAssertEqual(h.outcomes.voipSuspected["acme"], 1, "counted for pushgw_voip_suspected_blocked_total")
        XCTAssertEqual(h.command("ZRANGE", keys.voipSuspectedTokens, "0", "-1")?.array?.compactMap(\.string), [Self.voip[0]],
                       "listed for the console")

        ring("s-silent-4")
        records += 1
        XCTAssertTrue(h.waitForRecords(records))
        XCTAssertEqual(voipPushes(0).count, 6, "the fourth call skipped VoIP")
        XCTAssertEqual(h.requests(Self.alert[0]).filter { $0.status == 200 }.count, 4, "and went straight to the alert")
        let fourth = try XCTUnwrap(h.record("s-silent-4"))
        XCTAssertEqual(fourth.outcome, .deliveredAlert)
        XCTAssertEqual(fourth.cause, .voipSuspectedBlocked)
        XCTAssertEqual(fourth.attempts.map(\.channel), [.alert])

        // The third silent call's phone rang after all: its receipt, late, clears the token.
        h.xadd("acme", ["v": 1, "id": "s-silent-3", "type": "call_ringing"])
        records += 1
        XCTAssertTrue(h.waitForRecords(records))
        XCTAssertTrue(h.runUntil("the suspicion cleared") { self.h.command("EXISTS", keys.voipSuspected(Self.voip[0]))?.integer == 0 })
        XCTAssertEqual(h.command("ZCARD", keys.voipSuspectedTokens)?.integer, 0)
        ring("s-silent-5")
        deviceRings(0, call: "s-silent-5")
        records += 2
        XCTAssertTrue(h.waitForRecords(records))
        XCTAssertEqual(h.record("s-silent-5")?.outcome, .deliveredVoip, "VoIP again")
        XCTAssertEqual(voipPushes(0).count, 7)
        XCTAssertEqual(suspicionFeedback().count, 1, "said once")
    }

    func testAnAppWhoseBackendSendsNoReceiptsIsReportedNotSuspended() throws {
        h = try RouterHarness(ringReceiptTimeoutMs: 500)
        let keys = h.keys("acme")
        for n in 1...4 {
            ring("n-\(n)")
            XCTAssertTrue(h.waitForRecords(n))
            XCTAssertEqual(h.record("n-\(n)")?.cause, .noReceipt, "escalated for want of a receipt, as before")
        }
        XCTAssertEqual(voipPushes(0).count, 8, "every call rang VoIP (and its escalation's)")
        XCTAssertEqual(h.runner.appsMissingReceipts, ["acme": 4], "reported: four calls in a row without any receipt")
        XCTAssertNil(h.command("GET", keys.voipSuspected(Self.voip[0]))?.string, "not suspended")
        XCTAssertEqual(suspicionFeedback().count, 0)
        XCTAssertNil(h.outcomes.voipSuspected["acme"])
        ring("n-5")
        XCTAssertTrue(h.waitForRecords(5))
        XCTAssertEqual(h.record("n-5")?.attempts.first?.channel, .voip, "its calls still ring VoIP first")

        // The backend sends receipts again: the report ends.
        ring("n-6")
        deviceRings(0, call: "n-6")
        XCTAssertTrue(h.waitForRecords(7))
        XCTAssertEqual(h.runner.appsMissingReceipts, [:])
        XCTAssertEqual(h.command("EXISTS", keys.callsWithoutReceipt)?.integer, 0)
    }
}
