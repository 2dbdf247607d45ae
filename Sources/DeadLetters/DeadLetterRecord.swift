import Foundation
import CallStorage
import JSONOutput
import RedisClient

/// One push attempt of a dead-lettered event, as operators see it.
public struct DeadLetterAttempt: Equatable, Sendable {
    /// When the push was handed to the APNs client, unix ms; nil when the record had none.
    public var timeMs: Int64?
    /// `voip` or `alert`.
    public var channel: String?
    /// The last 8 characters of the token the push went to: from the attempt when it carries
    /// a token, otherwise the event's token of the attempt's channel.
    public var token: String?
    /// APNs' HTTP status; nil when no answer came (see `error`).
    public var status: Int?
    /// Apple's reason of a rejection.
    public var reason: String?
    /// The transport failure when APNs gave no answer.
    public var error: String?
    public var apnsID: String?
    /// Which dead letter of the event the attempt belongs to: 1 for the first, 2 for the one
    /// after the first replay, …
    public var round: Int

    public init(timeMs: Int64?, channel: String?, token: String?, status: Int?, reason: String?, error: String?,
                apnsID: String?, round: Int) {
        self.timeMs = timeMs
        self.channel = channel
        self.token = token
        self.status = status
        self.reason = reason
        self.error = error
        self.apnsID = apnsID
        self.round = round
    }
}

/// One dead letter of an event: the first one, or one after a replay.
public struct DeadLetterRound: Equatable, Sendable {
    /// 1-based, in order of death.
    public var round: Int
    /// The dead entry id it had (gone once replayed).
    public var deadEntryID: String
    public var reason: String
    /// Unix ms of its first and last failure.
    public var firstFailureMs: Int64?
    public var lastFailureMs: Int64?
    public var attempts: [DeadLetterAttempt]

    public init(round: Int, deadEntryID: String, reason: String, firstFailureMs: Int64?, lastFailureMs: Int64?,
                attempts: [DeadLetterAttempt]) {
        self.round = round
        self.deadEntryID = deadEntryID
        self.reason = reason
        self.firstFailureMs = firstFailureMs
        self.lastFailureMs = lastFailureMs
        self.attempts = attempts
    }
}

/// One dead letter read back: the stream entry the router wrote (`event`, `reason`,
/// `attempts`, `first_failure_ms`, `last_failure_ms`, `replays`, `app`), joined with the
/// replay ledger of its event when it died again after a replay. Plain data, no I/O.
///
/// Invariants: `rounds` is never empty and its last round is this entry; `replays` is
/// `rounds.count - 1` unless the entry itself says more; `firstFailureMs` is the first round's.
public struct DeadLetterRecord: Equatable, Sendable {
    /// The dead entry id (`ms-seq`).
    public let id: String
    public let app: String
    /// When the entry was written (its id's time), unix ms.
    public let deadAtMs: Int64
    /// The original event, the bytes the producer wrote (which need not be UTF-8); for an event
    /// refused for its size (or longer than `DeadLetterStore.wholeEventLimit`), their start.
    public let event: [UInt8]
    /// The original event's length, bytes: `event.count` unless the dead letter kept a prefix.
    public let eventBytes: Int
    /// False when `event` is only the start of the original (`eventBytes` long): such a dead
    /// letter cannot be replayed (the router refuses an event of that size anyway).
    public var isEventWhole: Bool { eventBytes == event.count }
    /// The event as text; nil when its bytes are not UTF-8.
    public var eventText: String? { String(validating: event, as: UTF8.self) }
    /// `EventDigest.of(event)`: names the event's replay ledger.
    public let eventDigest: String
    /// The event's `id` (the call id), nil when unreadable.
    public let callID: String?
    /// The event's `type`, nil when unreadable.
    public let eventType: String?
    /// The calls entry the event came in (what the producer's XADD returned, the `entry` of its
    /// result): from the dead letter's record; nil when it has none.
    public let callsEntry: String?
    /// The device (its id in the event's `devices`) whose ring alone this dead letter is, in a
    /// call with devices whose outcome is no dead letter (docs/protocol.md, *How an event ends*);
    /// nil for a dead letter of the whole event.
    public let device: String?
    /// The event's tokens, nil when absent.
    public let voipToken: String?
    public let alertToken: String?
    /// The event's `deadline`, unix ms, nil when absent (then the call's deadline is its first
    /// calls entry's time plus the app's ring timeout: `callDeadlineMs(ringTimeoutMs:)`).
    public let deadlineMs: Int64?
    /// The original call's deadline a replay wrote to the replay ledger this dead letter
    /// continues (a replayed call that died again); nil otherwise.
    public let ledgerDeadlineMs: Int64?
    /// The final reason (why it needs a human).
    public let reason: String
    /// How many times the event was replayed from the dead letters before this death.
    public let replays: Int
    /// First failure of the first round and last failure of this one, unix ms.
    public let firstFailureMs: Int64?
    public let lastFailureMs: Int64?
    /// Every dead letter of the event, oldest first; the last is this entry.
    public let rounds: [DeadLetterRound]
    /// True when a replay ledger supplied the earlier rounds (purging this entry drops it).
    public let continuesLedger: Bool

