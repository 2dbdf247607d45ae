import APNs
import FCM
import EventLoop
import Foundation
import CallStorage
import RedisClient
import Retry
import Routing

/// Settings of the router role.
package struct RouterRoleSettings: Sendable {
    /// This process's consumer name in the apps' consumer groups; unique per process.
    package var consumer: String
    /// Entries read per app per XREADGROUP.
    package var readBatch = 100
    /// How long one XREADGROUP blocks when there is nothing to read.
    package var blockMs: Int64 = 1_000
    /// Calls of one app in flight at once in this process; reads of that app pause beyond it,
    /// so one app's flood or slow APNs cannot take all of the process.
    package var perAppInFlight = 1_000
    /// An app with this many pushes waiting for a stream in its APNs pools is not read until
    /// fewer wait (`AppIntake`): about one read's worth queued behind the wire, not its cap's.
    /// While it is left out for them the intake's plan is made again every `capWaitMs`.
    package var waitingPushesPerApp = 100
    /// How long an XREADGROUP blocks at most while it leaves an app out for its in-flight cap
    /// (`AppIntake.Plan.leftOutAtCap`): nothing wakes a blocked read when that app's calls
    /// leave, so this bounds how long the app waits for a read once it has room again.
    package var capWaitMs: Int64 = 5
    /// Heartbeat period and lifetime: a consumer whose heartbeat is older than `heartbeatTTLMs`
    /// is dead and its in-flight entries are taken over.
    var heartbeatEveryMs: Int64 = 1_000
    var heartbeatTTLMs: Int64 = 3_000
    /// How often this process reads the consumer registry for dead consumers, and how idle
    /// their entries must be to be taken over.
    package var claimEveryMs: Int64 = 1_000
    package var claimMinIdleMs: Int64 = 1_000
    /// The apps' pending entries are swept (one script per app) when the registry shows a
    /// lapsed consumer, and at least this often anyway, for entries of consumers no longer
    /// registered (retired with a drain cut short, forgotten, or a Redis that lost the registry),
    /// and again at every claim round while the last sweep found a full page.
    package var fullClaimSweepEveryMs: Int64 = 30_000
    /// Entries of this process idle this long that it is not routing — left pending when a
    /// Redis step failed (lookup, record) — are claimed back and routed again by the full
    /// sweep. Well above a call's stay in the process (pushes time out after 10 s; waits for a
    /// retry leave the process), so a live call is not claimed from under itself.
    package var ownEntriesIdleMs: Int64 = 120_000
    /// An entry delivered this many times without an outcome is dead-lettered (poison).
    package var redeliveryLimit: Int64 = 5
    /// After a Redis error, how long before putting a waiting call in the retry schedule again, ms.
    var scheduleAgainAfterMs: Int64 = 250
    /// After a record step failed, how long before its held outcome is written again, ms.
    var recordAgainAfterMs: Int64 = 250
    /// While Redis refuses writes, the line saying so (with how many calls wait) is logged at
    /// most this often, ms.
    var writeRefusalLogEveryMs: Int64 = 10_000
    /// How long a call's in-flight claim lasts (`AppKeys.result`), ms: longer than a call
    /// stays in one process (a push's queue and answer budgets, twice: VoIP then alert, and its
    /// record). It is released as soon as the call leaves the process; the TTL only frees the
    /// claim of a process that died.
    var inFlightClaimMs: Int64 = 60_000
    /// How often a copy waiting for another process's copy of its call looks the call up again, ms.
    var copyRecheckEveryMs: Int64 = 250
    /// How often the cancellation markers of the calls with devices ringing here are read (an
    /// answer, decline or cancel another gateway read), ms: one MGET per app per round.
    var ringRecheckEveryMs: Int64 = 1_000
    /// How often the apps' pause keys are read even when the pauses' stamp did not change (a
    /// stamp that failed to be written, a pause key changed by hand), ms (`+Pauses`).
    package var pauseSweepEveryMs: Int64 = 30_000
    /// When an app's pushes are withheld after APNs refused its credential, and how often one
    /// goes as a probe (`AppCredentialHealth`).
    package var credentialHealth = AppCredentialHealth.Policy()
    /// `call finished` lines a second at most (`log.calls_per_second`); 0: none.
    package var callLinesPerSecond = 100

    package init(consumer: String) { self.consumer = consumer }
}

