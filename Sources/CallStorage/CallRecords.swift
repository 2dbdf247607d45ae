// The values CallStore takes and returns. Plain data, no I/O.

import EventLoop
import Glibc
import RedisClient

/// What to record when an event reaches its outcome.
public struct ResultEntry: Equatable, Sendable {
    /// How a record meets the result key of its event id (`AppKeys.result`).
    public enum Keying: String, Sendable {
        /// The event's outcome: stored under the key unless one is there already. If one is,
        /// nothing of this record is written but a `duplicate` result naming the first outcome
        /// (its own fields after `outcome`); a stored invalid event's result is replaced.
        case once
        /// An invalid event's result: stored under the key only if the key is free, and
        /// written to the results stream (with its dead letter) in any case. It does not claim
        /// the id: a later event with the same id replaces it (`once`).
        case provisional
        /// A `duplicate` result (the first outcome known already): written to the results
        /// stream only; the key keeps the first outcome.
        case duplicate
    }

    /// Which of an app's two id namespaces keys the result: a call's (`AppKeys.result`), or a
    /// `call_cancelled` event's own (`AppKeys.cancelResult`).
    public enum Namespace: Sendable {
        case call
        case cancel
        /// A `call_ringing` event's own (`AppKeys.ringResult`), keyed by call and device.
        case ringing
    }

    /// The event's `id`, the idempotency key: the result is stored under it for the
    /// idempotency window. Nil for an event without a usable id (an invalid event): then
    /// nothing is keyed.
    public var eventId: String?
    public var namespace: Namespace
    public var keying: Keying
    /// The results entry's `result` field, also the key's value: `OutcomeRecord.json()`, which
    /// starts with `{"outcome":"…",` (the scripts read the outcome from there).
    public var resultJSON: String

    public init(eventId: String?, namespace: Namespace = .call, keying: Keying = .once, resultJSON: String) {
        self.eventId = eventId
        self.namespace = namespace
        self.keying = keying
        self.resultJSON = resultJSON
    }

    /// The event id a receipt's own result is keyed by: the call id, then `:` and the device
    /// for a call with devices.
    public static func ringingID(_ callID: String, device: String?) -> String {
        device.map { callID + ":" + $0 } ?? callID
    }

    /// The code of the compact idempotency record this record leaves for the window
    /// (`CompactOutcome`): a call's outcome recorded `once`; nil for a duplicate's answer, an
    /// invalid event's result, and an end event's or a receipt's own result (kept whole for the
    /// window under `cancelResult`, `ringResult`).
    var compactCode: String? {
        guard namespace == .call, keying == .once, eventId != nil else { return nil }
        return CompactOutcome.code(ofResultJSON: resultJSON)
    }

    /// The outcome a stored result (the result key's value) claims its event id with; nil when
    /// there is none, or when it is an invalid event's result, which claims nothing (the same
    /// rule as `CallStoreLua.resultRules`).
    public static func claimedOutcome(_ stored: String?) -> String? {
        guard let stored else { return nil }
        // Over the contiguous bytes: the router looks up every call, and most values it finds
        // are its own in-flight claims, which fail at the first byte (the generic
        // `starts(with:)` over the `UTF8View` cost ~850 instructions to say so).
        let outcome: String? = stored.withUTF8Bytes { utf8 in
            let head: StaticString = #"{"outcome":""#
            let n = head.utf8CodeUnitCount
            guard utf8.count >= n, memcmp(utf8.baseAddress!, head.utf8Start, n) == 0 else { return nil }
            var end = n
            while end < utf8.count && utf8[end] != UInt8(ascii: "\"") { end += 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: utf8[n..<end]), as: UTF8.self)
        }
        if outcome == "dead_lettered" && stored.contains(#","reason":"invalid_event: "#) { return nil }
        return outcome
    }
}

/// One outcome of a batched `CallStore.finish`: the record, the entry it acknowledges (nil:
/// none) and the tokens APNs declared invalid on the way.
///
/// Its fields are inline: a record is copied into the turn's batch, its app's chunk and the
/// script's arguments (a few retains each), and a shared box cost one allocation per call.
public struct FinishRecord: Equatable, Sendable {
    public let entryID: String?
    public let record: ResultEntry
    public let invalidTokens: [InvalidToken]
    /// With ring receipts on, what the record tells the guard against iOS's silent VoIP ban
    /// (`RingTally`); nil: nothing (receipts off, or nothing to tell).
    public let ringTally: RingTally?
    /// The dead letters of a call with devices whose outcome is no dead letter, one per
    /// device whose ring was one (`DeadLetterEntry.device`): written with the record, only
    /// when the record is (so a record written again writes none twice).
    public let deadLetters: [DeadLetterEntry]

