import EventLoop
import CallStorage
import RedisClient
import Routing

// Reading: entries come in (read, or taken over), are admitted as live calls or
// dead-lettered, are looked up in one step per app, and each call's router starts.
//
// A call read from the stream starts only once the read after its own has answered (or none is
// made): a producer that writes a call and its cancel back to back gets the call alone from a
// blocked read (Redis answers it as soon as the call is added), and the cancel in the next one.
// That read does not block while calls wait for it, and goes out with their lookup, so it costs a
// lone call one XREADGROUP that finds nothing, and no time beyond its lookup's.
extension RouterRole {
    /// Reads next when the role may (`Lifecycle.onReadWanted`): running, no read in flight, the
    /// apps' pauses known (`readPauses`), and some app not paused and below its in-flight cap.
    func readNext() {
        // Every call that leaves asks for the next read; while one is out that is all (and the
        // intake's plan, a few lookups and an array per app, is not worked out per call).
        guard !lifecycle.readInFlight else { return }
        guard pausesKnown else { return run(lifecycle.onReadWanted(appsReady: false)) }
        let plan = plan(nowMs: Clock.monotonicMs())
        if plan.apps.isEmpty, let wait = plan.wakeAfterMs, !throttleTimer.isScheduled { throttleTimer.schedule(afterMs: wait) }
        run(lifecycle.onReadWanted(appsReady: !plan.apps.isEmpty))
    }

    /// The intake's next read (`AppIntake.plan`): the apps' in-flight calls, and their pushes
    /// waiting for a stream in their APNs pools.
    private func plan(nowMs: Int64) -> AppIntake.Plan {
        let pools = self.pools
        return intake.plan(apps, inFlight: inFlightPerApp, defaultCap: settings.perAppInFlight, readBatch: settings.readBatch,
                           nowMs: nowMs, waitingCap: settings.waitingPushesPerApp, waitingRecheckMs: settings.capWaitMs) {
            pools.waitingForStreams(credential: $0.credential, share: $0.share)
        }
    }

    /// One XREADGROUP over the apps the intake lets read (`.read`: below their in-flight cap,
    /// and with their rate's tokens: `AppIntake`), for as many entries as the fullest of them
    /// has room for. It blocks no longer than until a throttled app has its tokens, and only
    /// `capWaitMs` when it leaves an app out for its cap.
    func read(blocks: Bool) {
        let nowMs = Clock.monotonicMs()
        let plan = plan(nowMs: nowMs)
        let count = plan.count
        let longest = plan.leftOutAtCap ? min(settings.blockMs, settings.capWaitMs) : settings.blockMs
        let blockMs = blocks ? min(longest, max(1, plan.wakeAfterMs ?? longest)) : nil
        store.readNew(apps: plan.apps.map(\.keys), consumer: settings.consumer, count: count,
                      blockMs: blockMs) { [unowned self] result in
            switch result {
            case let .success(byApp):
                let action = self.lifecycle.onReadAnswered(failure: nil)
                let answeredMs = Clock.monotonicMs()
                var held: [String: StreamHold] = [:]
                for app in plan.apps where self.intake.holds(app) {
                    held[app.id] = self.intake.read(app, entries: byApp[app.keys]?.count ?? 0, asked: count, nowMs: answeredMs)
                }
                for (keys, entries) in byApp {
                    guard let app = self.appsByKeys[keys] else { continue }
                    self.stats.read += entries.count
                    self.observations?.eventsReceived(app: app.id, claimed: false, count: entries.count)
                    self.route(entries, app: app, fromRead: true, heldBy: held.isEmpty ? nil : held[app.id])
                }
                self.run(action)
            case let .failure(error):
                self.run(self.lifecycle.onReadAnswered(failure: error))
            }
        }
    }

