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

/// The router end to end — producer XADD, Redis, the router, APNs over HTTP/2 + TLS, the
/// records — one test per APNs answer of the behaviour table and per outcome of docs/protocol.md
/// ("Results"). Every test runs on each Redis deployment: plain TCP here; TLS, mutual TLS, the least-privileged ACL user and a
/// sentinel in the subclasses at the end of this file (Linux's XCTest runs only the tests a
/// class declares, so they list each test again; `RedisDeploymentListTests` checks the lists).
class RouterIntegrationTests: XCTestCase {
    private var h: RouterHarness!

    /// How the gateway of this class's tests reaches Redis.
    class var redisDeployment: RedisDeployment { .tcp }

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func start(_ scenarios: [String: Scenario] = [:],
                       voipRetry: RetryPolicy = RetryPolicy(maxAttempts: 4, baseMs: 20, capMs: 100)) throws {
        h = try RouterHarness(redis: Self.redisDeployment, simulator: { $0.scenarios = scenarios }, voipRetry: voipRetry)
    }

    // MARK: 200

    func testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() throws {
        try start()
        h.call("c-ok", voip: "a0a0", alert: "b0b0")
        XCTAssertTrue(h.waitForRecords(1))
        let r = try XCTUnwrap(h.record("c-ok"))
        XCTAssertEqual(r.outcome, .deliveredVoip)
        XCTAssertEqual(r.channel, .voip)
        XCTAssertNotNil(r.apnsID)
        XCTAssertEqual(r.attempts.count, 1)
        let push = try XCTUnwrap(h.requests("a0a0").first)
        XCTAssertEqual(push.header("apns-push-type"), "voip")
        XCTAssertEqual(push.header("apns-topic"), h.sim.bundleID + ".voip")
        let expiration = Int64(push.header("apns-expiration") ?? "") ?? 0
        XCTAssertGreaterThan(expiration, Clock.unixMs() / 1000, "apns-expiration is the call's deadline, in seconds")
        let body = String(decoding: push.body, as: UTF8.self)
        XCTAssertTrue(body.contains("\"id\":\"c-ok\""), "the call id travels in the VoIP payload: \(body)")
        XCTAssertTrue(h.requests("b0b0").isEmpty, "no alert when VoIP is delivered")
        let results = h.entries(h.keys("acme").results)
        XCTAssertEqual(results.count, 1)
        XCTAssertTrue(results.first?.fields["result"]?.contains("\"outcome\":\"delivered_voip\"") == true)
        XCTAssertEqual(h.entries(h.keys("acme").calls).count, 0, "the entry is acknowledged and deleted with its outcome")
    }

    // MARK: Token gone

    func testGoneVoipTokensFallBackToTheAlertWithFeedback() throws {
        try start(["dead0001": .unregistered, "dead0002": .expiredToken, "bad00003": .badToken, "0f0f0004": .notForTopic])
        let tokens = ["dead0001": "Unregistered", "dead0002": "ExpiredToken", "bad00003": "BadDeviceToken",
                      "0f0f0004": "DeviceTokenNotForTopic"]
        for (i, token) in tokens.keys.sorted().enumerated() { h.call("gone-\(i)", voip: token, alert: "a1e7") }
        XCTAssertTrue(h.waitForRecords(4))
        for (i, token) in tokens.keys.sorted().enumerated() {
            let r = try XCTUnwrap(h.record("gone-\(i)"))
            XCTAssertEqual(r.outcome, .deliveredAlert)
            XCTAssertEqual(r.cause, .voipTokenInvalid)
            if token == "bad00003" {
                XCTAssertEqual(r.attempts.map(\.channel), [.voip, .voip, .alert],
                               "a BadDeviceToken is tried once in the other environment (the same simulator here), then the alert")
                XCTAssertEqual(r.attempts.map(\.environment), [nil, .sandbox, nil])
            } else {
                XCTAssertEqual(r.attempts.map(\.channel), [.voip, .alert], "VoIP once, never retried, then the alert")
            }
        }
        let feedback = h.entries(h.keys("acme").feedback)
        XCTAssertEqual(Set(feedback.compactMap { $0.fields["token"] }), Set(tokens.keys))
        for f in feedback {
            XCTAssertEqual(f.fields["channel"], "voip")
            XCTAssertEqual(f.fields["reason"], tokens[f.fields["token"]!])
            XCTAssertNotNil(Int64(f.fields["timestamp"] ?? ""), "feedback carries a millisecond timestamp")
        }
        let alert = try XCTUnwrap(h.requests("a1e7").first)
        XCTAssertEqual(alert.header("apns-push-type"), "alert")
        XCTAssertEqual(alert.header("apns-topic"), h.sim.bundleID)
        XCTAssertTrue(String(decoding: alert.body, as: UTF8.self).contains("Alice tried to call you"),
                      "the app's template, filled from the event")
    }