    public init(entryID: String?, record: ResultEntry, invalidTokens: [InvalidToken] = [], ringTally: RingTally? = nil,
                deadLetters: [DeadLetterEntry] = []) {
        self.entryID = entryID
        self.record = record
        self.invalidTokens = invalidTokens
        self.ringTally = ringTally
        self.deadLetters = deadLetters
    }
}

/// With ring receipts on, what one record tells the guard against iOS's silent VoIP ban
/// (docs/protocol.md, *The guard against the silent VoIP ban*).
public enum RingTally: Equatable, Sendable {
    /// A call's rings: each device's VoIP token, and whether it rang (`silent` false) or its
    /// push was accepted and no receipt came (`silent`, keyed by the receipt id it waited for,
    /// `ResultEntry.ringingID`). `suspectAfter`: the app's `voip_suspected_after_silent_rings`.
    case call(rings: [Ring], suspectAfter: Int)
    /// A receipt's own record (`ringingID`): it clears what a silent count said of its token,
    /// and says the app's backend sends receipts.
    case receipt(ringingID: String)

    public struct Ring: Equatable, Sendable {
        public var voipToken: String
        public var silent: Bool
        public var ringingID: String

        public init(voipToken: String, silent: Bool, ringingID: String) {
            self.voipToken = voipToken
            self.silent = silent
            self.ringingID = ringingID
        }
    }
}

/// What a batched `CallStore.finish` did.
public struct FinishReport: Equatable, Sendable {
    /// Per record, in order: false when an outcome for its event id was already recorded
    /// (its `duplicate` result written instead, or nothing at all when the result there is its
    /// own entry's: the entry was delivered again; its entry still acknowledged).
    public var recorded: [Bool]
    /// Per record: the outcome recorded first for its event id when `recorded` is false and
    /// a `duplicate` result was written; nil when nothing was.
    public var firstOutcomes: [String?]
    /// How many of the entries were pending and are now acknowledged.
    public var acknowledged: Int64
    /// With ring tallies in the batch: how many calls in a row of the app heard no receipt
    /// after it (`AppKeys.callsWithoutReceipt`); nil when the batch had no call's tally.
    public var callsWithoutReceipt: Int64?
    /// VoIP tokens the batch marked suspected of iOS's silent ban (a feedback entry each).
    public var suspected: [String] = []
    /// VoIP tokens whose silent count a late receipt of the batch found (`AppKeys.silentRing`):
    /// `CallStore.clearVoipSuspicion` clears them.
    public var rangLate: [String] = []

    public init(recorded: [Bool], firstOutcomes: [String?]? = nil, acknowledged: Int64) {
        self.recorded = recorded
        self.firstOutcomes = firstOutcomes ?? Array(repeating: nil, count: recorded.count)
        self.acknowledged = acknowledged
    }
}

/// One event to look up before routing (`CallStore.lookup`).
public struct LookupQuery: Equatable, Sendable {
    public var eventId: String
    /// The event's tokens, to learn whether APNs declared them invalid; nil: not asked.
    public var voipToken: String?
    public var alertToken: String?
    /// Take the call's in-flight claim (`AppKeys.result`) in the same round trip, for an
    /// `incoming_call` about to be pushed.
    public var claim: Bool
    /// With ring receipts on: also read whether the VoIP tokens are suspected of iOS's silent
    /// ban (`AppKeys.voipSuspected`).
    public var voipSuspicion = false
    /// The tokens of a call's listed devices, one pair per device (nil: the device has none),
    /// looked up as `voipToken` and `alertToken` are; empty for a single-device call.
    public var deviceVoipTokens: [String?]
    public var deviceAlertTokens: [String?]
    /// An Android device's FCM token (the single-device form's), looked up as the others.
    public var fcmToken: String?
    /// Each listed device's FCM token (nil: an iPhone), one per device, or empty when no
    /// device has one.
    public var deviceFcmTokens: [String?]

    public init(eventId: String, voipToken: String?, alertToken: String?, claim: Bool = false,
                deviceVoipTokens: [String?] = [], deviceAlertTokens: [String?] = [], fcmToken: String? = nil,
                deviceFcmTokens: [String?] = []) {
        precondition(deviceVoipTokens.count == deviceAlertTokens.count, "one token pair per device")
        precondition(deviceFcmTokens.isEmpty || deviceFcmTokens.count == deviceVoipTokens.count, "one FCM token per device")
        self.eventId = eventId
        self.voipToken = voipToken
        self.alertToken = alertToken
        self.claim = claim
        self.deviceVoipTokens = deviceVoipTokens
        self.deviceAlertTokens = deviceAlertTokens
        self.fcmToken = fcmToken
        self.deviceFcmTokens = deviceFcmTokens
    }
}

