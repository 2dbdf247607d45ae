import APNs
import Retry
@testable import Routing
import XCTest

/// `CallStateMachine` as transcripts: each test plays one call's events (lookup, APNs answers
/// per device, an answer, a decline or a cancel, the timer, the record) and applies every
/// returned action to `RingModel`, the runner and its APNs in memory, which throws on every
/// move docs/protocol.md forbids (*Devices*). The devices' own routing rules are
/// `CallRouter`'s, tested per device by the `CallRouter…Tests`.
final class CallStateMachineTests: XCTestCase {
    static let tokens: [(voip: String, alert: String)] = (1...3).map { i in
        (String(repeating: String(format: "%02x", i), count: 32), String(repeating: String(format: "%02x", 0xa0 + i), count: 32))
    }
    static let ids = ["alice-iphone", "alice-ipad", "alice-mac"]

    static func devicesJSON(_ n: Int = 3, alert: Bool = true) -> String {
        "[" + (0..<n).map { i in
            "{\"id\":\"\(ids[i])\",\"voip_token\":\"\(tokens[i].voip)\"" + (alert ? ",\"alert_token\":\"\(tokens[i].alert)\"" : "") + "}"
        }.joined(separator: ",") + "]"
    }

    static func event(devices: String = devicesJSON(), policy: AppRoutingPolicy = Fixture.policy()) throws -> CallEvent {
        try Fixture.event(["voip_token": nil, "alert_token": nil, "devices": devices], policy: policy)
    }

    static func unanswered() -> AppRoutingPolicy {
        var policy = Fixture.policy()
        policy.missedCallAlert = .unanswered
        return policy
    }

    // MARK: Answered, declined, cancelled

