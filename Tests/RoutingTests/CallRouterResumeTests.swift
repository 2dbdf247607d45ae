import APNs
import Foundation
import Retry
@testable import Routing
import XCTest

/// The durable retry path of the router: a waiting call's snapshot, its JSON text, and
/// `resume(_:from:now:)` on a fresh router, which must do exactly what `retryDue(now:)` does on
/// the router that scheduled the retry.
final class CallRouterResumeTests: XCTestCase {
    /// Plays the same call twice, once firing retries in memory and once resuming fresh routers
    /// from snapshots; `answers` are the APNs statuses in order. Every action must match.
    private func assertResumeMatchesRetryDue(_ event: CallEvent, answers: [(Int, ApnsReason?)],
                                             policy: AppRoutingPolicy = Fixture.policy(), late: Int64 = 0,
                                             file: StaticString = #filePath, line: UInt = #line) throws -> OutcomeRecord? {
        var memory = Harness(event, policy: policy)
        var durable = Harness(event, policy: policy)
        XCTAssertEqual(try memory.start(), try durable.start(), file: file, line: line)
        var retries = 0
        for (status, reason) in answers {
            let a = try memory.answer(status, reason)
            let b = try durable.answer(status, reason)
            XCTAssertEqual(a, b, "same answer, same action", file: file, line: line)
            if a.retry != nil {
                retries += 1
                XCTAssertEqual(try memory.fireRetry(late: late), try durable.resumeRetry(late: late),
                               "resume does what retryDue does (retry \(retries))", file: file, line: line)
            }
        }
        XCTAssertGreaterThan(retries, 0, "the scenario retried", file: file, line: line)
        XCTAssertEqual(memory.model.record, durable.model.record, "the same final record", file: file, line: line)
        XCTAssertEqual(memory.model.sent, durable.model.sent, "the same pushes", file: file, line: line)
        return durable.model.record
    }

    func testResumingVoipRetriesDeliversLikeTheInMemoryPath() throws {
        let record = try assertResumeMatchesRetryDue(try Fixture.event(), answers: [(503, .serviceUnavailable),
                                                                                  (500, .internalServerError), (200, nil)])
        XCTAssertEqual(record?.outcome, .deliveredVoip)
        XCTAssertEqual(record?.attempts.map(\.status), [503, 500, 200], "the history crosses the schedule")
        XCTAssertEqual(record?.latencyMs, Fixture.entry + 5 + 40 + 50 + 40 + 100 + 40 - Fixture.entry,
                       "latency counts from the producer's entry, not from the retry's")
    }

    func testResumingAlertRetriesKeepsTheCauseAndTheWindow() throws {
        let record = try assertResumeMatchesRetryDue(try Fixture.event(), answers: [(410, .unregistered), (503, .serviceUnavailable),
                                                                                  (429, .tooManyRequests), (200, nil)])
        XCTAssertEqual(record?.outcome, .deliveredAlert)
        XCTAssertEqual(record?.cause, .voipTokenInvalid)
        XCTAssertEqual(record?.attempts.map(\.channel), [.voip, .alert, .alert, .alert])
    }

    func testResumingRunsOutOfAttemptsLikeTheInMemoryPath() throws {
        let policy = Fixture.policy(voip: RetryPolicy(maxAttempts: 3, baseMs: 100, capMs: 2_000),
                                    alert: RetryPolicy(maxAttempts: 2, baseMs: 100, capMs: 2_000))
        let record = try assertResumeMatchesRetryDue(try Fixture.event(), answers: Array(repeating: (503, .serviceUnavailable), count: 5),
                                                     policy: policy)
        XCTAssertEqual(record?.outcome, .deadLettered)
        XCTAssertEqual(record?.reason, "retries_exhausted: alert")
        XCTAssertEqual(record?.attempts.map(\.channel), [.voip, .voip, .voip, .alert, .alert])
    }

    func testAVoipRetryResumedAfterTheDeadlineSendsTheAlert() throws {
        let event = try Fixture.event(["deadline": "\(Fixture.entry + 1_000)"])
        var h = Harness(event)
        try h.start()
        XCTAssertNotNil(try h.answer(500).retry)
        let action = try h.resumeRetry(late: 2_000)
        XCTAssertNil(action.voipPlan, "never a VoIP push after the deadline, however late the move")
        XCTAssertEqual(action.alertPlan?.cause, .deadline)
    }

