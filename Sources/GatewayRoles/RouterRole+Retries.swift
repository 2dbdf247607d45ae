import EventLoop
import CallStorage
import Routing

// Retries and cancellations: a waiting call leaves the process for the durable retry schedule
// (`RetrySchedule`), and a `call_cancelled` event removes a scheduled retry and tells the
// call's live entries.
extension RouterRole {
    /// The schedule step for a call whose router is waiting: afterwards the call is in Redis
    /// only, and this process forgets it.
    func schedule(_ call: LiveCall) {
        guard var snapshot = call.machine.waiting else {
            preconditionFailure("a schedule step without a waiting router (call \(call.callID))")
        }
        let channel: PushChannel
        switch snapshot.stage {
        case .voip: channel = .voip
        case .alert: channel = .alert
        }
        snapshot.entryID = call.producerEntryID
        let retry = ScheduledRetry(snapshot, retryID: call.entryID, callID: call.callID, app: call.app.id, event: call.rawEvent,
                                   signer: signer)
        store.retries.schedule(call.app.keys, consumer: settings.consumer, retry: retry) { [unowned self] result in
            switch result {
            case .success(.scheduled):
                self.writesAccepted()
                self.stats.retriesScheduled += 1
                self.stats.retriesScheduledByChannel[channel.rawValue, default: 0] += 1
                self.run(call.machine.onScheduled(), for: call)
                self.onRetryScheduled?(snapshot.dueAtMs)
            case .success(.cancelled):
                // A cancel was recorded while the push was out: finish as cancelled now.
                self.run(call.machine.onScheduleFoundCancelled(now: Clock.unixMs()), for: call)
            case .success(.notOwned):
                // Tolerated: this process stalled past its lease and another took the entry
                // over (or finished it); that one carries on.
                self.log.warn("entry taken over before its retry was scheduled; left to its new owner",
                              ["app": call.app.id, "event": call.callID, "entry": call.entryID], limited: true)
                self.run(call.machine.onScheduled(), for: call)
            case let .failure(error):
                self.stats.redisErrors += 1
                self.run(call.machine.onScheduleFailed(), for: call)
                if error.writeRefusal != nil {
                    self.writesRefused(error)
                } else {
                    self.log.warn("scheduling a retry failed; trying again", ["app": call.app.id, "event": call.callID,
                                                                             "error": "\(error)"], limited: true)
                }
            }
        }
    }

    /// The schedule steps that failed, tried again after `scheduleAgainAfterMs`.
    func retrySchedulingSteps() {
        let calls = scheduleAgain
        scheduleAgain = []
        for call in calls { run(call.machine.onScheduleAgainDue(), for: call) }
    }

    /// A `call_cancelled` event's step, once no entry of its call that started here is still
    /// live: those were told of the cancel when it was read (`hearEnds`) and end soon (a push
    /// taken back, or its answer), and the cancel's result then says what the call got.
    func recordCancel(_ record: OutcomeRecord, of cancelEntry: LiveCall) {
        let started = liveCalls(of: callKey(cancelEntry.app, cancelEntry.callID)).first { $0.isCall && $0.life.hasStarted }
        if let started {
            started.cancelsWaiting.append((cancelEntry, record))
        } else {
            cancel(callID: cancelEntry.callID, app: cancelEntry.app, cancelRecord: record, cancelEntry: cancelEntry)
        }
    }

    /// A `call_cancelled` event, as one Redis step (`RetrySchedule.cancel`): the cancellation
    /// marker, the call's scheduled retry removed with its `cancelled` outcome (built here by a
    /// router resumed from the retry's snapshot, so the record keeps the attempts), and the
    /// cancel event's own result (with `cancelled_after` when the call had been delivered) and
    /// acknowledgement.
    ///
    /// Races, each closed by the marker: a retry scheduled after the read of the call's retry
    /// is found by nobody here, and is stopped when it is resumed; a call whose retry is being
    /// scheduled meets the marker in the schedule step.
    private func cancel(callID: String, app: AppRuntime, cancelRecord: OutcomeRecord, cancelEntry: LiveCall) {
        store.retries.pending(app.keys, callID: callID) { [unowned self] result in
            let found: ScheduledRetry?
            switch result {
            case let .success(pending):
                found = pending
            case let .failure(error):
                return self.recordFailed(CollectionOfOne(cancelEntry), "reading a cancelled call's retry failed; cancelling again",
                                         error: error, ["app": app.id, "event": callID])
            }
            var removing: [(retryID: String, resultJSON: String)] = []
            var records: [String: OutcomeRecord] = [:]
            if let found, let snapshot = try? WaitingCall.decode(found.state),
               let event = try? snapshot.event(from: found.event, policy: app.policy) {
                var router = CallRouter(sharing: app.sharedPolicy, jitter: .constant(0))
                if case var .finish(record) = router.resume(event, from: snapshot, now: Clock.unixMs(), cancelled: true).step {
                    record.entry = snapshot.entryID ?? found.retryID
                    removing.append((found.retryID, record.jsonString))
                    records[found.retryID] = record
                }
            }
            // An unreadable snapshot stays scheduled: when due, its resume dead-letters it.
            self.store.retries.cancel(app.keys, callID: callID, cancelEntryID: cancelEntry.entryID, resultJSON: cancelRecord.jsonString,
                                      removing: removing,
                                      marker: cancelEntry.ends?.marker ?? "1") { [unowned self] result in
                switch result {
                case let .failure(error):
                    self.recordFailed(CollectionOfOne(cancelEntry), "recording a cancellation failed; cancelling again",
                                      error: error, ["app": app.id, "event": callID])
                case let .success(report):
                    self.stats.retriesCancelled += report.removed.count
                    for id in report.recorded {
                        guard let record = records[id] else { continue }
                        self.stats.finishedByOutcome[record.outcome.ordinal] += 1
                        self.logFinished(record, app: app.id, callID: callID)
                        self.observations?.callRecorded(app: app.id, record: record)
                    }
                    var written = cancelRecord
                    written.cancelledAfter = report.callDelivered.flatMap(CallOutcome.init(rawValue:))
                    written.deliveredAtMs = report.callDeliveredAtMs
                    // A cancel of this call recorded meanwhile (two cancels at once): the script
                    // answered this one as a duplicate.
                    self.answered(written, call: cancelEntry, report.answer)
                }
            }
        }
    }