    func testThreeDevicesOneAnswersTheOtherTwoAreToldOnceAndTheAnsweringOneNothing() throws {
        var m = try RingModel(Self.event())
        let first = try m.lookUp()
        XCTAssertEqual(first.pushes.map(\.purpose), [.ring, .ring, .ring], "every device rings at once")
        XCTAssertEqual(first.timer, .fireAt(Fixture.deadline), "a ringing call waits for its deadline")
        for d in 0..<3 { try m.answer(d, 200) }
        XCTAssertTrue(m.recorded == nil, "delivered, the call waits for an answer until its deadline")
        let end = try m.hear(.answered(device: Self.ids[1]))
        XCTAssertEqual(end.pushes.map(\.device), [0, 2], "the two others, not the one that answered")
        XCTAssertEqual(end.pushes.map(\.purpose), [.ended(.answeredElsewhere), .ended(.answeredElsewhere)])
        try m.answer(0, 200)
        try m.answer(2, 200)
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertEqual(record.ended, .answered(device: Self.ids[1]))
        XCTAssertEqual(record.devices?.map(\.outcome), [.deliveredVoip, .deliveredVoip, .deliveredVoip])
        XCTAssertEqual(record.devices?.map(\.told), [.answeredElsewhere, nil, .answeredElsewhere])
        XCTAssertEqual(record.attempts.count, 5, "three rings, two ended pushes")
        XCTAssertEqual(m.sent(to: 1).map(\.purpose), [.ring], "the answering device got its ring only")
        XCTAssertEqual(m.machine.endReport?.stopped, [], "nothing was still ringing: every VoIP push was delivered")
        XCTAssertEqual(m.machine.endReport?.told, [Self.ids[0], Self.ids[2]])
        let json = record.jsonString
        XCTAssertTrue(json.contains(#""ended":"answered","ended_by":"alice-ipad""#), json)
        XCTAssertTrue(json.contains(#"{"id":"alice-iphone","outcome":"delivered_voip","channel":"voip","apns_id":"#), json)
        XCTAssertTrue(json.contains(#""device":"alice-mac","kind":"ended","channel":"alert","status":200"#), json)
    }

    func testADeclineTellsTheOthersDeclinedElsewhere() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        let end = try m.hear(.declined(device: Self.ids[2]))
        XCTAssertEqual(end.pushes.map(\.device), [0, 1])
        XCTAssertEqual(Set(end.pushes.map(\.purpose)), [.ended(.declinedElsewhere)])
        try m.answer(0, 200)
        try m.answer(1, 200)
        XCTAssertEqual(try XCTUnwrap(m.recorded).ended, .declined(device: Self.ids[2]))
        XCTAssertEqual(m.sent(to: 2).map(\.purpose), [.ring])
    }

    func testACancelTellsEveryDeviceThatRangAndStopsTheOneStillBeingPushed() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        try m.answer(0, 200)
        try m.answer(1, 200)
        // Device 2's VoIP push is still with the APNs client when the caller gives up.
        let end = try m.hear(.cancelled)
        XCTAssertEqual(end.withdraw, [2], "its push is taken back if not written yet")
        XCTAssertEqual(end.pushes.map(\.device), [0, 1])
        XCTAssertEqual(Set(end.pushes.map(\.purpose)), [.ended(.cancelled)])
        try m.fail(2, .withdrawn)
        try m.answer(0, 200)
        try m.answer(1, 200)
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredVoip, "two devices rang")
        XCTAssertEqual(record.devices?.map(\.outcome), [.deliveredVoip, .deliveredVoip, .cancelled])
        XCTAssertEqual(m.sent(to: 2).map(\.purpose), [.ring], "a push taken back rang nothing: nothing to end")
        XCTAssertEqual(m.machine.endReport?.stopped, [Self.ids[2]])
    }

    func testAnAnswerWhileADevicesPushWaitsForItsRetryAfterA429StopsItWithNoFurtherPush() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        let throttled = try m.answer(0, 429, .tooManyRequests)
        let due = try XCTUnwrap(throttled.timer.at, "the retry waits for the call's timer")
        XCTAssertLessThan(due, Fixture.deadline)
        try m.answer(1, 200)
        try m.answer(2, 200)
        let end = try m.hear(.answered(device: Self.ids[1]))
        XCTAssertEqual(end.timer, .cancel, "no retry is left to fire, no deadline to wait for")
        XCTAssertEqual(end.pushes.map(\.device), [2], "the 429'd device never rang: it is not told either")
        try m.answer(2, 200)
        XCTAssertEqual(try XCTUnwrap(m.recorded).devices?[0].outcome, .cancelled)
        XCTAssertEqual(m.sent(to: 0).map(\.purpose), [.ring], "no further push to the retried device")
        XCTAssertEqual(try m.timer(at: due).pushes, [], "a timer that fires anyway sends nothing")
        XCTAssertEqual(m.machine.endReport?.stopped, [Self.ids[0]])
    }

    func testARetryAfterA429GoesAtItsTimeWhileTheOthersKeepRinging() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        let due = try XCTUnwrap(try m.answer(2, 429, .tooManyRequests).timer.at)
        try m.answer(0, 200)
        let retried = try m.timer(at: due)
        XCTAssertEqual(retried.pushes.map(\.device), [2])
        XCTAssertEqual(retried.pushes.first?.plan.attempt, 2)
        XCTAssertEqual(retried.timer, .fireAt(Fixture.deadline))
    }

    // MARK: A token gone, the deadline

    func testOneVoipTokenGoneThatDeviceAloneGetsTheAlertAndTheCallRecordsAtTheDeadline() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        try m.answer(0, 200)
        let gone = try m.answer(1, 410, .unregistered, timestampMs: 1_764_000_000_000)
        XCTAssertEqual(gone.feedback.map(\.token), [Self.tokens[1].voip], "its VoIP token is reported")
        XCTAssertEqual(gone.pushes.map(\.device), [1])
        XCTAssertEqual(gone.pushes.first?.purpose, .fallback(.voipTokenInvalid))
        XCTAssertEqual(gone.pushes.first?.plan.notification!.collapseID, "call-7f3a9c", "a repeat replaces it")
        try m.answer(1, 200)
        try m.answer(2, 200)
        XCTAssertNil(m.recorded, "two devices ring: an answer may still come")
        let deadline = try m.timer(at: Fixture.deadline)
        XCTAssertEqual(deadline.pushes, [], "undelivered: the ringing devices get no alert")
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertNil(record.ended, "it rang out")
        XCTAssertEqual(record.devices?.map(\.outcome), [.deliveredVoip, .deliveredAlert, .deliveredVoip])
        XCTAssertEqual(record.devices?[1].cause, .voipTokenInvalid)
        XCTAssertEqual(m.sent(to: 1).map(\.purpose), [.ring, .fallback(.voipTokenInvalid)])
    }