    /// Every attempt, oldest round first.
    public var attempts: [DeadLetterAttempt] { rounds.flatMap(\.attempts) }

    /// Reads `entry` of `app`'s dead stream, with the ledger of its event's digest if any
    /// (`DeadLetterStore.ledgers`). A ledger written for this very entry, or before its
    /// replay re-entered the calls stream after this entry's death, does not apply.
    public init(entry: StreamEntry, app: String, ledger: [String: String]?) {
        let f = entry.fields
        id = entry.id
        self.app = f["app"] ?? app
        deadAtMs = DeadLetterRecord.timeMs(ofID: entry.id) ?? 0
        let event = entry.values["event"] ?? []
        self.event = event
        eventBytes = f["event_bytes"].flatMap(DeadLetterRecord.byteCount).map { max($0, event.count) } ?? event.count
        eventDigest = EventDigest.of(event)
        let object = PrettyJSON.object(String(decoding: event, as: UTF8.self))
        let record = f["attempts"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) }
        callID = JSONRead.string(object?["id"]) ?? JSONRead.string((record as? [String: Any])?["id"])
        eventType = JSONRead.string(object?["type"])
        callsEntry = JSONRead.string((record as? [String: Any])?["entry"])
        device = f["device"]
        // A device's dead letter: the tokens are its entry's in `devices` (an Android phone's
        // one FCM token for both stages).
        let named = device.flatMap { id in
            (object?["devices"] as? [Any])?.lazy.compactMap { $0 as? [String: Any] }.first { JSONRead.string($0["id"]) == id }
        }
        let fcmToken = JSONRead.string(named?["fcm_token"])
        voipToken = JSONRead.string((named ?? object)?["voip_token"]) ?? fcmToken
        alertToken = JSONRead.string((named ?? object)?["alert_token"]) ?? fcmToken
        deadlineMs = JSONRead.int(object?["deadline"])
        reason = f["reason"] ?? JSONRead.string((record as? [String: Any])?["reason"]) ?? "unknown"
        let ownFirst = f["first_failure_ms"].flatMap(DeadLetterRecord.unixMs)
        let ownLast = f["last_failure_ms"].flatMap(DeadLetterRecord.unixMs)