    // MARK: Ends read by another gateway

    /// Lists `call` among the calls with devices still ringing, whose cancellation markers
    /// `recheckRingingCalls` reads every `ringRecheckEveryMs`.
    func watchForEnd(_ call: LiveCall) {
        guard !call.watchedForEnd else { return }
        call.watchedForEnd = true
        call.claimedAtMs = Clock.monotonicMs()
        ringing.append(call)
        if !ringRecheckTimer.isScheduled { ringRecheckTimer.schedule(afterMs: settings.ringRecheckEveryMs) }
    }

    /// An answer, a decline or a cancel of a ringing call may have been read by another
    /// gateway, which set the call's cancellation marker but cannot end the ring: it does not
    /// know the devices. One lookup per app (an MGET, no claim) reads the markers of the calls
    /// still ringing here, and each one found ends its ring as if heard here (the marker's value
    /// names the end). A failed lookup is tried at the next round. The same round renews the
    /// in-flight claims of the calls ringing for half a claim's life or more, so a resend of a
    /// call ringing longer than that finds it routed here.
    func recheckRingingCalls() {
        let watched = ringing
        ringing = []
        var byApp: [String: [LiveCall]] = [:]
        for call in watched {
            guard isLive(call), call.machine.awaitsEnd else {
                call.watchedForEnd = false
                continue
            }
            ringing.append(call)
            byApp[call.app.id, default: []].append(call)
        }
        let now = Clock.monotonicMs()
        for (_, calls) in byApp {
            // Renewed claims count from now; one whose renewal failed is tried at the next round.
            let renewing = calls.filter { now - $0.claimedAtMs >= settings.inFlightClaimMs / 2 }
            store.renewClaims(calls[0].app.keys, renewing.map(\.callID), claimAs: settings.consumer,
                              claimTTLMs: settings.inFlightClaimMs) { result in
                guard case let .success(renewed) = result else { return }
                for (call, done) in zip(renewing, renewed) where done { call.claimedAtMs = now }
            }
            hearReceiptsReadElsewhere(calls)
            let queries = calls.map { LookupQuery(eventId: $0.callID, voipToken: nil, alertToken: nil) }
            store.lookup(calls[0].app.keys, queries, outcomes: false) { [unowned self] result in
                guard case let .success(found) = result else { return }
                for (call, f) in zip(calls, found) where f.cancelled && self.isLive(call) {
                    self.run(call.machine.onEndHeard(CallEnd(marker: f.endMarker), now: Clock.unixMs()), for: call)
                }
            }
        }
        if !ringing.isEmpty { ringRecheckTimer.schedule(afterMs: settings.ringRecheckEveryMs) }
    }

    /// With ring receipts on, a receipt read by another gateway reaches the ring through its
    /// own result (`ring-result:…`): one `MGET` per app reads those of the devices still
    /// awaited, and each found is heard as if read here (its `rang_at`, the receipt entry's
    /// time). A failed read is tried at the next round.
    private func hearReceiptsReadElsewhere(_ calls: [LiveCall]) {
        var asked: [(call: LiveCall, device: String?)] = []
        for call in calls {
            for device in call.machine.devicesAwaitingReceipt { asked.append((call, device)) }
        }
        guard !asked.isEmpty else { return }
        store.ringReceipts(calls[0].app.keys, asked.map { ($0.call.callID, $0.device) }) { [unowned self] result in
            guard case let .success(found) = result else { return }
            for (a, json) in zip(asked, found) where json != nil && self.isLive(a.call) {
                let rangAt = json.flatMap(OutcomeRecord.rangAtMs(inJSON:))
                self.run(a.call.machine.onRingReceipt(device: a.device, rangAtMs: rangAt, now: Clock.unixMs()), for: a.call)
            }
        }
    }
}
