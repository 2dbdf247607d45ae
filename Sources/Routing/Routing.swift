// Routing: event decoding and validation, the per-call state machine (VoIP first, alert
// fallback), outcomes and token feedback.
// Owns: every routing decision. Must not open sockets itself: it returns actions that the
// `RouterRole` (GatewayRoles) performs.
// Files: CallEvent (decoding, devices), AppRoutingPolicy, CallRouter (one device's state machine),
// CallStateMachine (a call's life as one machine: its entry's stay and one router per device,
// the end of the ring on the others, missed-call alerts), CallCopies and LiveCallStateMachine
// (an entry's stay in the router process, beside its copies), CallAction
// (what the runner does), OutcomeRecord (the result JSON), PushVerdict (reading APNs' and FCM's
// answers through each provider's one table), FcmMessages (what an Android phone is sent), JSONValue (the event's JSON parser, which reads what
// JSONSerialization read, the same way, without `Any`), JSONWriter (deterministic output of
// payloads, records and retry snapshots; docs/architecture.md, "JSON").

/// The final outcome of a call event, as written to the results stream (docs/protocol.md).
public enum CallOutcome: String, Sendable, CaseIterable {
    /// APNs accepted the VoIP push.
    case deliveredVoip = "delivered_voip"
    /// APNs accepted the fallback alert; the record carries the fallback's `cause`.
    case deliveredAlert = "delivered_alert"
    /// Every token the event had is invalid (or was known to be).
    case undeliverable
    /// The deadline passed and there was nothing to fall back to (no usable alert token).
    case expired
    /// The caller hung up before any push was delivered; nothing more is sent.
    case cancelled
    /// A `call_answered` event's own result: a device answered, the ring ended on the others.
    case answered
    /// A `call_declined` event's own result: a device declined, the ring ended on the others.
    case declined
    /// A `call_ringing` event's own result: the device named reported the call to CallKit.
    case ringing
    /// A human must look: the record carries the dead-letter `reason`.
    case deadLettered = "dead_lettered"
    /// The event's id already had an outcome within the idempotency window (a producer's
    /// re-send, a redelivery): nothing was sent for this entry; the record names the first
    /// outcome (`first_outcome`). Never stored as a call's outcome.
    case duplicate

    /// Its place in `allCases`: counts per outcome kept in an array, without hashing a name.
    public var ordinal: Int { CallOutcome.allCases.firstIndex(of: self)! }
}

/// Which of the call's two pushes: the PushKit VoIP push or the fallback alert. For an
/// Android device (docs/protocol.md, *Android devices*) the same two stages: `voip` is its
/// ring (FCM's high-priority data message), `alert` its missed-call notification.
public enum PushChannel: String, Sendable, CaseIterable {
    case voip, alert
}

/// Who delivers a device's pushes: Apple's APNs (an iPhone's VoIP and alert tokens) or
/// Firebase Cloud Messaging (an Android phone's `fcm_token`).
public enum PushProvider: String, Sendable, CaseIterable {
    case apns, fcm
}

/// Why the router fell back from VoIP to the alert push (the `cause` of `delivered_alert`).
public enum FallbackCause: String, Sendable, CaseIterable {
    /// The event had no VoIP token.
    case noVoipToken = "no_voip_token"
    /// APNs declared the VoIP token invalid, now or earlier (a known-invalid token).
    case voipTokenInvalid = "voip_token_invalid"
    /// The deadline passed (at start, or before the next VoIP retry could leave).
    case deadline
    /// The deadline passed while the call waited in its stream for its app's
    /// `limits.events_per_second` (docs/operations.md, *Limits*): a deadline miss the app's
    /// own rate caused. Also the `cause` of such a call's `expired` result.
    case rateLimited = "rate_limited"
    /// The deadline passed while the call waited in its stream because an operator had paused
    /// its app (`pushgw apps pause`, docs/operations.md, *Pausing an app*). Also the `cause`
    /// of such a call's `expired` result.
    case paused
    /// The VoIP policy's attempts ran out while the deadline still allowed another.
    case retriesExhausted = "retries_exhausted"
    /// APNs refused the VoIP payload as too large (413).
    case payload
    /// Nobody answered by the deadline (`missed_call_alert: unanswered`): the device's one
    /// missed-call alert, whatever its VoIP push did.
    case unanswered
    /// With ring receipts on: the device's VoIP push was accepted but no `call_ringing` came
    /// in time, nor after one more VoIP push (docs/protocol.md, *Ring receipts*).
    case noReceipt = "no_receipt"
    /// With ring receipts on: the device's VoIP token is suspected of iOS's silent VoIP ban
    /// (its last VoIP rings were accepted and none rang: docs/protocol.md, *The guard against
    /// the silent VoIP ban*): the call skipped VoIP and went straight to the alert.
    case voipSuspectedBlocked = "voip_suspected_blocked"
}

/// Why a call waited in its stream before the router read it, when something held it there:
/// a deadline that passed by then is that hold's (its `cause`), not the call's own `deadline`.
public enum StreamHold: Sendable, Equatable {
    /// Its app's `limits.events_per_second` (`AppIntake`): cause `rate_limited`.
    case rate
    /// An operator paused its app (`pushgw apps pause`): cause `paused`.
    case paused

    /// The fallback cause of a call this hold kept past its deadline.
    public var cause: FallbackCause {
        switch self {
        case .rate: .rateLimited
        case .paused: .paused
        }
    }
}