        var earlier: [DeadLetterRound] = []
        var ledgerReplays = 0
        var ledgerDeadline: Int64?
        if let ledger, ledger["dead_entry"] != entry.id,
           let callsEntry = ledger["calls_entry"].flatMap(DeadLetterRecord.timeMs(ofID:)), callsEntry <= deadAtMs,
           let history = ledger["history"].flatMap(ReplayHistory.init(json:)) {
            earlier = history.rounds
            ledgerReplays = ledger["replays"].flatMap(DeadLetterRecord.count) ?? history.rounds.count
            ledgerDeadline = ledger["call_deadline"].flatMap(DeadLetterRecord.unixMs)
        }
        ledgerDeadlineMs = ledgerDeadline
        continuesLedger = !earlier.isEmpty
        let number = earlier.count + 1
        let attemptList = (record as? [String: Any])?["attempts"] as? [Any] ?? record as? [Any] ?? []
        let own = DeadLetterAttempt.list(attemptList, voipToken: voipToken, alertToken: alertToken, round: number)
        rounds = earlier + [DeadLetterRound(round: number, deadEntryID: entry.id, reason: reason, firstFailureMs: ownFirst,
                                            lastFailureMs: ownLast, attempts: own)]
        replays = max(f["replays"].flatMap(DeadLetterRecord.count) ?? 0, ledgerReplays)
        firstFailureMs = earlier.first?.firstFailureMs ?? ownFirst
        lastFailureMs = ownLast
    }

    /// A unix-ms field of the entry; nil unless it is a whole number in 0 ... 9e15 (year 287,000):
    /// the dead stream is read as untrusted input, and times meet arithmetic (ages).
    static func unixMs(_ text: String) -> Int64? {
        guard let ms = Int64(text), ms >= 0, ms <= 9_000_000_000_000_000 else { return nil }
        return ms
    }

    /// A byte count; nil unless it is a whole number in 0 ... 2^40.
    static func byteCount(_ text: String) -> Int? {
        guard let n = Int(text), n >= 0, n <= 1 << 40 else { return nil }
        return n
    }

    /// A replay count; nil unless it is a whole number in 0 ... 1,000,000 (a replay adds one).
    static func count(_ text: String) -> Int? {
        guard let n = Int(text), n >= 0, n <= 1_000_000 else { return nil }
        return n
    }

    /// The time part of a stream id (`ms-seq` or `ms`), nil when it is not one.
    public static func timeMs(ofID id: String) -> Int64? {
        streamID(id).flatMap { $0.ms <= 9_000_000_000_000_000 ? Int64($0.ms) : nil }
    }

    /// `MS` or `MS-SEQ` read as numbers (digits only; nil for anything else). Scans the bytes
    /// once: listing pages sort hundreds of ids by it.
    static func streamID(_ id: String) -> (ms: UInt64, seq: UInt64?)? {
        var ms: UInt64 = 0, seq: UInt64 = 0
        var digits = 0, seqDigits = 0
        var inSeq = false
        for b in id.utf8 {
            if b == UInt8(ascii: "-") {
                guard !inSeq, digits > 0 else { return nil }
                inSeq = true
                continue
            }
            guard b >= 0x30, b <= 0x39 else { return nil }
            let d = UInt64(b - 0x30)
            if inSeq {
                let (m, o1) = seq.multipliedReportingOverflow(by: 10)
                let (n, o2) = m.addingReportingOverflow(d)
                guard !o1, !o2 else { return nil }
                seq = n
                seqDigits += 1
            } else {
                let (m, o1) = ms.multipliedReportingOverflow(by: 10)
                let (n, o2) = m.addingReportingOverflow(d)
                guard !o1, !o2 else { return nil }
                ms = n
                digits += 1
            }
        }
        guard digits > 0, !inSeq || seqDigits > 0 else { return nil }
        return (ms, inSeq ? seq : nil)
    }

    /// Whether `text` is a complete stream id (`ms-seq`).
    public static func isEntryID(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        return parts.count == 2 && UInt64(parts[0]) != nil && UInt64(parts[1]) != nil
    }

    /// The original call's deadline, unix ms: the event's `deadline`; for a replayed call that
    /// died again, the one its replay carried; otherwise the call's first calls entry's time
    /// (where the router recorded none: the earliest time the dead letter knows, its first
    /// failure or its death) plus the app's ring timeout. A replay never extends it.
    public func callDeadlineMs(ringTimeoutMs: Int64) -> Int64 {
        if let deadlineMs { return max(0, deadlineMs) }
        if let ledgerDeadlineMs { return ledgerDeadlineMs }
        let start = [callsEntry.flatMap(DeadLetterRecord.timeMs(ofID:)), firstFailureMs, deadAtMs].compactMap { $0 }.min() ?? deadAtMs
        return max(0, start) + max(0, min(ringTimeoutMs, 86_400_000))
    }

    /// What a replay of this dead letter writes: every round so far becomes the ledger's
    /// history, the replay count grows by one, and the call keeps its deadline
    /// (`callDeadlineMs(ringTimeoutMs:)`).
    public func replay(ledgerTTLSeconds: Int, ringTimeoutMs: Int64) -> DeadLetterStore.Replay {
        DeadLetterStore.Replay(deadEntryID: id, event: event, eventId: callID, eventDigest: eventDigest,
                               replays: replays + 1, historyJSON: ReplayHistory(rounds: rounds).json,
                               ledgerTTLSeconds: ledgerTTLSeconds, callDeadlineMs: callDeadlineMs(ringTimeoutMs: ringTimeoutMs),
                               device: device)
    }

    // MARK: JSON output

    /// The one-line summary of `pushgw dead list --json`; `device` only for a device's dead letter.
    public func summaryJSON(nowMs: Int64) -> OrderedJSON {
        var fields: [(String, OrderedJSON)] = [
            ("id", .string(id)), ("app", .string(app)), ("time_ms", .int(deadAtMs)),
            ("age_s", .int(max(0, nowMs - deadAtMs) / 1000)), ("reason", .string(reason)),
            ("call_id", .string(callID)), ("type", .string(eventType)), ("calls_entry", .string(callsEntry)),
        ]
        if let device { fields.append(("device", .string(device))) }
        fields += [
            ("attempts", .int(attempts.count)),
            ("replays", .int(replays)), ("first_failure_ms", .int(firstFailureMs)), ("last_failure_ms", .int(lastFailureMs)),
        ]
        return .object(fields)
    }

    /// The whole history, for `pushgw dead show --json`: the summary's keys, then `rounds`,
    /// `attempts` (each with its round) and `event` (the event as JSON when it is valid JSON,
    /// else its text as a string; when its bytes are not UTF-8, that text has U+FFFD for each
    /// bad sequence and `event_base64` follows with the exact bytes; when only the start of
    /// the event was kept, `event_bytes` follows with the original's length).
    public func detailJSON(nowMs: Int64) -> OrderedJSON {
        guard case var .object(fields) = summaryJSON(nowMs: nowMs) else { preconditionFailure("summary is an object") }
        fields.append(("rounds", .array(rounds.map { r in
            .object([("round", .int(r.round)), ("dead_id", .string(r.deadEntryID)), ("reason", .string(r.reason)),
                     ("first_failure_ms", .int(r.firstFailureMs)), ("last_failure_ms", .int(r.lastFailureMs)),
                     ("attempts", .int(r.attempts.count))])
        })))
        fields.append(("attempts", .array(attempts.map { $0.json(withRound: true) })))
        if let text = eventText {
            fields.append(("event", EmbeddedJSON(text).map { .embedded($0) } ?? .string(text)))
        } else {
            fields.append(("event", .string(String(decoding: event, as: UTF8.self))))
            fields.append(("event_base64", .string(Data(event).base64EncodedString())))
        }
        if !isEventWhole { fields.append(("event_bytes", .int(eventBytes))) }
        return .object(fields)
    }
}