    /// Starts routing stream entries of one app (new, or taken over: `deliveries[i]` > 1; nil
    /// means first deliveries). Invalid and poison entries are dead-lettered here; the others
    /// are looked up in one step per app, then each call's router starts (or resumes) with what
    /// Redis knew. `fromRead`: the entries came from `readNext`, and start after the next read.
    /// `heldBy`: what held them in the stream (the app's event rate, a pause: `AppIntake.read`).
    func route(_ entries: [StreamEntry], deliveries: [Int64]? = nil, app: AppRuntime, fromRead: Bool = false,
               heldBy: StreamHold? = nil) {
        var admitted: [Admitted] = []
        admitted.reserveCapacity(entries.count)
        for (i, entry) in entries.enumerated() {
            if let a = admit(entry, app: app, deliveries: deliveries?[i] ?? 1, heldBy: heldBy) {
                a.startsAfterNextRead = fromRead
                admitted.append(a)
            }
        }
        if fromRead && !admitted.isEmpty { lifecycle.onCallsAwaitRead() }
        lookUp(admitted, app: app)
    }

    /// Starts `a` with its lookup now, or once the read in flight answered when `a` waits for
    /// the read after its own (`route`): a cancel that read brings is then known first. The
    /// machine's action for a start now goes to `starting`, performed once the batch's other
    /// calls stepped (`perform(_:)`).
    func startAfterRead(_ a: Admitted, found: EventLookup, into starting: inout [Started]) {
        if a.startsAfterNextRead && lifecycle.isReadingWithoutBlocking {
            callsAwaitingRead.append((a, found))
        } else if let action = lookupAnswered(a, found: found) {
            starting.append(Started(call: a.call, action: action))
        }
    }

    /// The calls whose start waited for a read: it answered (or none will be made now).
    ///
    /// Their lookups' answers are older than the process's other answers now: a copy whose
    /// lookup found the claim of an entry routing here, and that entry has left meanwhile
    /// (recorded, or put in the retry schedule), would find no copy to wait for and push again.
    /// Such a copy is looked up again, and started as soon as that answers.
    func startCallsAwaitingRead() {
        guard !callsAwaitingRead.isEmpty else { return }
        let waiting = callsAwaitingRead
        callsAwaitingRead = []
        var again: [String: [Admitted]] = [:]
        var starting: [Started] = []
        starting.reserveCapacity(waiting.count)
        for (a, found) in waiting where isLive(a.call) {
            if found.claimHolder == settings.consumer && !found.claimTakenNow && copyRouting(besides: a.call) == nil {
                a.startsAfterNextRead = false
                again[a.call.app.id, default: []].append(a)
            } else if let action = lookupAnswered(a, found: found) {
                starting.append(Started(call: a.call, action: action))
            }
        }
        perform(starting)
        for (_, copies) in again { lookUp(copies, app: copies[0].call.app) }
    }

    /// Looks admitted calls up (one step per app: the outcome, the cancellation, the tokens, and
    /// for `incoming_call`s the in-flight claim), then starts each.
    ///
    /// Each call starts when the lookup answers, in turn with the answers of this process's
    /// other steps on the app's keys (records and schedule steps go on the same connection), so
    /// the answer is not older than what the process knows: a copy routed here whose record
    /// ran after the lookup has not left yet, and the call waits for it (`CallCopies`) and is
    /// its duplicate. Only the calls whose claim another consumer holds wait for a second step
    /// (`takeOverLapsedClaims`). Had the others waited with them, that copy could leave
    /// meanwhile, and a call seeing its own claim and no copy routing here would push again.
    func lookUp(_ admitted: [Admitted], app: AppRuntime) {
        guard !admitted.isEmpty else { return }
        store.lookup(app.keys, admitted.map(\.query), claimAs: settings.consumer,
                     claimTTLMs: settings.inFlightClaimMs) { [unowned self] result in
            switch result {
            case let .success(found):
                var heldElsewhere: [HeldElsewhere] = []
                var starting: [Started] = []
                starting.reserveCapacity(admitted.count)
                for (a, f) in zip(admitted, found) {
                    // A holder's lapsed lease is trusted only when leases are (see `claim`);
                    // otherwise the copy waits for the holder, as for a live one.
                    if let holder = f.claimHolder, holder != self.settings.consumer, self.leasesAreTrustworthy {
                        heldElsewhere.append(HeldElsewhere(admitted: a, found: f, holder: holder))
                    } else {
                        self.startAfterRead(a, found: f, into: &starting)
                    }
                }
                self.perform(starting)
                self.takeOverLapsedClaims(heldElsewhere, app: app)
            case let .failure(error):
                // Without the lookup, routing could repeat a finished call.
                self.stepFailed(admitted.lazy.map(\.call), .warn, "lookup failed; entries left pending", error: error,
                                ["app": app.id, "count": admitted.count])
            }
        }
    }