    func testThreeDevicesOneAnswersOneIsGoneAndTheAnswerComesBeforeTheDeadline() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        try m.answer(0, 200)
        try m.answer(1, 410, .unregistered)
        try m.answer(1, 200)  // its fallback alert
        try m.answer(2, 200)
        let end = try m.hear(.answered(device: Self.ids[0]))
        XCTAssertEqual(end.pushes.map(\.device), [2], "the gone device's VoIP never rang: nothing to end there")
        try m.answer(2, 200)
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.devices?.map(\.told), [nil, nil, .answeredElsewhere])
    }

    func testEveryTokenGoneRecordsAtOnceWithoutWaitingForTheDeadline() throws {
        var m = try RingModel(Self.event(devices: Self.devicesJSON(2, alert: false)))
        try m.lookUp()
        try m.answer(0, 410, .unregistered)
        try m.answer(1, 410, .unregistered)
        XCTAssertEqual(try XCTUnwrap(m.recorded).outcome, .undeliverable, "nothing rings: nothing can be answered")
    }

    // MARK: missed_call_alert: unanswered

    func testUnansweredEveryDeviceGetsOneCollapsedAlertAfterTheDeadline() throws {
        var m = try RingModel(Self.event(policy: Self.unanswered()), policy: Self.unanswered())
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        let deadline = try m.timer(at: Fixture.deadline)
        XCTAssertEqual(deadline.pushes.map(\.device), [0, 1, 2])
        XCTAssertEqual(Set(deadline.pushes.map(\.purpose)), [.missedCall])
        for push in deadline.pushes {
            XCTAssertEqual(push.plan.notification!.collapseID, "call-7f3a9c")
            XCTAssertEqual(push.plan.notification!.pushType, .alert)
            XCTAssertEqual(push.plan.notification!.deviceToken, Self.tokens[push.device].alert)
        }
        for d in 0..<3 { try m.answer(d, 200) }
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.attempts.filter { $0.kind == .missedCall }.count, 3)
        XCTAssertEqual(try m.timer(at: Fixture.deadline + 1).pushes, [], "at most one per device")
    }

    func testUnansweredAVoipTokenGoneSendsNoAlertBeforeTheDeadlineAndNoneAfterAnAnswer() throws {
        var m = try RingModel(Self.event(policy: Self.unanswered()), policy: Self.unanswered())
        try m.lookUp()
        let gone = try m.answer(0, 410, .unregistered)
        XCTAssertEqual(gone.pushes, [], "unanswered: no fallback of its own")
        try m.answer(1, 200)
        try m.answer(2, 200)
        let end = try m.hear(.answered(device: Self.ids[1]))
        XCTAssertEqual(end.pushes.map(\.device), [2])
        try m.answer(2, 200)
        XCTAssertNotNil(m.recorded)
        XCTAssertFalse(m.pushes.contains { $0.purpose == .missedCall }, "answered: nobody missed it")
    }

    func testUnansweredWithEveryVoipTokenGoneAlertsAtOnce() throws {
        var m = try RingModel(Self.event(devices: Self.devicesJSON(2), policy: Self.unanswered()), policy: Self.unanswered())
        try m.lookUp()
        try m.answer(0, 410, .unregistered)
        let both = try m.answer(1, 410, .unregistered)
        XCTAssertEqual(both.pushes.map(\.purpose), [.missedCall, .missedCall], "nothing rings, so nothing can be answered")
        try m.answer(0, 200)
        try m.answer(1, 200)
        let record = try XCTUnwrap(m.recorded)
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.devices?.map(\.cause), [.unanswered, .unanswered])
    }

    // MARK: A drain

    func testADrainRecordsARingingCallOnceItsDevicesAreDone() throws {
        var m = try RingModel(Self.event())
        try m.lookUp()
        try m.answer(0, 200)
        try m.answer(1, 200)
        try m.apply(m.machine.onDrain(now: m.now))
        XCTAssertNil(m.recorded, "device 2's push is still out")
        try m.answer(2, 200)
        let record = try XCTUnwrap(m.recorded, "recorded as it stands, not left to be rung again elsewhere")
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertNil(record.ended)
        XCTAssertLessThan(m.now, Fixture.deadline)
    }

    func testADrainLeavesAnUnansweredCallWaitingForItsDeadline() throws {
        var m = try RingModel(Self.event(policy: Self.unanswered()), policy: Self.unanswered())
        try m.lookUp()
        for d in 0..<3 { try m.answer(d, 200) }
        XCTAssertEqual(try m.apply(m.machine.onDrain(now: m.now)), .none, "its missed-call alerts depend on an answer")
        XCTAssertEqual(m.timerAt, Fixture.deadline, "its deadline timer stays")
        XCTAssertNil(m.recorded)
    }

    // MARK: Before the routers start, and the single-device form

    func testAnAnswerHeardDuringTheLookupStartsTheCallStoppedAndNothingIsPushed() throws {
        var m = try RingModel(Self.event())
        try m.hear(.answered(device: Self.ids[0]))
        let started = try m.lookUp()
        XCTAssertEqual(started.pushes, [])
        XCTAssertEqual(try XCTUnwrap(m.recorded).outcome, .cancelled)
    }

    func testACallCancelledByRedisMarkerSendsNoMissedCallAlert() throws {
        var m = try RingModel(Self.event(policy: Self.unanswered()), policy: Self.unanswered())
        let started = try m.lookUp(cancelled: true)
        XCTAssertEqual(started.pushes, [])
        XCTAssertEqual(try XCTUnwrap(m.recorded).ended, .cancelled)
    }

    func testTheSingleDeviceFormRoutesAsBeforeDevicesByteForByte() throws {
        let event = try Fixture.event()
        var h = Harness(event)
        try h.start()
        let expected = try XCTUnwrap(try h.answer(410, .unregistered).alertPlan)
        let expectedRecord = try XCTUnwrap(try h.answer(200).finished)

        var m = try RingModel(event)
        let first = try m.lookUp()
        XCTAssertEqual(first.timer, .unchanged, "no timer: it does not wait for an answer")
        let fallback = try m.answer(0, 410, .unregistered, after: 40)
        XCTAssertEqual(fallback.pushes.first?.plan.notification!.payload, expected.plan.notification!.payload)
        XCTAssertEqual(fallback.pushes.first?.plan.notification!.collapseID, "call-7f3a9c")
        try m.answer(0, 200, after: 40)
        XCTAssertEqual(try XCTUnwrap(m.recorded).jsonString, expectedRecord.jsonString, "today's result, byte for byte")
    }

    func testTheSingleDeviceFormWaitsForItsRetryInTheDurableSchedule() throws {
        var m = try RingModel(try Fixture.event())
        try m.lookUp()
        let throttled = try m.answer(0, 429, .tooManyRequests)
        XCTAssertEqual(throttled.life, .write, "the schedule step goes out")
        XCTAssertEqual(throttled.retry?.attempt, 2)
        XCTAssertNotNil(m.machine.waiting)
        XCTAssertEqual(m.machine.onScheduled().life, .leave(duplicatesOf: nil))
    }

    func testACopyWaitsAndADoneCallIsADuplicate() throws {
        var copy = CallStateMachine(event: try Self.event(), policy: Fixture.policy(), jitter: .constant(0.5))
        XCTAssertEqual(copy.onLookupAnswered(alreadyDone: nil, cancelled: false, claimHolder: "me", consumer: "me",
                                             copyRoutingHere: true, now: Fixture.entry).life, .waitForCopyHere)
        let done = copy.onLookupAnswered(alreadyDone: .deliveredVoip, cancelled: false, claimHolder: "me", consumer: "me",
                                         copyRoutingHere: false, now: Fixture.entry)
        guard case let .writeRecord(.duplicate(record)) = done.life else { return XCTFail("a duplicate: \(done)") }
        XCTAssertEqual(record.firstOutcome, .deliveredVoip)
        XCTAssertEqual(done.pushes, [])
    }

    func testTheCancellationMarkerNamesTheEndAndAPlainOneIsACancel() {
        for end in [CallEnd.answered(device: "a:b"), .declined(device: "ipad"), .cancelled] {
            XCTAssertEqual(CallEnd(marker: end.marker), end, end.marker)
        }
        XCTAssertEqual(CallEnd(marker: "1"), .cancelled, "what every version before devices wrote")
        XCTAssertEqual(CallEnd(marker: "paused:x"), .cancelled, "a value no version writes still ends the ring")
        XCTAssertEqual(CallEnd(marker: nil), .cancelled)
    }

    func testACallWhoseMarkerNamesAnAnswerStartsStoppedWithThatEnd() throws {
        var m = try RingModel(Self.event())
        let started = try m.apply(m.machine.onLookupAnswered(alreadyDone: nil, cancelled: true, claimHolder: "me", consumer: "me",
                                                             copyRoutingHere: false, ended: .answered(device: Self.ids[0]),
                                                             now: m.now))
        XCTAssertEqual(started.pushes, [])
        XCTAssertEqual(try XCTUnwrap(m.recorded).ended, .answered(device: Self.ids[0]))
    }

    /// 2,000 seeded calls of 1 to 3 devices under both modes, with APNs answering each push at
    /// random (200, 410, 429, 500, a timeout, a withdrawal when asked), an end heard at a random
    /// moment or never, and the timer fired when it is due: the model throws on every forbidden
    /// move, and every call ends with one record once nothing is out and its deadline passed.
    func testRandomTranscriptsNeverMakeAForbiddenMoveAndAlwaysEndInOneRecord() throws {
        var rng = SplitMix64(seed: 24)
        var seen = Set<String>()
        for round in 0..<2_000 {
            let count = Int.random(in: 1...3, using: &rng)
            let policy = Bool.random(using: &rng) ? Fixture.policy() : Self.unanswered()
            var m = try RingModel(Self.event(devices: Self.devicesJSON(count, alert: Bool.random(using: &rng)), policy: policy),
                                  policy: policy)
            let end: CallEnd? = [nil, .cancelled, .answered(device: Self.ids[0]), .declined(device: Self.ids[count - 1])]
                .randomElement(using: &rng)!
            var endAt = Int.random(in: 0...8, using: &rng)
            try m.lookUp()
            var steps = 0
            while m.recorded == nil {
                steps += 1
                guard steps < 500 else { return XCTFail("round \(round): no record after 500 events") }
                if let end, endAt == 0 {
                    try m.hear(end)
                    endAt = -1
                    continue
                }
                endAt -= 1
                if let device = m.out.keys.sorted().randomElement(using: &rng) {
                    let withdrawn = m.withdrawn.contains(device)
                    switch withdrawn ? 5 : Int.random(in: 0..<5, using: &rng) {
                    case 0, 1: try m.answer(device, 200)
                    case 2: try m.answer(device, 410, .unregistered)
                    case 3: try m.answer(device, [429, 500].randomElement(using: &rng)!, .tooManyRequests)
                    case 4: try m.fail(device, .timeout)
                    default: try m.fail(device, .withdrawn)
                    }
                } else if let at = m.timerAt {
                    try m.timer(at: at)
                } else {
                    return XCTFail("round \(round): nothing out, no timer, and no record: the call is stuck")
                }
            }
            XCTAssertTrue(m.out.isEmpty, "round \(round): recorded with nothing out")
            for push in m.pushes {
                switch push.purpose {
                case .ring: seen.insert("ring")
                case .fallback: seen.insert("fallback")
                case let .ended(told): seen.insert(told.rawValue)
                case .missedCall: seen.insert("missed call")
                case .noReceipt: seen.insert("no receipt")
                }
            }
            seen.insert("ended \(m.recorded?.ended?.name ?? "never")")
            if m.pushes.contains(where: { $0.plan.attempt > 1 }) { seen.insert("retried") }
        }
        XCTAssertEqual(seen, ["ring", "fallback", "answered_elsewhere", "declined_elsewhere", "cancelled", "missed call",
                              "ended never", "ended answered", "ended declined", "ended cancelled", "retried"],
                       "the transcripts cover every kind of push and end")
    }

    func testCollapseIDsFitApnsLimitAndKeepLongIDsApart() {
        XCTAssertEqual(CallStateMachine.collapseID(for: "call-1"), "call-1")
        let a = CallStateMachine.collapseID(for: String(repeating: "x", count: 100) + "a")
        let b = CallStateMachine.collapseID(for: String(repeating: "x", count: 100) + "b")
        XCTAssertNotEqual(a, b)
        XCTAssertLessThanOrEqual(a.utf8.count, 64)
        XCTAssertLessThanOrEqual(CallStateMachine.collapseID(for: String(repeating: "é", count: 128)).utf8.count, 64)
    }
}

