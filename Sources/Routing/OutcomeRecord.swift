import APNs

/// One push attempt as the outcome record lists it.
public struct AttemptRecord: Equatable, Sendable {
    /// When the push was handed to the APNs client, unix ms (`t`).
    public let sentAtMs: Int64
    public let channel: PushChannel
    /// APNs' HTTP status; nil when no answer came (see `error`).
    public let status: Int?
    /// Apple's reason text of a rejection.
    public let reason: String?
    /// The transport failure (timeout, connection lost, …) when APNs gave no answer.
    public let error: String?
    /// `apns-id` of APNs' answer.
    public let apnsID: String?
    /// Set when the push went to the other APNs environment than the call's (`sandbox` or
    /// `production`): the try after a `BadDeviceToken` (`environment`); nil for the call's own.
    public let environment: ApnsEnvironment?

    public init(sentAtMs: Int64, channel: PushChannel, status: Int?, reason: String?, error: String?, apnsID: String?,
                environment: ApnsEnvironment? = nil) {
        self.sentAtMs = sentAtMs
        self.channel = channel
        self.status = status
        self.reason = reason
        self.error = error
        self.apnsID = apnsID
        self.environment = environment
    }
}

/// The result of one event (field `result` of `pushgw:{APP}:results`, and the value of its
/// per-event key, docs/protocol.md), also the record a dead letter carries. `json()` is
/// deterministic: keys in the order `outcome, cancelled_after, delivered_at, first_outcome, id,
/// type, app, entry, channel, apns_id, environment_mismatch, cause, reason, latency_ms,
/// attempts`, absent values omitted; each attempt `t, channel, environment, status, reason,
/// error, apns_id`. `outcome` always comes
/// first: the recording scripts read it from there (`CallStoreLua`); the cancel step writes
/// `cancelled_after` and `delivered_at` right after it (`RetryLua.cancel`).
///
/// Beyond docs/protocol.md: `type` (a cancel event gets a record of its own), `entry` (the calls
/// entry, what the producer's XADD returned) and the `duplicate` outcome with `first_outcome`.
public struct OutcomeRecord: Equatable, Sendable {
    public var outcome: CallOutcome
    /// For a `call_cancelled` event's own result: what its call had got already when the cancel
    /// was recorded (`delivered_voip`, `delivered_alert`: the phone rang or showed the alert,
    /// the cancel came too late to stop it). Set by the cancel step, which reads the call's result.
    public var cancelledAfter: CallOutcome?
    /// With `cancelledAfter`: when APNs accepted the call's push, unix ms.
    public var deliveredAtMs: Int64?
    /// For a `duplicate`: the outcome recorded for the event id first.
    public var firstOutcome: CallOutcome?
    /// The call id; nil only for an invalid event whose id could not be read.
    public var id: String?
    /// The event's type; nil for an invalid event whose type could not be read.
    public var type: CallEvent.Kind?
    /// The app id.
    public var app: String
    /// The stream id of the calls entry this record answers (the producer's XADD reply; for a
    /// call that waited for retries, its first entry). The router knows no stream ids: the
    /// runner that read the entry sets it before the record is written.
    public var entry: String?
    /// The channel that delivered (delivered_voip / delivered_alert only).
    public var channel: PushChannel?
    /// `apns-id` of the delivered push.
    public var apnsID: String?
    /// The environment that delivered, when it is not the call's: the token was refused with
    /// `BadDeviceToken` in the call's environment and accepted in this one (an app built for
    /// the other environment, or the app's `environment` set wrong). The token is not invalid.
    public var environmentMismatch: ApnsEnvironment?
    /// Why the alert fallback was used (delivered_alert only).
    public var cause: FallbackCause?
    /// `DeadLetterReason.text` (dead_lettered only).
    public var reason: String?
    /// From the stream entry's time to the last APNs answer (or transport failure), in ms;
    /// nil when no push was answered.
    public var latencyMs: Int64?
    /// Every attempt, in order.
    public var attempts: [AttemptRecord]

    public init(outcome: CallOutcome, firstOutcome: CallOutcome? = nil, id: String?, type: CallEvent.Kind?, app: String,
                entry: String? = nil, channel: PushChannel? = nil, apnsID: String? = nil, cause: FallbackCause? = nil,
                reason: String? = nil, latencyMs: Int64? = nil, attempts: [AttemptRecord] = []) {
        self.outcome = outcome
        self.firstOutcome = firstOutcome
        self.id = id
        self.type = type
        self.app = app
        self.entry = entry
        self.channel = channel
        self.apnsID = apnsID
        self.cause = cause
        self.reason = reason
        self.latencyMs = latencyMs
        self.attempts = attempts
    }

    /// The record as compact JSON, the same bytes for the same record.
    public func json() -> [UInt8] {
        var w = JSONWriter()
        w.object { o in
            o.string("outcome", outcome.rawValue)
            o.string("cancelled_after", cancelledAfter?.rawValue)
            o.int("delivered_at", deliveredAtMs)
            o.string("first_outcome", firstOutcome?.rawValue)
            o.string("id", id)
            o.string("type", type?.rawValue)
            o.string("app", app)
            o.string("entry", entry)
            o.string("channel", channel?.rawValue)
            o.string("apns_id", apnsID)
            o.string("environment_mismatch", environmentMismatch?.rawValue)
            o.string("cause", cause?.rawValue)
            o.string("reason", reason)
            o.int("latency_ms", latencyMs)
            o.array("attempts", attempts) { w, a in
                w.object { e in
                    e.int("t", a.sentAtMs)
                    e.string("channel", a.channel.rawValue)
                    e.string("environment", a.environment?.rawValue)
                    e.int("status", a.status.map(Int64.init))
                    e.string("reason", a.reason)
                    e.string("error", a.error)
                    e.string("apns_id", a.apnsID)
                }
            }
        }
        return w.finish()
    }

    /// `json()` as a string.
    public var jsonString: String { String(decoding: json(), as: UTF8.self) }

    /// This record turned into the answer of a copy whose id was taken meanwhile: outcome
    /// `duplicate`, `first_outcome`, the rest its own (what the recording script writes then,
    /// `CallStoreLua.resultRules`).
    public func duplicate(of first: CallOutcome) -> OutcomeRecord {
        var copy = self
        copy.outcome = .duplicate
        copy.firstOutcome = first
        return copy
    }
}