    /// A looked-up call whose in-flight claim another consumer holds.
    struct HeldElsewhere {
        var admitted: Admitted
        var found: EventLookup
        var holder: String
    }

    /// Starts the calls whose claim another consumer held at their lookup, once the holders'
    /// leases are read: a live holder's copy is waited for (`CallCopies`); a lapsed one's claim
    /// is taken over if still there, and the call routed.
    private func takeOverLapsedClaims(_ held: [HeldElsewhere], app: AppRuntime) {
        guard !held.isEmpty else { return }
        store.takeOverLapsedClaims(app.keys, held.map { ($0.admitted.query.eventId, $0.holder) }, claimAs: settings.consumer,
                                   claimTTLMs: settings.inFlightClaimMs) { [unowned self] result in
            switch result {
            case let .success(holders):
                var starting: [Started] = []
                for (h, holder) in zip(held, holders) {
                    var found = h.found
                    found.claimHolder = holder
                    found.claimTakenNow = holder == self.settings.consumer
                    self.startAfterRead(h.admitted, found: found, into: &starting)
                }
                self.perform(starting)
            case let .failure(error):
                self.stepFailed(held.lazy.map(\.admitted.call), .warn, "lookup failed; entries left pending", error: error,
                                ["app": app.id, "count": held.count])
            }
        }
    }

    /// Registers a live call for `entry`, or dead-letters the entry (poison, invalid event,
    /// unreadable retry) and returns nil. Nil too when the entry is already being routed here.
    func admit(_ entry: StreamEntry, app: AppRuntime, deliveries: Int64, heldBy: StreamHold? = nil) -> Admitted? {
        let entryKey = key(app, entry.id)
        guard live[entryKey] == nil else { return nil }  // already routing it (a claim raced a read)
        // The entry's fields in one pass over them (a lookup by name hashes the name; an entry
        // has one to three fields). The event's bytes as read (hiredis's reply copied once, no
        // text decoding): what the decoder checks, and what a dead letter keeps. A replay carries
        // the original call's deadline (`call_deadline`), and a replay of one device's dead letter
        // that device (`replayed_device`); a moved retry its state (`retry`).
        var eventField: [UInt8]?, retryState: [UInt8]?, callDeadline: [UInt8]?, replayedDevice: [UInt8]?
        for (name, value) in entry.values {
            switch name {
            case "event": eventField = value
            case "retry": retryState = value
            case "call_deadline": callDeadline = value
            case "replayed_device": replayedDevice = value
            default: break
            }
        }
        let raw = eventField ?? []
        let entryTimeMs = entry.timeMs ?? Clock.unixMs()
        if deliveries >= settings.redeliveryLimit {
            stats.poison += 1
            let identity = CallEvent.identity(raw, entryTimeMs: entryTimeMs, policy: app.policy)
            deadLetterEntry(app, entry: entry, raw: raw,
                            DeadLetter.redeliveryLimit(deliveries, callID: identity.id, type: identity.kind, app: app.id,
                                                       entry: entry.id))
            return nil
        }
        if let state = retryState { return admitRetry(entry, state: state, app: app) }
        let event: CallEvent
        do throws(InvalidEvent) {
            guard eventField != nil else {
                throw InvalidEvent(field: "event", problem: "the stream entry has no field named event")
            }
            event = try CallEvent.decode(raw, entryTimeMs: entryTimeMs, policy: app.policy, callDeadline: callDeadline,
                                         replayedDevice: replayedDevice)
        } catch {
            stats.invalidEvents += 1
            log.warn("invalid call event dead-lettered", ["app": app.id, "entry": entry.id, "error": error.description],
                     limited: true)
            deadLetterEntry(app, entry: entry, raw: raw, DeadLetter.invalidEvent(error, app: app.id, entry: entry.id))
            return nil
        }
        let call = LiveCall(app: app, entryID: entry.id, entryKey: entryKey, rawEvent: raw,
                            machine: CallStateMachine(event: event, sharing: app.sharedPolicy, jitter: jitter.split(),
                                                      replayed: callDeadline != nil,
                                                      heldBy: heldBy), callID: event.id,
                            ends: event.end, isReceipt: event.kind == .callRinging)
        register(call)
        if call.isReceipt {
            hearReceipt(event, around: call)
        } else {
            hearEnds(around: call)
        }
        return Admitted(call: call, event: event, snapshot: nil)
    }

