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
    /// The id of the device the push went to, in a call with `devices` (`device`); nil in a
    /// single-device call.
    public var device: String?
    /// `fcm` for a message to FCM (`provider`; its `apns_id` is then FCM's message name); nil
    /// for APNs.
    public var provider: PushProvider?
    /// What the push was when it was not the call's ring or its fallback: `ended` (the
    /// background push that ends the ring elsewhere) or `missed_call` (the alert of an
    /// unanswered call); nil for the others (`kind`).
    public var kind: PushKind?

    /// A push of the call besides its ring and its fallback alert.
    public enum PushKind: String, Equatable, Sendable {
        /// The background push telling a device the call ended elsewhere.
        case ended
        /// The missed-call alert of a call nobody answered (`missed_call_alert: unanswered`).
        case missedCall = "missed_call"
        /// A step of a device's escalation for want of its ring receipt: one more VoIP push
        /// (`channel: voip`), then its alert (`channel: alert`).
        case noReceipt = "no_receipt"
    }

    public init(sentAtMs: Int64, channel: PushChannel, status: Int?, reason: String?, error: String?, apnsID: String?,
                environment: ApnsEnvironment? = nil, provider: PushProvider = .apns) {
        self.provider = provider == .apns ? nil : provider
        self.sentAtMs = sentAtMs
        self.channel = channel
        self.status = status
        self.reason = reason
        self.error = error
        self.apnsID = apnsID
        self.environment = environment
    }
}

/// What ended the ring of a call's devices before its deadline (docs/protocol.md, *Devices*).
public enum CallEnd: Equatable, Sendable {
    /// `call_answered`: the device named answered.
    case answered(device: String)
    /// `call_declined`: the device named declined.
    case declined(device: String)
    /// `call_cancelled`: the caller gave up.
    case cancelled

    /// The call record's `ended`.
    public var name: String {
        switch self {
        case .answered: return "answered"
        case .declined: return "declined"
        case .cancelled: return "cancelled"
        }
    }

    /// The device that answered or declined (`ended_by`); nil for a cancel.
    public var device: String? {
        switch self {
        case let .answered(device), let .declined(device): return device
        case .cancelled: return nil
        }
    }

    /// The call's cancellation marker's value for this end (Redis keeps the first end of a
    /// call): `1` for a cancel (what it always was), `answered:DEVICE`, `declined:DEVICE`.
    public var marker: String {
        switch self {
        case let .answered(device): return "answered:" + device
        case let .declined(device): return "declined:" + device
        case .cancelled: return "1"
        }
    }

    /// The end a marker's value names; a cancel for `1` or any value no version writes.
    public init(marker: String?) {
        guard let marker, let colon = marker.firstIndex(of: ":") else { self = .cancelled; return }
        let device = String(marker[marker.index(after: colon)...])
        switch marker[..<colon] {
        case "answered": self = .answered(device: device)
        case "declined": self = .declined(device: device)
        default: self = .cancelled
        }
    }

    /// What the background push tells the other devices (its payload's `ended`).
    public var told: EndedElsewhere {
        switch self {
        case .answered: return .answeredElsewhere
        case .declined: return .declinedElsewhere
        case .cancelled: return .cancelled
        }
    }
}

/// The `ended` of the background push that ends a call on a device (docs/app.md).
public enum EndedElsewhere: String, Equatable, Sendable, CaseIterable {
    case answeredElsewhere = "answered_elsewhere"
    case declinedElsewhere = "declined_elsewhere"
    case cancelled
}

/// One device of a call with `devices`, as its result lists it (`devices`): what the device got.
public struct DeviceRecord: Equatable, Sendable {
    /// The producer's id of the device; nil for the device of the single-device form.
    public var id: String?
    /// What its ring gave, by the rules of a single-device call: `delivered_voip`,
    /// `delivered_alert`, `undeliverable`, `expired`, `cancelled` (stopped by an answer, a
    /// decline or a cancel before it was delivered), `dead_lettered` (with `reason`).
    public var outcome: CallOutcome
    public var channel: PushChannel?
    public var apnsID: String?
    public var environmentMismatch: ApnsEnvironment?
    public var cause: FallbackCause?
    public var reason: String?
    /// The background push it was sent when the call ended elsewhere (`told`).
    public var told: EndedElsewhere?
    /// With ring receipts on: when the device's `call_ringing` was heard, unix ms (`rang_at`):
    /// the phone reported the call to CallKit.
    public var rangAtMs: Int64?

