import Routing
import XCTest

/// `AppCredentialHealth` as transcripts: APNs refusing an app's credential a few times in a row
/// withholds its pushes, one push a period goes as a probe, and any accepted push (a probe, or
/// one sent before the withholding) makes the app healthy. No clock: times are given.
final class AppCredentialHealthTests: XCTestCase {
    private let refused = DeadLetterReason.apnsCredentials("InvalidProviderToken")
    private let policy = AppCredentialHealth.Policy(refusalsToWithhold: 3, probeEveryMs: 60_000)

    func testAFewRefusalsInARowWithholdThePushesThenOneProbeAMinuteGoes() {
        var health = AppCredentialHealth(policy: policy)
        XCTAssertEqual(health.onPushWanted(nowMs: 0), .send)
        XCTAssertEqual(health.onRefused(refused, nowMs: 10), .becameUnhealthy)
        XCTAssertEqual(health.refusal, refused, "unhealthy from the first refusal")
        XCTAssertEqual(health.onPushWanted(nowMs: 20), .send, "not yet withheld")
        XCTAssertEqual(health.onRefused(refused, nowMs: 30), .none)
        XCTAssertEqual(health.onRefused(refused, nowMs: 40), .startedWithholding)
        XCTAssertTrue(health.isWithholding)
        guard case let .withhold(reason) = health.onPushWanted(nowMs: 50) else { return XCTFail("withheld") }
        XCTAssertEqual(reason.code, "apns_credentials")
        XCTAssertTrue(reason.text.hasPrefix("apns_credentials: InvalidProviderToken (not sent: "), reason.text)
        // Answers of pushes sent before the withholding keep it as it is.
        XCTAssertEqual(health.onRefused(refused, nowMs: 60), .none)
        XCTAssertEqual(health.onPushWanted(nowMs: 60_039), .withhold(reason), "no probe before a period")
        XCTAssertEqual(health.onPushWanted(nowMs: 60_040), .sendAsProbe, "a period after the withholding: one probe")
        XCTAssertEqual(health.onPushWanted(nowMs: 60_041), .withhold(reason), "one probe at a time")
        health.onProbeAnswered(nowMs: 60_100)
        XCTAssertEqual(health.onRefused(refused, nowMs: 60_100), .none, "the probe refused: still withheld")
        XCTAssertEqual(health.onPushWanted(nowMs: 61_000), .withhold(reason))
        XCTAssertEqual(health.onPushWanted(nowMs: 120_100), .sendAsProbe, "the next probe a period after the last answer")
        health.onProbeAnswered(nowMs: 120_200)
        XCTAssertEqual(health.onAccepted(), .becameHealthy, "the probe accepted")
        XCTAssertEqual(health.state, .sending(refusals: 0, last: nil))
        XCTAssertNil(health.refusal)
        XCTAssertEqual(health.onPushWanted(nowMs: 120_300), .send)
    }

    func testAnAcceptedPushBetweenRefusalsStartsTheCountAgain() {
        var health = AppCredentialHealth(policy: policy)
        _ = health.onRefused(refused, nowMs: 0)
        _ = health.onRefused(refused, nowMs: 1)
        XCTAssertEqual(health.onAccepted(), .becameHealthy)
        XCTAssertEqual(health.onRefused(refused, nowMs: 2), .becameUnhealthy)
        XCTAssertEqual(health.onRefused(refused, nowMs: 3), .none)
        XCTAssertFalse(health.isWithholding, "two in a row, not three")
        XCTAssertEqual(health.onAccepted(), .becameHealthy)
        XCTAssertEqual(health.onAccepted(), .none, "healthy already")
    }

    func testAProbeThatGotNoAnswerProbesAgainAPeriodLater() {
        var health = AppCredentialHealth(policy: AppCredentialHealth.Policy(refusalsToWithhold: 1, probeEveryMs: 1_000))
        XCTAssertEqual(health.onRefused(.apnsConfig("BadTopic"), nowMs: 0), .startedWithholding)
        XCTAssertEqual(health.onPushWanted(nowMs: 1_000), .sendAsProbe)
        health.onProbeAnswered(nowMs: 3_000)  // a timeout says nothing of the credential
        XCTAssertTrue(health.isWithholding)
        guard case let .withhold(reason) = health.onPushWanted(nowMs: 3_999) else { return XCTFail("withheld") }
        XCTAssertEqual(reason.code, "apns_config", "the refusal's own code")
        XCTAssertEqual(health.onPushWanted(nowMs: 4_000), .sendAsProbe)
    }
}
