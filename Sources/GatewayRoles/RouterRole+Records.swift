import EventLoop
import CallStorage
import RedisClient
import Routing

// Records: the outcomes reached in one loop turn are written by one script per app; dead
// letters one by one; each answer tells the call's life, which lets the call leave. A record
// Redis did not take is held in the call's life and written again (`recordAgain`) until it
// lands: the call stays here, its entry pending for this live consumer, so nothing routes it
// again.
extension RouterRole {
    /// One outcome waiting for the end of the loop turn, to be recorded with the others. Its
    /// result JSON and dead-letter entries are written at the turn's end (`finish`), in one
    /// pass over the turn's records, so that code stays in the instruction cache across the
    /// batch instead of being fetched again between two calls' machine steps.
    final class PendingRecord {
        let call: LiveCall
        let record: OutcomeRecord
        let keying: ResultEntry.Keying
        let invalidTokens: [InvalidToken]
        let ringTally: RingTally?
        let deadLetters: [DeadLetter]
        /// When the outcome was queued (the dead letters' time).
        let queuedAtMs: Int64

        init(call: LiveCall, record: OutcomeRecord, keying: ResultEntry.Keying, invalidTokens: [InvalidToken],
             ringTally: RingTally?, deadLetters: [DeadLetter], queuedAtMs: Int64) {
            self.call = call
            self.record = record
            self.keying = keying
            self.invalidTokens = invalidTokens
            self.ringTally = ringTally
            self.deadLetters = deadLetters
            self.queuedAtMs = queuedAtMs
        }

        /// What the finish script writes for it.
        func finish(_ role: RouterRole) -> FinishRecord {
            let entries = deadLetters.map { letter in
                // The device's first failure: its first attempt APNs or FCM did not accept.
                let attempts = letter.record.attempts
                let first = (attempts.first { $0.status != 200 } ?? attempts.first)?.sentAtMs ?? queuedAtMs
                return DeadLetterEntry(letter, record: role.stamped(letter.record, call), event: call.rawEvent,
                                       firstFailureMs: first, nowMs: queuedAtMs)
            }
            return FinishRecord(entryID: call.entryID, record: ResultEntry(record, callID: call.callID, keying: keying),
                                invalidTokens: invalidTokens, ringTally: ringTally, deadLetters: entries)
        }
    }

    /// Outcomes are recorded in batches: every outcome reached in one loop turn goes to Redis
    /// in one script per app (`CallStore.finish`), in chunks of at most this many.
    private static let recordChunk = 256

    /// The router's record with the calls entry it answers (the router knows no stream ids).
    func stamped(_ record: consuming OutcomeRecord, _ call: LiveCall) -> OutcomeRecord {
        if record.entry == nil { record.entry = call.producerEntryID }
        return record
    }

    /// Writes a call's record (its life is `recording`: the first time, or again after a failure).
    func write(_ record: LiveCallStateMachine.Record, for call: LiveCall) {
        switch record {
        case let .outcome(outcome):
            recordOutcome(outcome, for: call, keying: .once)
        case let .outcomeWithDeadLetters(outcome, deadLetters):
            recordOutcome(outcome, for: call, keying: .once, deadLetters: deadLetters)
        case let .duplicate(outcome):
            recordOutcome(outcome, for: call, keying: .duplicate)
        case let .deadLetter(deadLetter):
            writeDeadLetter(deadLetter, for: call)
        case let .cancellation(outcome):
            recordCancel(reported(stamped(outcome, call), of: call), of: call)
        }
    }

    /// Queues a routed call's record for the end of the loop turn (its life is `recording`),
    /// with the dead letters of its devices whose ring was one (written with it, in its script).
    private func recordOutcome(_ record: consuming OutcomeRecord, for call: LiveCall, keying: ResultEntry.Keying,
                               deadLetters: [DeadLetter] = []) {
        let record = stamped(record, call)
        records.add(PendingRecord(call: call, record: record, keying: keying, invalidTokens: call.feedback,
                                  ringTally: keying == .once ? ringTally(of: record, for: call) : nil,
                                  deadLetters: deadLetters, queuedAtMs: Clock.unixMs()))
    }

    /// One `finish` script per app (and chunk) for the turn's outcomes.
    func writeRecords(_ batch: [PendingRecord]) {
        // The batch's records per app, apps in the order they first appear: found by the app
        // object's identity (an integer's hash), not its name.
        var groups: [[PendingRecord]] = []
        var groupOf: [ObjectIdentifier: Int] = [:]
        for p in batch {
            let app = ObjectIdentifier(p.call.app)
            if let g = groupOf[app] {
                groups[g].append(p)
            } else {
                groupOf[app] = groups.count
                groups.append([p])
            }
        }
        for pending in groups {
            let id = pending[0].call.app.id
            for start in stride(from: 0, to: pending.count, by: Self.recordChunk) {
                let chunk = Array(pending[start..<min(pending.count, start + Self.recordChunk)])
                store.finish(chunk[0].call.app.keys, chunk.map { $0.finish(self) }) { [unowned self] result in
                    switch result {
                    case let .success(report):
                        for (i, p) in chunk.enumerated() { self.answered(p.record, call: p.call, report.answer(i)) }
                        if report.callsWithoutReceipt != nil || !report.suspected.isEmpty || !report.rangLate.isEmpty {
                            self.heardGuard(report, app: chunk[0].call.app)
                        }
                    case let .failure(error):
                        self.recordFailed(chunk.lazy.map(\.call), "recording outcomes failed; outcomes held, recording again",
                                          error: error, ["app": id, "count": chunk.count])
                    }
                }
            }
        }
    }