    public init(id: String?, outcome: CallOutcome, channel: PushChannel? = nil, apnsID: String? = nil,
                environmentMismatch: ApnsEnvironment? = nil, cause: FallbackCause? = nil, reason: String? = nil,
                told: EndedElsewhere? = nil, rangAtMs: Int64? = nil) {
        self.id = id
        self.outcome = outcome
        self.channel = channel
        self.apnsID = apnsID
        self.environmentMismatch = environmentMismatch
        self.cause = cause
        self.reason = reason
        self.told = told
        self.rangAtMs = rangAtMs
    }
}

/// The result of one event (field `result` of `pushgw:{APP}:results`, and the value of its
/// per-event key, docs/protocol.md), also the record a dead letter carries. `json()` is
/// deterministic: keys in the order `outcome, cancelled_after, delivered_at, first_outcome, id,
/// type, app, entry, device, rang_at, channel, apns_id, environment_mismatch, cause, reason, ended, ended_by,
/// latency_ms, attempts, devices, stopped, told`, absent values omitted; each attempt `t,
/// device, kind, channel, provider, environment, status, reason, error, apns_id`; each device `id,
/// outcome, channel, apns_id, environment_mismatch, cause, reason, told, rang_at`. A single-device
/// call's record has none of the devices' keys, so its bytes are what they were before
/// devices. `outcome` always comes
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
    /// Every attempt, in order (in a call with `devices`, each names its device).
    public var attempts: [AttemptRecord]
    /// What ended a call with `devices` before its deadline: an answer, a decline, a cancel
    /// (`ended`); nil when it rang out.
    public var ended: CallEnd?
    /// Each device of a call with `devices` (or of any call of an app whose missed-call alert
    /// is `unanswered`), in the event's order (`devices`); nil for a single-device call.
    public var devices: [DeviceRecord]?
    /// For a `call_answered`, `call_declined` or `call_cancelled` event's own result: the
    /// devices whose ring it cut short (a push in flight, a retry, a fallback to come:
    /// `stopped`) and those it sent the background push that ends the call (`told`).
    public var stopped: [String]?
    public var told: [String]?
    /// For a `call_ringing` event's own result: the device it confirmed (`device`; nil for the
    /// single-device form) and when it rang, the receipt entry's time, unix ms (`rang_at`).
    public var device: String?
    public var rangAtMs: Int64?

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
            o.string("device", device)
            o.int("rang_at", rangAtMs)
            o.string("channel", channel?.rawValue)
            o.string("apns_id", apnsID)
            o.string("environment_mismatch", environmentMismatch?.rawValue)
            o.string("cause", cause?.rawValue)
            o.string("reason", reason)
            o.string("ended", ended?.name)
            o.string("ended_by", ended?.device)
            o.int("latency_ms", latencyMs)
            o.array("attempts", attempts) { w, a in
                w.object { e in
                    e.int("t", a.sentAtMs)
                    e.string("device", a.device)
                    e.string("kind", a.kind?.rawValue)
                    e.string("channel", a.channel.rawValue)
                    e.string("provider", a.provider?.rawValue)
                    e.string("environment", a.environment?.rawValue)
                    e.int("status", a.status.map(Int64.init))
                    e.string("reason", a.reason)
                    e.string("error", a.error)
                    e.string("apns_id", a.apnsID)
                }
            }
            if let devices {
                o.array("devices", devices) { w, d in
                    w.object { e in
                        e.string("id", d.id)
                        e.string("outcome", d.outcome.rawValue)
                        e.string("channel", d.channel?.rawValue)
                        e.string("apns_id", d.apnsID)
                        e.string("environment_mismatch", d.environmentMismatch?.rawValue)
                        e.string("cause", d.cause?.rawValue)
                        e.string("reason", d.reason)
                        e.string("told", d.told?.rawValue)
                        e.int("rang_at", d.rangAtMs)
                    }
                }
            }
            if let stopped { o.array("stopped", stopped) { w, id in w.string(id) } }
            if let told { o.array("told", told) { w, id in w.string(id) } }
        }
        return w.finish()
    }

    /// The `rang_at` of a receipt's own result as `json()` wrote it (unix ms); nil when it has none.
    public static func rangAtMs(inJSON json: String) -> Int64? {
        guard let parsed = try? JSONParser.parse(Array(json.utf8)), case let .object(o) = parsed,
              case let .int(ms)? = o.last("rang_at") else { return nil }
        return ms
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