    /// An end of the ring (a cancel, an answer, a decline) wins over every entry of its call it
    /// meets here, whichever came first: a new end entry tells its call's live entries at once
    /// (one looking up starts stopped, one routing stops its devices and takes back pushes not
    /// written yet), and a new call entry whose end is live here starts stopped. After the
    /// end entry left, its cancellation marker in Redis tells the lookup. `call` was just
    /// registered: it heads its call's list, and the others follow it (the common case, none,
    /// costs one comparison and no allocation).
    func hearEnds(around call: LiveCall) {
        guard call.nextOfCall != nil else { return }
        if let end = call.ends {
            for other in liveCalls(of: call.callKey) where other.isCall {
                run(other.machine.onEndHeard(end, now: Clock.unixMs()), for: other)
            }
            return
        }
        var next = call.nextOfCall
        while let other = next {
            if let end = other.ends { return run(call.machine.onEndHeard(end, now: Clock.unixMs()), for: call) }
            next = other.nextOfCall
        }
    }

    /// A ring receipt (`receipt`, a `call_ringing` entry just registered as `call`) tells the
    /// entries of its call ringing here at once; its own result (`ring-result:…`, written with
    /// its record) tells a gateway ringing the call elsewhere, which reads it now and then
    /// (`recheckRingingCalls`).
    func hearReceipt(_ receipt: CallEvent, around call: LiveCall) {
        guard call.nextOfCall != nil else { return }
        for other in liveCalls(of: call.callKey) where other.isCall {
            run(other.machine.onRingReceipt(device: receipt.device, rangAtMs: receipt.entryTimeMs, now: Clock.unixMs()), for: other)
        }
    }

    /// A due retry came back from the schedule (an entry with field `retry`): the call continues
    /// from its snapshot once the lookup says whether it was finished or cancelled meanwhile.
    /// Only a retry pushgw signed is trusted (`RetrySigner`): any producer can `XADD` a `retry`
    /// field, so one without a valid `retry_mac` for this app, event and state — well-formed or
    /// not — is dead-lettered, never used.
    func admitRetry(_ entry: StreamEntry, state: [UInt8], app: AppRuntime) -> Admitted? {
        let raw = entry.values["event"] ?? []
        let snapshot: WaitingCall
        let event: CallEvent
        do throws(InvalidWaitingCall) {
            snapshot = try WaitingCall.decode(state)
            do {
                event = try snapshot.event(from: raw, policy: app.policy)
            } catch {
                throw InvalidWaitingCall(problem: "its event: \(error)")
            }
            guard signer.verifies(entry.values[RetrySigner.field], app: app.id, event: raw, state: state) else {
                throw InvalidWaitingCall(problem: "not signed by pushgw (no valid \(RetrySigner.field)): a field only pushgw writes")
            }
        } catch {
            // A bug, a hand-edited schedule or a forged entry gets here: a human must look.
            stats.invalidEvents += 1
            log.error("unreadable retry dead-lettered", ["app": app.id, "entry": entry.id, "error": error.description],
                      limited: true)
            let entryTimeMs = entry.timeMs ?? Clock.unixMs()
            let identity = CallEvent.identity(raw, entryTimeMs: entryTimeMs, policy: app.policy)
            let invalid = InvalidEvent(field: "retry", problem: error.description, callID: identity.id, kind: identity.kind)
            deadLetterEntry(app, entry: entry, raw: raw, DeadLetter.invalidEvent(invalid, app: app.id, entry: entry.id))
            return nil
        }
        stats.retriesFired += 1
        // Snapshots written before the producer's entry was kept in them: this entry stands in.
        let call = LiveCall(app: app, entryID: entry.id, producerEntryID: snapshot.entryID, rawEvent: raw,
                            machine: CallStateMachine(event: event, sharing: app.sharedPolicy, jitter: jitter.split()), callID: event.id)
        call.firstFailureMs = snapshot.firstFailureAtMs
        register(call)
        hearEnds(around: call)
        return Admitted(call: call, event: event, snapshot: snapshot)
    }

