import APNs
import Retry
@testable import Routing
import XCTest

/// Ring receipts (`ring_receipt_timeout_ms`, docs/protocol.md, *Ring receipts*) in
/// `CallStateMachine`, as transcripts on `RingModel`: a device whose VoIP push was accepted
/// and whose `call_ringing` does not come in time gets one more VoIP push, then its alert
/// (`no_receipt`); a receipt stops what is pending for its device only.
final class CallStateMachineReceiptTests: XCTestCase {
    static let timeout: Int64 = 4_000

    static func receipts(_ missedCallAlert: MissedCallAlert = .undelivered) -> AppRoutingPolicy {
        var policy = Fixture.policy()
        policy.missedCallAlert = missedCallAlert
        policy.ringReceiptTimeoutMs = timeout
        return policy
    }

    static func single(policy: AppRoutingPolicy = receipts()) throws -> RingModel {
        try RingModel(Fixture.event(policy: policy), policy: policy)
    }

    static func devices(policy: AppRoutingPolicy = receipts()) throws -> RingModel {
        try RingModel(CallStateMachineTests.event(policy: policy), policy: policy)
    }

    @discardableResult
    static func receipt(_ m: inout RingModel, _ device: String?, after ms: Int64 = 100) throws -> CallStateMachine.Action {
        m.now += ms
        return try m.apply(m.machine.onRingReceipt(device: device, now: m.now))
    }