/// A token APNs declared invalid: one feedback entry (docs/protocol.md) and one known-invalid key;
/// or a token accepted in the other environment (`environment`): a feedback entry only.
public struct InvalidToken: Equatable, Sendable {
    /// The hex token.
    public var token: String
    public var channel: TokenChannel
    /// APNs' reason (`Unregistered`, `BadDeviceToken`, …).
    public var reason: String
    /// Unix ms: APNs' 410 timestamp where given, else the time of the answer.
    public var timestampMs: Int64
    /// For an `environment_mismatch` entry: the environment (`sandbox`, `production`) that
    /// accepted the token. Its feedback entry carries it, and no known-invalid key is set.
    public var environment: String?

    public init(token: String, channel: TokenChannel, reason: String, timestampMs: Int64, environment: String? = nil) {
        self.token = token
        self.channel = channel
        self.reason = reason
        self.timestampMs = timestampMs
        self.environment = environment
    }
}

/// A dead letter's fields (stream `dead`: `event`, `reason`, `attempts`, `first_failure_ms`,
/// `last_failure_ms`, `replays`, `app`, for an event kept only in part `event_bytes` and
/// `event_sha256`, and for one device's ring of a call with devices `device`; the app comes
/// from the `AppKeys`).
public struct DeadLetterEntry: Equatable, Sendable {
    /// How much of an event refused for its size a dead letter keeps: enough to see what it
    /// was (its id and type are near its start), not what it weighed.
    public static let keptPrefixBytes = 4_096

    /// The original event, the bytes the producer wrote; for one refused for its size, their
    /// first `keptPrefixBytes`.
    public var event: [UInt8]
    /// When `event` is a prefix: the original's length and its SHA-256 (lower-case hex).
    public var eventBytes: Int?
    public var eventSHA256: String?
    /// Why it needs a human.
    public var reason: String
    /// JSON array of every attempt, as the caller renders it.
    public var attemptsJSON: String
    /// Unix ms of the first and last failure.
    public var firstFailureMs: Int64
    public var lastFailureMs: Int64
    /// How many times this event was already replayed from the dead letters.
    public var replays: Int
    /// The device (its id in the event's `devices`) whose ring alone this dead letter is, in a
    /// call whose outcome is no dead letter (`FinishRecord.deadLetters`); nil: the whole event's.
    public var device: String?

    public init(event: [UInt8], reason: String, attemptsJSON: String, firstFailureMs: Int64, lastFailureMs: Int64, replays: Int = 0,
                eventBytes: Int? = nil, eventSHA256: String? = nil, device: String? = nil) {
        self.event = event
        self.device = device
        self.eventBytes = eventBytes
        self.eventSHA256 = eventSHA256
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
    /// window): then only a `duplicate` result was written (nothing at all when the result
    /// there is this entry's own: it was delivered again), and the entry still acknowledged.
    public var recorded: Bool
    /// The outcome recorded first, when `recorded` is false and a `duplicate` result was
    /// written; nil when nothing was.
    public var firstOutcome: String? = nil
    /// Whether the stream entry was pending and is now acknowledged (false without an entry id,
    /// or when it was acknowledged before).
    public var acknowledged: Bool
    /// The id of the new dead-letter entry (deadLetter only, when recorded).
    public var deadEntryID: String?
}

/// What Redis knows about an event before it is routed (one round trip).
///
/// Its fields are inline: a lookup is read once, where its call starts (a copy is a few
/// retains), and a shared box cost one allocation per call.
public struct EventLookup: Equatable, Sendable {
    /// The outcome already recorded for the event id, nil if none (within the window) or if
    /// only an invalid event's result is there (`ResultEntry.claimedOutcome`).
    public var outcome: String? {
        get { fields.outcome }
        set { fields.outcome = newValue }
    }
    /// Whether the call was cancelled (or its ring ended by an answer or a decline).
    public var cancelled: Bool {
        get { fields.cancelled }
        set { fields.cancelled = newValue }
    }
    /// The cancellation marker's value when it is not a plain cancel's `1`: the end of the ring
    /// that set it (`answered:DEVICE`, `declined:DEVICE`, `RetrySchedule.cancel`).
    public var endMarker: String? {
        get { fields.endMarker }
        set { fields.endMarker = newValue }
    }
    /// Unix ms since when the event's VoIP / alert token is known invalid; nil if not known.
    public var voipInvalidSinceMs: Int64? {
        get { fields.voipInvalidSinceMs }
        set { fields.voipInvalidSinceMs = newValue }
    }
    public var alertInvalidSinceMs: Int64? {
        get { fields.alertInvalidSinceMs }
        set { fields.alertInvalidSinceMs = newValue }
    }
    /// The same for each listed device's tokens (`LookupQuery.deviceVoipTokens`), in its order.
    public var deviceVoipInvalidSinceMs: [Int64?] {
        get { fields.deviceVoipInvalidSinceMs }
        set { fields.deviceVoipInvalidSinceMs = newValue }
    }
    public var deviceAlertInvalidSinceMs: [Int64?] {
        get { fields.deviceAlertInvalidSinceMs }
        set { fields.deviceAlertInvalidSinceMs = newValue }
    }
    /// The same for FCM tokens: the single-device form's, and each listed device's (in order,
    /// nil for an iPhone; empty when the query named none).
    public var fcmInvalidSinceMs: Int64? {
        get { fields.fcmInvalidSinceMs }
        set { fields.fcmInvalidSinceMs = newValue }
    }
    public var deviceFcmInvalidSinceMs: [Int64?] {
        get { fields.deviceFcmInvalidSinceMs }
        set { fields.deviceFcmInvalidSinceMs = newValue }
    }
    /// With `LookupQuery.voipSuspicion`: whether the VoIP token (of the single-device form, or
    /// of each listed device in its order) is suspected of iOS's silent ban.
    public var voipSuspected: Bool {
        get { fields.voipSuspected }
        set { fields.voipSuspected = newValue }
    }
    public var deviceVoipSuspected: [Bool] {
        get { fields.deviceVoipSuspected }
        set { fields.deviceVoipSuspected = newValue }
    }
    /// For a query that claimed: the consumer holding the call's in-flight claim after the
    /// lookup — the asking consumer, or another live one that routes a copy of the call.
    public var claimHolder: String? {
        get { fields.claimHolder }
        set { fields.claimHolder = newValue }
    }
    /// The claim was taken by this lookup (or taken over from a lapsed consumer): false when
    /// the asking consumer held it already, for another entry of the call (a copy of it).
    public var claimTakenNow: Bool {
        get { fields.claimTakenNow }
        set { fields.claimTakenNow = newValue }
    }

