import APNs
import Foundation
import Retry
@testable import Routing
import XCTest

// Fixtures and an in-memory model of the runner (`RouterRole`) that throws on every move the routing
// rules forbid (docs/protocol.md), so a router that ever asks for one fails the test that drove it.

enum Fixture {
    static let voipToken = String(repeating: "ab", count: 32)
    static let alertToken = String(repeating: "cd", count: 32)
    /// A stream entry time (2025-11-29) and the default deadline 30 s later.
    static let entry: Int64 = 1_764_412_300_000
    static let deadline: Int64 = entry + 30_000

    static func policy(voip: RetryPolicy = RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2_000),
                       alert: RetryPolicy = RetryPolicy(maxAttempts: 8, baseMs: 500, capMs: 60_000),
                       alertTTLMs: Int64 = 86_400_000) -> AppRoutingPolicy {
        AppRoutingPolicy(appID: "acme", bundleID: "com.acme.phone", environment: .production, ringTimeoutMs: 30_000,
                         voipRetry: voip, alertRetry: alert, alertTTLMs: alertTTLMs,
                         fallbackAlert: FallbackTemplate(title: "Missed call", body: "{callerName} tried to call you",
                                                         sound: "default"))
    }

    /// The fields of docs/protocol.md's example, as raw JSON texts.
    static let baseFields: [(String, String)] = [
        ("v", "1"),
        ("id", #""call-7f3a9c""#),
        ("type", #""incoming_call""#),
        ("voip_token", "\"\(voipToken)\""),
        ("alert_token", "\"\(alertToken)\""),
        ("sandbox", "false"),
        ("deadline", "\(deadline)"),
        ("voip", #"{"caller":"+15551234567","callerName":"Alice Johnson","sessionId":"abc-123-def","hasVideo":false}"#),
    ]

    /// The example event with fields replaced (raw JSON text) or removed (nil), new ones appended.
    static func eventJSON(_ changes: [String: String?] = [:]) -> String {
        var parts: [String] = []
        for (key, value) in baseFields {
            if let change = changes[key] {
                if let change { parts.append("\"\(key)\":\(change)") }
            } else {
                parts.append("\"\(key)\":\(value)")
            }
        }
        for (key, value) in changes.sorted(by: { $0.key < $1.key }) where !baseFields.contains(where: { $0.0 == key }) {
            if let value { parts.append("\"\(key)\":\(value)") }
        }
        return "{" + parts.joined(separator: ",") + "}"
    }

    static func event(_ changes: [String: String?] = [:], policy: AppRoutingPolicy = Fixture.policy(),
                      file: StaticString = #filePath, line: UInt = #line) throws -> CallEvent {
        do {
            return try CallEvent.decode(Array(eventJSON(changes).utf8), entryTimeMs: entry, policy: policy)
        } catch {
            XCTFail("fixture event is invalid: \(error)", file: file, line: line)
            throw error
        }
    }

    static func response(_ status: Int, _ reason: ApnsReason? = nil, apnsID: String? = "00000000-0000-0000-0000-000000000001",
                         timestampMs: Int64? = nil) -> PushNotificationResponse {
        PushNotificationResponse(status: status, reason: reason, apnsID: apnsID, invalidationTimestampMs: timestampMs)
    }
}

/// A move the runner must never be asked to make.
struct IllegalMove: Error, CustomStringConvertible {
    let description: String
}

/// The runner (`RouterRole`) and its Redis and APNs, in memory. `apply` performs an action and throws
/// `IllegalMove` for: a VoIP push at or after the deadline, any push or retry for a cancelled
/// call, a second push while one is in flight, a VoIP retry scheduled at or after the deadline,
/// a push of the wrong form (topic, type, priority, expiration), feedback for a token the event
/// does not have, a second final step, any action after the final one, and a final record that
/// misses an attempt.
final class CallModel {
    let policy: AppRoutingPolicy
    let event: CallEvent
    var now: Int64
    /// A cancel for this call was received.
    var cancelled = false
    var inFlight: PushPlan?
    var scheduled: RetryPlan?
    var sent: [PushPlan] = []
    var causes: [FallbackCause] = []
    var feedback: [TokenFeedback] = []
    var final: CallAction.Step?
    var appUnhealthy = false

    init(policy: AppRoutingPolicy, event: CallEvent, now: Int64) {
        self.policy = policy
        self.event = event
        self.now = now
    }

    /// The final record, whichever final step carried it.
    var record: OutcomeRecord? {
        guard let final else { return nil }
        switch final {
        case let .finish(r), let .cancelCall(r): return r
        case let .deadLetter(d): return d.record
        case .none, .acknowledgeDuplicate, .sendVoip, .sendAlert, .scheduleRetry, .withdrawPush: return nil
        }
    }

    func apply(_ action: CallAction) throws {
        if final != nil, action != CallAction.none {
            throw IllegalMove(description: "an action after the call finished: \(action)")
        }
        if let fb = action.feedback {
            let expected = fb.channel == .voip ? event.voipToken : event.alertToken
            guard fb.token == expected else { throw IllegalMove(description: "feedback for a foreign token \(fb.token)") }
            feedback.append(fb)
        }
        switch action.step {
        case .none:
            break
        case .withdrawPush:
            guard cancelled, inFlight != nil else { throw IllegalMove(description: "a withdraw without a cancelled push in flight") }
        case let .sendVoip(plan):
            guard now < event.deadlineMs else {
                throw IllegalMove(description: "VoIP push at \(now), deadline \(event.deadlineMs)")
            }
            guard !cancelled else { throw IllegalMove(description: "VoIP push for a cancelled call") }
            try send(plan)
            let n = plan.notification!
            guard n.topic == policy.bundleID + ".voip", n.pushType == .voip, n.priority == .immediate,
                  n.expiration == event.deadlineMs / 1000, n.collapseID == nil, n.payload == event.voipPayload else {
                throw IllegalMove(description: "malformed VoIP push \(n)")
            }
        case let .sendAlert(plan, cause):
            guard !cancelled else { throw IllegalMove(description: "alert push for a cancelled call") }
            try send(plan)
            causes.append(cause)
            let n = plan.notification!
            guard n.topic == policy.bundleID, n.pushType == .alert, n.priority == .immediate,
                  n.payload == event.alertPayload, n.collapseID == nil, n.expiration != nil else {
                throw IllegalMove(description: "malformed alert push \(n)")
            }
        case let .scheduleRetry(retry):
            guard !cancelled else { throw IllegalMove(description: "retry scheduled for a cancelled call") }
            guard scheduled == nil, inFlight == nil else { throw IllegalMove(description: "retry scheduled twice") }
            guard retry.atMs >= now else { throw IllegalMove(description: "retry scheduled in the past") }
            if retry.channel == .voip, retry.atMs >= event.deadlineMs {
                throw IllegalMove(description: "VoIP retry at \(retry.atMs), deadline \(event.deadlineMs)")
            }
            scheduled = retry
        case .finish, .deadLetter, .cancelCall, .acknowledgeDuplicate:
            guard inFlight == nil else { throw IllegalMove(description: "finished with a push in flight") }
            scheduled = nil
            final = action.step
            if case let .deadLetter(d) = action.step, d.appUnhealthy { appUnhealthy = true }
            if let record, record.attempts.count != sent.count {
                throw IllegalMove(description: "record lists \(record.attempts.count) attempts of \(sent.count)")
            }
        }
    }

    private func send(_ plan: PushPlan) throws {
        guard inFlight == nil else { throw IllegalMove(description: "a second push while one is in flight") }
        guard scheduled == nil else { throw IllegalMove(description: "a push while a retry is scheduled") }
        inFlight = plan
        sent.append(plan)
    }
}

/// A router driven against the model: every returned action is applied, so an illegal one throws.
struct Harness {
    var router: CallRouter
    let model: CallModel

    init(_ event: CallEvent, policy: AppRoutingPolicy = Fixture.policy(), jitter: Jitter = .constant(0.5),
         now: Int64 = Fixture.entry + 5) {
        router = CallRouter(policy: policy, jitter: jitter)
        model = CallModel(policy: policy, event: event, now: now)
    }

    @discardableResult
    mutating func start(knownInvalid: (voip: Int64?, alert: Int64?) = (nil, nil), alreadyDone: CallOutcome? = nil,
                        cancelled: Bool = false) throws -> CallAction {
        model.cancelled = cancelled
        let action = router.start(model.event, now: model.now, knownInvalid: knownInvalid, alreadyDone: alreadyDone,
                                  cancelled: cancelled)
        try model.apply(action)
        return action
    }

    @discardableResult
    mutating func answer(_ status: Int, _ reason: ApnsReason? = nil, after ms: Int64 = 40,
                         timestampMs: Int64? = nil) throws -> CallAction {
        guard model.inFlight != nil else { throw IllegalMove(description: "an answer with no push in flight") }
        model.inFlight = nil
        model.now += ms
        let action = router.apnsAnswered(Fixture.response(status, reason, timestampMs: timestampMs), now: model.now)
        try model.apply(action)
        return action
    }

    @discardableResult
    mutating func fail(_ error: ApnsClientError, after ms: Int64 = 10_000) throws -> CallAction {
        guard model.inFlight != nil else { throw IllegalMove(description: "a failure with no push in flight") }
        model.inFlight = nil
        // A withdrawn push never left: it is no attempt.
        if error == .withdrawn { model.sent.removeLast() }
        model.now += ms
        let action = router.apnsFailed(error, now: model.now)
        try model.apply(action)
        return action
    }

    /// The runner withholds the push in flight (the app's credential is refused again and again).
    @discardableResult
    mutating func withhold(_ reason: DeadLetterReason) throws -> CallAction {
        guard model.inFlight != nil else { throw IllegalMove(description: "a push withheld with no push asked for") }
        model.inFlight = nil
        model.sent.removeLast()  // it never left
        let action = router.pushWithheld(reason, now: model.now)
        try model.apply(action)
        return action
    }

    /// Fires the scheduled retry at its time, or `late` ms after it.
    @discardableResult
    mutating func fireRetry(late: Int64 = 0) throws -> CallAction {
        guard let retry = model.scheduled else { throw IllegalMove(description: "no retry scheduled") }
        model.scheduled = nil
        model.now = retry.atMs + late
        let action = router.retryDue(now: model.now)
        try model.apply(action)
        return action
    }

    /// Fires the scheduled retry the durable way: the router's `waiting` snapshot goes through
    /// its JSON text, and a fresh router (same policy and jitter) resumes from it `late` ms
    /// after the due time, with `event` (the same event unless given). The fresh router
    /// replaces this one.
    @discardableResult
    mutating func resumeRetry(late: Int64 = 0, event: CallEvent? = nil, alreadyDone: CallOutcome? = nil,
                              cancelled: Bool = false, jitter: Jitter = .constant(0.5)) throws -> CallAction {
        guard let retry = model.scheduled else { throw IllegalMove(description: "no retry scheduled") }
        guard let snapshot = router.waiting else { throw IllegalMove(description: "a retry is scheduled but no snapshot") }
        let text = snapshot.json()
        let restored = try WaitingCall.decode(text)
        XCTAssertEqual(restored, snapshot, "the snapshot survives its JSON text: \(text)")
        model.scheduled = nil
        model.now = retry.atMs + late
        if cancelled { model.cancelled = true }
        router = CallRouter(policy: router.policy, jitter: jitter)
        let action = router.resume(event ?? model.event, from: restored, now: model.now, alreadyDone: alreadyDone,
                                   cancelled: cancelled)
        try model.apply(action)
        return action
    }

    @discardableResult
    mutating func cancel(after ms: Int64 = 1) throws -> CallAction {
        model.cancelled = true
        model.now += ms
        let action = router.cancelReceived(now: model.now)
        if action.isFinal { model.scheduled = nil }
        try model.apply(action)
        return action
    }
}

extension CallAction {
    /// True when the step ends the call.
    var isFinal: Bool {
        switch step {
        case .finish, .deadLetter, .cancelCall, .acknowledgeDuplicate: return true
        case .none, .sendVoip, .sendAlert, .scheduleRetry, .withdrawPush: return false
        }
    }

    var voipPlan: PushPlan? {
        if case let .sendVoip(p) = step { return p }
        return nil
    }

    var alertPlan: (plan: PushPlan, cause: FallbackCause)? {
        if case let .sendAlert(p, cause) = step { return (p, cause) }
        return nil
    }

    var retry: RetryPlan? {
        if case let .scheduleRetry(r) = step { return r }
        return nil
    }

    var finished: OutcomeRecord? {
        if case let .finish(r) = step { return r }
        return nil
    }

    var deadLetter: DeadLetter? {
        if case let .deadLetter(d) = step { return d }
        return nil
    }
}
