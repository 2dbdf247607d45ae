import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import CallStorage
import RedisClient
import Retry
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// The durable retry schedule end to end: a call that must wait leaves the router's
/// memory and the calls stream for the schedule in Redis, the mover puts it back when due,
/// and a router — any router — resumes it where it stopped.
final class RetryIntegrationTests: XCTestCase {
    private var h: RouterHarness!

    override func tearDown() {
        h?.close()
        h = nil
    }

    /// VoIP token `0a290002` always gets 429: with this policy its one retry waits 1–2 s
    /// (throttled: between half the cap and the cap), long enough to look at it.
    private let throttled = "0a290002"
    private let slowRetry = RetryPolicy(maxAttempts: 2, baseMs: 100, capMs: 2_000)

    func testAWaitingCallIsInTheScheduleOnlyThenComesBackAndFinishesWithItsHistory() throws {
        h = try RouterHarness(simulator: { $0.scenarios = [self.throttled: .tooMany] }, voipRetry: slowRetry)
        let acme = h.keys("acme")
        h.call("wait", voip: throttled, alert: "a1e7")
        XCTAssertTrue(h.runUntil("the 429's retry to be scheduled") { self.h.runner.stats.retriesScheduled == 1 })
        XCTAssertEqual(h.runner.inFlight, 0, "the waiting call left the process's memory")
        XCTAssertEqual(h.command("XLEN", acme.calls)?.integer, 0, "its entry is acknowledged and deleted")
        XCTAssertEqual(h.command("XPENDING", acme.calls, "pushgw")?.array?.first?.integer, 0)
        let member = try XCTUnwrap(h.command("ZRANGE", acme.retrySchedule, "0", "-1", "WITHSCORES")?.array)
        XCTAssertEqual(member.count, 2, "one retry in the app's schedule")
        let id = member[0].string ?? "", due = Int64(member[1].string ?? "") ?? 0
        XCTAssertEqual(h.command("ZSCORE", GatewayKeys().retryDue, "acme")?.string, String(due), "the due index knows it")
        let state = try XCTUnwrap(h.command("HGET", acme.retryData, id + ":state")?.string)
        let snapshot = try WaitingCall.decode(state)
        XCTAssertEqual(snapshot.callID, "wait")
        XCTAssertEqual(snapshot.stage, .voip(attemptsMade: 1))
        XCTAssertEqual(snapshot.attempts.map(\.status), [429])
        // A 429 waits between half the cap and the cap (1–2 s), counted from the decision, which
        // came after the push was sent and before this read.
        let sent = try XCTUnwrap(snapshot.attempts.first?.sentAtMs)
        XCTAssertGreaterThanOrEqual(due - sent, 1_000, "due at least cap/2 after the 429")
        XCTAssertLessThanOrEqual(due, Clock.unixMs() + 2_000, "due at most the cap after the decision")
        XCTAssertTrue(h.command("HGET", acme.retryData, id + ":event")?.string?.contains("\"id\":\"wait\"") == true)

        XCTAssertTrue(h.waitForRecords(1))
        let r = try XCTUnwrap(h.record("wait"))
        XCTAssertEqual(r.outcome, .deliveredAlert)
        XCTAssertEqual(r.cause, .retriesExhausted)
        XCTAssertEqual(r.attempts.map(\.status), [429, 429, 200], "the attempt before the wait is in the record")
        let retried = try XCTUnwrap(h.requests(throttled).last)
        XCTAssertGreaterThanOrEqual(retried.timeMs, due, "the retry left at or after its due time")
        XCTAssertEqual(h.mover.stats.moved, 1)
        XCTAssertEqual(h.runner.stats.retriesFired, 1)
        XCTAssertEqual(h.runner.stats.retriesScheduledByChannel, ["voip": 1])
        XCTAssertEqual(h.runner.stats.claimed, 0, "an error retry is not a crash redelivery")
        XCTAssertEqual(h.command("EXISTS", acme.retrySchedule, acme.retryData, acme.retryByCall, GatewayKeys().retryDue)?.integer, 0,
                       "nothing left in the schedule")
    }