/// The router role's I/O: reads call events from every app's stream, runs one
/// `CallStateMachine` per event (its entry's stay and a `CallRouter` per device), and performs
/// what each returns, in one place (`run(_:for:)`) — APNs pushes, the durable retry schedule,
/// and the atomic Redis records that acknowledge the entry. It decides nothing: every decision
/// comes from Routing, every key from `CallStore` (CallStorage).
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
/// are looked up with one step per app (an `MGET`, or the script that also takes the calls'
/// in-flight claims), and the outcomes reached in one loop turn are
/// recorded by one `finish` script per app (`TurnBatch`), each record still written and
/// acknowledged atomically. A lone call waits one loop iteration for its record; a burst of
/// answers from one TLS read shares one script.
///
/// Files by concern: this one holds the state and the tables of live calls; `+Reading` reads
/// and admits entries and starts their machines, `+Performing` performs a call machine's
/// actions (`run(_:for:)`) and sends the pushes, `+Retries` the retry schedule, cancellations
/// and the ends of ringing calls read elsewhere, `+Records` the outcomes' records, `+TakeOver`
/// the consumer lease, heartbeats and taking entries over, `+Pauses` the apps operators paused,
/// `+Lifecycle` the role's own life
/// (registering, running, draining, retired) as a machine. Each live call's own life (looked
/// up, routing, scheduling, recording, gone, and its devices' rings) is one `CallStateMachine`
/// (Routing).
///
/// Counted apart (`Stats`): crash redeliveries (`claimed`: entries taken over from a dead
/// consumer, whose delivery count XCLAIM raised) and error retries (`retriesScheduled`,
/// `retriesFired`: a push the router decided to try again).
package final class RouterRole {
    /// One event being routed. Its whole life — the entry's stay and its devices' routers —
    /// is one machine, `machine` (`CallStateMachine`, Routing), every event of the call goes
    /// through it, and `run(_:for:)` performs what it returns.
    final class LiveCall {
        let app: AppRuntime
        /// The stream entry, acknowledged with the outcome.
        let entryID: String
        /// Its keys in the live tables (`live`, `liveByCall`), made once.
        let entryKey: LiveKey
        let callKey: LiveKey
        /// The entry the producer's XADD made (`entryID`, or for a resumed retry the call's
        /// first entry): the `entry` of the call's result.
        let producerEntryID: String
        /// The entry's `event` field, its bytes as Redis holds them (kept exactly in a dead letter).
        let rawEvent: [UInt8]
        var machine: CallStateMachine
        let callID: String
        /// Which of the runner's steps may happen to the entry now (the machine's nested one).
        var life: LiveCallStateMachine { machine.life }
        var feedback: [InvalidToken] = []
        var firstFailureMs: Int64?
        /// The next live entry of the same app and call id (`liveByCall` lists them: usually
        /// one, two while a cancel or a producer's duplicate is in flight with its call).
        var nextOfCall: LiveCall?
        /// For a `call_cancelled`, `call_answered` or `call_declined` entry, the end of the ring
        /// it brings (it never pushes, so copies never wait for it); nil for a call.
        let ends: CallEnd?
        var isEnd: Bool { ends != nil }
        /// A `call_ringing` entry (a ring receipt): it never pushes and ends nothing, so copies
        /// and cancels never wait for it; its call's entries here hear it when it is read.
        let isReceipt: Bool
        /// An entry of the call itself (an `incoming_call` or its retry): not an end, not a receipt.
        var isCall: Bool { ends == nil && !isReceipt }
        /// Copies of this call that wait for it to leave the process (`CallCopies`).
        var copiesWaiting: [Admitted] = []
        /// Cancels of this call whose step waits for it to leave, so their result can say what
        /// the call got (`cancelled_after`): it had pushed when the cancel came.
        var cancelsWaiting: [(cancel: LiveCall, record: OutcomeRecord)] = []
        /// The pushes with the APNs client, by device, while their answers are awaited: a
        /// cancel takes them back if they are not written yet. A single-device call has one at
        /// most, kept apart from the others' array (`firstPushOut`), which it then never needs.
        var firstPushOut: PushOut?
        var morePushesOut: [PushOut] = []
        /// The call's one timer (its devices' retries, its deadline), made when first armed.
        var timer: LoopTimer?
        /// Listed in `ringing`: its cancellation marker is read now and then.
        var watchedForEnd = false
        /// Monotonic ms when its in-flight claim was last taken or renewed (a call with
        /// devices may ring longer than a claim lasts: `recheckRingingCalls` renews it).
        var claimedAtMs: Int64 = 0
        /// For an end entry: the devices of its call whose ring it cut short and those it told,
        /// set when that call (with devices) left (`CallStateMachine.endReport`); its own result
        /// names them.
        var endReport: (stopped: [String], told: [String])?

        /// `entryKey`: the entry's key when the caller made it already (`admit`), else made here.
        init(app: AppRuntime, entryID: String, entryKey: LiveKey? = nil, producerEntryID: String? = nil, rawEvent: [UInt8],
             machine: CallStateMachine, callID: String, ends: CallEnd? = nil, isReceipt: Bool = false) {
            self.isReceipt = isReceipt
            self.app = app
            self.entryID = entryID
            self.producerEntryID = producerEntryID ?? entryID
            self.rawEvent = rawEvent
            self.machine = machine
            self.callID = callID
            self.ends = ends
            self.entryKey = entryKey ?? LiveKey(app: app.id, id: entryID)
            callKey = LiveKey(app: app.id, id: callID)
        }
    }

    /// A push of a call with its provider's client.
    struct PushOut {
        let device: Int
        let ticket: Ticket

        enum Ticket {
            case apns(ApnsClient, ApnsPushTicket)
            case fcm(FcmClient, FcmSendTicket)
        }

        /// Takes the push back if it is not written yet (it then fails `.withdrawn`).
        func withdraw() {
            switch ticket {
            case let .apns(client, ticket): client.withdraw(ticket)
            case let .fcm(client, ticket): client.withdraw(ticket)
            }
        }
    }

    /// A call admitted for routing, waiting for its lookup: a new event, or a due retry with
    /// the router's snapshot (then only the outcome and the cancellation are looked up).
    final class Admitted {
        let call: LiveCall
        let event: CallEvent
        let snapshot: WaitingCall?
        /// It came from `readNext`: it starts once the next read answered (`startAfterRead`).
        var startsAfterNextRead = false

        init(call: LiveCall, event: CallEvent, snapshot: WaitingCall?) {
            self.call = call
            self.event = event
            self.snapshot = snapshot
        }

        var query: LookupQuery {
            LookupQuery(event, resumed: snapshot != nil, voipSuspicion: call.app.policy.ringReceiptTimeoutMs != nil)
        }
    }

    /// An app's entry id or call id: keys of the live tables (two strings, no concatenation).
    /// Its hash of the two strings is worked out once, when it is made: a live call keeps its two
    /// keys (`LiveCall.entryKey`, `LiveCall.callKey`), looked up at every step of the call, and
    /// a lookup then hashes one word, not both strings again.
    struct LiveKey: Hashable {
        let app: String
        let id: String
        private let hashOfBoth: Int

        init(app: String, id: String) {
            self.app = app
            self.id = id
            var hasher = Hasher()
            hasher.combine(app)
            hasher.combine(id)
            hashOfBoth = hasher.finalize()
        }

        static func == (a: LiveKey, b: LiveKey) -> Bool { a.hashOfBoth == b.hashOfBoth && a.id == b.id && a.app == b.app }

        func hash(into hasher: inout Hasher) { hasher.combine(hashOfBoth) }
    }

    /// Counters for metrics and tests.
    package struct Stats: Equatable, Sendable {
        /// New entries read (producers' events and moved retries).
        package var read = 0
        /// Crash redeliveries: entries taken over from dead consumers (delivery count ≥ 2).
        package var claimed = 0
        /// Finished calls per outcome, at each outcome's `ordinal`; `finished` names them.
        package var finishedByOutcome = [Int](repeating: 0, count: CallOutcome.allCases.count)
        /// The outcomes that finished calls, by name, with their counts.
        package var finished: [String: Int] {
            var out: [String: Int] = [:]
            for (outcome, n) in zip(CallOutcome.allCases, finishedByOutcome) where n > 0 { out[outcome.rawValue] = n }
            return out
        }
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

    // MARK: State

    let loop: EventLoop
    let store: CallStore
    let pools: ApnsPools
    /// The FCM clients, per FCM credential, for the apps' Android devices.
    let fcmPools: FcmPools
    var apps: [AppRuntime]
    var appsByKeys: [AppKeys: AppRuntime]
    package let settings: RouterRoleSettings
    let log: Log
    /// Tells this process's lease apart from another process's under the same name.
    let instance = String(UInt64.random(in: 1...UInt64.max), radix: 16)
    /// Signs the retries this process schedules and checks those it reads back (the key is the
    /// deployment's once registered: `register`, `beat`).
    let signer = RetrySigner()

    /// The live calls by app + entry id: every entry this process routes now.
    var live: [LiveKey: LiveCall] = [:]
    /// App + call id → the first of its live entries (the others follow `nextOfCall`).
    var liveByCall: [LiveKey: LiveCall] = [:]
    var inFlightPerApp: [String: Int] = [:]
    /// Which apps' streams are read next, with their rates (`limits`); `throttleTimer` reads
    /// again when a throttled app has its tokens and no read is in flight.
    var intake: AppIntake
    var throttleTimer: LoopTimer!
    /// Reads the apps' pauses (`+Pauses`); `pausesKnown` once it answered first.
    let pauseStore: AppPauseStore
    var pausesKnown = false
    /// Counts the reloads (`updateApps`): a pause read asked before the last one is ignored.
    var appsGeneration = 0
    /// The pauses' stamp at the last read of the apps' pause keys, and when that was (monotonic ms).
    var pauseStamp = ""
    var pausesReadAtMs: Int64 = 0
    /// Copies waiting for another process's copy of their call, looked up again by `recheckTimer`.
    var copiesElsewhere: [Admitted] = []
    /// Calls with devices still ringing, whose cancellation markers `ringRecheckTimer` reads
    /// (an end read by another gateway).
    var ringing: [LiveCall] = []
    var ringRecheckTimer: LoopTimer!
    /// The `call finished` lines' cap (`RouterRole+CallLines.swift`), and the timer that says
    /// at the end of a second how many calls it did not log.
    var callLines: CallLineCap
    var callLinesTimer: LoopTimer!
    /// Calls whose schedule step failed, tried again by `scheduleAgainTimer`.
    var scheduleAgain: [LiveCall] = []
    /// Calls holding an outcome whose record step failed, written again by `recordAgainTimer`.
    /// Bounded: they are live calls, counted in their app's in-flight cap.
    var recordAgain: [LiveCall] = []
    /// While Redis refuses writes: since when, the last refusal, and the entries whose lookup
    /// it refused (left pending until this process claims them back), for the log.
    var refusal: WriteRefusalSpell?
    /// Monotonic ms when the last spell of refusals ended (`leasesAreTrustworthy`).
    var refusalEndedMs: Int64?
    /// Outcomes reached this loop turn, recorded together at its end.
    var records: TurnBatch<PendingRecord>!
    /// Seeded once; each call's router gets a stream split off it (no system call per call).
    var jitter = Jitter.random()

    /// The role's own life: registering, running, draining, retired; the read in flight and
    /// the own sweeps due (`Lifecycle`). Every change goes through `run(_:)`.
    var lifecycle: Lifecycle
    /// Looked-up calls waiting for the read in flight to answer (`startAfterRead`).
    var callsAwaitingRead: [(Admitted, EventLookup)] = []
    /// Who waits for the drain to finish (`drain`).
    var drainDone: [() -> Void] = []
    /// Monotonic ms of the last full take-over sweep (`claim`).
    var lastFullSweepMs: Int64 = 0
    /// The last sweep filled a page in some app: more abandoned entries wait (of consumers that
    /// are not in the registry, such as a producer reading as the group), so the next claim
    /// round sweeps again instead of waiting `fullClaimSweepEveryMs`.
    var sweepFoundMore = false

    // The role's own timers: armed and cancelled only by `run(_:)` (the lifecycle's actions).
    var readRetryTimer: LoopTimer!
    var heartbeatTimer: LoopTimer!
    var claimTimer: LoopTimer!
    var registerTimer: LoopTimer!
    var drainTimer: LoopTimer!
    // The live calls' timers, for the steps they try again; cancelled when the role retires.
    var scheduleAgainTimer: LoopTimer!
    var recordAgainTimer: LoopTimer!
    var recheckTimer: LoopTimer!

    /// With ring receipts on: per app, how many calls in a row heard no receipt from any
    /// device, as its last recording script said (`heardGuard`).
    var callsWithoutReceipt: [String: Int64] = [:]
    /// The apps APNs refused lately for their credential or configuration, by id (a healthy
    /// app has no entry, so the hot path pays one missed lookup per push).
    var appHealth: [String: AppCredentialHealth] = [:]
    /// Apps whose credentials or config APNs refused lately (docs/protocol.md), with the
    /// reason: reported per app (`/status`, `pushgw_app_unhealthy`, the console).
    package var unhealthyApps: [String: String] { appHealth.compactMapValues { $0.refusal?.text } }
    /// Apps whose pushes are withheld now, with since when and when the next probe goes
    /// (monotonic ms).
    package var withheldApps: [String: (sinceMs: Int64, nextProbeAtMs: Int64)] {
        appHealth.compactMapValues { health in
            guard case let .withholding(_, since, next, _) = health.state else { return nil }
            return (since, next)
        }
    }
    package internal(set) var stats = Stats()
    /// Told about events as they happen, for metrics (`GatewayAdmin`) and tests: the one door
    /// out of the runner. Held weakly; nil tells nobody.
    package weak var observations: RouterObservations?
    /// Called when the consumer name is in use by another live process (`start` then gives up:
    /// the owner should stop with a clear message); the argument says what was found.
    package var onConsumerNameTaken: ((String) -> Void)?
    /// Called after a retry due at the given unix ms was put in the schedule (the process's
    /// own mover wakes up for it).
    package var onRetryScheduled: ((Int64) -> Void)?

    package init(loop: EventLoop, store: CallStore, pools: ApnsPools, fcmPools: FcmPools, apps: [AppRuntime],
                settings: RouterRoleSettings, log: Log) {
        self.loop = loop
        self.store = store
        self.pools = pools
        self.fcmPools = fcmPools
        self.apps = apps
        self.appsByKeys = Dictionary(uniqueKeysWithValues: apps.map { ($0.keys, $0) })
        intake = AppIntake(apps)
        pauseStore = AppPauseStore(topology: store.topology)
        self.settings = settings
        self.log = log
        callLines = CallLineCap(perSecond: settings.callLinesPerSecond)
        lifecycle = Lifecycle(timing: Lifecycle.Timing(heartbeatEveryMs: settings.heartbeatEveryMs,
                                                       claimEveryMs: settings.claimEveryMs))
        readRetryTimer = timer { $0.readNext() }
        throttleTimer = timer { $0.readNext() }
        heartbeatTimer = timer { $0.run($0.lifecycle.onHeartbeatDue()) }
        claimTimer = timer { $0.run($0.lifecycle.onClaimDue()) }
        registerTimer = timer { $0.run($0.lifecycle.onRegisterDue()) }
        drainTimer = timer { $0.drainTick() }
        scheduleAgainTimer = timer { $0.retrySchedulingSteps() }
        recordAgainTimer = timer { $0.recordHeldOutcomes() }
        recheckTimer = timer { $0.recheckCopiesElsewhere() }
        ringRecheckTimer = timer { $0.recheckRingingCalls() }
        callLinesTimer = timer { $0.logCallsNotLoggedSoFar() }
        records = TurnBatch(loop: loop) { [unowned self] in self.writeRecords($0) }
        // A read served on a connection the watchdog dropped left its entries pending here.
        store.onReadReplyMayBeLost = { [unowned self] in self.lifecycle.onOwnSweepsDue(atLeast: 2) }
    }

    /// A timer on the loop that runs `body` with this runner, held unowned: the runner owns its
    /// timers, which go with it.
    private func timer(_ body: @escaping (RouterRole) -> Void) -> LoopTimer {
        LoopTimer(loop: loop) { [unowned self] in body(self) }
    }

    /// Switches to a new set of apps (a config reload). Calls in flight finish with the policy
    /// they started with; new reads use the new apps; a removed app's stream is no longer read.
    /// Unhealthy marks and withheld pushes are cleared: a reload is how an operator fixes a
    /// credential, and a still broken one is marked again by its next pushes. The apps' pauses
    /// are read again before the next read.
    package func updateApps(_ newApps: [AppRuntime]) {
        apps = newApps
        appsByKeys = Dictionary(uniqueKeysWithValues: newApps.map { ($0.keys, $0) })
        intake.update(newApps)
        appHealth.removeAll()
        // An app the reload adds may be paused: no stream is read until the pauses are read again.
        pausesKnown = false
        appsGeneration += 1
        readPauses()
        readNext()
    }

    /// Calls being routed by this process.
    package var inFlight: Int { live.count }
    /// Calls being routed by this process, per app.
    package var inFlightByApp: [String: Int] { inFlightPerApp }
    /// Seconds each app with an event rate waited for it with events in its stream (`limits`).
    package var throttledSecondsByApp: [String: Double] { intake.throttledSeconds(nowMs: Clock.monotonicMs()) }

    /// Registers the consumer name, then starts reading, heart-beating and taking over
    /// entries of dead consumers.
    package func start() {
        run(lifecycle.onStart())
    }

    /// Stops reading new entries; calls in flight carry on to their outcome. `done` runs once
    /// none is left or after `timeoutMs` (what is left stays pending in Redis for another
    /// process: at least once).
    package func drain(timeoutMs: Int64, done: @escaping () -> Void) {
        drainDone.append(done)
        run(lifecycle.onDrain(nowMs: Clock.monotonicMs(), timeoutMs: timeoutMs))
        // Calls with devices waiting for an answer are recorded as they stand (or keep waiting
        // under `unanswered`): none is left to be rung again by another gateway.
        for call in Array(live.values) { run(call.machine.onDrain(now: Clock.unixMs()), for: call) }
    }

    /// Waits (polling every 20 ms) until every live call is recorded or in the retry schedule
    /// (none waits in memory), then retires this consumer so whatever is still pending (calls
    /// cut off by the timeout, outcomes Redis would not take meanwhile) is claimable by other
    /// processes at once: those are routed again, at least once.
    private func drainTick() {
        run(lifecycle.onDrainTick(liveCalls: live.count, nowMs: Clock.monotonicMs()))
    }

    /// An XREADGROUP is in flight.
    var reading: Bool { lifecycle.isReading }

    /// True once this process holds its consumer name's lease (`register`): reading waits for it.
    var registered: Bool { lifecycle.isRegistered }

    // MARK: The role's own life

    /// Performs what the role's `Lifecycle` returned: the one place its timers are armed and
    /// cancelled and its registration, heartbeats, reads, claim rounds and retirement are sent.
    func run(_ action: Lifecycle.Action) {
        switch action {
        case .none:
            break
        case .register:
            register()
        case let .registerLater(afterMs, because):
            switch because {
            case .leaseFirstSeen:
                log.info("consumer name leased by an earlier process; waiting for its lease to lapse or be renewed",
                         ["consumer": settings.consumer, "lease_ms": settings.heartbeatTTLMs])
            case .leaseStillHeld:
                break
            case let .failed(error):
                log.warn("registering the consumer failed; trying again", ["error": "\(error)"], limited: true)
            }
            registerTimer.schedule(afterMs: afterMs)
        case let .reportNameTaken(holder):
            let problem = "consumer name \"\(settings.consumer)\" is in use by another live gateway "
                + "(instance \(holder ?? "unknown") renewed its lease while this one waited)"
            log.error("consumer name in use; not starting", ["consumer": settings.consumer, "instance": holder ?? "unknown"])
            onConsumerNameTaken?(problem)
        case let .beginRunning(claimAfterMs):
            run(lifecycle.onHeartbeatDue())
            claimTimer.schedule(afterMs: claimAfterMs)
            readNext()
        case let .beat(againAfterMs):
            beat()
            readPauses()
            heartbeatTimer.schedule(afterMs: againAfterMs)
        case let .read(blocks):
            read(blocks: blocks)
        case .startCallsAwaitingRead:
            startCallsAwaitingRead()
        case .readAgain:
            // This read's cancels have told the calls they cancel (`admit`).
            startCallsAwaitingRead()
            readNext()
        case let .readAgainLater(afterMs, error):
            startCallsAwaitingRead()
            stats.redisErrors += 1
            log.warn("reading call events failed", ["error": "\(error)"], limited: true)
            readRetryTimer.schedule(afterMs: afterMs)
        case let .claim(sweepOwn):
            if sweepOwn { claimOwnEntries() }
            claim()
        case let .scheduleClaim(afterMs):
            claimTimer.schedule(afterMs: afterMs)
        case .beginDrain:
            claimTimer.cancel()
            readRetryTimer.cancel()
            throttleTimer.cancel()
            drainTick()
        case let .drainTickLater(afterMs):
            drainTimer.schedule(afterMs: afterMs)
        case .retire:
            heartbeatTimer.cancel()
            scheduleAgainTimer.cancel()
            recordAgainTimer.cancel()
            recheckTimer.cancel()
            ringRecheckTimer.cancel()
            registerTimer.cancel()
            callLinesTimer.cancel()
            logCallsNotLoggedSoFar()
            // Held strongly: whoever waits for the drain hears of it even if the role is let go.
            store.retire(consumer: settings.consumer, instance: instance) { _ in self.run(self.lifecycle.onRetired()) }
        case .finishDrain:
            let waiting = drainDone
            drainDone = []
            for done in waiting { done() }
        }
    }

    // MARK: The live tables

    func key(_ app: AppRuntime, _ entryID: String) -> LiveKey { LiveKey(app: app.id, id: entryID) }
    func callKey(_ app: AppRuntime, _ callID: String) -> LiveKey { LiveKey(app: app.id, id: callID) }

    func register(_ call: LiveCall) {
        live[call.entryKey] = call
        // One probe of the table: the call becomes its call id's first, the one before it next.
        call.nextOfCall = liveByCall.updateValue(call, forKey: call.callKey)
        inFlightPerApp[call.app.id, default: 0] += 1
    }

    /// Whether `call` is the one routed for its entry (not one that left).
    func isLive(_ call: LiveCall) -> Bool { live[call.entryKey] === call }

    /// The live entries of one app's call id (a copy: acting on them may forget some).
    func liveCalls(of callKey: LiveKey) -> [LiveCall] {
        var out: [LiveCall] = []
        var next = liveByCall[callKey]
        while let call = next {
            out.append(call)
            next = call.nextOfCall
        }
        return out
    }

    /// Another entry of `call`'s call that has started routing here (the one its copies wait for).
    func copyRouting(besides call: LiveCall) -> LiveCall? {
        var next = liveByCall[call.callKey]
        while let other = next {
            if other !== call, other.life.hasStarted, other.isCall { return other }
            next = other.nextOfCall
        }
        return nil
    }

    // MARK: A live call's life

    /// Drops a call from this process's tables (its entry is acknowledged, or left pending).
    func leave(_ call: LiveCall, duplicatesOf outcome: CallOutcome?) {
        guard let i = live.index(forKey: call.entryKey), live.values[i] === call else {
            preconditionFailure("call \(call.callID) (entry \(call.entryID)) left the process twice")
        }
        live.remove(at: i)
        let ck = call.callKey
        // One probe of the table (its slot is then changed where it lies): `call` is on its
        // call id's list, so the id has a slot.
        guard let first = liveByCall.index(forKey: ck) else {
            preconditionFailure("call \(call.callID) (entry \(call.entryID)) was live but not listed under its call id")
        }
        if liveByCall.values[first] === call {
            if let next = call.nextOfCall { liveByCall.values[first] = next } else { liveByCall.remove(at: first) }
        } else {
            var previous: LiveCall? = liveByCall.values[first]
            while let p = previous, p.nextOfCall !== call { previous = p.nextOfCall }
            previous?.nextOfCall = call.nextOfCall
        }
        call.nextOfCall = nil
        call.firstPushOut = nil
        call.morePushesOut = []
        call.timer?.close()
        call.timer = nil
        inFlightPerApp[call.app.id, default: 1] -= 1
        // Its waiting copies: duplicates of a recorded outcome; otherwise (the call went to the
        // retry schedule, or a step failed) each looks the call up again.
        let copies = call.copiesWaiting
        call.copiesWaiting = []
        if let outcome {
            for copy in copies { start(copy, found: EventLookup(recorded: outcome)) }
        } else if !copies.isEmpty {
            lookUp(copies, app: copies[0].call.app)
        }
        let cancels = call.cancelsWaiting
        call.cancelsWaiting = []
        // The entries that ended its ring learn whom they stopped and told: those waiting for it
        // now, and those whose own step comes later (their lookup still out).
        if let report = call.machine.endReport {
            for end in liveCalls(of: ck) where end.isEnd {
                end.endReport = call.machine.end == end.ends ? report : (stopped: [], told: [])
            }
        }
        for c in cancels { recordCancel(reported(c.record, of: c.cancel), of: c.cancel) }
        readNext()
    }

    /// The own result of `end`, an entry that ended a call's ring, with the devices it stopped
    /// and told (a call with devices only: a single-device call's ends keep their record).
    func reported(_ record: OutcomeRecord, of end: LiveCall) -> OutcomeRecord {
        guard let report = end.endReport else { return record }
        var record = record
        record.stopped = report.stopped
        record.told = report.told
        return record
    }

    /// The lookup step for `calls` failed: it is counted and logged, and the calls leave the
    /// process with their entries pending in Redis (nothing was pushed: nothing is known of
    /// them yet); this process claims them back once Redis answers (`claimOwnEntries`), so no
    /// call is dropped. (A record step that fails holds its outcome instead: `recordFailed`.)
    func stepFailed(_ calls: some Sequence<LiveCall>, _ level: Log.Level, _ message: String, error: RedisError,
                    _ fields: [String: Any]) {
        stats.redisErrors += 1
        lifecycle.onOwnSweepsDue(atLeast: 1)
        let left = Array(calls)
        for call in left { run(call.machine.onStepFailed(), for: call) }
        if error.writeRefusal != nil {
            writesRefused(error, leftPending: left.map { key($0.app, $0.entryID) })
        } else {
            var fields = fields
            fields["error"] = "\(error)"
            log.log(level, message, fields, limited: true)
        }
    }

    // MARK: Redis refusing writes

    /// A spell of Redis refusing writes, as the router met it.
    struct WriteRefusalSpell {
        let sinceMs: Int64
        var last: RedisError
        /// Entries whose lookup was refused and that wait, pending, to be claimed back.
        var leftPending: Set<LiveKey> = []
        var loggedAtMs: Int64?
    }

    /// A step met a write refusal: the spell starts or goes on, and at most every
    /// `writeRefusalLogEveryMs` one line says why and how many calls wait for Redis (outcomes
    /// held, retries to schedule, entries to look up again), instead of a line per failed step.
    func writesRefused(_ error: RedisError, leftPending: [LiveKey] = []) {
        let now = Clock.monotonicMs()
        var spell = refusal ?? WriteRefusalSpell(sinceMs: now, last: error)
        spell.last = error
        spell.leftPending.formUnion(leftPending)
        if spell.loggedAtMs.map({ now - $0 >= settings.writeRefusalLogEveryMs }) ?? true {
            spell.loggedAtMs = now
            let held = live.values.reduce(0) { n, call in
                if case .holdingOutcome = call.life.state { return n + 1 }
                return n
            }
            log.warn("Redis refuses writes; calls wait for it", [
                "refusal": error.writeRefusal?.code ?? "", "error": "\(error)", "for_ms": now - spell.sinceMs,
                "calls_waiting": held + scheduleAgain.count + spell.leftPending.count, "outcomes_held": held,
                "retries_to_schedule": scheduleAgain.count, "entries_to_look_up_again": spell.leftPending.count,
            ])
        }
        refusal = spell
    }

    /// A step wrote to Redis: a spell of refusals is over.
    func writesAccepted() {
        guard let spell = refusal else { return }
        refusal = nil
        refusalEndedMs = Clock.monotonicMs()
        log.info("Redis takes writes again", ["refused_for_ms": Clock.monotonicMs() - spell.sinceMs,
                                              "refusal": spell.last.writeRefusal?.code ?? ""])
    }
}
