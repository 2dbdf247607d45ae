import APNs
import EventLoop
import Foundation
import RedisStreams
import Retry
import Routing

/// Settings of the router role.
package struct RoutingRunnerSettings: Sendable {
    /// This process's consumer name in the apps' consumer groups; unique per process.
    package var consumer: String
    /// Entries read per app per XREADGROUP.
    package var readBatch = 100
    /// How long one XREADGROUP blocks when there is nothing to read.
    package var blockMs: Int64 = 1_000
    /// Calls of one app in flight at once in this process; reads of that app pause beyond it,
    /// so one app's flood or slow APNs cannot take all of the process.
    package var perAppInFlight = 1_000
    /// Heartbeat period and lifetime: a consumer whose heartbeat is older than `heartbeatTTLMs`
    /// is dead and its in-flight entries are taken over.
    package var heartbeatEveryMs: Int64 = 1_000
    package var heartbeatTTLMs: Int64 = 3_000
    /// How often this process reads the consumer registry for dead consumers, and how idle
    /// their entries must be to be taken over.
    package var claimEveryMs: Int64 = 1_000
    package var claimMinIdleMs: Int64 = 1_000
    /// The apps' pending entries are swept (one script per app) when the registry shows a
    /// lapsed consumer, and at least this often anyway, for entries of consumers no longer
    /// registered (retired with a drain cut short, forgotten, or a Redis that lost the registry).
    package var fullClaimSweepEveryMs: Int64 = 30_000
    /// Entries of this process idle this long that it is not routing — left pending when a
    /// Redis step failed (lookup, record) — are claimed back and routed again by the full
    /// sweep. Well above a call's stay in the process (pushes time out after 10 s; waits for a
    /// retry leave the process), so a live call is not claimed from under itself.
    package var ownEntriesIdleMs: Int64 = 120_000
    /// An entry delivered this many times without an outcome is dead-lettered (poison).
    package var redeliveryLimit: Int64 = 5
    /// Lifetime of a cancellation marker, in seconds (also the idempotency window).
    package var cancelTTLSeconds = 86_400
    /// After a Redis error, how long before putting a waiting call in the retry schedule again, ms.
    package var scheduleAgainAfterMs: Int64 = 250
    /// How long a call's in-flight claim lasts (`AppKeys.result`, `InFlightClaim`), ms: longer than a call
    /// stays in one process (a push's queue and answer budgets, twice: VoIP then alert, and its
    /// record). It is released as soon as the call leaves the process; the TTL only frees the
    /// claim of a process that died.
    package var inFlightClaimMs: Int64 = 60_000
    /// How often a copy waiting for another process's copy of its call looks the call up again, ms.
    package var copyRecheckEveryMs: Int64 = 250

    package init(consumer: String) { self.consumer = consumer }
}

