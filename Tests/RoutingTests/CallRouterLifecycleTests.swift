import APNs
import Retry
@testable import Routing
import XCTest

/// Cancellation, deadlines at start, known-invalid tokens, redeliveries, the outcome record's
/// JSON, and the model's own rules (so these tests can fail).
final class CallRouterLifecycleTests: XCTestCase {
    // MARK: Cancellation

    func testACallCancelledBeforeItsEventIsReadSendsNothing() throws {
        var h = Harness(try Fixture.event())
        let record = try XCTUnwrap(try h.start(cancelled: true).finished)
        XCTAssertEqual(record.outcome, .cancelled)
        XCTAssertEqual(record.attempts, [])
        XCTAssertNil(record.latencyMs, "no push answered")
        XCTAssertTrue(h.model.sent.isEmpty)
    }

    func testACancelEventRecordsTheCancellationOnce() throws {
        let cancel = try Fixture.event(["type": #""call_cancelled""#])
        var h = Harness(cancel)
        let action = try h.start()
        XCTAssertEqual(action.step, .cancelCall(OutcomeRecord(outcome: .cancelled, id: "call-7f3a9c", type: .callCancelled,
                                                              app: "acme")))
        XCTAssertEqual(h.router.outcome, .cancelled)
        var again = Harness(cancel)
        XCTAssertEqual(try again.start(cancelled: true).step,
                       .acknowledgeDuplicate(OutcomeRecord(outcome: .duplicate, firstOutcome: .cancelled, id: "call-7f3a9c",
                                                           type: .callCancelled, app: "acme")),
                       "a second cancel is answered as a duplicate of the first")
    }

    func testACancelDuringARetryWaitDropsTheRetry() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        let retry = try XCTUnwrap(try h.answer(503, .serviceUnavailable).retry)
        let record = try XCTUnwrap(try h.cancel().finished)
        XCTAssertEqual(record.outcome, .cancelled)
        XCTAssertEqual(record.attempts.count, 1)
        XCTAssertEqual(h.router.retryDue(now: retry.atMs), .none, "the dropped retry's timer sends nothing")
        XCTAssertEqual(h.model.sent.count, 1)
    }

    func testACancelWhileTheVoipPushIsInFlightWaitsForItsAnswerAndSendsNothingMore() throws {
        var transient = Harness(try Fixture.event())
        try transient.start()
        XCTAssertEqual(try transient.cancel(), CallAction(step: .withdrawPush), "taken back if not written yet")
        XCTAssertEqual(try transient.cancel(), .none, "asked once")
        let record = try XCTUnwrap(try transient.answer(500).finished)
        XCTAssertEqual(record.outcome, .cancelled, "no retry after a cancel")
        XCTAssertEqual(record.attempts.map(\.status), [500], "the in-flight attempt is recorded")

        var gone = Harness(try Fixture.event())
        try gone.start()
        try gone.cancel()
        let action = try gone.answer(410, .unregistered)
        XCTAssertEqual(action.feedback?.channel, .voip, "feedback still recorded")
        XCTAssertEqual(action.finished?.outcome, .cancelled, "no missed-call alert after a cancel")

        var large = Harness(try Fixture.event())
        try large.start()
        try large.cancel()
        XCTAssertEqual(try large.answer(413, .payloadTooLarge).finished?.outcome, .cancelled)
    }

    /// A push the runner withholds (the app's credential refused again and again) dead-letters
    /// the call at once with the reason, whatever channel it was on, with no attempt made up;
    /// a cancelled call is cancelled.
    func testAWithheldPushDeadLettersTheCallWithTheReasonAndNoAttempt() throws {
        let reason = DeadLetterReason.apnsCredentials("InvalidProviderToken (not sent)")
        var voip = Harness(try Fixture.event())
        try voip.start()
        let letter = try XCTUnwrap(try voip.withhold(reason).deadLetter)
        XCTAssertEqual(letter.reason, reason)
        XCTAssertFalse(letter.appUnhealthy, "no new evidence: it was not sent")
        XCTAssertEqual(letter.record.attempts, [], "nothing was sent")

        var alert = Harness(try Fixture.event())
        try alert.start()
        try alert.answer(410, .unregistered)  // the VoIP token is gone: the alert is next
        let history = try XCTUnwrap(try alert.withhold(reason).deadLetter)
        XCTAssertEqual(history.record.attempts.map(\.status), [410], "the attempts made so far are kept")

        var cancelled = Harness(try Fixture.event())
        try cancelled.start()
        try cancelled.cancel()
        XCTAssertEqual(try cancelled.withhold(reason).finished?.outcome, .cancelled)
    }

    func testACancelAfterTheVoipPushLeftDoesNotHideItsDelivery() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.cancel()
        XCTAssertEqual(try h.answer(200).finished?.outcome, .deliveredVoip, "the push did arrive")
    }