    func testARetryScheduledByOneRouterIsResumedByAnother() throws {
        h = try RouterHarness(simulator: { $0.scenarios = [self.throttled: .tooMany] }, voipRetry: slowRetry, startMover: false)
        h.call("handover", voip: throttled, alert: "a1e7")
        XCTAssertTrue(h.runUntil("the 429's retry to be scheduled") { self.h.runner.stats.retriesScheduled == 1 })
        h.sim.simulator.setScenario(.ok, for: throttled)
        // The first router stops; another one, with its own store and consumer name, takes over.
        var drained = false
        h.runner.drain(timeoutMs: 1_000) { drained = true }
        XCTAssertTrue(h.runUntil("the first router to drain") { drained })
        let url = try RedisURL(parsing: h.redis.url)
        let store = CallStore(config: CallStore.Config(), apps: h.apps.map(\.keys),
                              topology: .own(loop: h.loop, redis: RedisConnection.Config(url: url), cluster: nil, clientName: "pushgw-write"))
        var settings = RouterRoleSettings(consumer: "second")
        settings.blockMs = 100
        let second = RouterRole(loop: h.loop, store: store, pools: h.pools, fcmPools: FcmPools(loop: h.loop, config: h.config), apps: h.apps, settings: settings,
                                   log: Log(minimum: .error))
        let outcomes = RecordedOutcomes()
        second.observations = outcomes
        var records: [OutcomeRecord] { outcomes.all.map(\.record) }
        store.start()
        second.start()
        h.mover.start()
        XCTAssertTrue(h.runUntil("the second router's record") { !records.isEmpty })
        XCTAssertEqual(records.first?.outcome, .deliveredVoip)
        XCTAssertEqual(records.first?.attempts.map(\.status), [429, 200], "resumed with the first router's history")
        XCTAssertEqual(second.stats.retriesFired, 1)
        var done = false
        second.drain(timeoutMs: 1_000) { done = true }
        h.runUntil("the second router to drain") { done }
        store.close()
    }