/// The runner and its APNs in memory for one `CallStateMachine`. `apply` performs an action
/// and throws `IllegalMove` for: a second push to a device with one out; a VoIP push after the
/// deadline or after the call ended; any push to the device that answered or declined after
/// it did; a push after the record was requested; an `ended` push that is not a background
/// push of priority 5 with `content-available: 1` to the device's alert token, or that goes
/// to a device twice; a missed-call alert twice to a device, or without the collapse id; a
/// withdrawal with nothing out.
struct RingModel {
    var machine: CallStateMachine
    let event: CallEvent
    let policy: AppRoutingPolicy
    var now: Int64 = Fixture.entry + 5
    /// The push each device has out.
    var out: [Int: CallStateMachine.DevicePush] = [:]
    var pushes: [CallStateMachine.DevicePush] = []
    var ended: CallEnd?
    var recorded: OutcomeRecord?
    var timerAt: Int64?
    /// Devices whose push out was asked back (`Action.withdraw`): the client fails it as withdrawn.
    var withdrawn: Set<Int> = []

    init(_ event: CallEvent, policy: AppRoutingPolicy = Fixture.policy()) throws {
        self.event = event
        self.policy = policy
        machine = CallStateMachine(event: event, policy: policy, jitter: .constant(0.5))
    }

