import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// Android phones rung through FCM by the real router, end to end against the simulator's FCM
/// endpoints (the OAuth exchange and `messages:send` over real TLS and HTTP/2) and a real
/// redis-server (docs/protocol.md, *Android devices*): the ring is a high-priority data message
/// that lives as long as the ring, a gone token is fed back and gets no missed-call
/// notification, FCM's `Retry-After` is kept, an expired access token is renewed once, a bad
/// service account is a dead letter naming its credential, an answer on the iPhone ends the
/// Pixel's ring, and a ring that cannot be delivered by the deadline becomes the missed-call
/// notification. Messages are counted per token at the simulator.
final class AndroidEventsTests: XCTestCase {
    private var h: RouterHarness!
    // Lower case: the simulator's scenarios are keyed by the lower-cased token.
    private let pixel = "dgvzda:apa91bh-zx_qk-pixel"
    private let iphoneVoip = "a0a1a2a3", iphoneAlert = "b0b1b2b3"

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func mixedCall(_ id: String, deadlineInMs: Int64 = 30_000) -> String {
        #"{"v":1,"id":"\#(id)","type":"incoming_call","deadline":\#(Clock.unixMs() + deadlineInMs),"#
            + #""voip":{"caller":"+15551234567","callerName":"Alice","video":true},"#
            + #""devices":[{"id":"bob-iphone","voip_token":"\#(iphoneVoip)","alert_token":"\#(iphoneAlert)"},"#
            + #"{"id":"bob-pixel","fcm_token":"\#(pixel)"}]}"#
    }