    func testACancelDoesNotHideACredentialError() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.cancel()
        let dead = try XCTUnwrap(try h.answer(403, .invalidProviderToken).deadLetter)
        XCTAssertTrue(dead.appUnhealthy, "a human must still fix the credential")
    }

    func testACancelAfterDeliveryChangesNothing() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(200)
        XCTAssertEqual(try h.cancel(), .none)
        XCTAssertEqual(h.router.outcome, .deliveredVoip)
    }

    func testACancelDuringTheAlertFallbackStopsItsRetries() throws {
        var waiting = Harness(try Fixture.event(["voip_token": nil]))
        try waiting.start()
        try waiting.answer(500)
        XCTAssertEqual(try waiting.cancel().finished?.outcome, .cancelled)

        var inFlight = Harness(try Fixture.event(["voip_token": nil]))
        try inFlight.start()
        XCTAssertEqual(try inFlight.cancel(), CallAction(step: .withdrawPush))
        XCTAssertEqual(try inFlight.fail(.timeout).finished?.outcome, .cancelled)

        var withdrawn = Harness(try Fixture.event(["voip_token": nil]))
        try withdrawn.start()
        try withdrawn.cancel()
        let record = try XCTUnwrap(try withdrawn.fail(.withdrawn).finished)
        XCTAssertEqual(record.outcome, .cancelled)
        XCTAssertEqual(record.attempts, [], "a withdrawn alert is no attempt")

        var delivered = Harness(try Fixture.event(["voip_token": nil]))
        try delivered.start()
        try delivered.cancel()
        XCTAssertEqual(try delivered.answer(200).finished?.outcome, .deliveredAlert)
    }

    // MARK: Deadline at start

    func testADeadlineAlreadyPassedAtStartGoesStraightToTheMissedCallAlert() throws {
        var h = Harness(try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"]), now: Fixture.entry + 1_000)
        let action = try h.start()
        XCTAssertNil(action.voipPlan, "a call is never rung after its deadline")
        XCTAssertEqual(action.alertPlan?.cause, .deadline)
        XCTAssertEqual(try h.answer(200).finished?.cause, .deadline)
    }

    func testABackloggedEventWithoutDeadlinePassesTheRingTimeoutFromItsStreamEntry() throws {
        var h = Harness(try Fixture.event(["deadline": nil]), now: Fixture.entry + 31_000)
        XCTAssertEqual(try h.start().alertPlan?.cause, .deadline)
    }

    func testADeadlinePassedAtStartWithoutAlertTokenIsExpired() throws {
        var h = Harness(try Fixture.event(["alert_token": nil, "deadline": "\(Fixture.entry + 1_000)"]),
                        now: Fixture.entry + 5_000)
        let record = try XCTUnwrap(try h.start().finished)
        XCTAssertEqual(record.outcome, .expired)
        XCTAssertTrue(h.model.sent.isEmpty)
    }

    // MARK: Known-invalid tokens

    func testAKnownInvalidVoipTokenIsSkipped() throws {
        let invalidAt: Int64 = 1_764_000_000_000
        for registered in [nil, invalidAt - 1, invalidAt] as [Int64?] {
            var changes: [String: String?] = [:]
            if let registered { changes["voip_token_registered_at"] = "\(registered)" }
            var h = Harness(try Fixture.event(changes))
            let action = try h.start(knownInvalid: (voip: invalidAt, alert: nil))
            XCTAssertNil(action.voipPlan, "registered at \(String(describing: registered)), invalid at \(invalidAt)")
            XCTAssertEqual(action.alertPlan?.cause, .voipTokenInvalid)
            XCTAssertNil(action.feedback, "already known: no new feedback")
        }
    }

    func testAKnownInvalidVoipTokenRegisteredAgainLaterIsUsed() throws {
        let invalidAt: Int64 = 1_764_000_000_000
        var h = Harness(try Fixture.event(["voip_token_registered_at": "\(invalidAt + 1)"]))
        XCTAssertNotNil(try h.start(knownInvalid: (voip: invalidAt, alert: nil)).voipPlan)
    }

    func testAKnownInvalidAlertTokenIsSkippedUnlessRegisteredLater() throws {
        let invalidAt: Int64 = 1_764_000_000_000
        var skipped = Harness(try Fixture.event())
        try skipped.start(knownInvalid: (voip: nil, alert: invalidAt))
        XCTAssertEqual(try skipped.answer(410, .unregistered).finished?.outcome, .undeliverable,
                       "the VoIP token failed and the alert token is known invalid")
        XCTAssertEqual(skipped.model.sent.map(\.channel), [.voip])

        var renewed = Harness(try Fixture.event(["alert_token_registered_at": "\(invalidAt + 60_000)"]))
        try renewed.start(knownInvalid: (voip: nil, alert: invalidAt))
        XCTAssertEqual(try renewed.answer(410, .unregistered).alertPlan?.cause, .voipTokenInvalid)

        var late = Harness(try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"]), now: Fixture.entry + 2_000)
        XCTAssertEqual(try late.start(knownInvalid: (voip: nil, alert: invalidAt)).finished?.outcome, .expired)
    }

    func testEveryTokenKnownInvalidIsUndeliverableWithoutAPush() throws {
        var both = Harness(try Fixture.event())
        XCTAssertEqual(try both.start(knownInvalid: (voip: 1, alert: 1)).finished?.outcome, .undeliverable)
        var voipOnly = Harness(try Fixture.event(["alert_token": nil]))
        XCTAssertEqual(try voipOnly.start(knownInvalid: (voip: 1, alert: nil)).finished?.outcome, .undeliverable)
        var alertOnly = Harness(try Fixture.event(["voip_token": nil]))
        XCTAssertEqual(try alertOnly.start(knownInvalid: (voip: nil, alert: 1)).finished?.outcome, .undeliverable)
        XCTAssertTrue(both.model.sent.isEmpty && voipOnly.model.sent.isEmpty && alertOnly.model.sent.isEmpty)
    }

    // MARK: Redelivery

    func testARedeliveredFinishedEventIsAnsweredAsADuplicateWithoutSendingAgain() throws {
        var h = Harness(try Fixture.event())
        XCTAssertEqual(try h.start(alreadyDone: .deliveredVoip).step,
                       .acknowledgeDuplicate(OutcomeRecord(outcome: .duplicate, firstOutcome: .deliveredVoip, id: "call-7f3a9c",
                                                           type: .incomingCall, app: "acme")),
                       "the duplicate's result names the first outcome")
        XCTAssertTrue(h.model.sent.isEmpty)
        XCTAssertEqual(h.router.outcome, .deliveredVoip)
    }

    func testACancelWhileTheVoipPushWaitsToBeWrittenTakesItBack() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        XCTAssertEqual(try h.cancel(), CallAction(step: .withdrawPush))
        let record = try XCTUnwrap(try h.fail(.withdrawn, after: 1).finished)
        XCTAssertEqual(record.outcome, .cancelled, "nothing rang")
        XCTAssertEqual(record.attempts, [], "a push that never left is no attempt")
        XCTAssertNil(record.latencyMs, "no answer came")
        XCTAssertTrue(h.model.causes.isEmpty, "and no missed-call alert")
    }

    // MARK: Outcome record

    func testTheOutcomeRecordJSONHasTheWholeHistoryInAFixedOrder() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.fail(.timeout, after: 1_000)
        try h.fireRetry()
        try h.answer(410, .unregistered, timestampMs: 1_764_000_000_000)
        let record = try XCTUnwrap(try h.answer(200).finished)
        let id = "00000000-0000-0000-0000-000000000001"
        XCTAssertEqual(record.jsonString,
                       #"{"outcome":"delivered_alert","id":"call-7f3a9c","type":"incoming_call","app":"acme","#
                       + #""channel":"alert","apns_id":"\#(id)","cause":"voip_token_invalid","latency_ms":1135,"#
                       + #""attempts":[{"t":1764412300005,"channel":"voip","error":"timed out waiting for APNs"},"#
                       + #"{"t":1764412301055,"channel":"voip","status":410,"reason":"Unregistered","apns_id":"\#(id)"},"#
                       + #"{"t":1764412301095,"channel":"alert","status":200,"apns_id":"\#(id)"}]}"#)
        let parsed = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(record.json())) as? [String: Any])
        XCTAssertEqual(parsed["outcome"] as? String, "delivered_alert", "the record is valid JSON")
    }

    func testACancelAfterDeliveryWritesWhatTheCancelScriptWrites() {
        var record = OutcomeRecord(outcome: .cancelled, id: "call-2", type: .callCancelled, app: "acme")
        record.cancelledAfter = .deliveredVoip
        record.deliveredAtMs = 1_764_412_340_019
        // The bytes CallStorage's cancel script splices in after `outcome` (RetryScheduleTests).
        XCTAssertEqual(record.jsonString,
                       #"{"outcome":"cancelled","cancelled_after":"delivered_voip","delivered_at":1764412340019,"#
                       + #""id":"call-2","type":"call_cancelled","app":"acme","attempts":[]}"#)
    }

    func testDeadLetterReasonTexts() {
        let rows: [(DeadLetterReason, String)] = [
            (.invalidEvent("id: required"), "invalid_event: id: required"),
            (.apnsCredentials("InvalidProviderToken"), "apns_credentials: InvalidProviderToken"),
            (.apnsConfig("BadTopic"), "apns_config: BadTopic"),
            (.apnsRequest("BadExpirationDate"), "apns_request: BadExpirationDate"),
            (.retriesExhausted(.alert), "retries_exhausted: alert"),
            (.payloadTooLarge(.voip), "payload_too_large: voip"),
            (.invalidPush("payload is empty"), "invalid_push: payload is empty"),
        ]
        for (reason, text) in rows {
            XCTAssertEqual(reason.text, text)
            XCTAssertTrue(text.hasPrefix(reason.code + ": "))
        }
    }

    // MARK: The model catches illegal moves

    func testTheModelRejectsEveryMoveDesignForbids() throws {
        let event = try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"])
        let policy = Fixture.policy()
        let push = try PushNotification(deviceToken: Fixture.voipToken, bundleID: "com.acme.phone", pushType: .voip,
                                        payload: event.voipPayload, priority: .immediate,
                                        expiration: event.deadlineMs / 1000)
        let voip = CallAction(step: .sendVoip(PushPlan(channel: .voip, attempt: 1, environment: .production,
                                                       notification: push)))
        let finish = CallAction(step: .finish(OutcomeRecord(outcome: .expired, id: event.id, type: .incomingCall,
                                                            app: "acme")))

        let afterDeadline = CallModel(policy: policy, event: event, now: event.deadlineMs)
        XCTAssertThrowsError(try afterDeadline.apply(voip), "a VoIP push at the deadline")

        let cancelled = CallModel(policy: policy, event: event, now: Fixture.entry)
        cancelled.cancelled = true
        XCTAssertThrowsError(try cancelled.apply(voip), "a VoIP push for a cancelled call")

        let twice = CallModel(policy: policy, event: event, now: Fixture.entry)
        XCTAssertNoThrow(try twice.apply(finish))
        XCTAssertThrowsError(try twice.apply(finish), "two finishes")
        XCTAssertThrowsError(try twice.apply(voip), "an action after finish")
        XCTAssertNoThrow(try twice.apply(.none), "nothing after finish is fine")

        let retryLate = CallModel(policy: policy, event: event, now: Fixture.entry)
        let late = CallAction(step: .scheduleRetry(RetryPlan(channel: .voip, attempt: 2, atMs: event.deadlineMs,
                                                             delayMs: 995)))
        XCTAssertThrowsError(try retryLate.apply(late), "a VoIP retry that leaves at the deadline")

        let inFlight = CallModel(policy: policy, event: event, now: Fixture.entry)
        XCTAssertNoThrow(try inFlight.apply(voip))
        XCTAssertThrowsError(try inFlight.apply(voip), "two pushes in flight")
    }
}