    func testARetryTheDueIndexLostIsFoundByTheMoversRepairAtStart() throws {
        h = try RouterHarness(simulator: { $0.scenarios = [self.throttled: .tooMany] }, voipRetry: slowRetry, startMover: false)
        h.call("lost-hint", voip: throttled, alert: "a1e7")
        XCTAssertTrue(h.runUntil("the 429's retry to be scheduled") { self.h.runner.stats.retriesScheduled == 1 })
        h.sim.simulator.setScenario(.ok, for: throttled)
        // As if the process had died between its schedule step and the index command.
        h.command("DEL", GatewayKeys().retryDue)
        h.mover.start()
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.record("lost-hint")?.outcome, .deliveredVoip)
        XCTAssertEqual(h.mover.stats.moved, 1, "moved once, after the repair put the app back in the index")
    }

    func testACancelRemovesTheScheduledRetryAtOnceAndRecordsTheCallCancelled() throws {
        h = try RouterHarness(simulator: { $0.scenarios = [self.throttled: .tooMany] }, voipRetry: slowRetry)
        h.call("hang-up", voip: throttled, alert: "a1e7")
        XCTAssertTrue(h.runUntil("the 429's retry to be scheduled") { self.h.runner.stats.retriesScheduled == 1 })
        let due = Int64(h.command("ZRANGE", h.keys("acme").retrySchedule, "0", "0", "WITHSCORES")?.array?.last?.string ?? "") ?? 0
        h.xadd("acme", ["v": 1, "id": "hang-up", "type": "call_cancelled"])
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.mover.stats.moved, 0, "the cancel removed the retry: it was not waited for and moved back")
        XCTAssertEqual(h.runner.stats.retriesFired, 0)
        let r = try XCTUnwrap(h.record("hang-up"))
        XCTAssertEqual(r.outcome, .cancelled)
        XCTAssertEqual(r.attempts.map(\.status), [429], "the call's record keeps the attempt made before the wait")
        XCTAssertEqual(h.runner.stats.retriesCancelled, 1)
        XCTAssertEqual(h.command("ZCARD", h.keys("acme").retrySchedule)?.integer, 0)
        h.runFor(Swift.max(0, due - Clock.unixMs()) + 200)
        XCTAssertEqual(h.requests(throttled).count, 1, "no VoIP push after the cancel")
        XCTAssertTrue(h.requests("a1e7").isEmpty, "and no missed-call alert")
        XCTAssertEqual(h.mover.stats.moved, 0)
        XCTAssertEqual(h.entries(h.keys("acme").results).count, 2, "one result for the call, one for the cancel event")
    }

    func testACallCancelledWhileItsPushIsOutIsNotScheduled() throws {
        // The push is never answered: after the client's 2 s timeout the router wants a retry.
        h = try RouterHarness(simulator: { $0.scenarios = ["b1ac0001": .blackhole] }, voipRetry: slowRetry)
        h.call("out", voip: "b1ac0001", alert: "a1e7")
        XCTAssertTrue(h.runUntil("the push to reach APNs") { !self.h.requests("b1ac0001").isEmpty })
        // The cancellation marker, recorded behind this router's back (as another process
        // would): the schedule step must meet it and schedule nothing.
        h.command("SET", h.keys("acme").cancelled("out"), "1")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.record("out")?.outcome, .cancelled)
        XCTAssertNotNil(h.record("out")?.attempts.first?.error, "the timed-out attempt is recorded")
        XCTAssertEqual(h.runner.stats.retriesScheduled, 0)
        XCTAssertEqual(h.command("ZCARD", h.keys("acme").retrySchedule)?.integer, 0)
    }

    /// A `retry` field is trusted only with pushgw's MAC (`RetrySigner`): a well-formed snapshot
    /// a producer wrote — a fake entry id and attempt history — is dead-lettered, not resumed,
    /// and so is one with a wrong MAC or another app's; the same snapshot signed with the
    /// deployment's key (read from Redis, as a router has it) is resumed with its history.
    func testAWellFormedRetryPushgwDidNotSignIsDeadLetteredNotUsed() throws {
        h = try RouterHarness()
        let keyName = GatewayKeys().retrySigningKey
        h.runUntil("the router to create the signing key") { (try? h.redis.cli(["GET", keyName]))?.count == 65 }
        let deploymentKey = try h.redis.cli(["GET", keyName]).trimmingCharacters(in: .whitespacesAndNewlines)
        let signer = RetrySigner()
        XCTAssertTrue(signer.adopt(deploymentKey))
        let t = Clock.unixMs()
        func forged(_ id: String, token: String) -> (event: String, state: String) {
            let event = #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"\#(token)"}"#
            let state = WaitingCall(callID: id, stage: .voip(attemptsMade: 1), dueAtMs: t, deadlineMs: t + 30_000, entryTimeMs: t - 1_000,
                                    entryID: "1-1", alertUsable: false,
                                    attempts: [AttemptRecord(sentAtMs: t - 900, channel: .voip, status: 503, reason: "ServiceUnavailable",
                                                             error: nil, apnsID: nil)],
                                    lastAnswerAtMs: t - 800, firstFailureAtMs: t - 800).json()
            return (event, state)
        }
        let calls = h.keys("acme").calls
        var entries: [String: String] = [:]
        let unsigned = forged("unsigned", token: "f0f0")
        entries["unsigned"] = h.command("XADD", calls, "*", "event", unsigned.event, "retry", unsigned.state)?.string
        let wrong = forged("wrong-mac", token: "f0f1")
        entries["wrong-mac"] = h.command("XADD", calls, "*", "event", wrong.event, "retry", wrong.state,
                                         "retry_mac", String(repeating: "0", count: 64))?.string
        let elsewhere = forged("other-app", token: "f0f2")
        entries["other-app"] = h.command("XADD", calls, "*", "event", elsewhere.event, "retry", elsewhere.state, "retry_mac",
                                         signer.sign(app: "other", event: Array(elsewhere.event.utf8), state: Array(elsewhere.state.utf8)))?.string
        let genuine = forged("genuine", token: "f0f3")
        h.command("XADD", calls, "*", "event", genuine.event, "retry", genuine.state, "retry_mac",
                  signer.sign(app: "acme", event: Array(genuine.event.utf8), state: Array(genuine.state.utf8)))
        XCTAssertTrue(h.waitForRecords(4))
        for id in ["unsigned", "wrong-mac", "other-app"] {
            let record = try XCTUnwrap(h.record(id))
            XCTAssertEqual(record.outcome, .deadLettered, id)
            XCTAssertTrue(record.reason?.hasPrefix("invalid_event: retry: not signed by pushgw") == true, "\(id): \(record.reason ?? "")")
            XCTAssertTrue(record.attempts.isEmpty, "\(id): none of the forged history is kept")
            let result = h.results().first { $0["id"] as? String == id }
            XCTAssertEqual(result?["entry"] as? String, entries[id], "\(id): the result names the real calls entry, not the forged one")
        }
        XCTAssertTrue(h.requests("f0f0").isEmpty && h.requests("f0f1").isEmpty && h.requests("f0f2").isEmpty, "nothing pushed for them")
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 3, "each is a dead letter")
        let resumed = try XCTUnwrap(h.record("genuine"))
        XCTAssertEqual(resumed.outcome, .deliveredVoip, "pushgw's own signature is trusted")
        XCTAssertEqual(resumed.attempts.map(\.status), [503, 200], "resumed with the signed history")
        XCTAssertEqual(h.requests("f0f3").count, 1)
    }

    func testAnUnreadableRetryIsDeadLetteredNotDropped() throws {
        h = try RouterHarness()
        h.command("XADD", h.keys("acme").calls, "*", "event", #"{"v":1,"id":"bad-retry","type":"incoming_call","voip_token":"a0a0"}"#,
                "retry", #"{"v":9}"#)
        XCTAssertTrue(h.waitForRecords(1))
        let r = try XCTUnwrap(h.record("bad-retry"))
        XCTAssertEqual(r.outcome, .deadLettered)
        XCTAssertTrue(r.reason?.hasPrefix("invalid_event: retry: ") == true, r.reason ?? "")
        XCTAssertTrue(h.requests("a0a0").isEmpty)
    }
}
