import DeadLetters
import CallStorage
import Routing

// The one place where Routing's values become CallStorage's records and back. Routing decides
// without knowing Redis; CallStorage stores without knowing the router; the router role
// (`RouterRole`) converts here and nowhere else, so a new channel, outcome or record field
// is added in one file, and a mismatch fails to compile instead of crashing at a forced unwrap.

extension TokenChannel {
    /// The channel a token of `channel`'s push belongs to (feedback field `channel`,
    /// known-invalid key names: docs/protocol.md): an Android device's one FCM token for both.
    init(_ channel: PushChannel, provider: PushProvider) {
        switch (provider, channel) {
        case (.fcm, _): self = .fcm
        case (.apns, .voip): self = .voip
        case (.apns, .alert): self = .alert
        }
    }
}

extension InvalidToken {
    /// The feedback entry (and known-invalid key) of a token APNs declared invalid, or the
    /// feedback entry of one accepted in the other environment.
    init(_ feedback: TokenFeedback) {
        self.init(token: feedback.token, channel: TokenChannel(feedback.channel, provider: feedback.provider), reason: feedback.reason,
                  timestampMs: feedback.timestampMs, environment: feedback.environment?.rawValue)
    }
}

// Outcomes read back from Redis (a result's `outcome` field) are texts; nil for a text no
// version of the gateway writes.

extension EventLookup {
    /// What a copy waiting for another entry of its call knows once that entry recorded
    /// `outcome`: the call is done (the copy is answered as its duplicate).
    init(recorded outcome: CallOutcome) { self.init(outcome: outcome.rawValue, cancelled: false) }

    /// The outcome already recorded for the event, if any.
    var recordedOutcome: CallOutcome? { outcome.flatMap(CallOutcome.init(rawValue:)) }

    /// Since when each listed device's tokens are known invalid, in `CallEvent.devices`' order
    /// (empty for the single-device form, whose marks are `voipInvalidSinceMs`, `alertInvalidSinceMs`).
    /// An Android device's one FCM mark stands for both of its stages (its ring, its missed call).
    var devicesKnownInvalid: [(voip: Int64?, alert: Int64?)] {
        zip(deviceVoipInvalidSinceMs, deviceAlertInvalidSinceMs).enumerated().map { i, marks in
            let fcm = i < deviceFcmInvalidSinceMs.count ? deviceFcmInvalidSinceMs[i] : nil
            return (marks.0 ?? fcm, marks.1 ?? fcm)
        }
    }

    /// The single-device form's marks, an Android device's FCM mark for both stages.
    var knownInvalid: (voip: Int64?, alert: Int64?) {
        (voipInvalidSinceMs ?? fcmInvalidSinceMs, alertInvalidSinceMs ?? fcmInvalidSinceMs)
    }

    /// Whether each device's VoIP token is suspected of iOS's silent ban, in `CallEvent.devices`'
    /// order: the single-device form's one, or each listed device's.
    var devicesVoipSuspected: [Bool] { deviceVoipSuspected.isEmpty ? [voipSuspected] : deviceVoipSuspected }
}

/// What a recording script did with a record (`FinishReport`, `RecordReport`, `CancelReport`).
enum RecordAnswer: Equatable {
    /// The record was written, its entry acknowledged.
    case recorded
    /// The id had an outcome already (a copy routed at the same time): the copy's `duplicate`
    /// result was written, naming `first` (nil: a text no version of the gateway writes).
    case duplicate(first: CallOutcome?)
    /// Nothing was written: the result there is this entry's own (it was delivered again
    /// after its record ran), which said all there was to say.
    case ownResultThere

    init(recorded: Bool, firstOutcome: String?) {
        if recorded {
            self = .recorded
        } else if let firstOutcome {
            self = .duplicate(first: CallOutcome(rawValue: firstOutcome))
        } else {
            self = .ownResultThere
        }
    }
}

extension FinishReport {
    /// What the script did with record `i` of the batch.
    func answer(_ i: Int) -> RecordAnswer { RecordAnswer(recorded: recorded[i], firstOutcome: firstOutcomes[i]) }
}

extension RecordReport {
    var answer: RecordAnswer { RecordAnswer(recorded: recorded, firstOutcome: firstOutcome) }
}