/// The router role's I/O: reads call events from every app's stream, runs one `CallRouter`
/// per event, and performs what each returns — APNs pushes, the durable retry schedule, and
/// the atomic Redis records that acknowledge the entry. It decides nothing: every decision
/// comes from `CallRouter` (Routing), every key from `CallStore` (RedisStreams).
///
/// Loop-owned. Delivery is at least once: an entry is acknowledged only by the Lua step that
/// records its outcome or puts the call in the retry schedule; entries of dead processes are
/// taken over after their heartbeat lapses.
///
/// Retries: a call that must wait leaves this process. `.scheduleRetry` runs the
/// schedule step (`RetrySchedule.schedule`: the router's snapshot and the raw event into the
/// app's schedule, the entry acknowledged, in one Lua script); the retry mover later puts the
/// call back on its calls stream as a new entry with field `retry`, which any router reads
/// and continues with `CallRouter.resume`. Nothing waits in memory, so a crash loses no retry
/// and a drain has no timers to hand back. If the schedule step fails (Redis unreachable) the
/// call stays here, its entry pending, and the step is tried again every
/// `scheduleAgainAfterMs` — never dropped.
///
/// Batching (Redis work per event is most of the gateway's cost): the entries of one read
/// are looked up with one `MGET` per app, and the outcomes reached in one loop turn are
/// recorded by one `finish` script per app (`TurnBatch`), each record still written and
/// acknowledged atomically. A lone call waits one loop iteration for its record; a burst of
/// answers from one TLS read shares one script.
///
/// Counted apart (`Stats`): crash redeliveries (`claimed`: entries taken over from a dead
/// consumer, whose delivery count XCLAIM raised) and error retries (`retriesScheduled`,
/// `retriesFired`: a push the router decided to try again).
package final class RoutingRunner {
    /// One event being routed. The router's state lives here between I/O steps.
    private final class LiveCall {
        let app: AppRuntime
        /// The stream entry, acknowledged with the outcome.
        let entryID: String
        /// The entry the producer's XADD made (`entryID`, or for a resumed retry the call's
        /// first entry): the `entry` of the call's result.
        let producerEntryID: String
        /// The entry's `event` field, its bytes as Redis holds them (kept exactly in a dead letter).
        let rawEvent: [UInt8]
        var router: CallRouter
        let callID: String
        var feedback: [InvalidToken] = []
        var firstFailureMs: Int64?
        /// True while a Redis record is being written (a finish must not be performed twice).
        var recording = false
        /// True once the router got `start` or `resume` (after the lookup).
        var started = false
        /// A cancel arrived while the lookup was in flight: start as cancelled.
        var cancelRequested = false
        /// True while the call is being put in the retry schedule (or waits to try again).
        var scheduling = false
        /// The next live entry of the same app and call id (`liveByCall` lists them: usually
        /// one, two while a cancel or a producer's duplicate is in flight with its call).
        var nextOfCall: LiveCall?
        /// A `call_cancelled` entry (it never pushes, so copies never wait for it).
        let isCancel: Bool
        /// Copies of this call that wait for it to leave the process (`CallCopies`).
        var copiesWaiting: [Admitted] = []
        /// The outcome recorded for it, once recorded: its waiting copies are duplicates of it.
        var recordedOutcome: CallOutcome?

        init(app: AppRuntime, entryID: String, producerEntryID: String? = nil, rawEvent: [UInt8], router: CallRouter,
             callID: String, isCancel: Bool = false) {
            self.app = app
            self.entryID = entryID
            self.producerEntryID = producerEntryID ?? entryID
            self.rawEvent = rawEvent
            self.router = router
            self.callID = callID
            self.isCancel = isCancel
        }
    }

    /// Counters for metrics and tests.
    package struct Stats: Equatable, Sendable {
        /// New entries read (producers' events and moved retries).
        package var read = 0
        /// Crash redeliveries: entries taken over from dead consumers (delivery count ≥ 2).
        package var claimed = 0
        package var finished: [String: Int] = [:]
        package var invalidEvents = 0
        /// Entries dead-lettered for too many deliveries.
        package var poison = 0
        /// Entries whose event id already had an outcome, answered with a `duplicate` result.
        package var duplicates = 0
        /// Error retries put in the durable schedule, in all and per channel (`voip`, `alert`).
        package var retriesScheduled = 0
        package var retriesScheduledByChannel: [String: Int] = [:]
        /// Due retries read back from the schedule and resumed.
        package var retriesFired = 0
        /// Scheduled retries removed by a `call_cancelled`.
        package var retriesCancelled = 0
        package var redisErrors = 0
        package var lostEntries = 0
    }

    private let loop: EventLoop
    private let store: CallStore
    private let pools: ApnsPools
    private var apps: [AppRuntime]
    private var appsByKeys: [AppKeys: AppRuntime]
    private let settings: RoutingRunnerSettings
    private let log: Log
    /// An app's entry id or call id: keys of the live tables (two strings, no concatenation).
    private struct LiveKey: Hashable {
        let app: String
        let id: String
    }
    private var live: [LiveKey: LiveCall] = [:]              // by app + entry id
    private var liveByCall: [LiveKey: LiveCall] = [:]        // app + call id → first of its live entries
    private var inFlightPerApp: [String: Int] = [:]
    private var reading = false
    private var stopping = false
    /// True once this process holds its consumer name's lease (`register`): reading waits for it.
    private var registered = false
    /// Tells this process's lease apart from another process's under the same name.
    private let instance = String(UInt64.random(in: 1...UInt64.max), radix: 16)
    /// Sweeps of this process's own pending entries still to run (`claimOwnEntries`): after a
    /// reconnect of the reading connection and after a failed lookup or record.
    private var ownSweepsDue = 0
    /// Copies waiting for another process's copy of their call, looked up again by `recheckTimer`.
    private var copiesElsewhere: [Admitted] = []
    private var recheckTimer: LoopTimer!
    private var readRetryTimer: LoopTimer!
    private var heartbeatTimer: LoopTimer!
    private var claimTimer: LoopTimer!
    /// Apps whose credentials or config APNs refused lately (docs/protocol.md): for health.
    package private(set) var unhealthyApps: [String: String] = [:]
    package private(set) var stats = Stats()
    /// Called after each outcome is recorded (for tests and metrics).
    package var onRecorded: ((String, OutcomeRecord) -> Void)?
    /// Called when the consumer name is in use by another live process (`start` then gives up:
    /// the owner should stop with a clear message); the argument says what was found.
    package var onConsumerNameTaken: ((String) -> Void)?
    /// Told about events as they happen, for metrics (`GatewayMetrics`). Held weakly.
    package weak var observations: RouterObservations?
    /// Called after a retry due at the given unix ms was put in the schedule (the process's
    /// own mover wakes up for it).
    package var onRetryScheduled: ((Int64) -> Void)?
    /// Calls whose schedule step failed, tried again by `scheduleAgainTimer`.
    private var scheduleAgain: [LiveCall] = []
    private var scheduleAgainTimer: LoopTimer!
    /// Seeded once; each call's router gets a stream split off it (no system call per call).
    private var jitter = Jitter.random()
    /// Outcomes reached this loop turn, recorded together at its end.
    private var records: TurnBatch<PendingRecord>!

    package init(loop: EventLoop, store: CallStore, pools: ApnsPools, apps: [AppRuntime],
                settings: RoutingRunnerSettings, log: Log) {
        self.loop = loop
        self.store = store
        self.pools = pools
        self.apps = apps
        self.appsByKeys = Dictionary(uniqueKeysWithValues: apps.map { ($0.keys, $0) })
        self.settings = settings
        self.log = log
        readRetryTimer = LoopTimer(loop: loop) { [unowned self] in self.readNext() }
        heartbeatTimer = LoopTimer(loop: loop) { [unowned self] in self.beat() }
        claimTimer = LoopTimer(loop: loop) { [unowned self] in self.claim() }
        scheduleAgainTimer = LoopTimer(loop: loop) { [unowned self] in self.retrySchedulingSteps() }
        recheckTimer = LoopTimer(loop: loop) { [unowned self] in self.recheckCopiesElsewhere() }
        registerTimer = LoopTimer(loop: loop) { [unowned self] in self.registerAgain?(self) }
        records = TurnBatch(loop: loop) { [unowned self] in self.writeRecords($0) }
        store.onReadConnectionReconnected = { [unowned self] in self.ownSweepsDue = max(self.ownSweepsDue, 2) }
    }

    /// Switches to a new set of apps (a config reload). Calls in flight finish with the policy
    /// they started with; new reads use the new apps; a removed app's stream is no longer read.
    /// Unhealthy marks are cleared: a reload is how an operator fixes a credential, and a still
    /// broken one is marked again by its next push.
    package func updateApps(_ newApps: [AppRuntime]) {
        apps = newApps
        appsByKeys = Dictionary(uniqueKeysWithValues: newApps.map { ($0.keys, $0) })
        unhealthyApps.removeAll()
        readNext()
    }

    /// Calls being routed by this process.
    package var inFlight: Int { live.count }

    /// Registers the consumer name, then starts reading, heart-beating and taking over
    /// entries of dead consumers.
    package func start() {
        register(firstSeen: nil)
    }

    /// Takes the consumer name's lease (`CallStore.register`). A live lease of another process
    /// under the name is either this gateway's previous run, killed less than a lease ago, or a
    /// second gateway started with the same `--consumer`: the first stops renewing and lapses
    /// within `heartbeatTTLMs`, the second renews it. So the registration waits, looking again
    /// every heartbeat, until the lease lapses (then it is taken) or is renewed (then the name is
    /// in use: `onConsumerNameTaken`, and nothing is read). A Redis error retries after a beat.
    private func register(firstSeen: Int64?) {
        guard !stopping else { return }
        store.register(consumer: settings.consumer, instance: instance, ttlMs: settings.heartbeatTTLMs) { [unowned self] result in
            let again = { (seen: Int64?) in
                self.registerAgain = { $0.register(firstSeen: seen) }
                self.registerTimer.schedule(afterMs: self.settings.heartbeatEveryMs)
            }
            switch result {
            case .success(.registered):
                self.registered = true
                // Entries a previous run under this name left pending are this process's now.
                self.ownSweepsDue = max(self.ownSweepsDue, 1)
                self.beat()
                self.claimTimer.schedule(afterMs: self.settings.claimEveryMs)
                self.readNext()
            case let .success(.taken(holder, leaseUntil)):
                if let firstSeen, leaseUntil > firstSeen {
                    let problem = "consumer name \"\(self.settings.consumer)\" is in use by another live gateway "
                        + "(instance \(holder ?? "unknown") renewed its lease while this one waited)"
                    self.log.error("consumer name in use; not starting", ["consumer": self.settings.consumer,
                                                                         "instance": holder ?? "unknown"])
                    self.onConsumerNameTaken?(problem)
                    return
                }
                if firstSeen == nil {
                    self.log.info("consumer name leased by an earlier process; waiting for its lease to lapse or be renewed",
                                  ["consumer": self.settings.consumer, "lease_ms": self.settings.heartbeatTTLMs])
                }
                again(firstSeen ?? leaseUntil)
            case let .failure(error):
                self.log.warn("registering the consumer failed; trying again", ["error": "\(error)"], limited: true)
                again(firstSeen)
            }
        }
    }

    private var registerTimer: LoopTimer!
    private var registerAgain: ((RoutingRunner) -> Void)?

    /// Stops reading new entries; calls in flight carry on to their outcome. `done` runs once
    /// none is left or after `timeoutMs` (what is left stays pending in Redis for another
    /// process: at least once).
    package func drain(timeoutMs: Int64, done: @escaping () -> Void) {
        stopping = true
        claimTimer.cancel()
        readRetryTimer.cancel()
        drainTick(deadline: Clock.monotonicMs() + timeoutMs, done: done)
    }

    /// Waits (polling every 20 ms) until every live call is recorded or in the retry schedule
    /// (none waits in memory), then retires this consumer so whatever is still pending (calls
    /// cut off by the timeout) is claimable by other processes at once.
    private func drainTick(deadline: Int64, done: @escaping () -> Void) {
        if live.isEmpty || Clock.monotonicMs() >= deadline {
            heartbeatTimer.cancel()
            scheduleAgainTimer.cancel()
            recheckTimer.cancel()
            registerTimer.cancel()
            store.retire(consumer: settings.consumer, instance: instance) { _ in done() }
            return
        }
        if drainTimer == nil {
            drainTimer = LoopTimer(loop: loop) { [unowned self] in self.drainTick(deadline: deadline, done: done) }
        }
        drainTimer?.schedule(afterMs: 20)
    }

    private var drainTimer: LoopTimer?

    // MARK: Reading

    private func readNext() {
        guard !reading, !stopping, registered else { return }
        let ready = apps.filter { (inFlightPerApp[$0.id] ?? 0) < settings.perAppInFlight }
        guard !ready.isEmpty else { return }  // a finishing call resumes reading
        reading = true
        let count = ready.map { settings.perAppInFlight - (inFlightPerApp[$0.id] ?? 0) }.min() ?? 1
        store.readNew(apps: ready.map(\.keys), consumer: settings.consumer, count: min(settings.readBatch, max(1, count)),
                      blockMs: settings.blockMs) { [unowned self] result in
            self.reading = false
            switch result {
            case let .success(byApp):
                for (keys, entries) in byApp {
                    guard let app = self.appsByKeys[keys] else { continue }
                    self.stats.read += entries.count
                    self.observations?.eventsReceived(app: app.id, claimed: false, count: entries.count)
                    self.route(entries, app: app)
                }
                self.readNext()
            case let .failure(error):
                guard !self.stopping else { return }
                self.stats.redisErrors += 1
                self.log.warn("reading call events failed", ["error": "\(error)"], limited: true)
                self.readRetryTimer.schedule(afterMs: 200)
            }
        }
    }

    // MARK: One event

    private func key(_ app: AppRuntime, _ entryID: String) -> LiveKey { LiveKey(app: app.id, id: entryID) }
    private func callKey(_ app: AppRuntime, _ callID: String) -> LiveKey { LiveKey(app: app.id, id: callID) }

    /// A call admitted for routing, waiting for its lookup: a new event, or a due retry with
    /// the router's snapshot (then only the outcome and the cancellation are looked up).
    private final class Admitted {
        let call: LiveCall
        let event: CallEvent
        let snapshot: WaitingCall?

        init(call: LiveCall, event: CallEvent, snapshot: WaitingCall?) {
            self.call = call
            self.event = event
            self.snapshot = snapshot
        }

        var query: LookupQuery {
            let claim = event.kind == .incomingCall
            return snapshot == nil
                ? LookupQuery(eventId: event.id, voipToken: event.voipToken, alertToken: event.alertToken, claim: claim)
                : LookupQuery(eventId: event.id, voipToken: nil, alertToken: nil, claim: claim)
        }
    }

    /// Starts routing stream entries of one app (new, or taken over: `deliveries[i]` > 1; nil
    /// means first deliveries). Invalid and poison entries are dead-lettered here; the others
    /// are looked up in one MGET, then each call's router starts (or resumes) with what Redis knew.
    private func route(_ entries: [StreamEntry], deliveries: [Int64]? = nil, app: AppRuntime) {
        var admitted: [Admitted] = []
        admitted.reserveCapacity(entries.count)
        for (i, entry) in entries.enumerated() {
            if let a = admit(entry, app: app, deliveries: deliveries?[i] ?? 1) { admitted.append(a) }
        }
        lookUp(admitted, app: app)
    }

    /// Looks admitted calls up (one step per app: the outcome, the cancellation, the tokens, and
    /// for `incoming_call`s the in-flight claim), then starts each.
    private func lookUp(_ admitted: [Admitted], app: AppRuntime) {
        guard !admitted.isEmpty else { return }
        let cancelledHere = CallRouter.cancelledInRead(admitted.lazy.map { (kind: $0.event.kind, id: $0.event.id) })
        store.lookup(app.keys, admitted.map(\.query), claimAs: settings.consumer,
                     claimTTLMs: settings.inFlightClaimMs) { [unowned self] result in
            switch result {
            case let .success(found):
                for (i, (a, f)) in zip(admitted, found).enumerated() { self.start(a, found: f, cancelledInRead: cancelledHere[i]) }
            case let .failure(error):
                // Without the lookup, routing could repeat a finished call: leave the entries
                // pending; this process claims them back once Redis answers (`claimOwnEntries`).
                self.stats.redisErrors += 1
                self.ownSweepsDue = max(self.ownSweepsDue, 1)
                self.log.warn("lookup failed; entries left pending", ["app": app.id, "count": admitted.count, "error": "\(error)"],
                              limited: true)
                for a in admitted { self.forget(a.call) }
            }
        }
    }

    /// Registers a live call for `entry`, or dead-letters the entry (poison, invalid event,
    /// unreadable retry) and returns nil. Nil too when the entry is already being routed here.
    private func admit(_ entry: StreamEntry, app: AppRuntime, deliveries: Int64) -> Admitted? {
        guard live[key(app, entry.id)] == nil else { return nil }  // already routing it (a claim raced a read)
        // The event's bytes as read (hiredis's reply copied once, no text decoding): what the
        // decoder checks, and what a dead letter keeps.
        let eventField = entry.values["event"]
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
        if let state = entry.values["retry"] { return admitRetry(entry, state: state, app: app) }
        let event: CallEvent
        do throws(InvalidEvent) {
            guard eventField != nil else {
                throw InvalidEvent(field: "event", problem: "the stream entry has no field named event")
            }
            event = try CallEvent.decode(raw, entryTimeMs: entryTimeMs, policy: app.policy)
        } catch {
            stats.invalidEvents += 1
            log.warn("invalid call event dead-lettered", ["app": app.id, "entry": entry.id, "reason": error.description],
                     limited: true)
            deadLetterEntry(app, entry: entry, raw: raw, DeadLetter.invalidEvent(error, app: app.id, entry: entry.id))
            return nil
        }
        let call = LiveCall(app: app, entryID: entry.id, rawEvent: raw,
                            router: CallRouter(policy: app.policy, jitter: jitter.split()), callID: event.id,
                            isCancel: event.kind == .callCancelled)
        register(call)
        return Admitted(call: call, event: event, snapshot: nil)
    }

    /// A due retry came back from the schedule (an entry with field `retry`): the call continues
    /// from its snapshot once the lookup says whether it was finished or cancelled meanwhile.
    private func admitRetry(_ entry: StreamEntry, state: [UInt8], app: AppRuntime) -> Admitted? {
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
        } catch {
            // Only a bug or a hand-edited schedule gets here: a human must look.
            stats.invalidEvents += 1
            log.error("unreadable retry dead-lettered", ["app": app.id, "entry": entry.id, "reason": error.description],
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
                            router: CallRouter(policy: app.policy, jitter: jitter.split()), callID: event.id)
        call.firstFailureMs = snapshot.firstFailureAtMs
        register(call)
        return Admitted(call: call, event: event, snapshot: snapshot)
    }

    /// The lookup answered: unless another copy of the call is routing (`CallCopies`), the
    /// call's router starts (or resumes) and its first action runs. `cancelledInRead`: its
    /// cancel came in the same read (`CallRouter.cancelledInRead`).
    private func start(_ a: Admitted, found: EventLookup, cancelledInRead: Bool = false) {
        let call = a.call
        guard live[key(call.app, call.entryID)] === call else { return }  // forgotten meanwhile (drain cut, take-over)
        let done = found.outcome.flatMap(CallOutcome.init(rawValue:))
        let cancelled = found.cancelled || call.cancelRequested || cancelledInRead
        switch CallCopies.decide(kind: a.event.kind, alreadyDone: done != nil, cancelled: cancelled,
                                 claimHolder: found.claimHolder, consumer: settings.consumer,
                                 copyRoutingHere: copyRouting(besides: call) != nil) {
        case .route:
            break
        case .waitForCopyHere:
            copyRouting(besides: call)!.copiesWaiting.append(a)
            return
        case .waitForCopyElsewhere:
            copiesElsewhere.append(a)
            if !recheckTimer.isScheduled { recheckTimer.schedule(afterMs: settings.copyRecheckEveryMs) }
            return
        }
        call.started = true
        let action: CallAction
        if let snapshot = a.snapshot {
            action = call.router.resume(a.event, from: snapshot, now: Clock.unixMs(), alreadyDone: done, cancelled: cancelled)
        } else {
            action = call.router.start(a.event, now: Clock.unixMs(), knownInvalid: (found.voipInvalidSinceMs, found.alertInvalidSinceMs),
                                       alreadyDone: done, cancelled: cancelled)
        }
        perform(action, for: call)
    }

    /// Another entry of `call`'s call that has started routing here (the one its copies wait for).
    private func copyRouting(besides call: LiveCall) -> LiveCall? {
        var next = liveByCall[callKey(call.app, call.callID)]
        while let other = next {
            if other !== call, other.started, !other.isCancel { return other }
            next = other.nextOfCall
        }
        return nil
    }

    /// Looks the copies waiting for another process's copy up again: each then routes, waits
    /// on, or is acknowledged as a duplicate.
    private func recheckCopiesElsewhere() {
        let waiting = copiesElsewhere
        copiesElsewhere = []
        var byApp: [String: [Admitted]] = [:]
        for a in waiting where live[key(a.call.app, a.call.entryID)] === a.call { byApp[a.call.app.id, default: []].append(a) }
        for (_, copies) in byApp { lookUp(copies, app: copies[0].call.app) }
    }

    private func register(_ call: LiveCall) {
        let k = key(call.app, call.entryID)
        live[k] = call
        let ck = callKey(call.app, call.callID)
        call.nextOfCall = liveByCall[ck]
        liveByCall[ck] = call
        inFlightPerApp[call.app.id, default: 0] += 1
    }

    /// Performs one action of a call's router.
    private func perform(_ action: CallAction, for call: LiveCall) {
        if let feedback = action.feedback {
            call.feedback.append(InvalidToken(token: feedback.token, channel: TokenChannel(rawValue: feedback.channel.rawValue)!,
                                              reason: feedback.reason, timestampMs: feedback.timestampMs))
        }
        switch action.step {
        case .none:
            break
        case let .sendVoip(plan):
            send(plan, for: call)
        case let .sendAlert(plan, cause):
            if plan.attempt == 1 { observations?.fallback(app: call.app.id, cause: cause) }
            send(plan, for: call)
        case let .scheduleRetry(plan):
            if call.firstFailureMs == nil { call.firstFailureMs = call.router.waiting?.firstFailureAtMs ?? Clock.unixMs() }
            schedule(call, channel: plan.channel)
        case let .finish(record):
            recordOutcome(record, for: call)
        case let .deadLetter(deadLetter):
            if deadLetter.appUnhealthy {
                unhealthyApps[call.app.id] = deadLetter.reason.text
                log.error("app marked unhealthy", ["app": call.app.id, "reason": deadLetter.reason.text], limited: true)
            }
            writeDeadLetter(deadLetter, for: call)
        case let .cancelCall(record):
            cancel(callID: call.callID, app: call.app, cancelRecord: stamped(record, call), cancelEntry: call)
        case let .acknowledgeDuplicate(record):
            // An already finished call, a second cancel, a copy of a call another entry
            // finished: its `duplicate` result is written and its entry acknowledged.
            recordOutcome(record, for: call, keying: .duplicate)
        }
    }

    private func send(_ plan: PushPlan, for call: LiveCall) {
        let client: ApnsClient
        do {
            client = try pools.client(credential: call.app.credential, environment: plan.environment)
        } catch {
            let action = call.router.apnsFailed(.credentialUnusable("\(error)"), now: Clock.unixMs())
            return perform(action, for: call)
        }
        let sentUs = Clock.monotonicUs()
        client.send(plan.notification, writeByUnixMs: plan.writeByUnixMs) { [unowned self] result in
            let now = Clock.unixMs()
            let seconds = Double(Clock.monotonicUs() - sentUs) / 1_000_000
            let action: CallAction
            switch result {
            case let .success(response):
                self.observations?.apnsAnswered(app: call.app.id, channel: plan.channel, status: response.status,
                                                reason: response.reason?.text, latencySeconds: seconds)
                // APNs accepted the app's credentials and topic again: healthy (docs/protocol.md).
                if response.isAccepted { self.unhealthyApps[call.app.id] = nil }
                action = call.router.apnsAnswered(response, now: now)
            case let .failure(error):
                self.observations?.apnsFailed(app: call.app.id, channel: plan.channel, error: error, latencySeconds: seconds)
                action = call.router.apnsFailed(error, now: now)
            }
            self.perform(action, for: call)
        }
    }

    // MARK: Retries

    /// The schedule step for a call whose router is waiting: afterwards the call is in Redis
    /// only, and this process forgets it.
    private func schedule(_ call: LiveCall, channel: PushChannel) {
        guard var snapshot = call.router.waiting else {
            preconditionFailure("a scheduleRetry action without a waiting router (call \(call.callID))")
        }
        snapshot.entryID = call.producerEntryID
        call.scheduling = true
        let retry = ScheduledRetry(retryID: call.entryID, callID: call.callID, dueAtMs: snapshot.dueAtMs,
                                   event: call.rawEvent, state: snapshot.json())
        store.retries.schedule(call.app.keys, consumer: settings.consumer, retry: retry) { [unowned self] result in
            switch result {
            case .success(.scheduled):
                self.stats.retriesScheduled += 1
                self.stats.retriesScheduledByChannel[channel.rawValue, default: 0] += 1
                self.forget(call)
                self.onRetryScheduled?(snapshot.dueAtMs)
            case .success(.cancelled):
                // A cancel was recorded while the push was out: finish as cancelled now.
                call.scheduling = false
                self.perform(call.router.cancelReceived(now: Clock.unixMs()), for: call)
            case .success(.notOwned):
                // Tolerated: this process stalled past its lease and another took the entry
                // over (or finished it); that one carries on.
                self.log.warn("entry taken over before its retry was scheduled; left to its new owner",
                              ["app": call.app.id, "event": call.callID, "entry": call.entryID], limited: true)
                self.forget(call)
            case let .failure(error):
                self.stats.redisErrors += 1
                self.log.warn("scheduling a retry failed; trying again", ["app": call.app.id, "event": call.callID,
                                                                         "error": "\(error)"], limited: true)
                self.scheduleAgain.append(call)
                if !self.scheduleAgainTimer.isScheduled { self.scheduleAgainTimer.schedule(afterMs: self.settings.scheduleAgainAfterMs) }
            }
        }
    }

    private func retrySchedulingSteps() {
        let calls = scheduleAgain
        scheduleAgain = []
        for call in calls where live[key(call.app, call.entryID)] === call {
            guard let channel = call.router.waiting.map({ waiting -> PushChannel in
                if case .voip = waiting.stage { return .voip }
                return .alert
            }) else { continue }
            schedule(call, channel: channel)
        }
    }

    /// A `call_cancelled` event, as one Redis step (`RetrySchedule.cancel`): the cancellation
    /// marker, the call's scheduled retry removed with its `cancelled` outcome (built here by a
    /// router resumed from the retry's snapshot, so the record keeps the attempts), and the
    /// cancel event's own result and acknowledgement. Calls of that id in flight in this
    /// process are told, so they send nothing more after their answer.
    ///
    /// Races, each closed by the marker: a retry scheduled after the read of the call's retry
    /// is found by nobody here, and is stopped when it is resumed; a call whose retry is being
    /// scheduled meets the marker in the schedule step.
    private func cancel(callID: String, app: AppRuntime, cancelRecord: OutcomeRecord, cancelEntry: LiveCall) {
        cancelEntry.recording = true
        store.retries.pending(app.keys, callID: callID) { [unowned self] result in
            guard case let .success(found) = result else {
                self.stats.redisErrors += 1
                self.ownSweepsDue = max(self.ownSweepsDue, 1)
                return self.forget(cancelEntry)  // left pending; claimed back once Redis answers
            }
            var removing: [(retryID: String, resultJSON: String)] = []
            var records: [String: OutcomeRecord] = [:]
            if let found, let snapshot = try? WaitingCall.decode(found.state),
               let event = try? snapshot.event(from: found.event, policy: app.policy) {
                var router = CallRouter(policy: app.policy, jitter: .constant(0))
                if case var .finish(record) = router.resume(event, from: snapshot, now: Clock.unixMs(), cancelled: true).step {
                    record.entry = snapshot.entryID ?? found.retryID
                    removing.append((found.retryID, record.jsonString))
                    records[found.retryID] = record
                }
            }
            // An unreadable snapshot stays scheduled: when due, its resume dead-letters it.
            let entry = ResultEntry(eventId: "cancel:" + callID, resultJSON: cancelRecord.jsonString)
            self.store.retries.cancel(app.keys, callID: callID, cancelEntryID: cancelEntry.entryID, record: entry,
                                      removing: removing, markerTTLSeconds: self.settings.cancelTTLSeconds) { [unowned self] result in
                switch result {
                case let .failure(error):
                    self.stats.redisErrors += 1
                    self.ownSweepsDue = max(self.ownSweepsDue, 1)
                    self.log.error("recording a cancellation failed; entry left pending",
                                   ["app": app.id, "event": callID, "error": "\(error)"], limited: true)
                    self.forget(cancelEntry)
                case let .success(report):
                    self.stats.retriesCancelled += report.removed.count
                    for id in report.recorded {
                        guard let record = records[id] else { continue }
                        self.stats.finished[record.outcome.rawValue, default: 0] += 1
                        self.log.debug("call finished", ["app": app.id, "event": callID, "outcome": record.outcome.rawValue,
                                                        "retry": id])
                        self.onRecorded?(app.id, record)
                    }
                    for target in self.liveCalls(of: self.callKey(app, callID)) where target !== cancelEntry {
                        guard !target.recording, !target.scheduling else { continue }
                        // Its lookup may have answered before the marker was set: tell it.
                        guard target.started else { target.cancelRequested = true; continue }
                        self.perform(target.router.cancelReceived(now: Clock.unixMs()), for: target)
                    }
                    // A cancel of this call recorded meanwhile (two cancels at once): the script
                    // answered this one as a duplicate.
                    self.answered(cancelRecord, call: cancelEntry, recorded: report.cancelRecorded,
                                  firstOutcome: report.answeredBefore ? nil : CallOutcome.cancelled.rawValue)
                }
            }
        }
    }

    // MARK: Records

    /// One outcome waiting for the end of the loop turn, to be recorded with the others.
    private final class PendingRecord {
        let call: LiveCall
        let record: OutcomeRecord
        let finish: FinishRecord

        init(call: LiveCall, record: OutcomeRecord, finish: FinishRecord) {
            self.call = call
            self.record = record
            self.finish = finish
        }
    }

    /// Outcomes are recorded in batches: every outcome reached in one loop turn goes to Redis
    /// in one script per app (`CallStore.finish`), in chunks of at most this many.
    private static let recordChunk = 256

    /// The router's record with the calls entry it answers (the router knows no stream ids).
    private func stamped(_ record: consuming OutcomeRecord, _ call: LiveCall) -> OutcomeRecord {
        if record.entry == nil { record.entry = call.producerEntryID }
        return record
    }

    private func recordOutcome(_ record: consuming OutcomeRecord, for call: LiveCall, keying: ResultEntry.Keying = .once) {
        guard !call.recording else { return }
        call.recording = true
        let record = stamped(record, call)
        let eventId = record.type == .callCancelled ? "cancel:" + call.callID : call.callID
        let entry = ResultEntry(eventId: eventId, keying: keying, resultJSON: record.jsonString)
        records.add(PendingRecord(call: call, record: record,
                                  finish: FinishRecord(entryID: call.entryID, record: entry, invalidTokens: call.feedback)))
    }

    /// One `finish` script per app (and chunk) for the turn's outcomes.
    private func writeRecords(_ batch: [PendingRecord]) {
        var byApp: [String: [PendingRecord]] = [:]
        var order: [String] = []
        for p in batch {
            if byApp[p.call.app.id] == nil { order.append(p.call.app.id) }
            byApp[p.call.app.id, default: []].append(p)
        }
        for id in order {
            let pending = byApp[id]!
            for start in stride(from: 0, to: pending.count, by: Self.recordChunk) {
                let chunk = Array(pending[start..<min(pending.count, start + Self.recordChunk)])
                store.finish(chunk[0].call.app.keys, chunk.map(\.finish)) { [unowned self] result in
                    switch result {
                    case let .success(report):
                        for (i, p) in chunk.enumerated() {
                            self.answered(p.record, call: p.call, recorded: report.recorded[i], firstOutcome: report.firstOutcomes[i])
                        }
                    case let .failure(error):
                        // Never drop an outcome: leave the entries pending; claimed back and
                        // routed again once Redis answers.
                        self.stats.redisErrors += 1
                        self.ownSweepsDue = max(self.ownSweepsDue, 1)
                        self.log.error("recording outcomes failed; entries left pending",
                                       ["app": id, "count": chunk.count, "error": "\(error)"], limited: true)
                        for p in chunk { self.forget(p.call) }
                    }
                }
            }
        }
    }

    private func writeDeadLetter(_ deadLetter: DeadLetter, for call: LiveCall) {
        guard !call.recording else { return }
        call.recording = true
        let now = Clock.unixMs()
        let record = stamped(deadLetter.record, call)
        let attempts = String(decoding: record.json(), as: UTF8.self)
        let entry = DeadLetterEntry(event: call.rawEvent, reason: deadLetter.reason.text, attemptsJSON: attempts,
                                    firstFailureMs: call.firstFailureMs ?? now, lastFailureMs: now)
        // An invalid event's result does not claim its id: a corrected event may follow.
        store.deadLetter(call.app.keys, entryID: call.entryID, deadLetter: entry,
                         record: ResultEntry(eventId: record.id, keying: deadLetter.isInvalidEvent ? .provisional : .once,
                                             resultJSON: record.jsonString)) { [unowned self] result in
            switch result {
            case let .success(report):
                self.answered(record, call: call, recorded: report.recorded, firstOutcome: report.firstOutcome)
            case let .failure(error):
                self.stats.redisErrors += 1
                self.ownSweepsDue = max(self.ownSweepsDue, 1)
                self.log.error("dead-lettering failed; entry left pending", ["app": call.app.id, "error": "\(error)"],
                               limited: true)
                self.forget(call)
            }
        }
    }

    /// Dead-letters an entry that never became a live call (invalid, poison).
    private func deadLetterEntry(_ app: AppRuntime, entry: StreamEntry, raw: [UInt8], _ deadLetter: DeadLetter) {
        let call = LiveCall(app: app, entryID: entry.id, rawEvent: raw,
                            router: CallRouter(policy: app.policy, jitter: .constant(0)), callID: deadLetter.record.id ?? "")
        register(call)
        writeDeadLetter(deadLetter, for: call)
    }

    /// What a recording script did with `record`: wrote it; or, the id having an outcome
    /// already (a copy routed at the same time), wrote its `duplicate` result naming
    /// `firstOutcome`; or wrote nothing, the result there being this entry's own (the entry
    /// delivered again after its record ran, e.g. claimed back while a hung Redis still had the
    /// record to run): it said all there was to say then.
    private func answered(_ record: OutcomeRecord, call: LiveCall, recorded wasRecorded: Bool, firstOutcome: String?) {
        if wasRecorded { return recorded(record, call: call) }
        guard let firstOutcome else { return forget(call) }
        recorded(record.duplicate(of: CallOutcome(rawValue: firstOutcome) ?? record.outcome), call: call)
    }

    private func recorded(_ record: OutcomeRecord, call: LiveCall) {
        if record.outcome == .duplicate {
            // Its waiting copies are duplicates of the same first outcome.
            call.recordedOutcome = record.firstOutcome
            stats.duplicates += 1
            log.debug("duplicate event answered", ["app": call.app.id, "event": call.callID, "entry": call.entryID,
                                                   "first_outcome": record.firstOutcome?.rawValue ?? ""])
        } else {
            call.recordedOutcome = record.outcome
            stats.finished[record.outcome.rawValue, default: 0] += 1
            log.debug("call finished", ["app": call.app.id, "event": call.callID, "outcome": record.outcome.rawValue,
                                       "entry": call.entryID])
        }
        onRecorded?(call.app.id, record)
        forget(call)
    }

    /// The live entries of one app's call id (a copy: acting on them may forget some).
    private func liveCalls(of callKey: LiveKey) -> [LiveCall] {
        var out: [LiveCall] = []
        var next = liveByCall[callKey]
        while let call = next {
            out.append(call)
            next = call.nextOfCall
        }
        return out
    }

    /// Drops a call from this process's tables (its entry is acknowledged, or left pending).
    private func forget(_ call: LiveCall) {
        // Only the call routed for its entry: not one forgotten already, nor a later one.
        guard let i = live.index(forKey: key(call.app, call.entryID)), live.values[i] === call else { return }
        live.remove(at: i)
        let ck = callKey(call.app, call.callID)
        if liveByCall[ck] === call {
            liveByCall[ck] = call.nextOfCall
        } else {
            var previous = liveByCall[ck]
            while let p = previous, p.nextOfCall !== call { previous = p.nextOfCall }
            previous?.nextOfCall = call.nextOfCall
        }
        call.nextOfCall = nil
        inFlightPerApp[call.app.id, default: 1] -= 1
        // Its waiting copies: duplicates of a recorded outcome; otherwise (the call went to the
        // retry schedule, or a step failed) each looks the call up again.
        let copies = call.copiesWaiting
        call.copiesWaiting = []
        if let outcome = call.recordedOutcome {
            for copy in copies { start(copy, found: EventLookup(outcome: outcome.rawValue, cancelled: false)) }
        } else if !copies.isEmpty {
            lookUp(copies, app: copies[0].call.app)
        }
        readNext()
    }

    // MARK: Liveness and take-over

    private var sweepingOwn = false

    /// Claims back this process's own pending entries that it is not routing, in every app (one
    /// script per app, `CallStore.claimOwn`), and routes them. Due after the reading connection
    /// reconnected — a read served by Redis on the connection the watchdog had dropped left its
    /// entries pending here with their reply lost — twice, since Redis may serve that read
    /// only after the new connection is up; and after a failed lookup or record. So every
    /// event finishes within seconds of Redis coming back, not at the 2-minute own-entries
    /// rule of the full sweep. A sweep that fails stays due.
    private func claimOwnEntries() {
        guard !sweepingOwn else { return }
        sweepingOwn = true
        var routing: [AppKeys: [String]] = [:]
        for call in live.values { routing[call.app.keys, default: []].append(call.entryID) }
        let swept = apps
        store.claimOwn(swept.map(\.keys), consumer: settings.consumer, count: 1_000, routing: routing) { [unowned self] result in
            self.sweepingOwn = false
            guard case let .success(byApp) = result else {
                self.stats.redisErrors += 1
                return
            }
            self.ownSweepsDue = max(0, self.ownSweepsDue - 1)
            for app in swept {
                guard let found = byApp[app.keys] else { continue }
                let taken = found.entries.filter { self.live[self.key(app, $0.entry.id)] == nil }
                if !taken.isEmpty {
                    self.log.info("claimed back own pending entries", ["app": app.id, "count": taken.count])
                    self.observations?.eventsReceived(app: app.id, claimed: true, count: taken.count)
                }
                self.stats.lostEntries += found.lostIDs.count
                self.stats.claimed += taken.count
                self.route(taken.map(\.entry), deliveries: taken.map(\.deliveries), app: app)
            }
        }
    }

    private func beat() {
        store.heartbeat(consumer: settings.consumer, instance: instance, ttlMs: settings.heartbeatTTLMs) { [unowned self] result in
            switch result {
            case .success(nil):
                break
            case let .success(other?):
                // Another process beats under this name (started before names were checked, or
                // both waited out a lapsed lease at once): their take-overs will misfire.
                self.log.error("another live gateway uses this consumer name; give each process its own --consumer",
                               ["consumer": self.settings.consumer, "instance": other], limited: true)
            case .failure:
                self.stats.redisErrors += 1
            }
        }
        if !stopping { heartbeatTimer.schedule(afterMs: settings.heartbeatEveryMs) }
    }

    private var lastFullSweepMs: Int64 = 0

    /// Takes over in-flight entries of consumers whose heartbeat lapsed.
    ///
    /// Every `claimEveryMs` one read of the consumer registry; the per-app sweep (one script per
    /// app) runs only when it shows a lapsed consumer, or every `fullClaimSweepEveryMs` — so an
    /// idle process with many apps does not send a command per app every second. A sweep that
    /// found less than a page in every app forgets the lapsed consumers it was for (nothing of
    /// theirs is left); whatever the page limits hid is found by the next full sweep.
    private func claim() {
        guard !stopping else { return }
        if ownSweepsDue > 0 { claimOwnEntries() }
        store.consumerRegistry { [unowned self] result in
            guard case let .success(registry) = result else {
                self.stats.redisErrors += 1
                return self.claimTimer.schedule(afterMs: self.settings.claimEveryMs)
            }
            let now = Clock.monotonicMs()
            let lapsed = registry.lapsed.subtracting([self.settings.consumer])
            guard !lapsed.isEmpty || now - self.lastFullSweepMs >= self.settings.fullClaimSweepEveryMs else {
                return self.claimTimer.schedule(afterMs: self.settings.claimEveryMs)
            }
            self.lastFullSweepMs = now
            var liveSet = registry.live
            liveSet.insert(self.settings.consumer)
            var remaining = self.apps.count
            var cleared = true
            for app in self.apps {
                self.store.claimAbandoned(app.keys, consumer: self.settings.consumer, minIdleMs: self.settings.claimMinIdleMs,
                                          count: 1000, liveConsumers: liveSet,
                                          ownIdleMs: max(self.settings.ownEntriesIdleMs, self.settings.claimMinIdleMs)) { [unowned self] claimed in
                    if case let .success(found) = claimed {
                        // Own entries this process is still routing may come back (claimed by the
                        // own-idle rule): they are not new work.
                        let taken = found.entries.filter { self.live[self.key(app, $0.entry.id)] == nil }
                        if !taken.isEmpty {
                            self.log.info("took over abandoned entries (of dead consumers, or left pending here after an error)",
                                          ["app": app.id, "count": taken.count])
                            self.observations?.eventsReceived(app: app.id, claimed: true, count: taken.count)
                        }
                        self.stats.lostEntries += found.lostIDs.count
                        self.stats.claimed += taken.count
                        self.route(taken.map(\.entry), deliveries: taken.map(\.deliveries), app: app)
                        if found.entries.count + found.lostIDs.count >= 1000 { cleared = false }
                    } else {
                        self.stats.redisErrors += 1
                        cleared = false
                    }
                    remaining -= 1
                    guard remaining == 0 else { return }
                    if cleared { self.store.forgetLapsed(lapsed.sorted()) { _ in } }
                    if !self.stopping { self.claimTimer.schedule(afterMs: self.settings.claimEveryMs) }
                }
            }
        }
    }
}