    func testAReceiptInTimeEscalatesNothingAndTheResultHasTheRingTime() throws {
        var m = try Self.single()
        try m.lookUp()
        let accepted = try m.answer(0, 200)
        XCTAssertNil(m.recorded, "with receipts on, the call waits for its receipt")
        let due = try XCTUnwrap(accepted.timer.at)
        XCTAssertEqual(due, m.now + Self.timeout, "the receipt is due the timeout after APNs accepted")
        try Self.receipt(&m, nil)
        let rangAt = m.now
        let record = try XCTUnwrap(m.recorded, "the receipt came: nothing is left to wait for")
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertEqual(record.channel, .voip)
        XCTAssertNil(record.cause)
        XCTAssertEqual(record.devices?.first?.rangAtMs, rangAt)
        XCTAssertEqual(m.sent(to: 0).map(\.purpose), [.ring], "no escalation")
        XCTAssertTrue(record.jsonString.contains(#""rang_at":\#(rangAt)"#), record.jsonString)
        XCTAssertEqual(try m.timer(at: due).pushes, [], "a timer that fires anyway sends nothing")
    }

    func testNoReceiptOneMoreVoipPushThenTheAlertEachWithCauseNoReceipt() throws {
        var m = try Self.single()
        try m.lookUp()
        let due = try XCTUnwrap(try m.answer(0, 200).timer.at)
        let again = try m.timer(at: due)
        XCTAssertEqual(again.pushes.map(\.purpose), [.noReceipt(.voip)], "one more VoIP push")
        XCTAssertEqual(again.pushes.first?.plan.notification!.deviceToken, Fixture.voipToken)
        let secondDue = try XCTUnwrap(try m.answer(0, 200).timer.at)
        XCTAssertEqual(secondDue, m.now + Self.timeout, "its receipt is awaited as long again")
        let alert = try m.timer(at: secondDue)
        XCTAssertEqual(alert.pushes.map(\.purpose), [.noReceipt(.alert)], "then the alert path")
        XCTAssertEqual(alert.pushes.first?.plan.notification!.collapseID, "call-7f3a9c")
        try m.answer(0, 200)
        let record = try XCTUnwrap(m.recorded, "the escalation is done: the call is recorded")
        XCTAssertEqual(record.outcome, .deliveredAlert, "no phone rang: what showed is the alert")
        XCTAssertEqual(record.cause, .noReceipt)
        XCTAssertEqual(record.channel, .alert)
        XCTAssertNil(record.devices?.first?.rangAtMs)
        XCTAssertEqual(record.attempts.map(\.kind), [nil, .noReceipt, .noReceipt])
        XCTAssertEqual(record.attempts.map(\.channel), [.voip, .voip, .alert])
        let json = record.jsonString
        XCTAssertTrue(json.contains(#""cause":"no_receipt""#), json)
        XCTAssertTrue(json.contains(#""kind":"no_receipt","channel":"voip","status":200"#), json)
        XCTAssertTrue(json.contains(#""kind":"no_receipt","channel":"alert","status":200"#), json)
    }

    func testAReceiptDuringTheEscalationStopsIt() throws {
        var m = try Self.single()
        try m.lookUp()
        let due = try XCTUnwrap(try m.answer(0, 200).timer.at)
        try m.timer(at: due)
        // The receipt of the first push comes late, while the second VoIP push is out.
        let late = try Self.receipt(&m, nil)
        XCTAssertEqual(late.withdraw, [0], "the second VoIP push is taken back if not written yet")
        try m.fail(0, .withdrawn)
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertNotNil(record.devices?.first?.rangAtMs)
        XCTAssertEqual(m.sent(to: 0).map(\.purpose), [.ring, .noReceipt(.voip)], "no alert")
    }

    func testAReceiptAfterTheSecondPushWasAcceptedStopsTheAlert() throws {
        var m = try Self.single()
        try m.lookUp()
        try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        let secondDue = try XCTUnwrap(try m.answer(0, 200).timer.at)
        try Self.receipt(&m, nil)
        XCTAssertEqual(try XCTUnwrap(m.recorded).outcome, .deliveredVoip)
        XCTAssertEqual(try m.timer(at: secondDue).pushes, [], "the alert step was dropped")
        XCTAssertEqual(m.sent(to: 0).map(\.purpose), [.ring, .noReceipt(.voip)])
    }

    func testNothingEscalatesPastTheDeadline() throws {
        var m = try Self.single()
        try m.lookUp()
        try m.answer(0, 200, after: 29_000)  // accepted a second before the deadline
        let atDeadline = try m.timer(at: Fixture.deadline)
        XCTAssertEqual(atDeadline.pushes, [], "the deadline passed: no second VoIP push, no alert")
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredVoip, "APNs accepted it: never reported undelivered")
        XCTAssertNil(record.devices?.first?.rangAtMs)
    }

    func testASecondVoipPushRefusedGoesStraightToTheAlert() throws {
        var m = try Self.single()
        try m.lookUp()
        try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        let refused = try m.answer(0, 500, .internalServerError)
        XCTAssertEqual(refused.pushes.map(\.purpose), [.noReceipt(.alert)])
        try m.answer(0, 200)
        XCTAssertEqual(try XCTUnwrap(m.recorded).cause, .noReceipt)
    }

    func testMultiDeviceOnlyTheSilentDeviceIsEscalated() throws {
        var m = try Self.devices()
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        try Self.receipt(&m, CallStateMachineTests.ids[0])
        try Self.receipt(&m, CallStateMachineTests.ids[2])
        let due = try XCTUnwrap(m.timerAt)
        XCTAssertLessThan(due, Fixture.deadline)
        let again = try m.timer(at: due)
        XCTAssertEqual(again.pushes.map(\.device), [1], "the iPad alone is silent")
        XCTAssertEqual(again.pushes.map(\.purpose), [.noReceipt(.voip)])
        try m.answer(1, 200)
        let alert = try m.timer(at: try XCTUnwrap(m.timerAt))
        XCTAssertEqual(alert.pushes.map(\.device), [1])
        XCTAssertEqual(alert.pushes.map(\.purpose), [.noReceipt(.alert)])
        try m.answer(1, 200)
        XCTAssertNil(m.recorded, "a call with devices still waits for an answer")
        let end = try m.hear(.answered(device: CallStateMachineTests.ids[0]))
        XCTAssertEqual(Set(end.pushes.map(\.device)), [1, 2], "the others are told as before")
        for d in [1, 2] { try m.answer(d, 200) }
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertEqual(record.devices?.map(\.outcome), [.deliveredVoip, .deliveredAlert, .deliveredVoip])
        XCTAssertEqual(record.devices?.map(\.cause), [nil, .noReceipt, nil])
        XCTAssertEqual(record.devices?.map { $0.rangAtMs != nil }, [true, false, true])
        XCTAssertEqual(m.sent(to: 0).filter { if case .noReceipt = $0.purpose { return true }; return false }, [])
        XCTAssertEqual(m.sent(to: 2).filter { if case .noReceipt = $0.purpose { return true }; return false }, [])
    }

    func testAnAnswerDuringAnEscalationTakesItsPushBackAndEscalatesNoFurther() throws {
        var m = try Self.devices()
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        try Self.receipt(&m, CallStateMachineTests.ids[0])
        // Devices 1 and 2 get their second VoIP push, each when its own receipt was due.
        while m.out.count < 2 { try m.timer(at: try XCTUnwrap(m.timerAt)) }
        XCTAssertEqual(m.pushes.filter { $0.purpose == .noReceipt(.voip) }.map(\.device), [1, 2])
        XCTAssertEqual(Set(m.out.keys), [1, 2])
        let end = try m.hear(.answered(device: CallStateMachineTests.ids[0]))
        XCTAssertEqual(Set(end.withdraw), [1, 2])
        try m.fail(1, .withdrawn)
        try m.fail(2, .withdrawn)
        for d in [1, 2] { try m.answer(d, 200) }  // their ended pushes
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.devices?.map(\.told), [nil, .answeredElsewhere, .answeredElsewhere])
        XCTAssertFalse(m.pushes.contains { $0.purpose == .noReceipt(.alert) })
    }

    func testAReceiptOfAnUnknownDeviceOrASecondOneChangesNothing() throws {
        var m = try Self.devices()
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        XCTAssertEqual(try Self.receipt(&m, "someone-else"), .none)
        XCTAssertEqual(try Self.receipt(&m, nil), .none, "a call with devices names the device")
        try Self.receipt(&m, CallStateMachineTests.ids[1])
        let first = m.now
        try Self.receipt(&m, CallStateMachineTests.ids[1])
        try m.timer(at: Fixture.deadline)
        XCTAssertEqual(try XCTUnwrap(m.recorded).devices?[1].rangAtMs, first, "the first receipt's time")
    }

    func testReceiptsOffNothingWaitsAndTheResultIsAsBefore() throws {
        var m = try RingModel(Fixture.event())
        try m.lookUp()
        try m.answer(0, 200)
        let record = try XCTUnwrap(m.recorded, "off by default: recorded once APNs accepted, as before")
        XCTAssertNil(record.devices)
        XCTAssertEqual(try Self.receipt(&m, nil), .none)
    }

    func testUnansweredWithReceiptsTheEscalatedDeviceStillGetsItsMissedCallAlert() throws {
        var m = try Self.single(policy: Self.receipts(.unanswered))
        try m.lookUp()
        try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        try m.answer(0, 200)
        XCTAssertNil(m.recorded, "unanswered waits for the deadline")
        let deadline = try m.timer(at: Fixture.deadline)
        XCTAssertEqual(deadline.pushes.map(\.purpose), [.missedCall], "the missed-call alert after the deadline, as today")
        try m.answer(0, 200)
        XCTAssertEqual(try XCTUnwrap(m.recorded).cause, .noReceipt)
    }

    // MARK: The guard against iOS's silent VoIP ban

    @discardableResult
    static func lookUp(_ m: inout RingModel, suspected: [Bool]) throws -> CallStateMachine.Action {
        try m.apply(m.machine.onLookupAnswered(alreadyDone: nil, cancelled: false, claimHolder: "me", consumer: "me",
                                               copyRoutingHere: false, devicesVoipSuspected: suspected, now: m.now))
    }

    func testASuspectedTokenGoesStraightToItsAlertWithCauseVoipSuspectedBlocked() throws {
        var m = try Self.single()
        let start = try Self.lookUp(&m, suspected: [true])
        XCTAssertEqual(start.pushes.map(\.purpose), [.fallback(.voipSuspectedBlocked)], "no VoIP push")
        XCTAssertEqual(start.pushes.first?.plan.notification!.deviceToken, Fixture.alertToken)
        try m.answer(0, 200)
        let record = try XCTUnwrap(m.recorded, "nothing to wait for: no VoIP push went")
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.cause, .voipSuspectedBlocked)
        XCTAssertTrue(record.jsonString.contains(#""cause":"voip_suspected_blocked""#), record.jsonString)
        XCTAssertNil(m.machine.ringTally, "a ring that never went says nothing of the token")
    }

    func testASuspectedTokenWithoutAUsableAlertTokenIsStillPushedVoip() throws {
        var m = try RingModel(Fixture.event(["alert_token": nil], policy: Self.receipts()), policy: Self.receipts())
        let start = try Self.lookUp(&m, suspected: [true])
        XCTAssertEqual(start.pushes.map(\.purpose), [.ring], "the VoIP push is its only chance")
    }

    func testSuspicionMeansNothingWithReceiptsOff() throws {
        var m = try RingModel(Fixture.event())
        let start = try Self.lookUp(&m, suspected: [true])
        XCTAssertEqual(start.pushes.map(\.purpose), [.ring])
    }

    func testUnansweredASuspectedDeviceGetsItsAlertNowAndTheCallStillWaitsForTheDeadline() throws {
        var m = try Self.devices(policy: Self.receipts(.unanswered))
        let start = try Self.lookUp(&m, suspected: [false, true, false])
        XCTAssertEqual(start.pushes.map(\.purpose), [.ring, .fallback(.voipSuspectedBlocked), .ring])
        XCTAssertEqual(start.pushes[1].plan.notification!.deviceToken, CallStateMachineTests.tokens[1].alert)
        for d in 0..<3 { try m.answer(d, 200) }
        XCTAssertNil(m.recorded, "unanswered: the call waits for an answer or its deadline")
    }

    func testTheRingTallySaysWhichDevicesRangAndWhichWereSilent() throws {
        var m = try Self.devices()
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        try Self.receipt(&m, CallStateMachineTests.ids[0])
        // Device 1's receipt is due first (its push was accepted first after device 0's).
        let first = try XCTUnwrap(m.timerAt)
        let again = try m.timer(at: first)
        XCTAssertEqual(again.pushes.map(\.device), [1])
        try m.answer(1, 200)
        // Device 0 answers before device 2's receipt was due: device 2's ring says nothing.
        try m.hear(.answered(device: CallStateMachineTests.ids[0]))
        for d in [1, 2] where m.out[d] != nil { try m.answer(d, 200) }
        XCTAssertNotNil(m.recorded)
        let tally = try XCTUnwrap(m.machine.ringTally)
        XCTAssertEqual(tally.devices, [.init(id: CallStateMachineTests.ids[0], voipToken: CallStateMachineTests.tokens[0].voip, rang: true),
                                       .init(id: CallStateMachineTests.ids[1], voipToken: CallStateMachineTests.tokens[1].voip, rang: false)])
        XCTAssertTrue(tally.anyRang)
    }

    func testASilentSingleDeviceCallTalliesItsTokenSilentAndAReceiptRang() throws {
        var m = try Self.single()
        try m.lookUp()
        try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        try m.answer(0, 200)
        XCTAssertEqual(m.machine.ringTally?.devices, [.init(id: nil, voipToken: Fixture.voipToken, rang: false)])
        XCTAssertEqual(m.machine.ringTally?.anyRang, false)

        var rang = try Self.single()
        try rang.lookUp()
        try rang.answer(0, 200)
        try Self.receipt(&rang, nil)
        XCTAssertEqual(rang.machine.ringTally?.devices, [.init(id: nil, voipToken: Fixture.voipToken, rang: true)])
    }

    func testADeadlineBeforeTheReceiptWasDueCountsTheRingSilent() throws {
        var m = try Self.single()
        try m.lookUp()
        m.now = Fixture.deadline - 1_000
        try m.answer(0, 200)
        try m.timer(at: Fixture.deadline)
        XCTAssertNotNil(m.recorded)
        XCTAssertEqual(m.machine.ringTally?.devices.map(\.rang), [false], "silent to the deadline")
    }

    // MARK: The escalation's environment

    func testTheEscalationGoesToTheEnvironmentTheVoipPushWasAcceptedIn() throws {
        var m = try Self.single()
        try m.lookUp()
        let retry = try m.answer(0, 400, .badDeviceToken)
        XCTAssertEqual(retry.pushes.first?.plan.environment, .sandbox, "tried once in the other environment")
        let due = try XCTUnwrap(try m.answer(0, 200).timer.at)
        let again = try m.timer(at: due)
        XCTAssertEqual(again.pushes.map(\.purpose), [.noReceipt(.voip)])
        XCTAssertEqual(again.pushes.first?.plan.environment, .sandbox, "where the token was accepted, not the configured one")
        let alert = try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        XCTAssertEqual(alert.pushes.map(\.purpose), [.noReceipt(.alert)])
        XCTAssertEqual(alert.pushes.first?.plan.environment, .sandbox)
        try m.answer(0, 200)
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.attempts.map(\.environment), [nil, .sandbox, .sandbox, .sandbox], "each attempt says where it went")
    }

    func testWithoutAMismatchTheEscalationGoesToTheDevicesEnvironment() throws {
        var m = try Self.single()
        try m.lookUp()
        let again = try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        XCTAssertEqual(again.pushes.first?.plan.environment, .production)
        let alert = try m.timer(at: try XCTUnwrap(try m.answer(0, 200).timer.at))
        XCTAssertEqual(alert.pushes.first?.plan.environment, .production)
        try m.answer(0, 200)
        XCTAssertEqual(try XCTUnwrap(m.recorded).attempts.map(\.environment), [nil, nil, nil])
    }
}
