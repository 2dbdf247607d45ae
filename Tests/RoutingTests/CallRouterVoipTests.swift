import APNs
import Retry
@testable import Routing
import XCTest

/// docs/protocol.md, one test per row of "APNs answer to a VoIP push", played against the model.
final class CallRouterVoipTests: XCTestCase {
    private let apnsID = "00000000-0000-0000-0000-000000000001"

    /// A VoIP failure: an APNs rejection or a transport error.
    private enum Failure: CustomStringConvertible {
        case answer(Int, ApnsReason?)
        case transport(ApnsClientError)

        var description: String {
            switch self {
            case let .answer(status, reason): return "\(status) \(reason?.text ?? "-")"
            case let .transport(error): return "\(error)"
            }
        }

        @discardableResult
        func play(_ h: inout Harness) throws -> CallAction {
            switch self {
            case let .answer(status, reason): return try h.answer(status, reason)
            case let .transport(error): return try h.fail(error)
            }
        }
    }

    func testVoipPushHasTheFormDesignAndAppleRequire() throws {
        var h = Harness(try Fixture.event(["deadline": "1764412330999"]))
        let plan = try XCTUnwrap(try h.start().voipPlan, "a usable VoIP token goes first")
        let n = plan.notification!
        XCTAssertEqual(plan.channel, .voip)
        XCTAssertEqual(plan.attempt, 1)
        XCTAssertEqual(plan.environment, .production, "sandbox false")
        XCTAssertEqual(n.deviceToken, Fixture.voipToken)
        XCTAssertEqual(n.topic, "com.acme.phone.voip")
        XCTAssertEqual(n.pushType, .voip)
        XCTAssertEqual(n.priority, .immediate)
        XCTAssertEqual(n.expiration, 1_764_412_330, "apns-expiration is the deadline in seconds, rounded down")
        XCTAssertNil(n.apnsID)
        XCTAssertNil(n.collapseID)
        XCTAssertEqual(n.payload, h.model.event.voipPayload)
    }

    func testEnvironmentFollowsTheEventsSandboxElseTheApp() throws {
        var sandbox = Harness(try Fixture.event(["sandbox": "true"]))
        XCTAssertEqual(try sandbox.start().voipPlan?.environment, .sandbox)
        var policy = Fixture.policy()
        policy.environment = .sandbox
        var unsaid = Harness(try Fixture.event(["sandbox": nil]), policy: policy)
        XCTAssertEqual(try unsaid.start().voipPlan?.environment, .sandbox)
    }

