import Foundation

/// A call waiting for its next attempt, as the durable retry schedule keeps it in Redis
/// (issue 4): everything `CallRouter` needs to continue the call in any process, with the
/// call's raw event stored beside it. Internal to pushgw — not part of the producer contract —
/// and versioned (`v`) so a later gateway can refuse what it cannot read instead of guessing.
///
/// Taken from `CallRouter.waiting` after a `.scheduleRetry`; given back to
/// `CallRouter.resume(_:from:now:)` when the retry is due. A plain value; all times unix ms.
///
/// JSON (`json()`), keys sorted, absent optionals omitted:
///
///     {"alert_usable":true,"attempts":[{"channel":"voip","reason":"ServiceUnavailable","status":503,"t":…}],
///      "channel":"voip","deadline":…,"due":…,"entry":"…-0","entry_time":…,"first_failure":…,"id":"call-1",
///      "last_answer":…,"made":1,"v":1}
///
/// plus `cause` and `window_end` for an alert wait.
public struct WaitingCall: Equatable, Sendable {
    /// Which push the call waits to send again, with what that stage needs.
    public enum Stage: Equatable, Sendable {
        /// VoIP attempt `attemptsMade + 1` is next; it may leave only before `deadlineMs`.
        case voip(attemptsMade: Int)
        /// Alert attempt `attemptsMade + 1` of the fallback for `cause` is next; it may leave
        /// only before `windowEndMs` (the fallback's start + the app's alert TTL).
        case alert(cause: FallbackCause, attemptsMade: Int, windowEndMs: Int64)
    }

    /// The call id (the event's `id`); a resume checks it against the event it comes with.
    public var callID: String
    public var stage: Stage
    /// When the retry is due.
    public var dueAtMs: Int64
    /// The call's deadline as resolved when it was first read (event or ring timeout).
    public var deadlineMs: Int64
    /// The time of the producer's original stream entry; latency and the default deadline
    /// count from it, and the event is decoded again with it.
    public var entryTimeMs: Int64
    /// The producer's original stream entry id (results carry it as `entry`), set by whoever
    /// keeps the snapshot (the router knows no stream ids); nil in snapshots written before it
    /// was kept.
    public var entryID: String?
    /// Whether the alert token was usable (present, not known invalid) when the call started.
    public var alertUsable: Bool
    /// Every attempt so far, in order.
    public var attempts: [AttemptRecord]
    /// Time of the last APNs answer or transport failure.
    public var lastAnswerAtMs: Int64?
    /// Time of the first answer that was not an acceptance.
    public var firstFailureAtMs: Int64?

    /// The only snapshot version this gateway writes and reads.
    public static let version = 1

    public init(callID: String, stage: Stage, dueAtMs: Int64, deadlineMs: Int64, entryTimeMs: Int64, entryID: String? = nil,
                alertUsable: Bool, attempts: [AttemptRecord], lastAnswerAtMs: Int64?, firstFailureAtMs: Int64?) {
        self.callID = callID
        self.stage = stage
        self.dueAtMs = dueAtMs
        self.deadlineMs = deadlineMs
        self.entryTimeMs = entryTimeMs
        self.entryID = entryID
        self.alertUsable = alertUsable
        self.attempts = attempts
        self.lastAnswerAtMs = lastAnswerAtMs
        self.firstFailureAtMs = firstFailureAtMs
    }

    /// Decodes the call's raw event as it was first read: with the original entry time and
    /// with the ring timeout that gave `deadlineMs` (the app's may have changed since), so the
    /// event's deadline, its VoIP payload's `deadline` and the snapshot agree.
    public func event(from raw: [UInt8], policy: AppRoutingPolicy) throws(InvalidEvent) -> CallEvent {
        var original = policy
        original.ringTimeoutMs = deadlineMs - entryTimeMs
        return try CallEvent.decode(raw, entryTimeMs: entryTimeMs, policy: original)
    }

    /// The snapshot as compact JSON with sorted keys (the same text for the same value).
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding plain strings and integers cannot fail.
        let data = try! encoder.encode(Wire(self))
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads `json()`'s text back.
    /// - Throws: `InvalidWaitingCall` naming the problem (not JSON, another version, a value
    ///   out of range); the schedule's data is then unusable and the call needs a human.
    public static func decode(_ text: String) throws(InvalidWaitingCall) -> WaitingCall {
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(text.utf8))
        } catch {
            throw InvalidWaitingCall(problem: "unreadable: \(error)")
        }
        return try wire.value()
    }
}