    func sent(to device: Int) -> [CallStateMachine.DevicePush] { pushes.filter { $0.device == device } }

    @discardableResult
    mutating func lookUp(cancelled: Bool = false) throws -> CallStateMachine.Action {
        try apply(machine.onLookupAnswered(alreadyDone: nil, cancelled: cancelled, claimHolder: "me", consumer: "me",
                                           copyRoutingHere: false, now: now))
    }

    @discardableResult
    mutating func answer(_ device: Int, _ status: Int, _ reason: ApnsReason? = nil, timestampMs: Int64? = nil,
                         after ms: Int64 = 20) throws -> CallStateMachine.Action {
        guard out.removeValue(forKey: device) != nil else { throw IllegalMove(description: "an answer for device \(device) with no push out") }
        withdrawn.remove(device)
        now += ms
        return try apply(machine.onApnsAnswered(device: device, Fixture.response(status, reason, timestampMs: timestampMs), now: now))
    }

    @discardableResult
    mutating func fail(_ device: Int, _ error: ApnsClientError) throws -> CallStateMachine.Action {
        guard out.removeValue(forKey: device) != nil else { throw IllegalMove(description: "a failure for device \(device) with no push out") }
        withdrawn.remove(device)
        now += 1
        return try apply(machine.onApnsFailed(device: device, error, now: now))
    }

