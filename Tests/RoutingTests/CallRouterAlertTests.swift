import APNs
import Retry
@testable import Routing
import XCTest

/// The alert fallback: docs/protocol.md's table again, with the alert policy bounded by the TTL,
/// and the outcomes when the alert token fails too.
final class CallRouterAlertTests: XCTestCase {
    func testNoVoipTokenSendsTheAlertAtOnceAndItsFormIsTheAppsTemplate() throws {
        var h = Harness(try Fixture.event(["voip_token": nil]))
        let alert = try XCTUnwrap(try h.start().alertPlan)
        XCTAssertEqual(alert.cause, .noVoipToken)
        let n = alert.plan.notification!
        XCTAssertEqual(alert.plan.channel, .alert)
        XCTAssertEqual(n.deviceToken, Fixture.alertToken)
        XCTAssertEqual(n.topic, "com.acme.phone")
        XCTAssertEqual(n.pushType, .alert)
        XCTAssertEqual(n.priority, .immediate)
        XCTAssertEqual(n.expiration, (Fixture.entry + 5 + 86_400_000) / 1000)
        XCTAssertEqual(String(decoding: n.payload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Missed call","body":"Alice Johnson tried to call you"},"#
                       + #""sound":"default"},"id":"call-7f3a9c","call_id":"call-7f3a9c"}"#)
        let record = try XCTUnwrap(try h.answer(200).finished)
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.cause, .noVoipToken)
        XCTAssertEqual(record.channel, .alert)
        XCTAssertEqual(record.latencyMs, 45)
    }

    func testAlert200DeliversWithTheFallbacksCause() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(413, .payloadTooLarge)
        let record = try XCTUnwrap(try h.answer(200).finished)
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.cause, .payload)
    }

    func testAlertTokenInvalidAfterTheVoipTokenFailedIsUndeliverable() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(410, .unregistered, timestampMs: 1_764_000_000_000)
        XCTAssertEqual(try h.answer(400, .badDeviceToken).alertPlan?.plan.environment, .sandbox,
                       "a BadDeviceToken is tried once in the other environment first")
        let action = try h.answer(400, .badDeviceToken)
        XCTAssertEqual(action.feedback?.channel, .alert)
        XCTAssertEqual(action.feedback?.token, Fixture.alertToken)
        XCTAssertEqual(action.feedback?.reason, "BadDeviceToken")
        XCTAssertEqual(action.finished?.outcome, .undeliverable, "every token invalid")
        XCTAssertEqual(h.model.feedback.map(\.channel), [.voip, .alert])
    }

    func testAlertTokenInvalidWithNoVoipTokenIsUndeliverable() throws {
        var h = Harness(try Fixture.event(["voip_token": nil]))
        try h.start()
        let action = try h.answer(410, .unregistered, timestampMs: 1_764_000_000_000)
        XCTAssertEqual(action.feedback?.timestampMs, 1_764_000_000_000)
        XCTAssertEqual(action.finished?.outcome, .undeliverable)
    }

    func testAlertTokenInvalidAfterADeadlineFallbackIsExpired() throws {
        var h = Harness(try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"]), now: Fixture.entry + 2_000)
        XCTAssertEqual(try h.start().alertPlan?.cause, .deadline)
        XCTAssertEqual(try h.answer(410, .unregistered).finished?.outcome, .expired,
                       "the deadline passed and the fallback's token is gone: nothing delivered, no token at fault on VoIP")
    }

    func testAlertTokenInvalidAfterVoipRetriesRanOutDeadLetters() throws {
        let policy = Fixture.policy(voip: RetryPolicy(maxAttempts: 1, baseMs: 100, capMs: 2_000))
        var h = Harness(try Fixture.event(), policy: policy)
        try h.start()
        XCTAssertEqual(try h.answer(503, .serviceUnavailable).alertPlan?.cause, .retriesExhausted)
        let action = try h.answer(410, .unregistered)
        XCTAssertNotNil(action.feedback)
        XCTAssertEqual(action.deadLetter?.reason, .retriesExhausted(.voip))
    }

    func testAlertRetryableAnswersRetryWithTheAlertPolicyThenDeliver() throws {
        var h = Harness(try Fixture.event(["voip_token": nil]))
        try h.start()
        let retry = try XCTUnwrap(try h.answer(500, .internalServerError).retry)
        XCTAssertEqual(retry, RetryPlan(channel: .alert, attempt: 2, atMs: h.model.now + 250, delayMs: 250),
                       "alert policy: 0.5 · min(60000, 500)")
        let again = try XCTUnwrap(try h.fireRetry().alertPlan)
        XCTAssertEqual(again.plan.attempt, 2)
        XCTAssertEqual(again.cause, .noVoipToken)
        XCTAssertEqual(try h.fail(.timeout).retry?.delayMs, 500, "0.5 · 1000")
        try h.fireRetry()
        let throttled = try XCTUnwrap(try h.answer(429, .tooManyRequests).retry)
        XCTAssertEqual(throttled.delayMs, 45_000, "a 429 waits in [cap/2, cap]")
        try h.fireRetry()
        let record = try XCTUnwrap(try h.answer(200).finished)
        XCTAssertEqual(record.outcome, .deliveredAlert)
        XCTAssertEqual(record.attempts.count, 4)
        XCTAssertEqual(again.plan.notification!.expiration, try XCTUnwrap(h.model.sent.first).notification!.expiration,
                       "retries keep the fallback's expiration")
    }

    func testAlertRetriesExhaustedDeadLetter() throws {
        let policy = Fixture.policy(alert: RetryPolicy(maxAttempts: 3, baseMs: 500, capMs: 60_000))
        var h = Harness(try Fixture.event(["voip_token": nil]), policy: policy)
        try h.start()
        try h.answer(500)
        try h.fireRetry()
        try h.fail(.connectionLost("goaway"))
        try h.fireRetry()
        let dead = try XCTUnwrap(try h.answer(503, .serviceUnavailable).deadLetter)
        XCTAssertEqual(dead.reason, .retriesExhausted(.alert))
        XCTAssertEqual(dead.record.reason, "retries_exhausted: alert")
        XCTAssertFalse(dead.appUnhealthy)
        XCTAssertEqual(dead.record.attempts.count, 3)
    }

    func testAlertRetriesAreBoundedByTheAlertTTL() throws {
        let policy = Fixture.policy(alertTTLMs: 10_000)
        var throttled = Harness(try Fixture.event(["voip_token": nil]), policy: policy)
        try throttled.start()
        XCTAssertEqual(try throttled.answer(429, .tooManyRequests).deadLetter?.reason, .retriesExhausted(.alert),
                       "a retry 30 s away would leave after the 10 s TTL")

        var late = Harness(try Fixture.event(["voip_token": nil]), policy: policy)
        try late.start()
        XCTAssertNotNil(try late.answer(500).retry)
        XCTAssertEqual(try late.fireRetry(late: 20_000).deadLetter?.reason, .retriesExhausted(.alert),
                       "a retry timer firing after the TTL sends nothing")
    }

    func testAlertCredentialErrorDeadLettersAndMarksTheAppUnhealthy() throws {
        var h = Harness(try Fixture.event(["voip_token": nil]))
        try h.start()
        let dead = try XCTUnwrap(try h.answer(403, .invalidProviderToken).deadLetter)
        XCTAssertEqual(dead.reason.text, "apns_credentials: InvalidProviderToken")
        XCTAssertTrue(dead.appUnhealthy)
    }

    func testAlertPayloadTooLargeDeadLetters() throws {
        var h = Harness(try Fixture.event(["voip_token": nil]))
        try h.start()
        let dead = try XCTUnwrap(try h.answer(413, .payloadTooLarge).deadLetter)
        XCTAssertEqual(dead.reason.text, "payload_too_large: alert")
        XCTAssertFalse(dead.appUnhealthy)
    }

    func testAlertOtherRequestErrorDeadLetters() throws {
        var h = Harness(try Fixture.event(["voip_token": nil]))
        try h.start()
        XCTAssertEqual(try h.answer(400, .badCollapseId).deadLetter?.reason.text, "apns_request: BadCollapseId")
    }

    func testTheEventsOwnAlertIsSent() throws {
        var h = Harness(try Fixture.event(["voip_token": nil, "alert": #"{"title":"Bob","body":"Call me back"}"#]))
        let plan = try XCTUnwrap(try h.start().alertPlan?.plan)
        XCTAssertEqual(String(decoding: plan.notification!.payload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Bob","body":"Call me back"},"sound":"default"},"id":"call-7f3a9c","call_id":"call-7f3a9c"}"#)
    }
}