    func testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() throws {
        try start(["dead0001": .unregistered])
        h.call("first", voip: "dead0001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(1))
        let stamp = Int64(h.entries(h.keys("acme").feedback).first?.fields["timestamp"] ?? "") ?? 0
        h.call("second", voip: "dead0001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests("dead0001").count, 1, "a known-invalid token gets no second VoIP push")
        XCTAssertEqual(h.record("second")?.cause, .voipTokenInvalid)
        XCTAssertEqual(h.record("second")?.attempts.map(\.channel), [.alert])
        h.sim.simulator.setScenario(.ok, for: "dead0001")
        h.call("third", voip: "dead0001", alert: "a1e7", extra: ["voip_token_registered_at": stamp + 1])
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.record("third")?.outcome, .deliveredVoip, "registered after the feedback: used again")
    }

    // MARK: Transient

    func testTransientFailuresAreRetriedThenDelivered() throws {
        try start(["f1a70001": .flaky(2), "0a290002": .tooMany, "05000003": .error500])
        // 503 twice (flaky:2), then 200.
        let flakyEntry = h.call("flaky", voip: "f1a70001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(1))
        // 429 and 500 until the token's second request has its answer; then APNs recovers. The
        // check runs between two attempts (a retry waits at least 10 ms on a timer).
        for (id, token) in [("throttled", "0a290002"), ("server-error", "05000003")] {
            h.call(id, voip: token, alert: "a1e7")
            XCTAssertTrue(h.runUntil("two answers to \(token)") { self.h.requests(token).filter { $0.status != nil }.count >= 2 })
            h.sim.simulator.setScenario(.ok, for: token)
        }
        XCTAssertTrue(h.waitForRecords(3))
        for (id, status) in [("flaky", 503), ("throttled", 429), ("server-error", 500)] {
            let r = try XCTUnwrap(h.record(id))
            XCTAssertEqual(r.outcome, .deliveredVoip, id)
            XCTAssertEqual(r.attempts.map(\.status), [status, status, 200], "\(status) twice, retried, then delivered")
            XCTAssertEqual(r.attempts.map(\.channel), [.voip, .voip, .voip], "no fallback to the alert for a transient failure")
        }
        XCTAssertEqual(h.record("flaky")?.entry, flakyEntry, "the result names the producer's entry, not the retries' entries")
        XCTAssertTrue(h.requests("a1e7").isEmpty, "no alert was sent")
        XCTAssertEqual(h.runner.stats.retriesFired, 6)
    }

    func testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() throws {
        try start(["05000003": .unavailable], voipRetry: RetryPolicy(maxAttempts: 50, baseMs: 50, capMs: 100))
        h.call("late", voip: "05000003", alert: "a1e7", deadlineInMs: 400)
        XCTAssertTrue(h.waitForRecords(1))
        let r = try XCTUnwrap(h.record("late"))
        XCTAssertEqual(r.outcome, .deliveredAlert)
        XCTAssertEqual(r.cause, .deadline)
        let voip = r.attempts.filter { $0.channel == .voip }
        XCTAssertGreaterThan(voip.count, 1, "retried while the deadline allowed")
        // The event's deadline, as the VoIP payload carries it to the app.
        let first = try XCTUnwrap(h.requests("05000003").first)
        let payload = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(first.body)) as? [String: Any])
        let deadline = try XCTUnwrap((payload["deadline"] as? NSNumber)?.int64Value)
        XCTAssertTrue(voip.allSatisfy { $0.sentAtMs < deadline }, "no VoIP attempt at or after the deadline: \(voip.map(\.sentAtMs)), \(deadline)")
        for push in h.requests("05000003") {
            let exp = Int64(push.header("apns-expiration") ?? "0") ?? 0
            XCTAssertLessThanOrEqual(exp * 1000, push.timeMs + 400, "no VoIP push outlives the deadline")
        }
    }