extension DeadLetterAttempt {
    /// `{"t","channel","token","status","reason","error","apns_id"[,"round"]}`.
    func json(withRound: Bool) -> OrderedJSON {
        var fields: [(String, OrderedJSON)] = [
            ("t", .int(timeMs)), ("channel", .string(channel)), ("token", .string(token)), ("status", .int(status)),
            ("reason", .string(reason)), ("error", .string(error)), ("apns_id", .string(apnsID)),
        ]
        if withRound { fields.append(("round", .int(round))) }
        return .object(fields)
    }
}

/// The `history` of a replay ledger: every dead letter the event had before its replay.
/// JSON: `{"rounds":[{"round","dead_id","reason","first_failure_ms","last_failure_ms",
/// "attempts":[{"t","channel","token","status","reason","error","apns_id"}]}]}`.
public struct ReplayHistory: Equatable, Sendable {
    public var rounds: [DeadLetterRound]

    public init(rounds: [DeadLetterRound]) { self.rounds = rounds }

    /// Reads the JSON; nil when it is not a history. Rounds are renumbered 1… in order.
    public init?(json: String) {
        guard let object = PrettyJSON.object(json), let list = object["rounds"] as? [Any] else { return nil }
        var rounds: [DeadLetterRound] = []
        for item in list {
            guard let r = item as? [String: Any] else { return nil }
            let number = rounds.count + 1
            let attempts = (r["attempts"] as? [Any] ?? []).compactMap { a -> DeadLetterAttempt? in
                guard let a = a as? [String: Any] else { return nil }
                return DeadLetterAttempt(timeMs: JSONRead.int(a["t"]), channel: JSONRead.string(a["channel"]),
                                         token: JSONRead.string(a["token"]), status: JSONRead.int(a["status"]).map { Int($0) },
                                         reason: JSONRead.string(a["reason"]), error: JSONRead.string(a["error"]),
                                         apnsID: JSONRead.string(a["apns_id"]), round: number)
            }
            rounds.append(DeadLetterRound(round: number, deadEntryID: JSONRead.string(r["dead_id"]) ?? "",
                                          reason: JSONRead.string(r["reason"]) ?? "unknown",
                                          firstFailureMs: JSONRead.int(r["first_failure_ms"]),
                                          lastFailureMs: JSONRead.int(r["last_failure_ms"]), attempts: attempts))
        }
        self.rounds = rounds
    }

    public var json: String {
        OrderedJSON.object([("rounds", .array(rounds.map { r in
            .object([("round", .int(r.round)), ("dead_id", .string(r.deadEntryID)), ("reason", .string(r.reason)),
                     ("first_failure_ms", .int(r.firstFailureMs)), ("last_failure_ms", .int(r.lastFailureMs)),
                     ("attempts", .array(r.attempts.map { $0.json(withRound: false) }))])
        }))]).text
    }
}