/// Why a snapshot could not be read.
public struct InvalidWaitingCall: Error, Equatable, Sendable, CustomStringConvertible {
    public let problem: String
    public init(problem: String) { self.problem = problem }
    public var description: String { problem }
}

/// The JSON form of `WaitingCall`; field names are short and stable.
private struct Wire: Codable {
    var v: Int
    var id: String
    var channel: String
    var made: Int
    var cause: String?
    var windowEnd: Int64?
    var due: Int64
    var deadline: Int64
    var entryTime: Int64
    var entry: String?
    var alertUsable: Bool
    var lastAnswer: Int64?
    var firstFailure: Int64?
    var attempts: [Attempt]

    enum CodingKeys: String, CodingKey {
        case v, id, channel, made, cause, due, deadline, attempts, entry
        case windowEnd = "window_end", entryTime = "entry_time", alertUsable = "alert_usable"
        case lastAnswer = "last_answer", firstFailure = "first_failure"
    }

    struct Attempt: Codable {
        var t: Int64
        var channel: String
        var status: Int?
        var reason: String?
        var error: String?
        var apnsID: String?

        enum CodingKeys: String, CodingKey {
            case t, channel, status, reason, error
            case apnsID = "apns_id"
        }
    }

    init(_ w: WaitingCall) {
        v = WaitingCall.version
        id = w.callID
        switch w.stage {
        case let .voip(made):
            channel = PushChannel.voip.rawValue
            self.made = made
        case let .alert(cause, made, windowEnd):
            channel = PushChannel.alert.rawValue
            self.made = made
            self.cause = cause.rawValue
            self.windowEnd = windowEnd
        }
        due = w.dueAtMs
        deadline = w.deadlineMs
        entryTime = w.entryTimeMs
        entry = w.entryID
        alertUsable = w.alertUsable
        lastAnswer = w.lastAnswerAtMs
        firstFailure = w.firstFailureAtMs
        attempts = w.attempts.map {
            Attempt(t: $0.sentAtMs, channel: $0.channel.rawValue, status: $0.status, reason: $0.reason, error: $0.error,
                    apnsID: $0.apnsID)
        }
    }

    func value() throws(InvalidWaitingCall) -> WaitingCall {
        guard v == WaitingCall.version else {
            throw InvalidWaitingCall(problem: "version \(v); this gateway reads version \(WaitingCall.version)")
        }
        guard made >= 1 else { throw InvalidWaitingCall(problem: "made: \(made) attempts; a waiting call made at least 1") }
        let stage: WaitingCall.Stage
        switch PushChannel(rawValue: channel) {
        case .voip:
            stage = .voip(attemptsMade: made)
        case .alert:
            guard let cause, let reason = FallbackCause(rawValue: cause) else {
                throw InvalidWaitingCall(problem: "cause: an alert wait needs a fallback cause, got \(cause ?? "none")")
            }
            guard let windowEnd else { throw InvalidWaitingCall(problem: "window_end: missing for an alert wait") }
            stage = .alert(cause: reason, attemptsMade: made, windowEndMs: windowEnd)
        case nil:
            throw InvalidWaitingCall(problem: "channel: \(channel) is neither voip nor alert")
        }
        var records: [AttemptRecord] = []
        for a in attempts {
            guard let ch = PushChannel(rawValue: a.channel) else {
                throw InvalidWaitingCall(problem: "attempts: channel \(a.channel) is neither voip nor alert")
            }
            records.append(AttemptRecord(sentAtMs: a.t, channel: ch, status: a.status, reason: a.reason, error: a.error,
                                         apnsID: a.apnsID))
        }
        return WaitingCall(callID: id, stage: stage, dueAtMs: due, deadlineMs: deadline, entryTimeMs: entryTime,
                           entryID: entry, alertUsable: alertUsable, attempts: records, lastAnswerAtMs: lastAnswer,
                           firstFailureAtMs: firstFailure)
    }
}
