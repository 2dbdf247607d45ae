import APNs
import Retry

/// A call waiting for its next attempt, as the durable retry schedule keeps it in Redis:
/// everything `CallRouter` needs to continue the call in any process, with the
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
    /// Times in a snapshot must lie in `CallEvent.smallestUnixMs ... latestUnixMs` (1973 to
    /// the year 3000): a snapshot travels through the calls stream, where anyone who can
    /// `XADD` can forge one, so its times are checked before any arithmetic uses them.
    public static let latestUnixMs: Int64 = 32_503_680_000_000

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
        original.ringTimeoutMs = deadlineMs.clampedDifference(entryTimeMs)
        return try CallEvent.decode(raw, entryTimeMs: entryTimeMs, policy: original)
    }

    /// The snapshot as compact JSON with sorted keys (the same text for the same value).
    public func json() -> String {
        String(decoding: Wire(self).json(), as: UTF8.self)
    }

    /// Reads `json()`'s text back, checking every value as untrusted input: the call id's
    /// length, `made` in 1 ... `RetryPolicy.attemptsLimit` and not above the attempts listed,
    /// at most twice that many attempts, every time in the window above, and the due time
    /// before the deadline (VoIP) or the alert window's end, as the router schedules them.
    /// - Throws: `InvalidWaitingCall` naming the field and the problem (not JSON, another
    ///   version, a value out of range); the schedule's data is then unusable and the call
    ///   needs a human.
    public static func decode(_ text: String) throws(InvalidWaitingCall) -> WaitingCall {
        try decode(Array(text.utf8))
    }

    /// Reads the snapshot from the bytes of a stream entry's `retry` field.
    public static func decode(_ bytes: [UInt8]) throws(InvalidWaitingCall) -> WaitingCall {
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(bytes)
        } catch {
            throw InvalidWaitingCall(problem: (error.field.map { "\($0): " } ?? "") + "unreadable: not JSON: \(error)")
        }
        guard case let .object(root) = parsed else {
            throw InvalidWaitingCall(problem: "unreadable: expected a JSON object, got \(parsed.kind)")
        }
        let wire: Wire
        do {
            wire = try Wire(reading: JSONFields(root: root))
        } catch {
            throw InvalidWaitingCall(problem: error.description)
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

/// The JSON form of `WaitingCall`; field names are short and stable. Written with
/// `JSONWriter` (keys sorted, absent fields left out), read back with `JSONParser` (field by
/// field, each problem naming its field).
private struct Wire {
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

    struct Attempt {
        var t: Int64
        var channel: String
        var status: Int?
        var reason: String?
        var error: String?
        var apnsID: String?
        var environment: String?
    }

    /// The text: keys in byte order, absent fields left out (the same text for the same value).
    func json() -> [UInt8] {
        var w = JSONWriter()
        w.object { o in
            o.bool("alert_usable", alertUsable)
            o.array("attempts", attempts) { w, a in
                w.object { o in
                    o.string("apns_id", a.apnsID)
                    o.string("channel", a.channel)
                    o.string("environment", a.environment)
                    o.string("error", a.error)
                    o.string("reason", a.reason)
                    o.int("status", a.status.map { Int64($0) })
                    o.int("t", a.t)
                }
            }
            o.string("cause", cause)
            o.string("channel", channel)
            o.int("deadline", deadline)
            o.int("due", due)
            o.string("entry", entry)
            o.int("entry_time", entryTime)
            o.int("first_failure", firstFailure)
            o.string("id", id)
            o.int("last_answer", lastAnswer)
            o.int("made", Int64(made))
            o.int("v", Int64(v))
            o.int("window_end", windowEnd)
        }
        return w.finish()
    }

    /// Reads the fields of a snapshot; unknown fields are ignored.
    init(reading f: JSONFields) throws(InvalidEvent) {
        v = Int(try f.required("v", f.integer("v", what: "")))
        id = try f.required("id", f.string("id"))
        channel = try f.required("channel", f.string("channel"))
        made = Int(try f.required("made", f.integer("made", what: "")))
        cause = try f.string("cause")
        windowEnd = try f.integer("window_end", what: " (unix ms)")
        due = try f.required("due", f.integer("due", what: " (unix ms)"))
        deadline = try f.required("deadline", f.integer("deadline", what: " (unix ms)"))
        entryTime = try f.required("entry_time", f.integer("entry_time", what: " (unix ms)"))
        entry = try f.string("entry")
        alertUsable = try f.required("alert_usable", f.bool("alert_usable"))
        lastAnswer = try f.integer("last_answer", what: " (unix ms)")
        firstFailure = try f.integer("first_failure", what: " (unix ms)")
        guard let list = f.value("attempts") else { throw f.invalid("attempts", "required") }
        guard case let .array(items) = list else { throw f.invalid("attempts", "expected an array, got \(list.kind)") }
        // Two policies' attempts, and per channel one try in the other environment.
        let most = 2 * RetryPolicy.attemptsLimit + 2
        guard items.count <= most else {
            throw f.invalid("attempts", "\(items.count) listed, over the \(most) two policies allow")
        }
        attempts = []
        for item in items {
            guard case let .object(o) = item else { throw f.invalid("attempts", "expected objects, got \(item.kind)") }
            let a = JSONFields(root: o)
            do {
                attempts.append(Attempt(t: try a.required("t", a.integer("t", what: " (unix ms)")),
                                        channel: try a.required("channel", a.string("channel")),
                                        status: try a.integer("status", what: "").map { Int($0) },
                                        reason: try a.string("reason"), error: try a.string("error"),
                                        apnsID: try a.string("apns_id"), environment: try a.string("environment")))
            } catch {
                throw InvalidEvent(field: "attempts." + (error.field ?? ""), problem: error.problem)
            }
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
                    apnsID: $0.apnsID, environment: $0.environment?.rawValue)
        }
    }

    func value() throws(InvalidWaitingCall) -> WaitingCall {
        guard v == WaitingCall.version else {
            throw InvalidWaitingCall(problem: "version \(v); this gateway reads version \(WaitingCall.version)")
        }
        guard CallEvent.isCallID(id) else {
            throw InvalidWaitingCall(problem: "id: \(id.count) characters, not 1-\(CallEvent.maxIDCharacters)")
        }
        guard made >= 1 else { throw InvalidWaitingCall(problem: "made: \(made) attempts; a waiting call made at least 1") }
        guard made <= RetryPolicy.attemptsLimit else {
            throw InvalidWaitingCall(problem: "made: \(made) attempts, over the \(RetryPolicy.attemptsLimit) a policy allows")
        }
        guard made <= attempts.count else {
            throw InvalidWaitingCall(problem: "made: \(made) attempts, but \(attempts.count) listed")
        }
        try Wire.checkTime(due, "due")
        try Wire.checkTime(deadline, "deadline")
        try Wire.checkTime(entryTime, "entry_time")
        if let entry, !Wire.isStreamID(entry) {
            throw InvalidWaitingCall(problem: "entry: \(InvalidEvent.quote(entry)) is not a stream id (digits-digits)")
        }
        if let lastAnswer { try Wire.checkTime(lastAnswer, "last_answer") }
        if let firstFailure { try Wire.checkTime(firstFailure, "first_failure") }
        if let windowEnd { try Wire.checkTime(windowEnd, "window_end") }
        for a in attempts { try Wire.checkTime(a.t, "attempts.t") }
        let stage: WaitingCall.Stage
        switch PushChannel(rawValue: channel) {
        case .voip:
            guard due < deadline else {
                throw InvalidWaitingCall(problem: "due: \(due) is not before the deadline \(deadline) (a VoIP retry leaves before it)")
            }
            stage = .voip(attemptsMade: made)
        case .alert:
            guard let cause, let reason = FallbackCause(rawValue: cause) else {
                throw InvalidWaitingCall(problem: "cause: an alert wait needs a fallback cause, got \(InvalidEvent.quote(cause ?? "none"))")
            }
            guard let windowEnd else { throw InvalidWaitingCall(problem: "window_end: missing for an alert wait") }
            guard due < windowEnd else {
                throw InvalidWaitingCall(problem: "window_end: \(windowEnd) is not after the due time \(due) (an alert retry leaves before it)")
            }
            stage = .alert(cause: reason, attemptsMade: made, windowEndMs: windowEnd)
        case nil:
            throw InvalidWaitingCall(problem: "channel: \(InvalidEvent.quote(channel)) is neither voip nor alert")
        }
        var records: [AttemptRecord] = []
        for a in attempts {
            guard let ch = PushChannel(rawValue: a.channel) else {
                throw InvalidWaitingCall(problem: "attempts: channel \(InvalidEvent.quote(a.channel)) is neither voip nor alert")
            }
            var environment: ApnsEnvironment?
            if let name = a.environment {
                guard let known = ApnsEnvironment(rawValue: name) else {
                    throw InvalidWaitingCall(problem: "attempts: environment \(InvalidEvent.quote(name)) is neither production nor sandbox")
                }
                environment = known
            }
            records.append(AttemptRecord(sentAtMs: a.t, channel: ch, status: a.status, reason: a.reason, error: a.error,
                                         apnsID: a.apnsID, environment: environment))
        }
        return WaitingCall(callID: id, stage: stage, dueAtMs: due, deadlineMs: deadline, entryTimeMs: entryTime,
                           entryID: entry, alertUsable: alertUsable, attempts: records, lastAnswerAtMs: lastAnswer,
                           firstFailureAtMs: firstFailure)
    }

    /// True for a Redis stream id as XADD returns it: 1-20 digits, `-`, 1-20 digits (results
    /// carry it as `entry`, so a hand-edited schedule cannot put other text there).
    static func isStreamID(_ text: String) -> Bool {
        let parts = text.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { part in
            (1...20).contains(part.count) && part.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
    }

    /// Refuses a time outside `CallEvent.smallestUnixMs ... WaitingCall.latestUnixMs`.
    static func checkTime(_ ms: Int64, _ field: String) throws(InvalidWaitingCall) {
        guard ms >= CallEvent.smallestUnixMs && ms <= WaitingCall.latestUnixMs else {
            throw InvalidWaitingCall(problem: "\(field): \(ms) is not a unix time in milliseconds between 1973 and 3000")
        }
    }
}