extension CancelReport {
    /// What the script did with the cancel event's own result: a cancel recorded before makes
    /// this one a duplicate of that `cancelled`.
    var answer: RecordAnswer {
        cancelRecorded ? .recorded : answeredBefore ? .ownResultThere : .duplicate(first: .cancelled)
    }
}

extension LookupQuery {
    /// The lookup of an event before routing: its outcome, its cancellation, and for a new
    /// event (not a resumed retry, whose snapshot knows its tokens) the tokens' known-invalid
    /// marks; an `incoming_call` also takes its in-flight claim.
    /// With `voipSuspicion` (ring receipts on) also whether its VoIP tokens are suspected of
    /// iOS's silent VoIP ban.
    init(_ event: borrowing CallEvent, resumed: Bool, voipSuspicion: Bool = false) {
        let claim = event.kind == .incomingCall
        let devices = resumed ? [] : event.listedDevices
        self.init(eventId: event.id, voipToken: resumed ? nil : event.voipToken, alertToken: resumed ? nil : event.alertToken,
                  claim: claim, deviceVoipTokens: devices.map(\.voipToken), deviceAlertTokens: devices.map(\.alertToken),
                  fcmToken: resumed ? nil : event.fcmToken,
                  deviceFcmTokens: event.android == nil ? [] : devices.map(\.fcmToken))
        self.voipSuspicion = voipSuspicion && claim && !resumed
    }
}

extension ResultEntry {
    /// `record` as the results entry (and result key value) of event `callID`: a
    /// `call_cancelled` event's own result is keyed apart from its call's, in the cancels' id
    /// namespace, so the cancel and the call each have one result and a call whose id is
    /// `cancel:X` is not taken for a cancel of `X` (docs/protocol.md).
    init(_ record: borrowing OutcomeRecord, callID: String, keying: Keying = .once) {
        if record.type == .callRinging {
            self.init(eventId: ResultEntry.ringingID(callID, device: record.device), namespace: .ringing, keying: keying,
                      resultJSON: record.jsonString)
            return
        }
        self.init(eventId: callID, namespace: record.type?.endsRing == true ? .cancel : .call, keying: keying,
                  resultJSON: record.jsonString)
    }

    /// The result of a dead-lettered event: keyed by the id the record names. An invalid
    /// event's result does not claim its id (`provisional`): a corrected event may follow.
    init(deadLettered record: OutcomeRecord, _ deadLetter: DeadLetter) {
        self.init(eventId: record.id, keying: deadLetter.isInvalidEvent ? .provisional : .once, resultJSON: record.jsonString)
    }
}

extension ScheduledRetry {
    /// A waiting router's snapshot as the retry schedule's member for calls entry `retryID` of
    /// `app`, signed by `signer`.
    init(_ snapshot: WaitingCall, retryID: String, callID: String, app: String, event: [UInt8], signer: RetrySigner) {
        let state = snapshot.json()
        self.init(retryID: retryID, callID: callID, dueAtMs: snapshot.dueAtMs, event: event, state: state,
                  mac: signer.sign(app: app, event: event, state: Array(state.utf8)))
    }
}

extension DeadLetterEntry {
    /// The dead letter of `event` (its bytes as read), with `record` (the router's, stamped with
    /// its calls entry) as its attempts; a device's dead letter (`DeadLetter.device`) names it. An event over `CallEvent.maxEventBytes` (refused for
    /// its size) is kept as its first `keptPrefixBytes`, its length and its SHA-256: an
    /// operator sees what it was, and the dead stream does not grow by megabytes per entry.
    init(_ deadLetter: DeadLetter, record: OutcomeRecord, event: [UInt8], firstFailureMs: Int64, nowMs: Int64) {
        let whole = event.count <= CallEvent.maxEventBytes
        self.init(event: whole ? event : Array(event.prefix(DeadLetterEntry.keptPrefixBytes)), reason: deadLetter.reason.text,
                  attemptsJSON: String(decoding: record.json(), as: UTF8.self), firstFailureMs: firstFailureMs, lastFailureMs: nowMs,
                  eventBytes: whole ? nil : event.count, eventSHA256: whole ? nil : EventDigest.of(event), device: deadLetter.device)
    }
}