    /// Writes a call's dead letter (its life is `recording`).
    private func writeDeadLetter(_ deadLetter: DeadLetter, for call: LiveCall) {
        let now = Clock.unixMs()
        let record = stamped(deadLetter.record, call)
        let entry = DeadLetterEntry(deadLetter, record: record, event: call.rawEvent, firstFailureMs: call.firstFailureMs ?? now,
                                    nowMs: now)
        store.deadLetter(call.app.keys, entryID: call.entryID, deadLetter: entry,
                         record: ResultEntry(deadLettered: record, deadLetter)) { [unowned self] result in
            switch result {
            case let .success(report):
                self.answered(record, call: call, report.answer)
            case let .failure(error):
                self.recordFailed(CollectionOfOne(call), "dead-lettering failed; held, writing it again", error: error,
                                  ["app": call.app.id])
            }
        }
    }

    /// Dead-letters an entry that never became a live call (invalid, poison).
    func deadLetterEntry(_ app: AppRuntime, entry: StreamEntry, raw: [UInt8], _ deadLetter: DeadLetter) {
        let call = LiveCall(app: app, entryID: entry.id, rawEvent: raw,
                            machine: .refusedAtAdmission(deadLetter, policy: app.policy), callID: deadLetter.record.id ?? "")
        register(call)
        write(.deadLetter(deadLetter), for: call)
    }

    /// A record step for `calls` (outcomes, a dead letter, a cancellation) failed: each call
    /// holds its outcome (`LiveCallStateMachine.holdingOutcome`) and its record is written again
    /// after `recordAgainAfterMs`, until it lands. Every record step is idempotent, so one that
    /// ran with its answer lost is answered as the entry's own result when written again.
    func recordFailed(_ calls: some Sequence<LiveCall>, _ message: String, error: RedisError, _ fields: [String: Any]) {
        stats.redisErrors += 1
        for call in calls { run(call.machine.onRecordFailed(), for: call) }
        if error.writeRefusal != nil {
            writesRefused(error)
        } else {
            var fields = fields
            fields["error"] = "\(error)"
            log.error(message, fields, limited: true)
        }
    }

    /// The held outcomes' records, written again (`recordAgainTimer`).
    func recordHeldOutcomes() {
        let calls = recordAgain
        recordAgain = []
        for call in calls { run(call.machine.onRecordAgainDue(), for: call) }
    }

    /// What a recording script did with `record`: wrote it; or, the id having an outcome
    /// already (a copy routed at the same time), wrote its `duplicate` result naming
    /// `firstOutcome`; or wrote nothing, the result there being this entry's own (the entry
    /// delivered again after its record ran, e.g. claimed back while a hung Redis still had the
    /// record to run): it said all there was to say then.
    func answered(_ record: OutcomeRecord, call: LiveCall, _ answer: RecordAnswer) {
        switch answer {
        case .recorded:
            writesAccepted()
            recorded(record, call: call)
        case let .duplicate(first):
            writesAccepted()
            recorded(record.duplicate(of: first ?? record.outcome), call: call)
        case .ownResultThere:
            run(call.machine.onRecorded(outcome: nil), for: call)
        }
    }

    func recorded(_ record: OutcomeRecord, call: LiveCall) {
        if record.outcome == .duplicate {
            stats.duplicates += 1
            log.debug("duplicate event answered", ["app": call.app.id, "event": call.callID, "entry": call.entryID,
                                                   "first_outcome": record.firstOutcome?.rawValue ?? ""])
        } else {
            stats.finishedByOutcome[record.outcome.ordinal] += 1
            logFinished(record, app: call.app.id, callID: call.callID)
            // The script wrote the call's feedback with its record.
            for feedback in call.feedback { observations?.tokenFeedback(app: call.app.id, feedback: feedback) }
            if let environment = record.environmentMismatch {
                log.warn("a token APNs refused as BadDeviceToken was accepted in the other environment: check the app's environment and its builds; the token is kept",
                         ["app": call.app.id, "event": call.callID, "channel": record.channel?.rawValue ?? "",
                          "configured": call.app.policy.environment.rawValue, "accepted_in": environment.rawValue], limited: true)
            }
        }
        observations?.callRecorded(app: call.app.id, record: record)
        // Its waiting copies are duplicates of the outcome it recorded (for a duplicate, the
        // first outcome it names).
        run(call.machine.onRecorded(outcome: record.outcome == .duplicate ? record.firstOutcome : record.outcome), for: call)
    }
}
