// The values CallStore takes and returns. Plain data, no I/O.

/// What to record when an event reaches its outcome.
public struct ResultEntry: Equatable, Sendable {
    /// The event's `id`, the idempotency key: the outcome is stored under it for the
    /// idempotency window, and a second record for the same id writes nothing. Nil for an
    /// event without a usable id (an invalid event): then nothing is keyed.
    public var eventId: String?
    /// The outcome name kept in the done key (`delivered_voip`, `dead_lettered`, …).
    public var outcome: String
    /// The results entry's `result` field: the caller's JSON, stored as given.
    public var resultJSON: String

    public init(eventId: String?, outcome: String, resultJSON: String) {
        self.eventId = eventId
        self.outcome = outcome
        self.resultJSON = resultJSON
    }
}

/// One outcome of a batched `CallStore.finish`: the record, the entry it acknowledges (nil:
/// none) and the tokens APNs declared invalid on the way.
public struct FinishRecord: Equatable, Sendable {
    public var entryID: String?
    public var record: ResultEntry
    public var invalidTokens: [InvalidToken]

    public init(entryID: String?, record: ResultEntry, invalidTokens: [InvalidToken] = []) {
        self.entryID = entryID
        self.record = record
        self.invalidTokens = invalidTokens
    }
}

/// What a batched `CallStore.finish` did.
public struct FinishReport: Equatable, Sendable {
    /// Per record, in order: false when an outcome for its event id was already recorded
    /// (nothing written for it; its entry still acknowledged).
    public var recorded: [Bool]
    /// How many of the entries were pending and are now acknowledged.
    public var acknowledged: Int64
}

/// One event to look up before routing (`CallStore.lookup`).
public struct LookupQuery: Equatable, Sendable {
    public var eventId: String
    /// The event's tokens, to learn whether APNs declared them invalid; nil: not asked.
    public var voipToken: String?
    public var alertToken: String?
    /// Take the call's in-flight claim (`InFlightClaim`, in its done key) in the same step, for an
    /// `incoming_call` about to be pushed.
    public var claim: Bool

    public init(eventId: String, voipToken: String?, alertToken: String?, claim: Bool = false) {
        self.eventId = eventId
        self.voipToken = voipToken
        self.alertToken = alertToken
        self.claim = claim
    }
}

/// A token APNs declared invalid: one feedback entry (DESIGN.md §2) and one known-invalid key.
public struct InvalidToken: Equatable, Sendable {
    /// The hex token.
    public var token: String
    public var channel: TokenChannel
    /// APNs' reason (`Unregistered`, `BadDeviceToken`, …).
    public var reason: String
    /// Unix ms: APNs' 410 timestamp where given, else the time of the answer.
    public var timestampMs: Int64

    public init(token: String, channel: TokenChannel, reason: String, timestampMs: Int64) {
        self.token = token
        self.channel = channel
        self.reason = reason
        self.timestampMs = timestampMs
    }
}

/// A dead letter's fields (stream `dead`: `event`, `reason`, `attempts`, `first_failure_ms`,
/// `last_failure_ms`, `replays`, `app`; the app comes from the `AppKeys`).
public struct DeadLetterEntry: Equatable, Sendable {
    /// The original event, the bytes the producer wrote.
    public var event: [UInt8]
    /// Why it needs a human.
    public var reason: String
    /// JSON array of every attempt, as the caller renders it.
    public var attemptsJSON: String
    /// Unix ms of the first and last failure.
    public var firstFailureMs: Int64
    public var lastFailureMs: Int64
    /// How many times this event was already replayed from the dead letters.
    public var replays: Int

    public init(event: [UInt8], reason: String, attemptsJSON: String, firstFailureMs: Int64, lastFailureMs: Int64, replays: Int = 0) {
        self.event = event
        self.reason = reason
        self.attemptsJSON = attemptsJSON
        self.firstFailureMs = firstFailureMs
        self.lastFailureMs = lastFailureMs
        self.replays = replays
    }