    func testVoip200DeliversVoip() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        let record = try XCTUnwrap(try h.answer(200).finished)
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertEqual(record.channel, .voip)
        XCTAssertEqual(record.apnsID, apnsID)
        XCTAssertNil(record.cause)
        XCTAssertEqual(record.latencyMs, 45, "from the stream entry to APNs' answer")
        XCTAssertEqual(record.attempts, [AttemptRecord(sentAtMs: Fixture.entry + 5, channel: .voip, status: 200,
                                                       reason: nil, error: nil, apnsID: apnsID)])
        XCTAssertEqual(h.router.outcome, .deliveredVoip)
        XCTAssertTrue(h.model.feedback.isEmpty)
    }

    func testVoipTokenInvalidAnswersGiveFeedbackAndTheAlertAtOnce() throws {
        let rows: [(Int, ApnsReason, Int64?)] = [
            (410, .unregistered, 1_764_000_000_000),
            (410, .expiredToken, nil),
            (400, .deviceTokenNotForTopic, nil),
        ]
        for (status, reason, timestamp) in rows {
            var h = Harness(try Fixture.event())
            try h.start()
            let action = try h.answer(status, reason, timestampMs: timestamp)
            let answeredAt = Fixture.entry + 45
            XCTAssertEqual(action.feedback, TokenFeedback(token: Fixture.voipToken, channel: .voip, reason: reason.text,
                                                          timestampMs: timestamp ?? answeredAt,
                                                          timestampFromAPNs: timestamp != nil), "\(reason.text)")
            let alert = try XCTUnwrap(action.alertPlan, "\(reason.text): the alert goes now")
            XCTAssertEqual(alert.cause, .voipTokenInvalid)
            XCTAssertEqual(alert.plan.attempt, 1)
            XCTAssertEqual(alert.plan.notification!.deviceToken, Fixture.alertToken)
            XCTAssertEqual(alert.plan.notification!.expiration, (answeredAt + 86_400_000) / 1000,
                           "alert expiration = now + alert TTL")
            let record = try XCTUnwrap(try h.answer(200).finished)
            XCTAssertEqual(record.outcome, .deliveredAlert)
            XCTAssertEqual(record.cause, .voipTokenInvalid)
            XCTAssertEqual(record.channel, .alert)
            XCTAssertEqual(record.attempts.map(\.status), [status, 200])
            XCTAssertEqual(record.attempts.first?.reason, reason.text)
        }
    }

    func testABadDeviceTokenIsTriedOnceInTheOtherEnvironmentBeforeItIsCalledInvalid() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        let probe = try XCTUnwrap(try h.answer(400, .badDeviceToken).voipPlan, "the same push, in the other environment")
        XCTAssertEqual(probe.environment, .sandbox)
        XCTAssertEqual(probe.attempt, 1, "not a retry: the policy's attempts are untouched")
        XCTAssertNil(try h.answer(400, .badDeviceToken).voipPlan.map { _ in () }, "tried once only")
        let record = try XCTUnwrap(try h.answer(200).finished, "then the alert, as for any invalid token")
        XCTAssertEqual(record.cause, .voipTokenInvalid)
        XCTAssertEqual(record.attempts.map(\.environment), [nil, .sandbox, nil])
        XCTAssertEqual(h.model.feedback.map(\.reason), ["BadDeviceToken"], "called invalid once both refused it")
        XCTAssertTrue(h.model.feedback.allSatisfy(\.tokenIsInvalid))

        var ok = Harness(try Fixture.event())
        try ok.start()
        try ok.answer(400, .badDeviceToken)
        let accepted = try ok.answer(200)
        let delivered = try XCTUnwrap(accepted.finished)
        XCTAssertEqual(delivered.outcome, .deliveredVoip)
        XCTAssertEqual(delivered.environmentMismatch, .sandbox)
        XCTAssertEqual(accepted.feedback, TokenFeedback(token: Fixture.voipToken, channel: .voip, reason: "environment_mismatch",
                                                        timestampMs: Fixture.entry + 85, timestampFromAPNs: false,
                                                        environment: .sandbox))
        XCTAssertFalse(accepted.feedback?.tokenIsInvalid ?? true, "not marked invalid")
    }

    func testAfterATryInTheOtherEnvironmentRetriesStayThere() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(400, .badDeviceToken)
        XCTAssertNotNil(try h.answer(503, .serviceUnavailable).retry)
        let again = try XCTUnwrap(try h.resumeRetry().voipPlan, "the snapshot keeps where the token was last sent")
        XCTAssertEqual(again.environment, .sandbox)
        XCTAssertEqual(try h.answer(200).finished?.environmentMismatch, .sandbox)
    }

    func testNoTryInTheOtherEnvironmentWhenTheCredentialReachesOneOrTheCallEnded() throws {
        var oneEnvironment = Fixture.policy()
        oneEnvironment.reachesBothEnvironments = false
        var h = Harness(try Fixture.event(), policy: oneEnvironment)
        try h.start()
        let action = try h.answer(400, .badDeviceToken)
        XCTAssertEqual(action.alertPlan?.cause, .voipTokenInvalid, "a certificate for one environment: invalid at once")
        XCTAssertEqual(action.feedback?.reason, "BadDeviceToken")

        var cancelled = Harness(try Fixture.event())
        try cancelled.start()
        try cancelled.cancel()
        let end = try cancelled.answer(400, .badDeviceToken)
        XCTAssertEqual(end.finished?.outcome, .cancelled)
        XCTAssertNil(end.feedback, "not tried elsewhere, so not called invalid either")
    }

    func testRetryableAnswersAndTransportErrorsRetryWithBackoffThenDeliver() throws {
        let rows: [(Failure, throttled: Bool)] = [
            (.answer(429, .tooManyRequests), true),
            (.answer(500, .internalServerError), false),
            (.answer(503, .serviceUnavailable), false),
            (.answer(503, .shutdown), false),
            (.answer(503, nil), false),
            (.transport(.timeout), false),
            (.transport(.connectionLost("reset by peer")), false),
            (.transport(.connectionFailed("refused")), false),
            (.transport(.clientClosed), false),
            (.transport(.queueFull), true),
        ]
        for (failure, throttled) in rows {
            var h = Harness(try Fixture.event())
            try h.start()
            let action = try failure.play(&h)
            let retry = try XCTUnwrap(action.retry, "\(failure): retried")
            // Constant draw 0.5: a 5xx waits 0.5 · min(2000, 100 · 2^0) = 50 ms, a 429 2000/2 + 0.5 · 1000.
            let delay: Int64 = throttled ? 1_500 : 50
            XCTAssertEqual(retry, RetryPlan(channel: .voip, attempt: 2, atMs: h.model.now + delay, delayMs: delay),
                           "\(failure)")
            XCTAssertNil(action.feedback)
            let again = try XCTUnwrap(try h.fireRetry().voipPlan, "\(failure): the retry is a VoIP push")
            XCTAssertEqual(again.attempt, 2)
            let record = try XCTUnwrap(try h.answer(200).finished)
            XCTAssertEqual(record.outcome, .deliveredVoip, "\(failure)")
            XCTAssertEqual(record.attempts.count, 2)
            if case let .transport(error) = failure {
                XCTAssertEqual(record.attempts[0].error, error.description)
                XCTAssertNil(record.attempts[0].status)
            }
        }
    }

    func testBackoffGrowsPerRetryUntilTheAttemptsRunOutThenTheAlertGoesWithCauseRetriesExhausted() throws {
        let policy = Fixture.policy(voip: RetryPolicy(maxAttempts: 3, baseMs: 100, capMs: 2_000))
        var h = Harness(try Fixture.event(), policy: policy)
        try h.start()
        XCTAssertEqual(try h.answer(500).retry?.delayMs, 50)
        try h.fireRetry()
        XCTAssertEqual(try h.answer(500).retry?.delayMs, 100, "the ceiling doubles: 0.5 · 200")
        XCTAssertEqual(try h.fireRetry().voipPlan?.attempt, 3)
        let action = try h.answer(500)
        XCTAssertEqual(action.alertPlan?.cause, .retriesExhausted, "3 attempts made, deadline still far")
        XCTAssertLessThan(h.model.now, h.model.event.deadlineMs)
        XCTAssertEqual(try h.answer(200).finished?.cause, .retriesExhausted)
    }

    func testARetryThatWouldLeaveAfterTheDeadlineIsNotScheduledAndTheAlertGoesInstead() throws {
        let deadline = Fixture.entry + 1_000
        var h = Harness(try Fixture.event(["deadline": "\(deadline)"]))
        try h.start()
        // 429 at entry+45 would wait 1500 ms: past the deadline.
        let action = try h.answer(429, .tooManyRequests)
        XCTAssertNil(action.retry)
        XCTAssertEqual(action.alertPlan?.cause, .deadline)
        XCTAssertEqual(h.model.sent.map(\.channel), [.voip, .alert])

        // The same call with a 500 (50 ms) still fits before the deadline.
        var fits = Harness(try Fixture.event(["deadline": "\(deadline)"]))
        try fits.start()
        XCTAssertEqual(try fits.answer(500).retry?.atMs, Fixture.entry + 95)
    }

    func testATransportFailureReportedAfterTheDeadlineSendsTheAlert() throws {
        var h = Harness(try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"]))
        try h.start()
        let action = try h.fail(.timeout, after: 10_000)
        XCTAssertEqual(action.alertPlan?.cause, .deadline)
    }

    func testAVoipRetryFallingDueAfterTheDeadlineSendsTheAlertNotTheVoipPush() throws {
        var h = Harness(try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"]))
        try h.start()
        XCTAssertNotNil(try h.answer(500).retry)
        let action = try h.fireRetry(late: 2_000)
        XCTAssertNil(action.voipPlan, "never a VoIP push after the deadline")
        XCTAssertEqual(action.alertPlan?.cause, .deadline)
    }

    func testAVoipPushInFlightPastTheDeadlineIsLeftToItsAnswer() throws {
        var h = Harness(try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"]))
        try h.start()
        XCTAssertEqual(try h.answer(200, after: 1_500).finished?.outcome, .deliveredVoip,
                       "the push carries the deadline as its expiration: its answer decides")
    }

    func testCredentialAndConfigErrorsDeadLetterAndMarkTheAppUnhealthy() throws {
        let rows: [(Failure, String)] = [
            (.answer(403, .invalidProviderToken), "apns_credentials: InvalidProviderToken"),
            (.answer(403, .badCertificate), "apns_credentials: BadCertificate"),
            (.answer(403, .forbidden), "apns_credentials: Forbidden"),
            (.answer(403, .badEnvironmentKeyIdInToken), "apns_credentials: BadEnvironmentKeyIdInToken"),
            (.answer(403, .unknown("NewAuthReason", status: 403)), "apns_credentials: NewAuthReason"),
            (.answer(400, .badTopic), "apns_config: BadTopic"),
            (.answer(400, .topicDisallowed), "apns_config: TopicDisallowed"),
            (.answer(400, .missingTopic), "apns_config: MissingTopic"),
            (.transport(.credentialUnusable("key file unreadable")),
             "apns_credentials: credential unusable: key file unreadable"),
        ]
        for (failure, reason) in rows {
            var h = Harness(try Fixture.event())
            try h.start()
            let dead = try XCTUnwrap(try failure.play(&h).deadLetter, "\(failure)")
            XCTAssertEqual(dead.reason.text, reason)
            XCTAssertTrue(dead.appUnhealthy, "\(failure): the app's credentials or config are wrong")
            XCTAssertEqual(dead.record.outcome, .deadLettered)
            XCTAssertEqual(dead.record.reason, reason)
            XCTAssertEqual(dead.record.attempts.count, 1)
            XCTAssertTrue(h.model.appUnhealthy)
            XCTAssertEqual(h.model.sent.count, 1, "\(failure): no alert either")
        }
    }

    func testOtherRequestErrorsDeadLetterWithoutMarkingTheApp() throws {
        let rows: [(Int, ApnsReason?, String)] = [
            (400, .badExpirationDate, "apns_request: BadExpirationDate"),
            (400, .badPriority, "apns_request: BadPriority"),
            (400, .payloadEmpty, "apns_request: PayloadEmpty"),
            (404, .badPath, "apns_request: BadPath"),
            (405, .methodNotAllowed, "apns_request: MethodNotAllowed"),
            (400, nil, "apns_request: HTTP 400"),
            (400, .unknown("Novel", status: 400), "apns_request: Novel"),
        ]
        for (status, reason, text) in rows {
            var h = Harness(try Fixture.event())
            try h.start()
            let dead = try XCTUnwrap(try h.answer(status, reason).deadLetter, text)
            XCTAssertEqual(dead.reason.text, text)
            XCTAssertEqual(dead.reason.code, "apns_request")
            XCTAssertFalse(dead.appUnhealthy, text)
        }
    }

    func testAPushWhoseHeadersCannotBeWrittenIsDeadLetteredNotRetried() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        let dead = try XCTUnwrap(try h.fail(.unsendable("request headers too large at authorization")).deadLetter,
                                 "a push refused before sending can never be sent: no retry, no alert")
        XCTAssertEqual(dead.reason.text, "invalid_push: request headers too large at authorization")
        XCTAssertFalse(dead.appUnhealthy)
        XCTAssertEqual(h.model.sent.count, 1)
    }

    func testAHugeReasonFromAPNsIsQuotedShortInTheDeadLetter() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        let dead = try XCTUnwrap(try h.answer(400, .unknown(String(repeating: "x", count: 60_000), status: 400)).deadLetter)
        XCTAssertEqual(dead.reason.text, "apns_request: " + String(repeating: "x", count: 64) + "…")
    }

    func testPayloadTooLargeSendsTheAlertWithCausePayload() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        let action = try h.answer(413, .payloadTooLarge)
        XCTAssertNil(action.feedback)
        XCTAssertEqual(action.alertPlan?.cause, .payload, "413 is never retried; the alert goes")
        XCTAssertEqual(try h.answer(200).finished?.cause, .payload)
    }

    func testUnknownReasonsAreClassifiedByStatusThroughTheReasonTable() throws {
        var gone = Harness(try Fixture.event())
        try gone.start()
        let action = try gone.answer(410, .unknown("Vanished", status: 410))
        XCTAssertEqual(action.feedback?.reason, "Vanished")
        XCTAssertEqual(action.alertPlan?.cause, .voipTokenInvalid)

        var busy = Harness(try Fixture.event())
        try busy.start()
        XCTAssertNotNil(try busy.answer(502, .unknown("BadGateway", status: 502)).retry)
    }

    func testAVoipFailureWithoutAnAlertTokenEndsOnTheVoipSidesOutcome() throws {
        // Token invalid, nothing else: undeliverable.
        var invalid = Harness(try Fixture.event(["alert_token": nil]))
        try invalid.start()
        let action = try invalid.answer(410, .unregistered, timestampMs: 1_764_000_000_000)
        XCTAssertEqual(action.feedback?.channel, .voip)
        XCTAssertEqual(action.finished?.outcome, .undeliverable)

        // Retries ran into the deadline: expired.
        var late = Harness(try Fixture.event(["alert_token": nil, "deadline": "\(Fixture.entry + 1_000)"]))
        try late.start()
        XCTAssertEqual(try late.answer(429, .tooManyRequests).finished?.outcome, .expired)

        // Attempts ran out before the deadline: a human may look (dead letter retries_exhausted).
        let policy = Fixture.policy(voip: RetryPolicy(maxAttempts: 1, baseMs: 100, capMs: 2_000))
        var exhausted = Harness(try Fixture.event(["alert_token": nil]), policy: policy)
        try exhausted.start()
        let dead = try XCTUnwrap(try exhausted.answer(500).deadLetter)
        XCTAssertEqual(dead.reason, .retriesExhausted(.voip))
        XCTAssertEqual(dead.record.reason, "retries_exhausted: voip")
        XCTAssertFalse(dead.appUnhealthy)

        // 413 with nothing to fall back to.
        var large = Harness(try Fixture.event(["alert_token": nil]))
        try large.start()
        XCTAssertEqual(try large.answer(413, .payloadTooLarge).deadLetter?.reason, .payloadTooLarge(.voip))
    }
}