    /// The lookup answered: unless another copy of the call is routing (`CallCopies`), the
    /// call's router starts (or resumes) and its first action runs; cancelled when Redis' marker
    /// says so or a cancel of it was heard here meanwhile (`hearEnds`).
    func start(_ a: Admitted, found: EventLookup) {
        if let action = lookupAnswered(a, found: found) { run(action, for: a.call) }
    }

    /// A call whose machine took its lookup's answer, with the action to perform.
    struct Started {
        var call: LiveCall
        var action: CallStateMachine.Action
    }

    /// Performs the actions of a batch of calls that started, after every machine of the batch
    /// stepped. Invariant: no machine's step depends on another call's action being performed
    /// (a copy waits on its sibling's machine state, `copyRouting`, which the step sets), so
    /// the order only keeps each stage's code in the instruction cache across the batch: one
    /// pass of machines, then one pass of pushes (measured with cachegrind, bench/ab.sh).
    func perform(_ starting: [Started]) {
        for s in starting { run(s.action, for: s.call) }
    }

    /// Gives `a`'s machine its lookup's answer. A call that waits for a copy is put with the
    /// copy (here or elsewhere) and nil returned; otherwise the machine's action is returned,
    /// for the caller to perform.
    func lookupAnswered(_ a: Admitted, found: EventLookup) -> CallStateMachine.Action? {
        let call = a.call
        let action = call.machine.onLookupAnswered(alreadyDone: found.recordedOutcome, cancelled: found.cancelled,
                                                   claimHolder: found.claimHolder, consumer: settings.consumer,
                                                   copyRoutingHere: copyRouting(besides: call) != nil,
                                                   ended: found.cancelled ? CallEnd(marker: found.endMarker) : nil,
                                                   knownInvalid: found.knownInvalid,
                                                   devicesKnownInvalid: found.devicesKnownInvalid,
                                                   devicesVoipSuspected: found.devicesVoipSuspected,
                                                   snapshot: a.snapshot, now: Clock.unixMs())
        switch action.life {
        case .waitForCopyHere:
            copyRouting(besides: call)!.copiesWaiting.append(a)
            return nil
        case .waitForCopyElsewhere:
            copiesElsewhere.append(a)
            if !recheckTimer.isScheduled { recheckTimer.schedule(afterMs: settings.copyRecheckEveryMs) }
            return nil
        case .none, .startRouter, .tellRouterCancelled, .write, .writeRecord, .scheduleAgainLater, .recordAgainLater, .leave:
            return action
        }
    }

    /// Looks the copies waiting for another process's copy up again: each then routes, waits
    /// on, or is acknowledged as a duplicate.
    func recheckCopiesElsewhere() {
        let waiting = copiesElsewhere
        copiesElsewhere = []
        var byApp: [String: [Admitted]] = [:]
        for a in waiting where isLive(a.call) { byApp[a.call.app.id, default: []].append(a) }
        for (_, copies) in byApp { lookUp(copies, app: copies[0].call.app) }
    }
}