    /// A dead letter whose event is given as text.
    public init(event: String, reason: String, attemptsJSON: String, firstFailureMs: Int64, lastFailureMs: Int64, replays: Int = 0) {
        self.init(event: Array(event.utf8), reason: reason, attemptsJSON: attemptsJSON, firstFailureMs: firstFailureMs,
                  lastFailureMs: lastFailureMs, replays: replays)
    }
}

/// What `finish` and `deadLetter` did.
public struct RecordReport: Equatable, Sendable {
    /// False when an outcome for the event id was already recorded (within the idempotency
    /// window): then nothing was written but the entry was still acknowledged.
    public var recorded: Bool
    /// Whether the stream entry was pending and is now acknowledged (false without an entry id,
    /// or when it was acknowledged before).
    public var acknowledged: Bool
    /// The id of the new dead-letter entry (deadLetter only, when recorded).
    public var deadEntryID: String?
}

/// What Redis knows about an event before it is routed (one round trip).
public struct EventLookup: Equatable, Sendable {
    /// The outcome already recorded for the event id, nil if none (within the window).
    public var outcome: String?
    /// Whether the call was cancelled.
    public var cancelled: Bool
    /// Unix ms since when the event's VoIP / alert token is known invalid; nil if not known.
    public var voipInvalidSinceMs: Int64?
    public var alertInvalidSinceMs: Int64?
    /// For a query that claimed: the consumer holding the call's in-flight claim after the
    /// lookup — the asking consumer, or another live one that routes a copy of the call.
    public var claimHolder: String?

    public init(outcome: String?, cancelled: Bool, voipInvalidSinceMs: Int64? = nil, alertInvalidSinceMs: Int64? = nil,
                claimHolder: String? = nil) {
        self.outcome = outcome
        self.cancelled = cancelled
        self.voipInvalidSinceMs = voipInvalidSinceMs
        self.alertInvalidSinceMs = alertInvalidSinceMs
        self.claimHolder = claimHolder
    }
}

/// What registering a consumer found (`CallStore.register`).
public enum ConsumerRegistration: Equatable, Sendable {
    /// The lease is this process's now; `live` are the consumers live at that moment.
    case registered(live: Set<String>)
    /// Another process (`instance`) holds a live lease under the name until `leaseUntilMs`
    /// (Redis' clock): a second gateway with the same name, or this one's previous run whose
    /// lease has not lapsed yet. Nothing was written.
    case taken(instance: String?, leaseUntilMs: Int64)
}

/// An entry taken over from a dead consumer.
public struct ClaimedEntry: Equatable, Sendable {
    public var entry: StreamEntry
    /// How many times it has now been delivered, this claim included (≥ 2). Poison-message
    /// detection: dead-letter entries delivered too often.
    public var deliveries: Int64
}

/// The result of `claimAbandoned`.
public struct ClaimResult: Equatable, Sendable {
    /// Claimed entries, oldest first.
    public var entries: [ClaimedEntry]
    /// Pending ids whose entries no longer exist (deleted or trimmed while pending): Redis
    /// dropped them from the pending list. That work is lost: count and report it.
    public var lostIDs: [String]
}

/// The consumer registry (`GatewayKeys.consumers`) as `consumerRegistry` reads it.
public struct ConsumerRegistry: Equatable, Sendable {
    /// Consumers whose lease has not lapsed.
    public var live: Set<String>
    /// Consumers whose lease lapsed and that are still registered: their pending entries, if
    /// any, are to be taken over.
    public var lapsed: Set<String>
}

/// Size of one app's calls stream, for metrics.
public struct Backlog: Equatable, Sendable {
    /// XLEN: entries not yet finished (unread and in flight; finished ones are deleted).
    public var length: Int64
    /// Delivered and not yet acknowledged (in flight).
    public var pending: Int64
}