    private func androidCall(_ id: String, token: String? = nil, deadlineInMs: Int64 = 20_000) -> Int64 {
        let deadline = Clock.unixMs() + deadlineInMs
        h.xaddRaw("acme", #"{"v":1,"id":"\#(id)","type":"incoming_call","fcm_token":"\#(token ?? pixel)","deadline":\#(deadline),"#
                  + #""voip":{"caller":"+15551234567","callerName":"Alice"}}"#)
        return deadline
    }

    /// The simulator's message of `request`, parsed: `{"message": {…}}`'s inside.
    private func message(_ request: RecordedRequest, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any], file: file, line: line)
        return try XCTUnwrap(root["message"] as? [String: Any], file: file, line: line)
    }

    private func rings(_ token: String) throws -> [RecordedRequest] {
        try h.requests(token).filter { (try message($0)["data"] as? [String: String])?["type"] == "incoming_call" }
    }

    func testAnAppWithoutAnFcmCredentialDeadLettersAnAndroidCallNamingTheFix() throws {
        h = try RouterHarness()
        h.xaddRaw("acme", #"{"v":1,"id":"single","type":"incoming_call","fcm_token":"\#(pixel)"}"#)
        h.xaddRaw("acme", mixedCall("mixed"))
        h.call("neighbour", voip: "c0c1")
        XCTAssertTrue(h.waitForRecords(3), "one outcome per entry: \(h.recorded.map(\.record.id))")
        XCTAssertEqual(h.record("neighbour")?.outcome, .deliveredVoip, "an iOS call beside them rings as before")
        XCTAssertTrue(h.requests(iphoneVoip).isEmpty, "the mixed call's iPhone is not rung: the call is kept whole")
        let reasons = h.entries(h.keys("acme").dead).map { $0.fields["reason"] ?? "" }
        XCTAssertEqual(reasons, [
            "invalid_event: fcm_token: app acme has no fcm_credential, so it cannot ring Android devices "
                + "(name an FCM service account of credentials in the app's fcm_credential, config/README.md)",
            "invalid_event: devices[1].fcm_token: app acme has no fcm_credential, so it cannot ring Android devices "
                + "(name an FCM service account of credentials in the app's fcm_credential, config/README.md)",
        ])
    }

    func testAnAndroidDeviceIsRungWithAHighPriorityDataMessageThatLivesNoLongerThanTheRing() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase")
        let deadline = androidCall("a-ring")
        XCTAssertTrue(h.waitForRecords(1))
        let record = try XCTUnwrap(h.record("a-ring"))
        XCTAssertEqual(record.outcome, .deliveredVoip, "the ring was accepted: \(record.jsonString)")
        XCTAssertEqual(record.attempts.map(\.provider), [.fcm])
        XCTAssertEqual(record.apnsID?.hasPrefix("projects/\(h.sim.pki.fcmProjectID)/messages/"), true, "FCM's message name")
        let requests = h.requests(pixel)
        XCTAssertEqual(requests.count, 1, "one message to the Pixel")
        let sent = try XCTUnwrap(requests.first)
        XCTAssertEqual(sent.path, "/v1/projects/\(h.sim.pki.fcmProjectID)/messages:send")
        let m = try message(sent)
        XCTAssertNil(m["notification"], "a ring is data only: the app shows the call itself")
        let android = try XCTUnwrap(m["android"] as? [String: String])
        XCTAssertEqual(android["priority"], "HIGH")
        XCTAssertEqual(android["collapse_key"], "a-ring")
        // The TTL is the whole seconds from the send (the attempt's time) to the deadline.
        let sentAt = try XCTUnwrap(record.attempts.first?.sentAtMs)
        XCTAssertEqual(android["ttl"], "\((deadline - sentAt) / 1000)s")
        XCTAssertLessThanOrEqual(Int64(android["ttl"]!.dropLast())!, 20, "never longer than the ring")
        XCTAssertEqual(m["data"] as? [String: String], ["type": "incoming_call", "id": "a-ring", "deadline": String(deadline),
                                                        "caller": "+15551234567", "callerName": "Alice"])
    }

    func testAnUnregisteredTokenIsFedBackKnownInvalidAndGetsNoMissedCallNotification() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase")
        h.sim.simulator.setScenario(.unregistered, for: pixel)
        _ = androidCall("a-gone")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.record("a-gone")?.outcome, .undeliverable)
        XCTAssertEqual(h.requests(pixel).count, 1, "the ring only: no missed-call notification to a token that is gone")
        let feedback = h.entries(h.keys("acme").feedback)
        XCTAssertEqual(feedback.map { $0.fields["token"] }, [pixel])
        XCTAssertEqual(feedback.map { $0.fields["channel"] }, ["fcm"])
        XCTAssertEqual(feedback.map { $0.fields["reason"] }, ["UNREGISTERED"])
        XCTAssertNotNil(h.command("GET", "pushgw:{acme}:invalid:fcm:\(pixel)")?.integer, "known invalid since the answer")
        // Known invalid now: the next call does not try it.
        _ = androidCall("a-gone-again")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.record("a-gone-again")?.outcome, .undeliverable)
        XCTAssertEqual(h.record("a-gone-again")?.attempts.count, 0)
        XCTAssertEqual(h.requests(pixel).count, 1, "nothing more sent to it")
    }

    func testQuotaExceededIsRetriedNoSoonerThanItsRetryAfter() throws {
        h = try RouterHarness(simulator: { $0.fcmRetryAfterSeconds = 1 }, acmeFcmCredential: "firebase")
        h.sim.simulator.setScenario(.tooMany, for: pixel)
        _ = androidCall("a-quota")
        XCTAssertTrue(h.runUntil("the first ring refused") { self.h.requests(self.pixel).count == 1 })
        h.sim.simulator.setScenario(.ok, for: pixel)
        XCTAssertTrue(h.waitForRecords(1))
        let record = try XCTUnwrap(h.record("a-quota"))
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertEqual(record.attempts.map(\.status), [429, 200])
        XCTAssertEqual(record.attempts.first?.reason, "QUOTA_EXCEEDED")
        let times = h.requests(pixel).map(\.timeMs)
        XCTAssertEqual(times.count, 2)
        // The harness's backoff alone would retry within 100 ms; FCM asked for a second.
        XCTAssertGreaterThanOrEqual(times[1] - times[0], 1_000, "the retry waited for Retry-After")
    }

    func testAnExpiredAccessTokenIsRenewedOnceAndTheRingDelivered() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase")
        _ = androidCall("a-first")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.sim.simulator.fcmTokensGranted, 1)
        h.sim.simulator.expireFcmAccessTokens()
        let second = "dgvzda:apa91bh-second-pixel"
        _ = androidCall("a-renewed", token: second)
        XCTAssertTrue(h.waitForRecords(2))
        let record = try XCTUnwrap(h.record("a-renewed"))
        XCTAssertEqual(record.outcome, .deliveredVoip)
        XCTAssertEqual(record.attempts.count, 1, "the resend with a new token is not an attempt")
        XCTAssertEqual(h.requests(second).map(\.status), [401, 200], "refused once, renewed, sent again")
        XCTAssertEqual(h.sim.simulator.fcmTokensGranted, 2)
    }

    func testABadServiceAccountKeyDeadLettersTheAndroidRingNamingTheCredentialAndTheIPhoneStillRings() throws {
        let damaged = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEAsecret\n-----END PRIVATE KEY-----\n"
        h = try RouterHarness(acmeFcmCredential: "firebase", fcmServiceAccountChanges: ["private_key": damaged])
        h.xaddRaw("acme", mixedCall("a-badkey", deadlineInMs: 1_500))  // a call that rang waits for its deadline
        XCTAssertTrue(h.waitForRecords(1))
        let record = try XCTUnwrap(h.record("a-badkey"))
        XCTAssertEqual(record.outcome, .deliveredVoip, "the iPhone rang: \(record.jsonString)")
        XCTAssertEqual(record.devices?.map(\.outcome), [.deliveredVoip, .deadLettered])
        let reason = try XCTUnwrap(record.devices?.last?.reason)
        XCTAssertTrue(reason.hasPrefix("fcm_credentials: credentials.firebase: "), reason)
        XCTAssertTrue(reason.contains("service-account-firebase.json"), "names the file: \(reason)")
        XCTAssertFalse(reason.contains("secret"), "never quotes the key: \(reason)")
        XCTAssertTrue(h.requests(pixel).isEmpty, "nothing could be sent to the Pixel")
        XCTAssertEqual(h.requests(iphoneVoip).count, 1)
    }

    func testABadServiceAccountKeyDeadLettersAnAndroidOnlyCall() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase", fcmServiceAccountChanges: ["private_key": "not a key"])
        _ = androidCall("a-badkey-single")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.record("a-badkey-single")?.outcome, .deadLettered)
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, 1)
        let reason = dead.first?.fields["reason"] ?? ""
        XCTAssertTrue(reason.hasPrefix("fcm_credentials: credentials.firebase: "), reason)
    }

    /// A Pixel whose ring FCM refuses for its app's credential (THIRD_PARTY_AUTH_ERROR: a human
    /// must fix the service account) inside a call whose iPhone rings: the call keeps one
    /// result (`delivered_voip`, the Pixel `dead_lettered` in its devices), and the Pixel's
    /// dead letter lands in the app's dead stream naming the device, with its reason and its
    /// attempt, as an iPhone's does (DevicesTests).
    func testAPixelDeadLetteredInsideAMixedCallLeavesADeadLetterNamingIt() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase")
        h.sim.simulator.setScenario(.invalidProviderToken, for: pixel)
        let event = mixedCall("a-pixel-dead", deadlineInMs: 1_500)  // a call that rang waits for its deadline
        h.xaddRaw("acme", event)
        XCTAssertTrue(h.waitForRecords(1))
        h.runFor(300)  // nothing more comes
        XCTAssertEqual(h.recorded.map(\.record.id), ["a-pixel-dead"], "one result per event")
        XCTAssertEqual(h.results().map { $0["id"] as? String }, ["a-pixel-dead"], "one results entry")
        let record = try XCTUnwrap(h.record("a-pixel-dead"))
        XCTAssertEqual(record.outcome, .deliveredVoip, "the iPhone rang: \(record.jsonString)")
        XCTAssertEqual(record.devices?.map(\.outcome), [.deliveredVoip, .deadLettered])
        let reason = try XCTUnwrap(record.devices?.last?.reason)
        XCTAssertTrue(reason.hasPrefix("fcm_credentials: credentials.firebase: "), reason)
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, 1, "the Pixel's dead letter: \(dead.map(\.fields))")
        let letter = try XCTUnwrap(dead.first?.fields)
        XCTAssertEqual(letter["device"], "bob-pixel")
        XCTAssertEqual(letter["reason"], reason)
        XCTAssertEqual(letter["event"], event, "the event as the producer wrote it")
        XCTAssertEqual(letter["app"], "acme")
        let history = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data((letter["attempts"] ?? "").utf8)) as? [String: Any])
        XCTAssertEqual(history["outcome"] as? String, "dead_lettered")
        XCTAssertEqual(history["reason"] as? String, reason)
        let attempts = try XCTUnwrap(history["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.map { $0["device"] as? String }, ["bob-pixel"], "the Pixel's own attempts only")
        XCTAssertEqual(attempts.map { $0["status"] as? Int }, [401])
        XCTAssertEqual(attempts.map { $0["provider"] as? String }, ["fcm"])
        // Pushes per token: each device once, nothing again.
        XCTAssertEqual(h.requests(pixel).count, 1, "the Pixel's ring, refused, not sent again")
        XCTAssertEqual(h.requests(iphoneVoip).count, 1)
        XCTAssertEqual(h.requests(iphoneAlert).count, 0, "the iPhone rang: no alert")
    }

    func testAMixedCallAnsweredOnTheIPhoneEndsThePixelsRingWithCallEnded() throws {
        h = try RouterHarness(acmeFcmCredential: "firebase")
        h.xaddRaw("acme", mixedCall("a-mixed"))
        XCTAssertTrue(h.runUntil("both devices rung") {
            self.h.requests(self.iphoneVoip).contains { $0.status == 200 } && self.h.requests(self.pixel).contains { $0.status == 200 }
        })
        h.xaddRaw("acme", #"{"v":1,"id":"a-mixed","type":"call_answered","device":"bob-iphone"}"#)
        XCTAssertTrue(h.waitForRecords(2), "the call's result and the answer's")
        let pixelMessages = h.requests(pixel)
        XCTAssertEqual(pixelMessages.count, 2, "the ring, then call_ended")
        let ended = try message(try XCTUnwrap(pixelMessages.last))
        XCTAssertEqual(ended["data"] as? [String: String], ["type": "call_ended", "id": "a-mixed", "ended": "answered_elsewhere"])
        XCTAssertEqual((ended["android"] as? [String: String])?["priority"], "HIGH")
        XCTAssertNil(ended["notification"])
        XCTAssertEqual(h.requests(iphoneVoip).count, 1)
        XCTAssertEqual(h.requests(iphoneAlert).count, 0, "the device that answered gets nothing")
        let call = try XCTUnwrap(h.record("a-mixed"))
        XCTAssertEqual(call.ended, .answered(device: "bob-iphone"))
        XCTAssertEqual(call.devices?.map(\.told), [nil, .answeredElsewhere])
        let answer = try XCTUnwrap(h.recorded.first { $0.record.type == .callAnswered }?.record)
        XCTAssertEqual(answer.told, ["bob-pixel"])
    }

    func testARingNotDeliveredByTheDeadlineBecomesTheMissedCallNotification() throws {
        h = try RouterHarness(simulator: { $0.fcmRetryAfterSeconds = 1 }, acmeFcmCredential: "firebase")
        h.sim.simulator.setScenario(.tooMany, for: pixel)
        let deadline = androidCall("a-missed", deadlineInMs: 1_500)
        // The rings are refused until the next could only leave after the deadline; then the
        // missed-call notification goes (refused once too, then let through).
        XCTAssertTrue(h.runUntil("the missed-call notification tried") {
            self.h.requests(self.pixel).contains { (try? self.message($0)["notification"]) != nil }
        })
        h.sim.simulator.setScenario(.ok, for: pixel)
        XCTAssertTrue(h.waitForRecords(1))
        let record = try XCTUnwrap(h.record("a-missed"))
        XCTAssertEqual(record.outcome, .deliveredAlert, record.jsonString)
        XCTAssertEqual(record.cause, .deadline)
        let ringAttempts = record.attempts.filter { $0.channel == .voip }
        XCTAssertFalse(ringAttempts.isEmpty)
        XCTAssertEqual(try rings(pixel).count, ringAttempts.count)
        XCTAssertTrue(ringAttempts.allSatisfy { $0.sentAtMs < deadline }, "no ring sent at or after the deadline")
        let missed = try message(try XCTUnwrap(h.requests(pixel).last))
        XCTAssertEqual((missed["notification"] as? [String: String])?["title"], "Missed call")
        let android = try XCTUnwrap(missed["android"] as? [String: Any])
        XCTAssertEqual(android["priority"] as? String, "NORMAL")
        XCTAssertEqual((android["notification"] as? [String: String])?["tag"], "a-missed", "a repeat replaces it")
        XCTAssertEqual(missed["data"] as? [String: String], ["type": "missed_call", "id": "a-missed"])
    }
}