    func testAlertRetriesExhaustedGoToTheDeadLetters() throws {
        try start(["05000003": .unavailable, "dead0001": .unregistered])
        h.call("no-luck", voip: "dead0001", alert: "05000003")
        XCTAssertTrue(h.waitForRecords(1))
        let r = try XCTUnwrap(h.record("no-luck"))
        XCTAssertEqual(r.outcome, .deadLettered)
        XCTAssertEqual(r.reason, "retries_exhausted: alert")
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, 1)
        XCTAssertTrue(dead.first?.fields["event"]?.contains("no-luck") == true, "the original event is kept")
        XCTAssertTrue(dead.first?.fields["attempts"]?.contains("\"status\":503") == true, "with every attempt")
    }

    // MARK: Auth and config

    func testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() throws {
        try start(["e0e00001": .expiredProviderToken(1)])
        h.call("renew", voip: "e0e00001")
        XCTAssertTrue(h.waitForRecords(1))
        let sent = h.requests("e0e00001")
        XCTAssertEqual(sent.map(\.status), [403, 200], "APNs said ExpiredProviderToken, then took the resend")
        XCTAssertEqual(sent.first?.reason, .expiredProviderToken)
        XCTAssertEqual(h.record("renew")?.outcome, .deliveredVoip)
        XCTAssertEqual(h.record("renew")?.attempts.map(\.status), [200], "the resend is not an attempt, and the 403 is not one")
        let client = try h.pools.client(credential: "good", environment: .production)
        XCTAssertEqual(client.stats.resentAfterTokenRenewal, 1)
        XCTAssertEqual(h.runner.stats.retriesScheduled, 0, "nor a retry")
        // The token is minutes old: a new one would earn TooManyProviderTokenUpdates, so the
        // resend carries the same token (renewal after 20 minutes is ApnsClientTests' case).
        XCTAssertEqual(Set(sent.compactMap { $0.header("authorization") }).count, 1)
    }

    func testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() throws {
        try start()
        h.call("b1", voip: "a0a0", alert: "b0b0", app: "broken")
        h.call("t1", voip: "a0a0", alert: "b0b0", app: "other")
        h.call("ok1", voip: "a0a0", alert: "b0b0", app: "acme")
        XCTAssertTrue(h.waitForRecords(3))
        let broken = try XCTUnwrap(h.recorded.first { $0.app == "broken" }?.record)
        XCTAssertEqual(broken.outcome, .deadLettered)
        XCTAssertEqual(broken.reason, "apns_credentials: InvalidProviderToken")
        let other = try XCTUnwrap(h.recorded.first { $0.app == "other" }?.record)
        XCTAssertEqual(other.outcome, .deadLettered)
        XCTAssertTrue(other.reason?.hasPrefix("apns_config: ") == true, "\(other.reason ?? "")")
        XCTAssertEqual(h.recorded.first { $0.app == "acme" }?.record.outcome, .deliveredVoip)
        XCTAssertNotNil(h.runner.unhealthyApps["broken"], "the broken app is marked unhealthy")
        XCTAssertNil(h.runner.unhealthyApps["acme"])
        XCTAssertEqual(h.entries(h.keys("broken").dead).count, 1)
    }

    func testPayloadRefusedByAPNsFallsBackToTheAlert() throws {
        try start(["b1660001": .payloadTooLarge])
        h.call("big", voip: "b1660001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.record("big")?.outcome, .deliveredAlert)
        XCTAssertEqual(h.record("big")?.cause, .payload)
    }

    // MARK: Outcomes

    func testEveryOtherOutcome() throws {
        try start(["dead0001": .unregistered, "dead0002": .unregistered, "05000003": .unavailable])
        h.call("undeliverable", voip: "dead0001", alert: "dead0002")
        h.call("expired", voip: "a0a0", deadlineInMs: -1_000)
        h.call("missed", voip: "a0a1", alert: "a1e7", deadlineInMs: -1_000)
        h.call("alert-only", alert: "a1e8")
        XCTAssertTrue(h.waitForRecords(4))
        XCTAssertEqual(h.record("undeliverable")?.outcome, .undeliverable)
        XCTAssertEqual(h.record("expired")?.outcome, .expired)
        XCTAssertEqual(h.record("missed")?.outcome, .deliveredAlert)
        XCTAssertEqual(h.record("missed")?.cause, .deadline)
        XCTAssertTrue(h.requests("a0a0").isEmpty && h.requests("a0a1").isEmpty, "never a VoIP push after the deadline")
        XCTAssertEqual(h.record("alert-only")?.cause, .noVoipToken)
    }

    func testCancelStopsPendingRetries() throws {
        try start(["05000003": .unavailable], voipRetry: RetryPolicy(maxAttempts: 100, baseMs: 100, capMs: 200))
        h.call("ring", voip: "05000003", alert: "a1e7", deadlineInMs: 20_000)
        XCTAssertTrue(h.runUntil("the call's second VoIP attempt") { self.h.requests("05000003").count >= 2 })
        XCTAssertNil(h.record("ring"), "still retrying")
        h.xadd("acme", ["v": 1, "id": "ring", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.record("ring")?.outcome, .cancelled)
        let sent = h.requests("05000003").count
        h.runFor(400)
        XCTAssertEqual(h.requests("05000003").count, sent, "no VoIP push after the cancel")
        XCTAssertTrue(h.requests("a1e7").isEmpty, "no missed-call alert either")
        XCTAssertEqual(h.recorded.filter { $0.record.type == .callCancelled }.count, 1, "the cancel event has its own result")
    }

    func testCancelBeforeTheCallIsSeen() throws {
        try start()
        h.xadd("acme", ["v": 1, "id": "early", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(1))
        h.call("early", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.record("early")?.outcome, .cancelled)
        XCTAssertTrue(h.requests("a0a0").isEmpty)
    }

    func testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() throws {
        h = try RouterHarness(redis: Self.redisDeployment, startRouter: false)
        let count = 150
        for i in 0..<count { h.call("batch-\(i)", voip: String(format: "a%03x", i)) }
        let info = { self.h.command("INFO", "commandstats")?.string ?? "" }
        let before = info()
        h.runner.start()
        XCTAssertTrue(h.waitForRecords(count))
        let after = info()
        let calls = { (command: String) in commandCalls(command, inInfo: after) - commandCalls(command, inInfo: before) }
        XCTAssertEqual(Set(h.recorded.map(\.record.outcome)), [.deliveredVoip])
        XCTAssertEqual(Set(h.recorded.compactMap(\.record.id)).count, count, "one outcome per event")
        XCTAssertEqual(h.entries(h.keys("acme").results).count, count, "one result per event")
        XCTAssertEqual(h.entries(h.keys("acme").calls).count, 0, "every entry acknowledged and deleted")
        XCTAssertEqual(calls("mget"), 2, "two reads of at most 100 entries, one lookup each")
        XCTAssertLessThan(calls("evalsha") + calls("eval"), count / 2,
                          "outcomes reached in one loop turn share one recording script")
    }

    func testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() throws {
        // Both copies are read and looked up together, before either is done: the first takes
        // the call's in-flight claim and is pushed, the second waits for its outcome and is
        // answered with a `duplicate` result naming it (CallCopiesTests has the cases).
        h = try RouterHarness(redis: Self.redisDeployment, startRouter: false)
        h.call("twin", voip: "a0a0")
        h.call("twin", voip: "a0a0")
        _ = h.command("PING")
        h.runner.start()
        XCTAssertTrue(h.runUntil("both copies to be acknowledged") { self.h.entries(self.h.keys("acme").calls).isEmpty })
        XCTAssertTrue(h.waitForRecords(2), "both copies answered")
        let results = h.results()
        XCTAssertEqual(results.map { $0["outcome"] as? String }, ["delivered_voip", "duplicate"],
                       "one outcome per event id, and an answer for the copy")
        XCTAssertEqual(results.last?["first_outcome"] as? String, "delivered_voip")
        XCTAssertEqual(h.recorded.map(\.record.outcome), [.deliveredVoip, .duplicate], "the copy is not an outcome of its own")
        XCTAssertEqual(h.runner.stats.finished, ["delivered_voip": 1])
        XCTAssertEqual(h.runner.stats.duplicates, 1)
        XCTAssertEqual(h.requests("a0a0").count, 1, "a copy routed with its original is not pushed again")
    }

    func testTheLineACallWritesIsInfoUnlessItsRateIsZero() throws {
        // Capped at log.calls_per_second (docs/operations.md, Logs); 0 writes none.
        for (level, perSecond, expected) in [(Log.Level.info, 100, 1), (.debug, 100, 1), (.warn, 100, 0), (.info, 0, 0)] {
            var lines: [String] = []
            let h = try RouterHarness(redis: Self.redisDeployment, settings: { $0.callLinesPerSecond = perSecond },
                                      routerLog: Log(minimum: level, write: { lines.append($0) }))
            defer { h.close() }
            h.call("logged-\(level)-\(perSecond)", voip: "a0a0")
            XCTAssertTrue(h.waitForRecords(1))
            let finished = lines.filter { $0.contains(#""msg":"call finished""#) }
            XCTAssertEqual(finished.count, expected, "at \(level), \(perSecond)/s: \(lines)")
            if expected == 1 { XCTAssertTrue(finished[0].contains(#""level":"info""#), finished[0]) }
        }
    }

    func testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() throws {
        var lines: [String] = []
        h = try RouterHarness(redis: Self.redisDeployment, routerLog: Log(minimum: .debug, write: { lines.append($0) }))
        h.call("dup", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(1))
        let second = h.call("dup", voip: "a0a0")
        h.call("after", voip: "a0a1")
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.requests("a0a0").count, 1, "the duplicate is not pushed")
        let answer = try XCTUnwrap(h.results().first { $0["outcome"] as? String == "duplicate" }, "the duplicate gets a result")
        XCTAssertEqual(answer["first_outcome"] as? String, "delivered_voip", "naming the first outcome")
        XCTAssertEqual(answer["id"] as? String, "dup")
        XCTAssertEqual(answer["type"] as? String, "incoming_call")
        XCTAssertEqual(answer["entry"] as? String, second, "and its own entry")
        XCTAssertEqual(h.results().count, 3)
        XCTAssertEqual(h.entries(h.keys("acme").calls).count, 0, "it is acknowledged")
        XCTAssertEqual(h.runner.stats.duplicates, 1, "counted")
        XCTAssertEqual(h.runner.stats.finished, ["delivered_voip": 2], "not as an outcome")
        XCTAssertTrue(lines.contains { $0.contains(#""msg":"duplicate event answered""#) && $0.contains(#""level":"debug""#) },
                      "logged at debug: \(lines)")
        let stored = h.command("GET", h.keys("acme").result("dup"))?.string ?? ""
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"delivered_voip""#), "the id's result stays the first outcome: \(stored)")
    }

    // MARK: The contract answers every event (docs/protocol.md, How an event ends)

    func testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() throws {
        try start()
        let notJSON = h.xaddRaw("acme", "not json")
        let array = h.xaddRaw("acme", "[1,2]")
        let noField = h.xaddRaw("acme", "{}", field: "wrong_field")
        let badVersion = h.xaddRaw("acme", #"{"v":2,"id":"v2-call","type":"incoming_call","voip_token":"ab"}"#)
        let notUTF8 = h.xaddRaw("acme", bytes: Array(#"{"v":1,"id":"utf-"#.utf8) + [0xFF] + Array(#"","type":"call_cancelled"}"#.utf8))
        XCTAssertTrue(h.waitForRecords(5))
        let byEntry = Dictionary(h.results().map { ($0["entry"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        for entry in [notJSON, array, noField, badVersion, notUTF8] {
            let r = try XCTUnwrap(byEntry[entry], "a result names entry \(entry), what the producer's XADD returned")
            XCTAssertEqual(r["outcome"] as? String, "dead_lettered")
            XCTAssertEqual(r["app"] as? String, "acme")
            XCTAssertTrue((r["reason"] as? String)?.hasPrefix("invalid_event: ") == true)
        }
        XCTAssertNil(byEntry[notJSON]?["id"], "no id could be read")
        XCTAssertEqual(byEntry[badVersion]?["id"] as? String, "v2-call", "the id, read although v was refused first")
        XCTAssertEqual(byEntry[badVersion]?["type"] as? String, "incoming_call")
        XCTAssertEqual(byEntry[notUTF8]?["reason"] as? String, "invalid_event: event: not valid UTF-8 at byte 17")
        XCTAssertNil(byEntry[notUTF8]?["id"], "bytes that are not UTF-8 are not read for an id")
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 5)
    }

    func testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() throws {
        try start()
        h.xadd("acme", ["v": 1, "id": "fix-me", "type": "incoming_call", "voip_token": "not-hex"])
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.recorded.first?.record.outcome, .deadLettered)
        XCTAssertEqual(h.recorded.first?.record.id, "fix-me")
        h.call("fix-me", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.recorded.last?.record.outcome, .deliveredVoip, "an invalid event does not claim its id")
        XCTAssertEqual(h.requests("a0a0").count, 1)
        let stored = h.command("GET", h.keys("acme").result("fix-me"))?.string ?? ""
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"delivered_voip""#), "the id's result is the corrected event's: \(stored)")
        // A broken copy sent after the outcome is still dead-lettered with its reason (bad
        // input is never dropped), and does not replace the outcome.
        h.xadd("acme", ["v": 1, "id": "fix-me", "type": "incoming_call", "voip_token": "still-not-hex"])
        XCTAssertTrue(h.waitForRecords(3))
        XCTAssertEqual(h.recorded.last?.record.outcome, .deadLettered)
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 2, "both invalid events are dead letters")
        XCTAssertEqual(h.command("GET", h.keys("acme").result("fix-me"))?.string, stored, "the outcome stands")
    }

    func testAResultIsFoundByIdWithoutReadingTheStream() throws {
        try start()
        let entry = h.call("find-me", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(1))
        let key = "pushgw:{acme}:result:find-me"  // as docs/protocol.md writes it
        let stored = try XCTUnwrap(h.command("GET", key)?.string, "GET \(key)")
        XCTAssertEqual(stored, h.entries(h.keys("acme").results).first?.fields["result"], "the same JSON as the results stream's")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        XCTAssertEqual(json["outcome"] as? String, "delivered_voip")
        XCTAssertEqual(json["entry"] as? String, entry)
        let ttl = h.command("TTL", key)?.integer ?? -1
        XCTAssertTrue((86_000...86_400).contains(ttl), "kept whole for the result window (24 h by default): \(ttl)")
        h.xadd("acme", ["v": 1, "id": "find-me", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(2))
        let cancel = h.command("GET", "pushgw:{acme}:cancel-result:find-me")?.string ?? ""
        XCTAssertTrue(cancel.contains(#""type":"call_cancelled""#), "a cancel event's own result, by id: \(cancel)")
        let cancelTTL = h.command("TTL", "pushgw:{acme}:cancel-result:find-me")?.integer ?? -1
        XCTAssertTrue((86_000...86_400).contains(cancelTTL), "an end event's own result is kept whole for the window: \(cancelTTL)")
    }

    func testAnUpperCaseCopyOfADeadTokenIsSkipped() throws {
        try start(["dead0001": .unregistered])
        h.call("lower", voip: "dead0001", alert: "a1e7")
        XCTAssertTrue(h.waitForRecords(1))
        h.call("upper", voip: "DEAD0001", alert: "A1E7")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests("dead0001").count, 1, "the token APNs declared dead is not pushed again in upper case")
        XCTAssertEqual(h.record("upper")?.cause, .voipTokenInvalid)
        XCTAssertEqual(h.record("upper")?.outcome, .deliveredAlert)
        XCTAssertEqual(h.entries(h.keys("acme").feedback).compactMap { $0.fields["token"] }, ["dead0001"])
    }

    func testAMicrosecondDeadlineIsRefusedNamingTheField() throws {
        try start()
        h.call("micro", voip: "a0a0", extra: ["deadline": Clock.unixMs() * 1000])
        XCTAssertTrue(h.waitForRecords(1))
        let r = try XCTUnwrap(h.recorded.first?.record)
        XCTAssertEqual(r.outcome, .deadLettered)
        XCTAssertTrue(r.reason?.hasPrefix("invalid_event: deadline: ") == true, r.reason ?? "")
        XCTAssertTrue(r.reason?.contains("microseconds?") == true, "the likely unit is named: \(r.reason ?? "")")
        XCTAssertTrue(h.requests("a0a0").isEmpty, "nothing is pushed with an expiration decades ahead")
    }

    func testACancelReadWithItsCallSendsNoVoipPush() throws {
        h = try RouterHarness(redis: Self.redisDeployment, startRouter: false)
        h.call("hung-up", voip: "a0a0", alert: "a1e7")
        h.xadd("acme", ["v": 1, "id": "hung-up", "type": "call_cancelled"])
        h.runner.start()
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.record("hung-up")?.outcome, .cancelled, "the cancel wins")
        XCTAssertTrue(h.requests("a0a0").isEmpty, "no VoIP push for a call cancelled in the same read")
        XCTAssertTrue(h.requests("a1e7").isEmpty, "no missed-call alert either")
    }

    // MARK: Bad input

    func testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() throws {
        try start()
        let corpus: [(String, String)] = [
            ("not json", "not JSON"),
            ("[1,2]", "event"),
            (#"{"v":1,"type":"incoming_call","voip_token":"ab"}"#, "id"),
            (#"{"v":1,"id":"bad-1","type":"ringing","voip_token":"ab"}"#, "type"),
            (#"{"v":1,"id":"bad-2","type":"incoming_call"}"#, "voip_token"),
            (#"{"v":1,"id":"bad-3","type":"incoming_call","voip_token":"xyz"}"#, "voip_token"),
            (#"{"v":1,"id":"bad-4","type":"incoming_call","voip_token":"abc"}"#, "voip_token"),
            (#"{"v":1,"id":"bad-5","type":"incoming_call","voip_token":"ab","deadline":"soon"}"#, "deadline"),
            (#"{"v":1,"id":"bad-6","type":"incoming_call","voip_token":"ab","sandbox":"yes"}"#, "sandbox"),
            (#"{"v":2,"id":"bad-7","type":"incoming_call","voip_token":"ab"}"#, "v"),
            (#"{"v":1,"id":"bad-8","type":"incoming_call","voip_token":"ab","voip":{"p":"\#(String(repeating: "x", count: 6000))"}}"#, "voip"),
            (#"{"v":1,"id":"bad-9","type":"incoming_call","alert_token":"ab","alert":"hi"}"#, "alert"),
        ]
        for (text, _) in corpus { h.xaddRaw("acme", text) }
        h.xaddRaw("acme", "{}", field: "wrong_field")
        h.call("still-alive", voip: "a0a0")
        XCTAssertTrue(h.waitForRecords(corpus.count + 2))
        // Ids are the idempotency key, so each malformed event above has its own.
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, corpus.count + 1, "every malformed entry is dead-lettered, none dropped")
        for (i, (text, field)) in corpus.enumerated() where i < dead.count {
            let entry = dead[i]
            XCTAssertEqual(entry.fields["event"], text, "the original text is kept")
            XCTAssertTrue(entry.fields["reason"]?.hasPrefix("invalid_event: \(field)") == true,
                          "reason names \(field): \(entry.fields["reason"] ?? "")")
        }
        XCTAssertTrue(dead.last?.fields["reason"]?.contains("event") == true)
        XCTAssertTrue(h.results().allSatisfy { $0["entry"] is String }, "every result names its calls entry")
        XCTAssertEqual(h.record("still-alive")?.outcome, .deliveredVoip, "the process is alive and still delivering")
        XCTAssertEqual(h.entries(h.keys("acme").calls).count, 0)
    }

    // MARK: Isolation

    func testOneAppsFloodDoesNotDelayAnother() throws {
        // acme's pushes are never answered, so its 20 in-flight slots stay taken while its flood
        // waits in the stream; beta's call must not wait behind it.
        h = try RouterHarness(redis: Self.redisDeployment, simulator: { $0.defaultScenario = .blackhole },
                              settings: { $0.perAppInFlight = 20 })
        h.sim.simulator.setScenario(.ok, for: "fa57")
        h.call("warm-up", voip: "fa57", app: "beta")
        XCTAssertTrue(h.waitForRecords(1))
        for i in 0..<200 { h.call("flood-\(i)", voip: String(format: "%04x", 0x1000 + i), app: "acme") }
        XCTAssertTrue(h.runUntil("acme's 20 pushes to be out") { self.h.sim.simulator.stats.unanswered >= 20 })
        h.call("quick", voip: "fa57", app: "beta")
        XCTAssertTrue(h.runUntil("beta's call to be recorded") { self.h.recorded.contains { $0.record.id == "quick" } })
        XCTAssertEqual(h.recorded.filter { $0.app == "acme" }.count, 0, "beta's call did not wait for any of acme's")
        XCTAssertEqual(h.runner.stats.retriesScheduled, 0, "nor for a slot of acme's to free up (by a timeout and a retry)")
        XCTAssertGreaterThanOrEqual(h.command("XLEN", h.keys("acme").calls)?.integer ?? 0, 180, "acme's flood was still waiting")
    }
}

/// Entries of dead consumers are taken over; one that keeps coming back is poison. On each
/// Redis deployment, as `RouterIntegrationTests`.
class TakeOverTests: XCTestCase {
    /// How the gateway of this class's tests reaches Redis.
    class var redisDeployment: RedisDeployment { .tcp }

    func testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() throws {
        let h = try RouterHarness(redis: Self.redisDeployment, settings: {
            $0.claimEveryMs = 100; $0.fullClaimSweepEveryMs = 100; $0.claimMinIdleMs = 0; $0.ownEntriesIdleMs = 300
        }, startRouter: false)
        defer { h.close() }
        let stream = h.keys("acme").calls
        _ = try h.redis.cli(["XGROUP", "CREATE", stream, "pushgw", "0", "MKSTREAM"])
        h.call("forgotten", voip: "a0a0")
        // Delivered to this process's consumer, as when a lookup or a record failed on a Redis
        // error: pending in Redis, unknown to the router, and no other process will take it.
        let read = try h.redis.cli(["XREADGROUP", "GROUP", "pushgw", h.consumer, "COUNT", "1", "STREAMS", stream, ">"])
        XCTAssertTrue(read.contains("forgotten"), read)
        h.runner.start()
        XCTAssertTrue(h.waitForRecords(1), "the sweep finds its own idle entry")
        XCTAssertEqual(h.record("forgotten")?.outcome, .deliveredVoip)
        XCTAssertEqual(h.requests("a0a0").count, 1, "pushed once")
        XCTAssertEqual(h.entries(stream).count, 0, "acknowledged with its outcome")
        XCTAssertEqual(h.runner.stats.claimed, 1)
    }

    func testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() throws {
        let h = try RouterHarness(redis: Self.redisDeployment,
                                  settings: { $0.claimEveryMs = 200; $0.claimMinIdleMs = 0; $0.redeliveryLimit = 4 },
                                  startRouter: false)
        defer { h.close() }
        let stream = h.keys("acme").calls
        _ = try h.redis.cli(["XGROUP", "CREATE", stream, "pushgw", "0", "MKSTREAM"])
        h.call("orphan", voip: "a0a0")
        h.call("poison", voip: "a0a1")
        // A consumer that then dies (it never heart-beats) takes both entries.
        let read = try h.redis.cli(["XREADGROUP", "GROUP", "pushgw", "ghost", "COUNT", "2", "STREAMS", stream, ">"])
        XCTAssertTrue(read.contains("orphan") && read.contains("poison"), "the ghost holds both entries: \(read)")
        // Crashes that keep re-delivering the poison entry: each claim bumps its delivery count.
        let lines = read.split(separator: "\n").map(String.init)
        let poisonID = try XCTUnwrap(lines.firstIndex { $0.contains("\"poison\"") }.map { lines[$0 - 2] })
        for ghost in ["ghost2", "ghost3"] {
            _ = try h.redis.cli(["XCLAIM", stream, "pushgw", ghost, "0", poisonID])
        }
        h.runner.start()
        XCTAssertTrue(h.waitForRecords(2), "both entries get an outcome after the take-over")
        XCTAssertEqual(h.record("orphan")?.outcome, .deliveredVoip, "a dead consumer's entry is routed by a live one")
        let poison = try XCTUnwrap(h.record("poison"))
        XCTAssertEqual(poison.outcome, .deadLettered)
        XCTAssertEqual(poison.reason, "redelivery_limit: delivered 4 times")
        XCTAssertTrue(h.requests("a0a1").isEmpty, "a poison entry is not pushed again")
        XCTAssertEqual(h.runner.stats.claimed, 2)
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 1)
    }

    /// A claim round while no app is configured (a reload removed them all) arms the claim
    /// timer again: once apps are back, a dead consumer's entries are taken over. Before, the
    /// round never ended and take-overs stopped for the life of the process.
    func testTakeOversGoOnAfterAReloadLeftNoAppForARound() throws {
        let h = try RouterHarness(redis: Self.redisDeployment,
                                  settings: { $0.claimEveryMs = 100; $0.claimMinIdleMs = 0; $0.fullClaimSweepEveryMs = 120_000 },
                                  startRouter: false)
        defer { h.close() }
        h.runner.start()
        h.runFor(300)
        h.runner.updateApps([])
        h.runFor(300)
        let stream = h.keys("acme").calls
        h.call("after-reload", voip: "a0b0")
        // A consumer that read it (this router reads no app now) and died: registered, its
        // lease lapsed a second ago.
        let read = try h.redis.cli(["XREADGROUP", "GROUP", "pushgw", "ghost-after-reload", "COUNT", "1", "STREAMS", stream, ">"])
        XCTAssertTrue(read.contains("after-reload"), "the ghost holds the entry: \(read)")
        let time = try h.redis.cli(["TIME"]).split(separator: "\n").compactMap { Int64($0) }
        _ = try h.redis.cli(["ZADD", "pushgw:consumers", String(time[0] * 1000 - 1_000), "ghost-after-reload"])
        h.runFor(500)  // claim rounds with no app, a lapsed consumer in the registry
        h.runner.updateApps(h.apps)
        XCTAssertTrue(h.waitForRecords(1, timeoutMs: 10_000), "the dead consumer's entry is taken over after the reload")
        XCTAssertEqual(h.record("after-reload")?.outcome, .deliveredVoip)
        XCTAssertEqual(h.requests("a0b0").count, 1)
    }
}

/// Entries pending on a consumer that never registered — a producer whose ACL let it read the
/// calls stream as the group, or a registry lost with Redis — are taken over a page per claim
/// round while pages come full, as a lapsed consumer's are, not one page per full sweep.
final class UnknownConsumerTakeOverTests: XCTestCase {
    func testEntriesOfAnUnregisteredConsumerAreTakenOverAtTheNormalRate() throws {
        let h = try RouterHarness(settings: {
            $0.claimEveryMs = 100; $0.claimMinIdleMs = 0; $0.fullClaimSweepEveryMs = 120_000
        }, startRouter: false)
        defer { h.close() }
        let stream = h.keys("acme").calls
        _ = try h.redis.cli(["XGROUP", "CREATE", stream, "pushgw", "0", "MKSTREAM"])
        let count = 2_500   // two full pages of 1,000 and a half one
        for i in 0..<count { h.call("held-\(i)", voip: String(format: "b0%06x", i)) }
        let read = try h.redis.cli(["XREADGROUP", "GROUP", "pushgw", "acme-backend", "COUNT", String(count), "STREAMS", stream, ">"])
        XCTAssertTrue(read.contains("held-\(count - 1)"), "a consumer that never registered holds every entry")
        h.runner.start()
        // The first full sweep runs at start; the next is two minutes away: only sweeping again
        // while pages come full finishes within the limit.
        XCTAssertTrue(h.waitForRecords(count, timeoutMs: 30_000), "every held entry taken over and routed")
        XCTAssertEqual(h.runner.stats.claimed, count)
        XCTAssertEqual(h.entries(stream).count, 0)
    }
}

/// `RouterIntegrationTests` over TLS (`rediss://`).
final class RouterIntegrationOverTLSTests: RouterIntegrationTests {
    override class var redisDeployment: RedisDeployment { .tls }

    override func testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() throws { try super.testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() }
    override func testGoneVoipTokensFallBackToTheAlertWithFeedback() throws { try super.testGoneVoipTokensFallBackToTheAlertWithFeedback() }
    override func testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() throws { try super.testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() }
    override func testTransientFailuresAreRetriedThenDelivered() throws { try super.testTransientFailuresAreRetriedThenDelivered() }
    override func testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() throws { try super.testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() }
    override func testAlertRetriesExhaustedGoToTheDeadLetters() throws { try super.testAlertRetriesExhaustedGoToTheDeadLetters() }
    override func testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() throws { try super.testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() }
    override func testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() throws { try super.testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() }
    override func testPayloadRefusedByAPNsFallsBackToTheAlert() throws { try super.testPayloadRefusedByAPNsFallsBackToTheAlert() }
    override func testEveryOtherOutcome() throws { try super.testEveryOtherOutcome() }
    override func testCancelStopsPendingRetries() throws { try super.testCancelStopsPendingRetries() }
    override func testCancelBeforeTheCallIsSeen() throws { try super.testCancelBeforeTheCallIsSeen() }
    override func testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() throws { try super.testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() }
    override func testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() throws { try super.testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() }
    override func testTheLineACallWritesIsInfoUnlessItsRateIsZero() throws { try super.testTheLineACallWritesIsInfoUnlessItsRateIsZero() }
    override func testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() throws { try super.testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() }
    override func testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() throws { try super.testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() }
    override func testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() throws { try super.testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() }
    override func testAResultIsFoundByIdWithoutReadingTheStream() throws { try super.testAResultIsFoundByIdWithoutReadingTheStream() }
    override func testACancelReadWithItsCallSendsNoVoipPush() throws { try super.testACancelReadWithItsCallSendsNoVoipPush() }
    override func testAnUpperCaseCopyOfADeadTokenIsSkipped() throws { try super.testAnUpperCaseCopyOfADeadTokenIsSkipped() }
    override func testAMicrosecondDeadlineIsRefusedNamingTheField() throws { try super.testAMicrosecondDeadlineIsRefusedNamingTheField() }
    override func testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() throws { try super.testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() }
    override func testOneAppsFloodDoesNotDelayAnother() throws { try super.testOneAppsFloodDoesNotDelayAnother() }
}

/// `RouterIntegrationTests` over TLS with a client certificate.
final class RouterIntegrationOverMutualTLSTests: RouterIntegrationTests {
    override class var redisDeployment: RedisDeployment { .mutualTLS }

    override func testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() throws { try super.testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() }
    override func testGoneVoipTokensFallBackToTheAlertWithFeedback() throws { try super.testGoneVoipTokensFallBackToTheAlertWithFeedback() }
    override func testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() throws { try super.testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() }
    override func testTransientFailuresAreRetriedThenDelivered() throws { try super.testTransientFailuresAreRetriedThenDelivered() }
    override func testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() throws { try super.testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() }
    override func testAlertRetriesExhaustedGoToTheDeadLetters() throws { try super.testAlertRetriesExhaustedGoToTheDeadLetters() }
    override func testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() throws { try super.testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() }
    override func testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() throws { try super.testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() }
    override func testPayloadRefusedByAPNsFallsBackToTheAlert() throws { try super.testPayloadRefusedByAPNsFallsBackToTheAlert() }
    override func testEveryOtherOutcome() throws { try super.testEveryOtherOutcome() }
    override func testCancelStopsPendingRetries() throws { try super.testCancelStopsPendingRetries() }
    override func testCancelBeforeTheCallIsSeen() throws { try super.testCancelBeforeTheCallIsSeen() }
    override func testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() throws { try super.testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() }
    override func testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() throws { try super.testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() }
    override func testTheLineACallWritesIsInfoUnlessItsRateIsZero() throws { try super.testTheLineACallWritesIsInfoUnlessItsRateIsZero() }
    override func testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() throws { try super.testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() }
    override func testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() throws { try super.testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() }
    override func testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() throws { try super.testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() }
    override func testAResultIsFoundByIdWithoutReadingTheStream() throws { try super.testAResultIsFoundByIdWithoutReadingTheStream() }
    override func testACancelReadWithItsCallSendsNoVoipPush() throws { try super.testACancelReadWithItsCallSendsNoVoipPush() }
    override func testAnUpperCaseCopyOfADeadTokenIsSkipped() throws { try super.testAnUpperCaseCopyOfADeadTokenIsSkipped() }
    override func testAMicrosecondDeadlineIsRefusedNamingTheField() throws { try super.testAMicrosecondDeadlineIsRefusedNamingTheField() }
    override func testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() throws { try super.testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() }
    override func testOneAppsFloodDoesNotDelayAnother() throws { try super.testOneAppsFloodDoesNotDelayAnother() }
}

/// `RouterIntegrationTests` as the ACL user with the least permissions pushgw needs.
final class RouterIntegrationAsLeastPrivilegedUserTests: RouterIntegrationTests {
    override class var redisDeployment: RedisDeployment { .leastPrivilege }

    override func testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() throws { try super.testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() }
    override func testGoneVoipTokensFallBackToTheAlertWithFeedback() throws { try super.testGoneVoipTokensFallBackToTheAlertWithFeedback() }
    override func testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() throws { try super.testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() }
    override func testTransientFailuresAreRetriedThenDelivered() throws { try super.testTransientFailuresAreRetriedThenDelivered() }
    override func testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() throws { try super.testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() }
    override func testAlertRetriesExhaustedGoToTheDeadLetters() throws { try super.testAlertRetriesExhaustedGoToTheDeadLetters() }
    override func testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() throws { try super.testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() }
    override func testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() throws { try super.testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() }
    override func testPayloadRefusedByAPNsFallsBackToTheAlert() throws { try super.testPayloadRefusedByAPNsFallsBackToTheAlert() }
    override func testEveryOtherOutcome() throws { try super.testEveryOtherOutcome() }
    override func testCancelStopsPendingRetries() throws { try super.testCancelStopsPendingRetries() }
    override func testCancelBeforeTheCallIsSeen() throws { try super.testCancelBeforeTheCallIsSeen() }
    override func testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() throws { try super.testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() }
    override func testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() throws { try super.testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() }
    override func testTheLineACallWritesIsInfoUnlessItsRateIsZero() throws { try super.testTheLineACallWritesIsInfoUnlessItsRateIsZero() }
    override func testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() throws { try super.testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() }
    override func testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() throws { try super.testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() }
    override func testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() throws { try super.testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() }
    override func testAResultIsFoundByIdWithoutReadingTheStream() throws { try super.testAResultIsFoundByIdWithoutReadingTheStream() }
    override func testACancelReadWithItsCallSendsNoVoipPush() throws { try super.testACancelReadWithItsCallSendsNoVoipPush() }
    override func testAnUpperCaseCopyOfADeadTokenIsSkipped() throws { try super.testAnUpperCaseCopyOfADeadTokenIsSkipped() }
    override func testAMicrosecondDeadlineIsRefusedNamingTheField() throws { try super.testAMicrosecondDeadlineIsRefusedNamingTheField() }
    override func testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() throws { try super.testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() }
    override func testOneAppsFloodDoesNotDelayAnother() throws { try super.testOneAppsFloodDoesNotDelayAnother() }
}

/// `RouterIntegrationTests` through a sentinel that names the primary.
final class RouterIntegrationThroughSentinelTests: RouterIntegrationTests {
    override class var redisDeployment: RedisDeployment { .sentinel }

    override func testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() throws { try super.testAcceptedVoipPushIsDeliveredVoipAndAcknowledged() }
    override func testGoneVoipTokensFallBackToTheAlertWithFeedback() throws { try super.testGoneVoipTokensFallBackToTheAlertWithFeedback() }
    override func testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() throws { try super.testKnownInvalidTokenIsSkippedUnlessRegisteredAgainLater() }
    override func testTransientFailuresAreRetriedThenDelivered() throws { try super.testTransientFailuresAreRetriedThenDelivered() }
    override func testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() throws { try super.testRetriesStopAtTheDeadlineAndTheMissedCallAlertGoes() }
    override func testAlertRetriesExhaustedGoToTheDeadLetters() throws { try super.testAlertRetriesExhaustedGoToTheDeadLetters() }
    override func testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() throws { try super.testExpiredProviderTokenAnswerIsResentWithoutCountingAsAnAttempt() }
    override func testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() throws { try super.testBrokenCredentialsDeadLetterThatAppOnlyAndOthersAreUnaffected() }
    override func testPayloadRefusedByAPNsFallsBackToTheAlert() throws { try super.testPayloadRefusedByAPNsFallsBackToTheAlert() }
    override func testEveryOtherOutcome() throws { try super.testEveryOtherOutcome() }
    override func testCancelStopsPendingRetries() throws { try super.testCancelStopsPendingRetries() }
    override func testCancelBeforeTheCallIsSeen() throws { try super.testCancelBeforeTheCallIsSeen() }
    override func testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() throws { try super.testEventsReadTogetherAreLookedUpTogetherAndRecordedInBatches() }
    override func testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() throws { try super.testDuplicatesRoutedTogetherEndWithOneResultAndOneRecordedOutcome() }
    override func testTheLineACallWritesIsInfoUnlessItsRateIsZero() throws { try super.testTheLineACallWritesIsInfoUnlessItsRateIsZero() }
    override func testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() throws { try super.testADuplicateIsAnsweredWithTheFirstOutcomeAndNotPushedAgain() }
    override func testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() throws { try super.testEventsDeadLetteredBeforeTheirIdWasReadGetAResultWithTheirEntry() }
    override func testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() throws { try super.testACorrectedEventAfterAnInvalidOneWithTheSameIdIsRouted() }
    override func testAResultIsFoundByIdWithoutReadingTheStream() throws { try super.testAResultIsFoundByIdWithoutReadingTheStream() }
    override func testACancelReadWithItsCallSendsNoVoipPush() throws { try super.testACancelReadWithItsCallSendsNoVoipPush() }
    override func testAnUpperCaseCopyOfADeadTokenIsSkipped() throws { try super.testAnUpperCaseCopyOfADeadTokenIsSkipped() }
    override func testAMicrosecondDeadlineIsRefusedNamingTheField() throws { try super.testAMicrosecondDeadlineIsRefusedNamingTheField() }
    override func testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() throws { try super.testMalformedEventsAreDeadLetteredWithTheirReasonAndDeliveryGoesOn() }
    override func testOneAppsFloodDoesNotDelayAnother() throws { try super.testOneAppsFloodDoesNotDelayAnother() }
}

/// `TakeOverTests` over TLS.
final class TakeOverOverTLSTests: TakeOverTests {
    override class var redisDeployment: RedisDeployment { .tls }

    override func testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() throws { try super.testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() }
    override func testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() throws { try super.testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() }
    override func testTakeOversGoOnAfterAReloadLeftNoAppForARound() throws { try super.testTakeOversGoOnAfterAReloadLeftNoAppForARound() }
}

/// `TakeOverTests` over TLS with a client certificate.
final class TakeOverOverMutualTLSTests: TakeOverTests {
    override class var redisDeployment: RedisDeployment { .mutualTLS }

    override func testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() throws { try super.testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() }
    override func testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() throws { try super.testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() }
    override func testTakeOversGoOnAfterAReloadLeftNoAppForARound() throws { try super.testTakeOversGoOnAfterAReloadLeftNoAppForARound() }
}

/// `TakeOverTests` as the least-privileged ACL user.
final class TakeOverAsLeastPrivilegedUserTests: TakeOverTests {
    override class var redisDeployment: RedisDeployment { .leastPrivilege }

    override func testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() throws { try super.testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() }
    override func testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() throws { try super.testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() }
    override func testTakeOversGoOnAfterAReloadLeftNoAppForARound() throws { try super.testTakeOversGoOnAfterAReloadLeftNoAppForARound() }
}

/// `TakeOverTests` through a sentinel.
final class TakeOverThroughSentinelTests: TakeOverTests {
    override class var redisDeployment: RedisDeployment { .sentinel }

    override func testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() throws { try super.testAnEntryThisProcessLeftPendingIsRoutedAgainByItsSweep() }
    override func testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() throws { try super.testEntriesOfADeadConsumerAreTakenOverAndPoisonIsDeadLettered() }
    override func testTakeOversGoOnAfterAReloadLeftNoAppForARound() throws { try super.testTakeOversGoOnAfterAReloadLeftNoAppForARound() }
}

/// The deployments' classes above list every test of their base class.
final class RedisDeploymentListTests: XCTestCase {
    func testEveryEndToEndTestRunsOnEveryDeployment() throws {
        let file = "Tests/GatewayRolesTests/RouterIntegrationTests.swift"
        XCTAssertEqual(try testsMissingFromVariants(of: "RouterIntegrationTests", ["RouterIntegrationOverTLSTests", "RouterIntegrationOverMutualTLSTests", "RouterIntegrationAsLeastPrivilegedUserTests", "RouterIntegrationThroughSentinelTests"], in: file), [])
        XCTAssertEqual(try testsMissingFromVariants(of: "TakeOverTests", ["TakeOverOverTLSTests", "TakeOverOverMutualTLSTests", "TakeOverAsLeastPrivilegedUserTests", "TakeOverThroughSentinelTests"], in: file), [])
        XCTAssertEqual(try testsMissingFromVariants(of: "DeadLettersCLITests", ["DeadLettersCLIOverTLSTests", "DeadLettersCLIAsLeastPrivilegedUserTests",
                                                                          "DeadLettersCLIThroughSentinelTests"],
                                                    in: "Tests/PushgwCommandsTests/DeadLettersCLITests.swift"), [])
    }
}