    @discardableResult
    mutating func hear(_ end: CallEnd) throws -> CallStateMachine.Action {
        if ended == nil { ended = end }
        now += 1
        return try apply(machine.onEndHeard(end, now: now))
    }

    @discardableResult
    mutating func timer(at time: Int64) throws -> CallStateMachine.Action {
        now = max(now, time)
        return try apply(machine.onTimer(now: now))
    }

    mutating func apply(_ action: CallStateMachine.Action) throws -> CallStateMachine.Action {
        for device in action.withdraw {
            guard out[device] != nil else { throw IllegalMove(description: "a withdrawal for device \(device) with nothing out") }
            withdrawn.insert(device)
        }
        for push in action.pushes {
            guard recorded == nil else { throw IllegalMove(description: "a push after the record: \(push)") }
            guard out[push.device] == nil else { throw IllegalMove(description: "a second push out to device \(push.device)") }
            let device = event.devices[push.device]
            let n = push.plan.notification!
            if let ended, let by = ended.device, by == device.id {
                throw IllegalMove(description: "a push to \(by), which \(ended.name) the call")
            }
            switch push.purpose {
            case .ring:
                guard ended == nil else { throw IllegalMove(description: "a VoIP push after the call ended") }
                guard now < event.deadlineMs else { throw IllegalMove(description: "a VoIP push after the deadline") }
                guard n.pushType == .voip, n.deviceToken == device.voipToken else { throw IllegalMove(description: "malformed ring \(n)") }
            case let .fallback(cause):
                guard ended == nil else { throw IllegalMove(description: "a fallback after the call ended") }
                guard n.pushType == .alert, n.deviceToken == device.alertToken, n.collapseID == "call-7f3a9c" else {
                    throw IllegalMove(description: "malformed fallback \(n)")
                }
                // Under `unanswered` only a token suspected of iOS's silent VoIP ban goes to its alert at once.
                guard policy.missedCallAlert == .undelivered || cause == .voipSuspectedBlocked else {
                    throw IllegalMove(description: "a fallback under unanswered")
                }
            case let .ended(told):
                guard let ended, told == ended.told else { throw IllegalMove(description: "an ended push before an end") }
                guard n.pushType == .background, n.priority == .conserve, n.topic == policy.bundleID,
                      n.deviceToken == device.alertToken,
                      String(decoding: n.payload, as: UTF8.self) == #"{"aps":{"content-available":1},"id":"call-7f3a9c","ended":""#
                        + told.rawValue + #""}"# else {
                    throw IllegalMove(description: "malformed ended push \(n) \(String(decoding: n.payload, as: UTF8.self))")
                }
                guard !sent(to: push.device).contains(where: { if case .ended = $0.purpose { return true }; return false }) else {
                    throw IllegalMove(description: "a second ended push to device \(push.device)")
                }
            case let .noReceipt(channel):
                guard ended == nil else { throw IllegalMove(description: "an escalation after the call ended") }
                guard now < event.deadlineMs else { throw IllegalMove(description: "an escalation after the deadline") }
                guard policy.ringReceiptTimeoutMs != nil else { throw IllegalMove(description: "an escalation without receipts on") }
                let token = channel == .voip ? device.voipToken : device.alertToken
                guard n.pushType == (channel == .voip ? .voip : .alert), n.deviceToken == token else {
                    throw IllegalMove(description: "malformed escalation \(n)")
                }
                guard !sent(to: push.device).contains(where: { $0.purpose == push.purpose }) else {
                    throw IllegalMove(description: "a second escalation step \(channel) to device \(push.device)")
                }
            case .missedCall:
                guard ended == nil else {
                    throw IllegalMove(description: "a missed-call alert for a call that ended")
                }
                guard n.pushType == .alert, n.collapseID == "call-7f3a9c", n.deviceToken == device.alertToken else {
                    throw IllegalMove(description: "malformed missed-call alert \(n)")
                }
                guard !sent(to: push.device).contains(where: { $0.purpose == .missedCall }) else {
                    throw IllegalMove(description: "a second missed-call alert to device \(push.device)")
                }
            }
            out[push.device] = push
            pushes.append(push)
        }
        switch action.timer {
        case .unchanged: break
        case let .fireAt(at): timerAt = at
        case .cancel: timerAt = nil
        }
        if case let .writeRecord(record) = action.life {
            guard recorded == nil else { throw IllegalMove(description: "a second record") }
            guard out.isEmpty else { throw IllegalMove(description: "recorded with pushes out: \(out.keys.sorted())") }
            switch record {
            case let .outcome(r), let .duplicate(r), let .cancellation(r), let .outcomeWithDeadLetters(r, _): recorded = r
            case let .deadLetter(d): recorded = d.record
            }
        }
        return action
    }
}

extension CallStateMachine.Action.TimerChange {
    /// The time it arms the timer for; nil when it leaves or cancels it.
    var at: Int64? {
        if case let .fireAt(at) = self { return at }
        return nil
    }
}