    /// The fields, as `CallStore.lookup` fills them in before it makes the lookup.
    struct Fields: Equatable, Sendable {
        var outcome: String? = nil
        var cancelled: Bool
        var endMarker: String? = nil
        var voipInvalidSinceMs: Int64? = nil
        var alertInvalidSinceMs: Int64? = nil
        var deviceVoipInvalidSinceMs: [Int64?] = []
        var deviceAlertInvalidSinceMs: [Int64?] = []
        var fcmInvalidSinceMs: Int64? = nil
        var deviceFcmInvalidSinceMs: [Int64?] = []
        var voipSuspected: Bool = false
        var deviceVoipSuspected: [Bool] = []
        var claimHolder: String? = nil
        var claimTakenNow: Bool = false
    }

    private var fields: Fields

    init(_ fields: Fields) { self.fields = fields }

    public init(outcome: String?, cancelled: Bool, voipInvalidSinceMs: Int64? = nil, alertInvalidSinceMs: Int64? = nil,
                claimHolder: String? = nil) {
        fields = Fields(outcome: outcome, cancelled: cancelled, voipInvalidSinceMs: voipInvalidSinceMs,
                        alertInvalidSinceMs: alertInvalidSinceMs, claimHolder: claimHolder)
    }
}

/// What registering a consumer found (`CallStore.register`).
public enum ConsumerRegistration: Equatable, Sendable {
    /// The lease is this process's now; `live` are the consumers live at that moment,
    /// `signingKey` the deployment's retry signing key (`RetrySigner.adopt`).
    case registered(live: Set<String>, signingKey: String?)
    /// Another process (`instance`) holds a live lease under the name until `leaseUntilMs`
    /// (Redis' clock): a second gateway with the same name, or this one's previous run whose
    /// lease has not lapsed yet. Nothing was written.
    case taken(instance: String?, leaseUntilMs: Int64)
}

/// What a heartbeat found (`CallStore.heartbeat`).
public struct HeartbeatAnswer: Equatable, Sendable {
    /// Another instance that held the name's live lease until this beat: two processes run
    /// under one name.
    public var otherInstance: String?
    /// The deployment's retry signing key as Redis holds it after the beat.
    public var signingKey: String?

    public init(otherInstance: String?, signingKey: String?) {
        self.otherInstance = otherInstance
        self.signingKey = signingKey
    }
}

/// An entry taken over from a dead consumer, or claimed back by its own.
public struct ClaimedEntry: Equatable, Sendable {
    public var entry: StreamEntry
    /// How many times it has now been delivered: a take-over from a consumer that died counts
    /// (≥ 2), a live consumer claiming back its own entry does not. Poison-message detection:
    /// dead-letter entries delivered too often.
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