    func testAResumedCallThatWasCancelledMeanwhileEndsCancelledWithItsHistory() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(503, .serviceUnavailable)
        let record = try XCTUnwrap(try h.resumeRetry(cancelled: true).finished)
        XCTAssertEqual(record.outcome, .cancelled)
        XCTAssertEqual(record.attempts.map(\.status), [503], "the attempts before the wait are kept")
        XCTAssertEqual(h.model.sent.count, 1, "nothing sent after the cancel")
    }

    func testAResumedCallAlreadyFinishedElsewhereSendsNothing() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(503, .serviceUnavailable)
        guard case let .acknowledgeDuplicate(record) = try h.resumeRetry(alreadyDone: .deliveredVoip).step else {
            return XCTFail("a resumed call already finished elsewhere is answered as a duplicate")
        }
        XCTAssertEqual(record.outcome, .duplicate)
        XCTAssertEqual(record.firstOutcome, .deliveredVoip)
        XCTAssertEqual(h.model.sent.count, 1)
    }

    func testASnapshotWithAnotherCallsEventIsADeadLetter() throws {
        var h = Harness(try Fixture.event())
        try h.start()
        try h.answer(503, .serviceUnavailable)
        let foreign = try Fixture.event(["id": #""someone-else""#])
        let dead = try XCTUnwrap(try h.resumeRetry(event: foreign).deadLetter)
        XCTAssertTrue(dead.reason.text.hasPrefix("invalid_event: retry: "), dead.reason.text)
        XCTAssertEqual(dead.record.attempts.count, 1, "the history is kept for the human")
        XCTAssertTrue(h.model.sent.count == 1, "nothing sent for a mismatched snapshot")
    }

    // MARK: The snapshot

    func testTheSnapshotHoldsWhatTheWaitNeedsAndOnlyExistsWhileWaiting() throws {
        var h = Harness(try Fixture.event())
        XCTAssertNil(h.router.waiting, "idle")
        try h.start()
        XCTAssertNil(h.router.waiting, "a push in flight is not a wait")
        let retry = try XCTUnwrap(try h.answer(503, .serviceUnavailable).retry)
        let snapshot = try XCTUnwrap(h.router.waiting)
        XCTAssertEqual(snapshot.callID, "call-7f3a9c")
        XCTAssertEqual(snapshot.stage, .voip(attemptsMade: 1))
        XCTAssertEqual(snapshot.dueAtMs, retry.atMs)
        XCTAssertEqual(snapshot.deadlineMs, Fixture.deadline)
        XCTAssertEqual(snapshot.entryTimeMs, Fixture.entry)
        XCTAssertTrue(snapshot.alertUsable)
        XCTAssertEqual(snapshot.attempts, h.router.attempts)
        XCTAssertEqual(snapshot.firstFailureAtMs, Fixture.entry + 45)
        XCTAssertEqual(snapshot.lastAnswerAtMs, Fixture.entry + 45)
        try h.fireRetry()
        XCTAssertNil(h.router.waiting, "the retry is in flight again")
    }

    func testTheSnapshotRoundTripsThroughJSONWithEveryField() throws {
        let t = Fixture.entry
        let attempts = [
            AttemptRecord(sentAtMs: t + 1, channel: .voip, status: 503, reason: "ServiceUnavailable", error: nil, apnsID: "a-1"),
            AttemptRecord(sentAtMs: t + 2, channel: .voip, status: nil, reason: nil, error: "timeout \"quoted\" / ü\n", apnsID: nil),
            AttemptRecord(sentAtMs: t + 3, channel: .alert, status: 429, reason: "TooManyRequests", error: nil, apnsID: nil),
        ]
        let snapshots = [
            WaitingCall(callID: "c/1 \"é\"", stage: .voip(attemptsMade: 2), dueAtMs: 1_764_412_345_678,
                        deadlineMs: 1_764_412_399_999, entryTimeMs: 1_764_412_300_000, alertUsable: false,
                        attempts: Array(attempts.prefix(2)), lastAnswerAtMs: nil, firstFailureAtMs: nil),
            WaitingCall(callID: "c-2", stage: .alert(cause: .retriesExhausted, attemptsMade: 1, windowEndMs: 9_000_000_000_000),
                        dueAtMs: t + 5, deadlineMs: t + 6, entryTimeMs: t + 4, entryID: "\(t + 4)-1", alertUsable: true,
                        attempts: attempts, lastAnswerAtMs: t + 7, firstFailureAtMs: t + 2),
        ]
        for s in snapshots {
            XCTAssertEqual(try WaitingCall.decode(s.json()), s, s.json())
            XCTAssertEqual(s.json(), s.json(), "deterministic text")
        }
        XCTAssertTrue(snapshots[1].json().contains(#""cause":"retries_exhausted""#), snapshots[1].json())
    }

    /// A snapshot as the router writes one: entry at `Fixture.entry`, one VoIP attempt, due
    /// before the deadline.
    private var goodSnapshot: String {
        let t = Fixture.entry
        return WaitingCall(callID: "c", stage: .voip(attemptsMade: 1), dueAtMs: t + 100, deadlineMs: t + 30_000,
                           entryTimeMs: t, alertUsable: true,
                           attempts: [AttemptRecord(sentAtMs: t + 1, channel: .voip, status: 503, reason: "ServiceUnavailable",
                                                    error: nil, apnsID: nil)],
                           lastAnswerAtMs: t + 2, firstFailureAtMs: t + 2).json()
    }

    func testTheSnapshotTextIsCompactWithSortedKeysAndNoAbsentFields() {
        let t = Fixture.entry
        let alert = WaitingCall(callID: "c/1", stage: .alert(cause: .retriesExhausted, attemptsMade: 1, windowEndMs: t + 9_000),
                                dueAtMs: t + 100, deadlineMs: t + 30_000, entryTimeMs: t, entryID: "\(t)-0", alertUsable: true,
                                attempts: [AttemptRecord(sentAtMs: t + 1, channel: .alert, status: nil, reason: nil,
                                                         error: "connection lost: \"x\"\n", apnsID: "A-1")],
                                lastAnswerAtMs: nil, firstFailureAtMs: t + 2)
        XCTAssertEqual(alert.json(), #"{"alert_usable":true,"attempts":[{"apns_id":"A-1","channel":"alert","error":"connection lost: \"x\"\n","t":\#(t + 1)}],"#
                       + #""cause":"retries_exhausted","channel":"alert","deadline":\#(t + 30_000),"due":\#(t + 100),"entry":"\#(t)-0","#
                       + #""entry_time":\#(t),"first_failure":\#(t + 2),"id":"c/1","made":1,"v":1,"window_end":\#(t + 9_000)}"#)
        XCTAssertEqual(try WaitingCall.decode(alert.json()), alert)
        XCTAssertEqual(goodSnapshot, #"{"alert_usable":true,"attempts":[{"channel":"voip","reason":"ServiceUnavailable","status":503,"#
                       + #""t":\#(t + 1)}],"channel":"voip","deadline":\#(t + 30_000),"due":\#(t + 100),"entry_time":\#(t),"#
                       + #""first_failure":\#(t + 2),"id":"c","last_answer":\#(t + 2),"made":1,"v":1}"#)
    }

    func testUnreadableSnapshotsAreRefusedWithTheirProblem() {
        let good = goodSnapshot
        XCTAssertNoThrow(try WaitingCall.decode(good), good)
        let rows: [(String, String)] = [
            ("not json", "unreadable"),
            (good.replacingOccurrences(of: #""v":1"#, with: #""v":2"#), "version 2"),
            (good.replacingOccurrences(of: #""channel":"voip""#, with: #""channel":"sms""#), "channel"),
            (good.replacingOccurrences(of: #""channel":"voip""#, with: #""channel":"alert""#), "cause"),
            (good.replacingOccurrences(of: #""made":1"#, with: #""made":0"#), "made"),
        ]
        for (text, problem) in rows {
            XCTAssertThrowsError(try WaitingCall.decode(text), text) { error in
                XCTAssertTrue("\(error)".contains(problem), "\(error) names \(problem)")
            }
        }
    }

    /// The `retry` field travels through the calls stream, where any producer can forge it:
    /// every value is checked before arithmetic uses it, and the problem names the field.
    func testForgedSnapshotValuesAreRefusedNamingTheFieldInsteadOfTrapping() {
        let good = goodSnapshot
        let t = Fixture.entry
        func with(_ field: String, _ value: String) -> String {
            let pattern = try! NSRegularExpression(pattern: "\"\(field)\":-?[0-9]+")
            let range = NSRange(good.startIndex..., in: good)
            XCTAssertEqual(pattern.numberOfMatches(in: good, range: range), 1, "\(field) is in \(good)")
            return pattern.stringByReplacingMatches(in: good, range: range, withTemplate: "\"\(field)\":\(value)")
        }
        func withEntry(_ json: String) -> String {
            good.replacingOccurrences(of: #""entry_time":"#, with: #""entry":\#(json),"entry_time":"#)
        }
        XCTAssertNoThrow(try WaitingCall.decode(withEntry(#""\#(t)-0""#)), "a stream id is an entry")
        let max = String(Int64.max), min = String(Int64.min)
        let manyAttempts = "[" + Array(repeating: #"{"channel":"voip","status":503,"t":\#(t)}"#, count: 203)
            .joined(separator: ",") + "]"
        let rows: [(String, String, String)] = [
            ("deadline Int64.max, entry_time -1000",
             with("deadline", max).replacingOccurrences(of: "\"entry_time\":\(t)", with: #""entry_time":-1000"#), "deadline"),
            ("entry_time Int64.min", with("entry_time", min), "entry_time"),
            ("entry_time -1000", with("entry_time", "-1000"), "entry_time"),
            ("made Int64.max", with("made", max), "made"),
            ("made over the attempts limit", with("made", "101"), "made"),
            ("made above the attempts listed", with("made", "2"), "made: 2 attempts, but 1 listed"),
            ("due Int64.max", with("due", max), "due"),
            ("due after the deadline", with("due", String(t + 40_000)), "due"),
            ("last_answer Int64.min", with("last_answer", min), "last_answer"),
            ("first_failure negative", with("first_failure", "-1"), "first_failure"),
            ("an attempt's time Int64.max", with("t", max), "attempts.t"),
            ("a 60,000-digit made", with("made", String(repeating: "9", count: 60_000)), "made"),
            ("203 attempts (two policies' 200 and a try in the other environment per channel are 202)", good.replacing(#/"attempts":\[[^\]]*\]/#, with: "\"attempts\":\(manyAttempts)"),
             "attempts"),
            ("alert wait ending before it is due",
             good.replacingOccurrences(of: #""channel":"voip""#,
                                       with: #""cause":"deadline","channel":"alert","window_end":\#(t + 50)"#), "window_end"),
            ("alert wait with window_end Int64.max",
             good.replacingOccurrences(of: #""channel":"voip""#,
                                       with: #""cause":"deadline","channel":"alert","window_end":\#(max)"#), "window_end"),
            ("an entry that is no stream id", withEntry(#""1-0\n\u001b[2J""#), "entry"),
            ("an entry with a third part", withEntry(#""1-0-0""#), "entry"),
            ("a 60,000-digit entry", withEntry("\"\(String(repeating: "9", count: 60_000))-0\""), "entry"),
            ("an entry that is a number", withEntry("17"), "entry"),
        ]
        for (name, text, field) in rows {
            XCTAssertThrowsError(try WaitingCall.decode(text), name) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains(field), "\(name): the problem names \(field): \(message)")
                XCTAssertLessThan(message.utf8.count, 300, "\(name): the problem quotes a short prefix at most: \(message)")
            }
        }
    }

    /// The extremes a snapshot may hold decode, and the router resumes from them without a trap.
    func testSnapshotsAtTheEdgesOfTheTimeWindowResumeWithoutTrapping() throws {
        let policy = Fixture.policy()
        let raw = Array(Fixture.eventJSON(["deadline": nil]).utf8)
        let early = CallEvent.smallestUnixMs, late = WaitingCall.latestUnixMs
        let snapshots = [
            WaitingCall(callID: "call-7f3a9c", stage: .voip(attemptsMade: RetryPolicy.attemptsLimit), dueAtMs: early,
                        deadlineMs: late, entryTimeMs: early,
                        alertUsable: true, attempts: Array(repeating: AttemptRecord(sentAtMs: late, channel: .voip, status: 503,
                                                                                     reason: nil, error: nil, apnsID: nil),
                                                           count: RetryPolicy.attemptsLimit),
                        lastAnswerAtMs: late, firstFailureAtMs: early),
            WaitingCall(callID: "call-7f3a9c", stage: .alert(cause: .deadline, attemptsMade: 1, windowEndMs: late),
                        dueAtMs: early, deadlineMs: early, entryTimeMs: late, alertUsable: true,
                        attempts: [AttemptRecord(sentAtMs: early, channel: .alert, status: 503, reason: nil, error: nil, apnsID: nil)],
                        lastAnswerAtMs: early, firstFailureAtMs: late),
        ]
        for snapshot in snapshots {
            let decoded = try WaitingCall.decode(snapshot.json())
            let event = try decoded.event(from: raw, policy: policy)
            var router = CallRouter(policy: policy, jitter: .constant(0.5))
            _ = router.resume(event, from: decoded, now: Fixture.entry)
            _ = router.apnsFailed(.timeout, now: Fixture.entry + 1)
        }
    }

    func testTheEventIsDecodedAgainWithItsOriginalDeadlineEvenIfTheRingTimeoutChanged() throws {
        let policy = Fixture.policy()
        let raw = Array(Fixture.eventJSON(["deadline": nil]).utf8)
        let event = try CallEvent.decode(raw, entryTimeMs: Fixture.entry, policy: policy)
        var h = Harness(event, policy: policy)
        try h.start()
        try h.answer(503, .serviceUnavailable)
        let snapshot = try XCTUnwrap(h.router.waiting)
        var changed = policy
        changed.ringTimeoutMs = 5_000
        let again = try snapshot.event(from: raw, policy: changed)
        XCTAssertEqual(again, event, "same entry time, same deadline, same payloads")
        let push = try XCTUnwrap(try h.resumeRetry(event: again).voipPlan)
        XCTAssertEqual(push.notification!.expiration, event.deadlineMs / 1000)
    }
}
