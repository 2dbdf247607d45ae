import APNs
import FCM
import Retry

/// One `incoming_call` entry's life in the router process as one machine: the entry's stay
/// (`LiveCallStateMachine`, nested: looked up, routing, scheduling, recording, gone) and the
/// ring of every device it names, each device routed by its own `CallRouter` by today's rules
/// (docs/protocol.md, *Devices*). As AsyncHTTPClient's connection machine owns its request
/// machine, this one owns both, takes every event of the call (lookup answered, APNs answered
/// per device, an answer, decline or cancel heard, its timer, the Redis steps answered) and
/// returns one `Action` for the runner to perform completely in one place.
///
/// Pure: no clock, no I/O. Runs on the loop thread; a plain value.
///
///     waiting ─lookup answered─┬─▶ single (the single-device form: one router, today's actions)
///                              └─▶ ringing(devices) ─answer/decline/cancel, deadline─▶ ringing(recorded)
///
/// Invariants:
/// - A device's pushes go one at a time: its router's (the ring, its fallback) or, once its
///   router finished, the machine's own (the background push that ends the call, the
///   missed-call alert). An APNs answer for device `i` is for whichever is out.
/// - Nothing is pushed to a device after an answer, a decline or a cancel but the background
///   push `ended` (`apns-push-type: background`, priority 5, to the alert token), and that only
///   to a device whose VoIP push was accepted or may have been (no answer came), never to the
///   device that answered or declined, and never a VoIP push (Apple forbids pushing VoIP to
///   end a call).
/// - A device gets at most one missed-call alert per call, with `apns-collapse-id` derived
///   from the call id (`collapseID(for:)`), so a repeat replaces it.
/// - A call with devices waits in the process, its entry pending, until its ring ends: an
///   answer, decline or cancel, or its deadline (nothing can answer sooner than that: a
///   device's VoIP push was delivered), or no device rings at all. Its devices' retries wait
///   here too (`Action.timer`), not in the durable retry schedule, which keeps single-device
///   calls only.
/// - The single-device form under `missed_call_alert: undelivered` is today's call: its
///   router's actions pass through one for one and its record is the router's, byte for byte
///   (unless ring receipts are on: then every call rings as a call with devices).
/// - An Android device (`fcm_token`) is rung by its router through FCM by the same rules
///   (`CallRouter`); the machine's own pushes to it are FCM messages too: `call_ended` (a
///   high-priority data message) where an iPhone gets the background push, the missed-call
///   notification where an iPhone gets the missed-call alert. Ring receipts' escalation is
///   an iPhone's (CallKit's report): an Android device's ring is not escalated.
/// - With ring receipts on (`AppRoutingPolicy.ringReceiptTimeoutMs`), a device whose VoIP push
///   was accepted and whose receipt (`onRingReceipt`) has not come within the timeout is
///   escalated, before the deadline only and never after an end: one more VoIP push, then its
///   alert, each the machine's own push (`kind: no_receipt`). A receipt stops what is pending
///   for its device (a due step, a push not written yet) and only for it.
public struct CallStateMachine: Sendable {
    /// Read in place (`_read`): a getter would copy the policy, and retain each of its strings, at every use.
    public var policy: AppRoutingPolicy { _read { yield sharedPolicy.value } }
    /// The policy, shared with the call's routers and, in a running gateway, with every call
    /// of its app (`AppRuntime`).
    private let sharedPolicy: SharedRoutingPolicy
    /// The call's id (the event's).
    public let callID: String
    /// A dead letter replayed by an operator: every push of it goes in the background lane.
    public let replayed: Bool
    /// What held the entry in its stream before it was read (its app's event rate, a pause):
    /// a deadline passed by its start is that hold's (`StreamHold.cause`).
    public let heldBy: StreamHold?
    /// The entry's stay in the process; every event of the entry goes through it.
    public private(set) var life: LiveCallStateMachine
    /// What ended the ring, once heard (first one wins), also before the routers started.
    public private(set) var end: CallEnd?
    private var state: State

    // MARK: States

    private enum State: Sendable {
        /// Admitted: the routers start once the lookup answered. Inline, as every state: the
        /// event is one reference already, and a box per transition costs an allocation per
        /// step of every call in flight (the gateway's malloc was its largest cost).
        case waiting(event: CallEvent, jitter: Jitter)
        /// The single-device form under `missed_call_alert: undelivered` (or another event
        /// type): one router, whose actions pass through.
        case single(CallRouter)
        /// A call with devices (or any call under `missed_call_alert: unanswered`).
        case ringing(Ringing)
        /// An entry refused at admission (invalid, poison): its dead letter is written, nothing routes.
        case refused
        /// Only inside a transition, which always puts a state back: the state's router or
        /// devices were taken out to be changed, so the enum does not share their storage and
        /// changing them copies nothing (SwiftNIO's machines do the same).
        case modifying
    }

    private struct Ringing: Sendable {
        let event: CallEvent
        var devices: [DeviceRing]
        /// The deadline passed (a timer or any event at or after it).
        var deadlinePassed = false
        /// The missed-call alerts of an unanswered call were sent.
        var missedCallAlertsSent = false
        /// The call's record was requested: nothing more is pushed.
        var recordRequested = false
        /// The process drains: under `undelivered` the call is recorded once its devices'
        /// routers are done, without waiting for an end or the deadline (`onDrain`).
        var draining = false
    }

    private struct DeviceRing: Sendable {
        let device: CallDevice
        var router: CallRouter
        /// The alert token exists and is not known to be invalid (for the missed-call alert).
        let alertUsable: Bool
        /// A push of the router is with the APNs client.
        var routerPushOut = false
        /// The router waits for a retry due at this time (unix ms), in the process.
        var retryDueAtMs: Int64?
        /// The router's end, once it reached one.
        var end: DeviceEnd?
        /// The end of the call cut this device's ring short (a push out, a retry, a fallback).
        var stopped = false
        /// The machine's own push with the APNs client.
        var ownPush: OwnPush?
        /// The machine's own pushes to the device, answered (ended, missed call).
        var ownAttempts: [AttemptRecord] = []
        /// The background push ending the call was accepted for it.
        var told: EndedElsewhere?
        /// The missed-call alert was sent (at most once).
        var missedCallAlertSent = false
        /// APNs accepted the missed-call alert, with `missedCallAPNsID`.
        var missedCallAccepted = false
        var missedCallAPNsID: String?
        /// With ring receipts on: when the device's receipt was heard (unix ms).
        var rangAtMs: Int64?
        /// The receipt is awaited until this time (unix ms); then the next escalation step goes.
        var receiptDueAtMs: Int64?
        /// The receipt wait started (once, when the router's VoIP push was accepted).
        var receiptAwaited = false
        /// Escalation steps sent for want of a receipt: 1 after the second VoIP push, 2 after the alert.
        var noReceiptSteps = 0
        /// APNs accepted the escalation's alert, with this apns-id.
        var noReceiptAlertAPNsID: String?
        /// The receipt wait ran out with no receipt (its timeout, or the deadline, came before
        /// any end): the device's ring was silent (`ringTally`).
        var receiptWaitRanOut = false
        /// Its VoIP token was suspected of iOS's silent ban at the lookup: its router went
        /// straight to the alert (when it had a usable alert token).
        var voipSuspected = false
    }

    private enum DeviceEnd: Sendable {
        case record(OutcomeRecord)
        case deadLetter(DeadLetter)

        var record: OutcomeRecord {
            switch self {
            case let .record(r): return r
            case let .deadLetter(d): return d.record
            }
        }
    }

    private struct OwnPush: Sendable {
        let kind: AttemptRecord.PushKind
        let sentAtMs: Int64
        let told: EndedElsewhere?
        let environment: ApnsEnvironment
        /// The ended push and the missed-call alert go to the alert token; an escalation's
        /// first step is a VoIP push.
        var channel: PushChannel = .alert
    }

    // MARK: Actions

    /// A push for one device of the call.
    public struct DevicePush: Equatable, Sendable {
        /// What the push is for.
        public enum Purpose: Hashable, Sendable {
            /// The device's VoIP push (the ring).
            case ring
            /// Its router's alert fallback.
            case fallback(FallbackCause)
            /// The background push that ends the call on the device.
            case ended(EndedElsewhere)
            /// The missed-call alert of an unanswered call.
            case missedCall
            /// A step of the device's escalation for want of its ring receipt: one more VoIP
            /// push, then the alert.
            case noReceipt(PushChannel)
        }

        /// The device's index in `CallEvent.devices`; its answer comes back under it.
        public let device: Int
        public let plan: PushPlan
        public let purpose: Purpose
        /// The call is a replayed dead letter (`CallStateMachine.replayed`).
        public var replayed = false

        /// Where the push waits in the APNs client's queue (docs/architecture.md, "Scheduling"):
        /// a new ring first, then what is tried again, then alerts, then what no phone waits
        /// for — the ended pushes, and every push of a replay.
        public var lane: PushLane {
            if replayed { return .background }
            switch purpose {
            case .ring: return plan.attempt == 1 ? .live : .retry
            case .noReceipt(.voip): return .retry
            case .fallback: return plan.attempt == 1 ? .alert : .retry
            case .missedCall, .noReceipt(.alert): return .alert
            case .ended: return .background
            }
        }
    }

    /// What the runner does after one event: every part, in this order: feedback, the app's
    /// refusal, withdrawals, the timer, the entry's step (`life`), then the pushes (last: a push
    /// answered at once is answered inside the runner's send). Never pushes and a record together.
    public struct Action: Equatable, Sendable {
        /// Token feedback to write with the call's record (and to remember).
        public var feedback: [TokenFeedback] = []
        /// APNs refused the app's credential or configuration (a dead letter marked
        /// `appUnhealthy`): the runner marks the app.
        public var appRefused: DeadLetterReason?
        /// Devices whose push with the APNs client is to be taken back if not written yet
        /// (`ApnsClient.withdraw`); it then fails with `.withdrawn`.
        public var withdraw: [Int] = []
        /// The pushes to hand to the APNs client now, in order, each to `body` (`pushes` as one
        /// array); each is answered with `onApnsAnswered` or `onApnsFailed` (or `onPushWithheld`)
        /// for its device. The first is kept apart: most actions carry one at most, which then
        /// costs no array, and the list is opened once, not once for the first and again for the rest.
        public func forEachPush(_ body: (DevicePush) -> Void) {
            guard case let .some(first, more) = pushList else { return }
            body(first)
            for push in more { body(push) }
        }
        /// The pushes, inline: the first is ~60 bytes, and a box would cost an allocation for
        /// every push of every call (`more` stays the empty array, no allocation, for one push).
        private var pushList: PushList = .none

        private enum PushList: Equatable, Sendable {
            case none
            case some(first: DevicePush, more: [DevicePush])
        }
        /// What becomes of the call's one timer (`onTimer`): unchanged (an event that changes
        /// nothing of the ring), armed to fire at a time, or cancelled.
        public var timer: TimerChange = .unchanged
        /// The single-device call's retry (with `life == .write`): keep the router's `waiting`
        /// snapshot in the durable schedule.
        public var retry: RetryPlan?
        /// The entry's step, as `LiveCallStateMachine` returned it.
        public var life: LiveCallStateMachine.Action = .none

        public init() {}

        public static let none = Action()

        /// The call's timer after an action.
        public enum TimerChange: Equatable, Sendable {
            case unchanged
            /// Fire at this unix ms (replacing any earlier schedule).
            case fireAt(Int64)
            case cancel
        }

        /// Every push of the action, in order.
        public var pushes: [DevicePush] {
            var all: [DevicePush] = []
            forEachPush { all.append($0) }
            return all
        }

        mutating func push(replayed: Bool, _ push: consuming DevicePush) {
            push.replayed = replayed
            switch pushList {
            case .none:
                pushList = .some(first: push, more: [])
            case .some(let first, var more):
                pushList = .none
                more.append(push)
                pushList = .some(first: first, more: more)
            }
        }
    }

    // MARK: Init and reading

    /// The machine of an admitted entry: its lookup goes out next. `jitter` seeds the routers'
    /// backoff draws (one split per device).
    /// `replayed`: the event is a dead letter replayed by an operator (its entry carries the
    /// original `call_deadline`); its pushes wait behind every live one (`DevicePush.lane`).
    /// `heldBy`: what held its app's reads when it was read (the app's event rate, a pause).
    public init(event: CallEvent, policy: AppRoutingPolicy, jitter: Jitter, replayed: Bool = false, heldBy: StreamHold? = nil) {
        self.init(event: event, sharing: SharedRoutingPolicy(policy), jitter: jitter, replayed: replayed, heldBy: heldBy)
    }

    /// The same, with the policy its app's calls share (no copy of it per call).
    public init(event: CallEvent, sharing policy: SharedRoutingPolicy, jitter: Jitter, replayed: Bool = false,
                heldBy: StreamHold? = nil) {
        self.replayed = replayed
        self.heldBy = heldBy
        self.sharedPolicy = policy
        self.callID = event.id
        self.life = LiveCallStateMachine()
        self.state = .waiting(event: event, jitter: jitter)
    }

    /// An entry refused at admission (invalid event, poison, unreadable retry): its dead letter
    /// is written at once (the runner performs `writeRecord` of it), and it never routes.
    public static func refusedAtAdmission(_ deadLetter: DeadLetter, policy: AppRoutingPolicy) -> CallStateMachine {
        var machine = CallStateMachine(refusing: deadLetter.record.id ?? "", policy: policy)
        machine.life = .refusedAtAdmission(deadLetter)
        return machine
    }

    private init(refusing callID: String, policy: AppRoutingPolicy) {
        self.replayed = false
        self.heldBy = nil
        self.sharedPolicy = SharedRoutingPolicy(policy)
        self.callID = callID
        self.life = LiveCallStateMachine()
        self.state = .refused
    }

    /// Whether the event is routed by the machine's devices (a call with `devices`, or any
    /// `incoming_call` of an app whose missed-call alert is `unanswered`) rather than by one
    /// router as before devices.
    private func ringsDevices(_ event: CallEvent) -> Bool {
        event.kind == .incomingCall
            && (!event.listedDevices.isEmpty || policy.missedCallAlert == .unanswered || policy.ringReceiptTimeoutMs != nil)
    }

    /// A call with devices still ringing: no end heard, its record not requested. The runner
    /// looks such calls' cancellation markers up now and then, for an end another gateway read.
    public var awaitsEnd: Bool {
        guard case let .ringing(r) = state else { return false }
        return end == nil && !r.recordRequested
    }

    /// With ring receipts on, the devices of a ringing call whose receipt is awaited (their
    /// VoIP push accepted, no receipt heard yet): nil names the single-device form's one. The
    /// runner reads their receipts' own results now and then, for a receipt another gateway read.
    public var devicesAwaitingReceipt: [String?] {
        guard case let .ringing(r) = state, !r.recordRequested, end == nil, policy.ringReceiptTimeoutMs != nil else { return [] }
        return r.devices.filter { $0.receiptAwaited && $0.rangAtMs == nil }.map(\.device.id)
    }

    /// With ring receipts on, what the call says of its devices' VoIP tokens for the guard
    /// against iOS's silent VoIP ban (docs/protocol.md, *The guard against the silent VoIP
    /// ban*), read when its record is written: each device that rang (its receipt came) or
    /// stayed silent (its VoIP push accepted, then its receipt wait ran out before any end);
    /// nil when receipts are off or no device's ring said either (an answer before the timeout,
    /// no VoIP push accepted, a drain).
    public var ringTally: RingTally? {
        guard policy.ringReceiptTimeoutMs != nil, case let .ringing(r) = state else { return nil }
        let devices = r.devices.compactMap { d -> RingTally.Device? in
            guard let token = d.device.voipToken else { return nil }
            if d.rangAtMs != nil { return RingTally.Device(id: d.device.id, voipToken: token, rang: true) }
            guard d.receiptAwaited, d.receiptWaitRanOut else { return nil }
            return RingTally.Device(id: d.device.id, voipToken: token, rang: false)
        }
        return devices.isEmpty ? nil : RingTally(devices: devices)
    }

    /// What one call says of its devices' rings (`ringTally`).
    public struct RingTally: Equatable, Sendable {
        public struct Device: Equatable, Sendable {
            /// The device's id (nil: the single-device form's one).
            public let id: String?
            public let voipToken: String
            /// Its receipt came; false: its VoIP ring was accepted and no receipt came in time.
            public let rang: Bool
        }

        public let devices: [Device]
        /// Some device of the call rang: the app's backend sends receipts.
        public var anyRang: Bool { devices.contains { $0.rang } }
    }

    /// The single-device router's snapshot while it waits for a retry (after `Action.retry`).
    public var waiting: WaitingCall? {
        guard case let .single(router) = state else { return nil }
        return router.waiting
    }

    /// For the own result of the event that ended the ring (`end`), once the call's record was
    /// requested: the ids of the devices whose ring it cut short and of those it told.
    public var endReport: (stopped: [String], told: [String])? {
        guard case let .ringing(r) = state, r.recordRequested, end != nil else { return nil }
        return (r.devices.compactMap { $0.stopped ? $0.device.id : nil },
                r.devices.compactMap { $0.told != nil ? $0.device.id : nil })
    }

    // MARK: Events

    /// The lookup answered (see `LiveCallStateMachine.onLookupAnswered`): unless a copy routes,
    /// the routers start — or, with `snapshot`, the single-device router resumes from the
    /// durable schedule. `ended`: what the cancellation marker says ended the ring, when
    /// `cancelled` (nil: a cancel). `knownInvalid`: since when the single-device form's VoIP and
    /// alert tokens are known to be invalid; `devicesKnownInvalid` the same per listed device (in
    /// `CallEvent.devices`' order; missing entries mean not known). `devicesVoipSuspected`: with
    /// ring receipts on, per device in `CallEvent.devices`' order (the single-device form's one
    /// first), whether its VoIP token is suspected of iOS's silent ban: it goes straight to its
    /// alert (`CallRouter.start`), under `missed_call_alert: unanswered` too.
    public mutating func onLookupAnswered(alreadyDone: CallOutcome?, cancelled: Bool, claimHolder: String?, consumer: String,
                                          copyRoutingHere: Bool, ended: CallEnd? = nil,
                                          knownInvalid: (voip: Int64?, alert: Int64?) = (nil, nil),
                                          devicesKnownInvalid: [(voip: Int64?, alert: Int64?)] = [],
                                          devicesVoipSuspected: [Bool] = [],
                                          snapshot: WaitingCall? = nil, now: Int64) -> Action {
        guard case let .waiting(event, seed) = state else {
            if case .refused = state { preconditionFailure("a lookup answered for an entry refused at admission") }
            // The life refuses a second lookup answer of a started call itself.
            return Action(life: life.onLookupAnswered(.incomingCall, alreadyDone: alreadyDone != nil, cancelled: cancelled,
                                                      claimHolder: claimHolder, consumer: consumer,
                                                      copyRoutingHere: copyRoutingHere))
        }
        let step = life.onLookupAnswered(event.kind, alreadyDone: alreadyDone != nil, cancelled: cancelled,
                                         claimHolder: claimHolder, consumer: consumer, copyRoutingHere: copyRoutingHere)
        guard case let .startRouter(startCancelled) = step else { return Action(life: step) }
        // Cancelled by Redis' marker, not heard here: the ring ends as by a cancel.
        if startCancelled && end == nil { end = ended ?? .cancelled }
        var jitter = seed
        if snapshot != nil || !ringsDevices(event) || alreadyDone != nil {
            var router = CallRouter(sharing: sharedPolicy, jitter: jitter.split())
            let action: CallAction
            if let snapshot {
                action = router.resume(event, from: snapshot, now: now, alreadyDone: alreadyDone, cancelled: startCancelled)
            } else {
                action = router.start(event, now: now, knownInvalid: knownInvalid, alreadyDone: alreadyDone,
                                      cancelled: startCancelled, heldBy: heldBy)
            }
            state = .single(router)
            return single(action)
        }
        var ringing = Ringing(event: event, devices: [])
        var action = Action()
        let devices = event.devices
        // Under `unanswered` the machine sends the missed-call alert: the routers ring VoIP only.
        let routersAlert = policy.missedCallAlert == .undelivered
        for (i, device) in devices.enumerated() {
            let marks: (voip: Int64?, alert: Int64?) = event.listedDevices.isEmpty ? knownInvalid
                : i < devicesKnownInvalid.count ? devicesKnownInvalid[i] : (nil, nil)
            var router = CallRouter(sharing: sharedPolicy, jitter: jitter.split())
            let suspected = policy.ringReceiptTimeoutMs != nil && i < devicesVoipSuspected.count && devicesVoipSuspected[i]
            // A suspected token's router sends its alert, whatever the missed-call alert.
            let deviceEvent = event.event(of: device, alert: routersAlert || suspected)
            let started = router.start(deviceEvent, now: now, knownInvalid: marks, cancelled: startCancelled,
                                       voipSuspected: suspected, heldBy: heldBy)
            ringing.devices.append(DeviceRing(device: device, router: router,
                                              alertUsable: CallRouter.usable(device.alertToken ?? device.fcmToken,
                                                                             invalidSince: marks.alert,
                                                                             registeredAt: device.alertTokenRegisteredAtMs),
                                              voipSuspected: suspected))
            absorb(started, device: i, into: &ringing, &action)
        }
        advance(&ringing, now: now, &action)
        state = .ringing(ringing)
        return action
    }

    /// APNs answered the push out for device `device`.
    public mutating func onApnsAnswered(device: Int, _ response: PushNotificationResponse, now: Int64) -> Action {
        answered(device: device, now: now, own: { .init(response) }, router: { $0.apnsAnswered(response, now: now) },
                 attempt: { own in
                     AttemptRecord(sentAtMs: own.sentAtMs, channel: .alert, status: response.status, reason: response.reason?.text,
                                   error: nil, apnsID: response.apnsID)
                 })
    }

    /// FCM answered the message out for device `device` (an Android device).
    public mutating func onFcmAnswered(device: Int, _ response: FcmResponse, now: Int64) -> Action {
        let credential = policy.fcmCredential ?? ""
        return answered(device: device, now: now, own: { .init(response, credential: credential) },
                        router: { $0.fcmAnswered(response, now: now) },
                        attempt: { own in
                            AttemptRecord(sentAtMs: own.sentAtMs, channel: .alert, status: response.status,
                                          reason: response.isAccepted ? nil : response.reasonText, error: nil,
                                          apnsID: response.messageName, provider: .fcm)
                        })
    }

    /// The message out for device `device` got no answer from FCM.
    public mutating func onFcmFailed(device: Int, _ error: FcmClientError, now: Int64) -> Action {
        let credential = policy.fcmCredential ?? ""
        return answered(device: device, now: now, own: { .init(error, credential: credential) },
                        router: { $0.fcmFailed(error, now: now) },
                        attempt: { own in
                            AttemptRecord(sentAtMs: own.sentAtMs, channel: .alert, status: nil, reason: nil,
                                          error: error.description, apnsID: nil, provider: .fcm)
                        })
    }

    /// The push out for device `device` got no answer (timeout, connection lost, withdrawn, …).
    public mutating func onApnsFailed(device: Int, _ error: ApnsClientError, now: Int64) -> Action {
        answered(device: device, now: now, own: { .init(error) }, router: { $0.apnsFailed(error, now: now) },
                 attempt: { own in
                     AttemptRecord(sentAtMs: own.sentAtMs, channel: .alert, status: nil, reason: nil, error: error.description,
                                   apnsID: nil)
                 })
    }

    /// The runner did not send device `device`'s push: the app's pushes are withheld
    /// (`AppCredentialHealth`). A router's push ends its device as `CallRouter.pushWithheld`
    /// says; the machine's own push is dropped, no attempt made.
    public mutating func onPushWithheld(device: Int, _ reason: DeadLetterReason, now: Int64) -> Action {
        switch state {
        case .waiting, .refused, .modifying:
            preconditionFailure("a push withheld before the call's routers started")
        case var .single(router):
            state = .modifying
            let action = router.pushWithheld(reason, now: now)
            state = .single(router)
            return single(action)
        case var .ringing(r):
            state = .modifying
            var action = Action()
            if r.devices[device].ownPush != nil {
                r.devices[device].ownPush = nil
            } else {
                r.devices[device].routerPushOut = false
                let routed = r.devices[device].router.pushWithheld(reason, now: now)
                absorb(routed, device: device, into: &r, &action)
            }
            advance(&r, now: now, &action)
            state = .ringing(r)
            return action
        }
    }

    /// An answer, a decline or a cancel of the call was heard (read by this process). The
    /// first one ends the ring; a later one changes nothing (tolerated: two ends race).
    /// Before the routers start, the call starts stopped (nothing is pushed); a single-device
    /// call's router is told as of a cancel (`CallRouter.cancelReceived`), for any of the three.
    public mutating func onEndHeard(_ heard: CallEnd, now: Int64) -> Action {
        guard end == nil else { return .none }
        let step = life.onCancelHeard()
        switch state {
        case .waiting:
            end = heard
            return Action(life: step)
        case .refused:
            return Action(life: step)
        case .modifying:
            preconditionFailure("an end heard inside a transition")
        case var .single(router):
            guard step == .tellRouterCancelled else { return Action(life: step) }
            state = .modifying
            end = heard
            let action = router.cancelReceived(now: now)
            state = .single(router)
            return single(action)
        case var .ringing(r):
            // Tolerated: an end heard once the call's record was requested has nothing to stop.
            guard step == .tellRouterCancelled, !r.recordRequested else { return Action(life: step) }
            state = .modifying
            end = heard
            var action = Action()
            // An escalation push not written yet rings nothing more: taken back.
            for i in r.devices.indices where r.devices[i].ownPush?.kind == .noReceipt { action.withdraw.append(i) }
            for i in r.devices.indices where r.devices[i].end == nil {
                r.devices[i].stopped = true
                let told = r.devices[i].router.cancelReceived(now: now)
                absorb(told, device: i, into: &r, &action)
            }
            advance(&r, now: now, &action)
            state = .ringing(r)
            return action
        }
    }

    /// The call's timer fired (`Action.timer`): the devices' retries due by `now` go, and at
    /// the deadline the ring ends. Tolerated: a timer of a call that moved on does nothing.
    public mutating func onTimer(now: Int64) -> Action {
        guard case var .ringing(r) = state, !r.recordRequested else { return .none }
        state = .modifying
        var action = Action()
        for i in r.devices.indices {
            guard let due = r.devices[i].retryDueAtMs, due <= now else { continue }
            r.devices[i].retryDueAtMs = nil
            let routed = r.devices[i].router.retryDue(now: now)
            absorb(routed, device: i, into: &r, &action)
        }
        if end == nil && now < r.event.deadlineMs {
            for i in r.devices.indices {
                guard let due = r.devices[i].receiptDueAtMs, due <= now, r.devices[i].ownPush == nil else { continue }
                r.devices[i].receiptDueAtMs = nil
                r.devices[i].receiptWaitRanOut = true
                escalate(&r, device: i, now: now, &action)
            }
        }
        advance(&r, now: now, &action)
        state = .ringing(r)
        return action
    }

    /// A ring receipt (`call_ringing`) of the call was heard: device `device` (nil: the one
    /// device of the single-device form) reported the call to CallKit at `rangAtMs` (the
    /// receipt entry's time; `now` when not given). Its escalation
    /// stops (a due step is dropped, a push not written yet is taken back); the other devices'
    /// go on. Tolerated: a receipt of a device the call does not name, a second receipt, a
    /// receipt of a call not ringing (recorded, or a single-device call without receipts on).
    public mutating func onRingReceipt(device: String?, rangAtMs: Int64? = nil, now: Int64) -> Action {
        guard case var .ringing(r) = state, !r.recordRequested else { return .none }
        let found = device.flatMap { id in r.devices.firstIndex { $0.device.id == id } }
            ?? (device == nil && r.event.listedDevices.isEmpty ? 0 : nil)
        guard let i = found, r.devices[i].rangAtMs == nil else { return .none }
        state = .modifying
        var action = Action()
        r.devices[i].rangAtMs = rangAtMs ?? now
        r.devices[i].receiptDueAtMs = nil
        if r.devices[i].ownPush?.kind == .noReceipt { action.withdraw.append(i) }
        advance(&r, now: now, &action)
        state = .ringing(r)
        return action
    }

    /// The process drains (SIGTERM). A call with devices under `missed_call_alert: undelivered`
    /// stops waiting for an answer: once its devices' routers are done (pushes answered,
    /// retries run) it is recorded as it stands, so no other gateway takes it over and rings
    /// its devices again; an answer read later ends nothing here (the app's signalling does).
    /// Under `unanswered` the call keeps waiting for its deadline: its missed-call alerts depend
    /// on whether it is answered. Tolerated: a call not ringing (any other state) is unchanged.
    public mutating func onDrain(now: Int64) -> Action {
        guard case var .ringing(r) = state, !r.recordRequested, policy.missedCallAlert == .undelivered else { return .none }
        state = .modifying
        r.draining = true
        var action = Action()
        advance(&r, now: now, &action)
        state = .ringing(r)
        return action
    }

    // The entry's Redis steps: forwarded to the life (`LiveCallStateMachine`), whose docs say
    // which states each may come in.

    public mutating func onScheduleFailed() -> Action { Action(life: life.onScheduleFailed()) }
    public mutating func onScheduleAgainDue() -> Action { Action(life: life.onScheduleAgainDue()) }
    public mutating func onScheduled() -> Action { Action(life: life.onScheduled()) }
    public mutating func onRecordFailed() -> Action { Action(life: life.onRecordFailed()) }
    public mutating func onRecordAgainDue() -> Action { Action(life: life.onRecordAgainDue()) }
    public mutating func onRecorded(outcome: CallOutcome?) -> Action { Action(life: life.onRecorded(outcome: outcome)) }
    public mutating func onStepFailed() -> Action { Action(life: life.onStepFailed()) }

    /// The schedule step found the call cancelled: its router finishes it as cancelled.
    public mutating func onScheduleFoundCancelled(now: Int64) -> Action {
        let step = life.onScheduleFoundCancelled()
        guard case var .single(router) = state, step == .tellRouterCancelled else { return Action(life: step) }
        state = .modifying
        let action = router.cancelReceived(now: now)
        state = .single(router)
        return single(action)
    }

    // MARK: Transitions

    private mutating func answered(device i: Int, now: Int64, own verdict: () -> PushVerdict,
                                   router answer: (inout CallRouter) -> CallAction,
                                   attempt: (OwnPush) -> AttemptRecord) -> Action {
        switch state {
        case .waiting, .refused, .modifying:
            preconditionFailure("an APNs answer before the call's routers started")
        case var .single(router):
            state = .modifying
            let action = answer(&router)
            state = .single(router)
            return single(action)
        case var .ringing(r):
            state = .modifying
            var action = Action()
            if let own = r.devices[i].ownPush {
                r.devices[i].ownPush = nil
                var record = attempt(own)
                record = AttemptRecord(sentAtMs: record.sentAtMs, channel: own.channel, status: record.status, reason: record.reason,
                                       error: record.error, apnsID: record.apnsID,
                                       environment: own.environment == environment(of: r.devices[i].device) ? nil : own.environment,
                                       provider: record.provider ?? .apns)
                record.device = r.devices[i].device.id
                record.kind = own.kind
                r.devices[i].ownAttempts.append(record)
                switch verdict() {
                case let .accepted(apnsID):
                    switch own.kind {
                    case .ended: r.devices[i].told = own.told
                    case .missedCall: (r.devices[i].missedCallAccepted, r.devices[i].missedCallAPNsID) = (true, apnsID)
                    case .noReceipt:
                        if own.channel == .alert {
                            r.devices[i].noReceiptAlertAPNsID = apnsID
                        } else if r.devices[i].rangAtMs == nil, let timeout = policy.ringReceiptTimeoutMs {
                            r.devices[i].receiptDueAtMs = now.clampedSum(timeout)
                        }
                    }
                case let .tokenInvalid(reason, timestampMs, _):
                    let device = r.devices[i].device
                    action.feedback.append(TokenFeedback(token: device.alertToken ?? device.fcmToken ?? "", channel: .alert,
                                                         reason: reason, timestampMs: timestampMs ?? now,
                                                         timestampFromAPNs: timestampMs != nil,
                                                         provider: device.fcmToken == nil ? .apns : .fcm))
                case let .deadLetter(reason, appUnhealthy):
                    if appUnhealthy { action.appRefused = reason }
                case .transient, .payloadTooLarge, .withdrawn:
                    // One attempt each: the app's own signalling ends the call too, and a
                    // missed-call alert is sent at most once.
                    break
                }
                // An escalation's VoIP push not accepted: its next step (the alert) goes now.
                if own.kind == .noReceipt, own.channel == .voip, r.devices[i].receiptDueAtMs == nil,
                   r.devices[i].rangAtMs == nil, end == nil, now < r.event.deadlineMs {
                    escalate(&r, device: i, now: now, &action)
                }
            } else {
                precondition(r.devices[i].routerPushOut, "an APNs answer for device \(i) of call \(r.event.id) with no push out")
                r.devices[i].routerPushOut = false
                let routed = answer(&r.devices[i].router)
                absorb(routed, device: i, into: &r, &action)
            }
            advance(&r, now: now, &action)
            state = .ringing(r)
            return action
        }
    }

    /// A single-device router's action, passed through: what `RouterRole` performed before
    /// devices, with the alert's collapse id added.
    private mutating func single(_ routed: CallAction) -> Action {
        var action = Action()
        if let feedback = routed.feedback { action.feedback.append(feedback) }
        switch routed.step {
        case .none:
            break
        case let .sendVoip(plan):
            action.push(replayed: replayed, DevicePush(device: 0, plan: plan, purpose: .ring))
        case let .sendAlert(plan, cause):
            action.push(replayed: replayed, DevicePush(device: 0, plan: CallStateMachine.collapsed(plan, callID: callID), purpose: .fallback(cause)))
        case .withdrawPush:
            action.withdraw.append(0)
        case let .scheduleRetry(plan):
            action.retry = plan
            action.life = life.onScheduleRequested()
        case let .finish(record):
            action.life = life.onRecordRequested(.outcome(record))
        case let .deadLetter(deadLetter):
            if deadLetter.appUnhealthy { action.appRefused = deadLetter.reason }
            action.life = life.onRecordRequested(.deadLetter(deadLetter))
        case let .cancelCall(record):
            action.life = life.onRecordRequested(.cancellation(record))
        case let .acknowledgeDuplicate(record):
            action.life = life.onRecordRequested(.duplicate(record))
        }
        return action
    }

    /// One device router's action, taken into the call's.
    private func absorb(_ routed: CallAction, device i: Int, into r: inout Ringing, _ action: inout Action) {
        if let feedback = routed.feedback { action.feedback.append(feedback) }
        switch routed.step {
        case .none:
            break
        case let .sendVoip(plan):
            r.devices[i].routerPushOut = true
            action.push(replayed: replayed, DevicePush(device: i, plan: plan, purpose: .ring))
        case let .sendAlert(plan, cause):
            r.devices[i].routerPushOut = true
            action.push(replayed: replayed, DevicePush(device: i, plan: CallStateMachine.collapsed(plan, callID: r.event.id),
                                            purpose: .fallback(cause)))
        case .withdrawPush:
            action.withdraw.append(i)
        case let .scheduleRetry(plan):
            r.devices[i].retryDueAtMs = plan.atMs
        case let .finish(record):
            r.devices[i].retryDueAtMs = nil
            r.devices[i].end = .record(record)
        case let .deadLetter(deadLetter):
            r.devices[i].retryDueAtMs = nil
            if deadLetter.appUnhealthy { action.appRefused = deadLetter.reason }
            r.devices[i].end = .deadLetter(deadLetter)
        case .cancelCall, .acknowledgeDuplicate:
            preconditionFailure("a device's router of call \(r.event.id) answered as for a cancel or a duplicate event")
        }
    }

    /// Device `i`'s next escalation step for want of its receipt: one more VoIP push (while
    /// the deadline allows), then its alert (when its alert token is usable); nothing when both
    /// were sent. Never after an end or the deadline (the caller checks).
    private func escalate(_ r: inout Ringing, device i: Int, now: Int64, _ action: inout Action) {
        let d = r.devices[i]
        guard d.device.fcmToken == nil else { return }  // receipts are awaited from iPhones only
        // Where the device's VoIP push was accepted: after an `environment_mismatch` that is
        // the other environment, which the token (and its alert token, of the same build) belongs to.
        let environment = acceptedEnvironment(of: d)
        if d.noReceiptSteps == 0, let token = d.device.voipToken,
           let push = try? PushNotification(deviceToken: token, topic: policy.voipTopic, pushType: .voip,
                                            payload: r.event.voipPayload, priority: .immediate,
                                            expiration: r.event.deadlineMs / 1000) {
            r.devices[i].noReceiptSteps = 1
            r.devices[i].ownPush = OwnPush(kind: .noReceipt, sentAtMs: now, told: nil, environment: environment, channel: .voip)
            var plan = PushPlan(channel: .voip, attempt: 1, environment: environment, notification: push)
            plan.writeByUnixMs = r.event.deadlineMs
            action.push(replayed: replayed, DevicePush(device: i, plan: plan, purpose: .noReceipt(.voip)))
            return
        }
        r.devices[i].noReceiptSteps = 2
        guard d.noReceiptSteps < 2, d.alertUsable, !r.event.alertPayload.isEmpty,
              let push = try? PushNotification(deviceToken: d.device.alertToken ?? "", bundleID: policy.bundleID,
                                               pushType: .alert, payload: r.event.alertPayload, priority: .immediate,
                                               expiration: now.clampedSum(policy.alertTTLMs) / 1000,
                                               collapseID: CallStateMachine.collapseID(for: r.event.id))
        else { return }
        r.devices[i].ownPush = OwnPush(kind: .noReceipt, sentAtMs: now, told: nil, environment: environment, channel: .alert)
        action.push(replayed: replayed, DevicePush(device: i, plan: PushPlan(channel: .alert, attempt: 1, environment: environment, notification: push),
                               purpose: .noReceipt(.alert)))
    }

    /// After every event of a ringing call: the end's background pushes, the missed-call
    /// alerts, the record once everything settled, and the timer.
    private mutating func advance(_ r: inout Ringing, now: Int64, _ action: inout Action) {
        if now >= r.event.deadlineMs { r.deadlinePassed = true }
        guard !r.recordRequested else { return }
        if let timeout = policy.ringReceiptTimeoutMs {
            for i in r.devices.indices {
                if end != nil || r.deadlinePassed {
                    // The deadline came first: the ring was silent to the end.
                    if end == nil, r.devices[i].receiptDueAtMs != nil { r.devices[i].receiptWaitRanOut = true }
                    r.devices[i].receiptDueAtMs = nil  // nothing escalates after an end or the deadline
                } else if !r.devices[i].receiptAwaited, r.devices[i].rangAtMs == nil, r.devices[i].device.fcmToken == nil,
                          case let .record(routed)? = r.devices[i].end, routed.outcome == .deliveredVoip {
                    r.devices[i].receiptAwaited = true
                    r.devices[i].receiptDueAtMs = now.clampedSum(timeout)
                }
            }
        }
        let routersDone = r.devices.allSatisfy { $0.end != nil }
        let anyRang = r.devices.contains { CallStateMachine.mayHaveRung($0) }
        // A suspected token's alert stands for its ring: under `unanswered` the missed-call
        // alerts wait for the deadline, as after a ring.
        let anyShown = anyRang || r.devices.contains { $0.voipSuspected && $0.end?.record.outcome == .deliveredAlert }
        if let end {
            for i in r.devices.indices {
                let d = r.devices[i]
                guard d.end != nil, d.ownPush == nil, d.told == nil, !d.ownAttempts.contains(where: { $0.kind == .ended }),
                      let id = d.device.id, id != end.device, CallStateMachine.mayHaveRung(d) else { continue }
                let environment = environment(of: d.device)
                let plan: PushPlan
                if let token = d.device.fcmToken {
                    guard let ended = FcmMessages.callEnded(token: token, callID: r.event.id, ended: end.told.rawValue,
                                                            deadlineMs: r.event.deadlineMs, nowMs: now) else { continue }
                    plan = PushPlan(channel: .alert, attempt: 1, fcm: ended, writeByUnixMs: r.event.deadlineMs)
                } else {
                    guard let token = d.device.alertToken,
                          let push = try? PushNotification(deviceToken: token, bundleID: policy.bundleID, pushType: .background,
                                                           payload: CallStateMachine.endedPayload(callID: r.event.id, end.told),
                                                           priority: .conserve, expiration: (r.event.deadlineMs + 999) / 1000)
                    else { continue }
                    plan = PushPlan(channel: .alert, attempt: 1, environment: environment, notification: push)
                }
                r.devices[i].ownPush = OwnPush(kind: .ended, sentAtMs: now, told: end.told, environment: environment)
                action.push(replayed: replayed, DevicePush(device: i, plan: plan, purpose: .ended(end.told)))
            }
        } else if policy.missedCallAlert == .unanswered, routersDone, !r.missedCallAlertsSent, r.deadlinePassed || !anyShown {
            r.missedCallAlertsSent = true
            for i in r.devices.indices where r.devices[i].alertUsable && !r.devices[i].missedCallAlertSent {
                let d = r.devices[i]
                let environment = environment(of: d.device)
                let plan: PushPlan
                if d.device.fcmToken != nil {
                    guard let missed = FcmMessages.missedCall(r.event.event(of: d.device), nowMs: now,
                                                              windowEndMs: now.clampedSum(policy.alertTTLMs)) else { continue }
                    plan = PushPlan(channel: .alert, attempt: 1, fcm: missed)
                } else {
                    guard let push = try? PushNotification(deviceToken: d.device.alertToken ?? "", bundleID: policy.bundleID,
                                                           pushType: .alert, payload: r.event.alertPayload, priority: .immediate,
                                                           expiration: now.clampedSum(policy.alertTTLMs) / 1000,
                                                           collapseID: CallStateMachine.collapseID(for: r.event.id))
                    else { continue }
                    plan = PushPlan(channel: .alert, attempt: 1, environment: environment, notification: push)
                }
                r.devices[i].missedCallAlertSent = true
                r.devices[i].ownPush = OwnPush(kind: .missedCall, sentAtMs: now, told: nil, environment: environment)
                action.push(replayed: replayed, DevicePush(device: i, plan: plan, purpose: .missedCall))
            }
        }
        let settled = routersDone && r.devices.allSatisfy { $0.ownPush == nil }
        // The single-device form under `undelivered` waits for nothing but its receipt (no
        // answer can end it early: no other device to tell).
        let receiptsSettled = policy.ringReceiptTimeoutMs != nil && r.event.listedDevices.isEmpty
            && policy.missedCallAlert == .undelivered && r.devices.allSatisfy { $0.receiptDueAtMs == nil }
        let over = end != nil || r.deadlinePassed || !anyRang || r.draining || receiptsSettled
        let alertsDone = policy.missedCallAlert == .undelivered || end != nil || r.missedCallAlertsSent
        if settled && over && alertsDone {
            r.recordRequested = true
            action.timer = .cancel
            action.life = life.onRecordRequested(record(r))
            return
        }
        var wake = (r.devices.compactMap(\.retryDueAtMs) + r.devices.compactMap(\.receiptDueAtMs)).min()
        if end == nil && !r.deadlinePassed { wake = min(wake ?? r.event.deadlineMs, r.event.deadlineMs) }
        action.timer = wake.map(Action.TimerChange.fireAt) ?? .cancel
    }

    /// The call's record: each device's outcome, every push tagged with its device (`latency_ms`:
    /// to the last answer of a device's ring or fallback, as a single-device call's), and the
    /// call's outcome, the best a device got (a VoIP delivery, an alert, then `cancelled`,
    /// `expired`, `undeliverable`); a dead letter only when every device's ring was one.
    /// Otherwise each device whose outcome is `dead_lettered` gets its own dead letter beside
    /// the call's one result (`outcomeWithDeadLetters`): its reason, its own attempts, its id.
    private func record(_ r: Ringing) -> LiveCallStateMachine.Record {
        var devices: [DeviceRecord] = []
        var attempts: [AttemptRecord] = []
        var deadLetters: [DeadLetter] = []
        var latest: Int64?
        for d in r.devices {
            guard let end = d.end else { preconditionFailure("call \(r.event.id) recorded with a device still routing") }
            let routed = end.record
            var device = DeviceRecord(id: d.device.id, outcome: routed.outcome, channel: routed.channel, apnsID: routed.apnsID,
                                      environmentMismatch: routed.environmentMismatch, cause: routed.cause, reason: routed.reason,
                                      told: d.told)
            if d.missedCallAccepted, routed.outcome != .deliveredVoip, routed.outcome != .deliveredAlert {
                (device.outcome, device.channel, device.apnsID, device.cause, device.reason) =
                    (.deliveredAlert, .alert, d.missedCallAPNsID, .unanswered, nil)
            }
            device.rangAtMs = d.rangAtMs
            // Accepted, yet no receipt came: what the device showed is the escalation's alert.
            if d.rangAtMs == nil, let apnsID = d.noReceiptAlertAPNsID {
                (device.outcome, device.channel, device.apnsID, device.cause, device.environmentMismatch) =
                    (.deliveredAlert, .alert, apnsID, .noReceipt, nil)
            }
            devices.append(device)
            let first = attempts.count
            for var a in routed.attempts {
                a.device = d.device.id
                attempts.append(a)
            }
            if device.outcome == .deadLettered, case let .deadLetter(letter) = end {
                var own = letter.record
                own.attempts = Array(attempts[first...])
                deadLetters.append(DeadLetter(reason: letter.reason, appUnhealthy: letter.appUnhealthy, record: own,
                                              device: d.device.id))
            }
            attempts.append(contentsOf: d.ownAttempts)
            if let l = routed.latencyMs { latest = max(latest ?? l, l) }
        }
        attempts.sort { $0.sentAtMs < $1.sentAtMs }
        let ranked: [CallOutcome] = [.deliveredVoip, .deliveredAlert, .cancelled, .expired, .undeliverable]
        let outcome = ranked.first { o in devices.contains { $0.outcome == o } } ?? .deadLettered
        var record = OutcomeRecord(outcome: outcome, id: r.event.id, type: r.event.kind, app: policy.appID,
                                   channel: outcome == .deliveredVoip ? .voip : outcome == .deliveredAlert ? .alert : nil,
                                   latencyMs: latest, attempts: attempts)
        record.ended = end
        record.devices = devices
        if policy.ringReceiptTimeoutMs != nil, r.event.listedDevices.isEmpty, let only = devices.first {
            // The single-device form says at the top what its one device got, as before receipts.
            (record.channel, record.apnsID, record.cause, record.environmentMismatch) =
                (only.channel, only.apnsID, only.cause, only.environmentMismatch)
        }
        guard outcome == .deadLettered, case let .deadLetter(first)? = r.devices.first?.end else {
            return deadLetters.isEmpty ? .outcome(record) : .outcomeWithDeadLetters(record, deadLetters)
        }
        record.reason = first.reason.text
        return .deadLetter(DeadLetter(reason: first.reason, appUnhealthy: false, record: record))
    }

    /// Where device `d`'s VoIP push was last accepted (an attempt's `environment`: the other
    /// one than the device's after a `BadDeviceToken`), else the device's own.
    private func acceptedEnvironment(of d: DeviceRing) -> ApnsEnvironment {
        let accepted = ((d.end?.record.attempts ?? []) + d.ownAttempts).last { $0.channel == .voip && $0.status == 200 }
        return accepted?.environment ?? environment(of: d.device)
    }

    private func environment(of device: CallDevice) -> ApnsEnvironment {
        guard let sandbox = device.sandbox else { return policy.environment }
        return sandbox ? .sandbox : .production
    }

    /// A device's VoIP push was accepted, or may have been (written, no answer came).
    private static func mayHaveRung(_ d: DeviceRing) -> Bool {
        guard let end = d.end else { return false }
        return end.record.attempts.contains { $0.channel == .voip && ($0.status == 200 || ($0.status == nil && $0.error != nil)) }
    }

    /// `{"aps":{"content-available":1},"id":…,"ended":…}`: a background push wakes the app
    /// with no alert, sound or badge (Apple's background-update rules), naming the call.
    static func endedPayload(callID: String, _ ended: EndedElsewhere) -> [UInt8] {
        var w = JSONWriter()
        w.object { o in
            o.object("aps") { aps in aps.int("content-available", 1) }
            o.string("id", callID)
            o.string("ended", ended.rawValue)
        }
        return w.finish()
    }

    /// `plan` with the call's collapse id (a missed-call alert repeated replaces the first).
    /// An FCM message is left as it is: its `notification.tag` is the call id already.
    static func collapsed(_ plan: PushPlan, callID: String) -> PushPlan {
        guard case let .apns(n, environment) = plan.message,
              let push = try? PushNotification(deviceToken: n.deviceToken, topic: n.topic, pushType: n.pushType, payload: n.payload,
                                               priority: n.priority, expiration: n.expiration, apnsID: n.apnsID,
                                               collapseID: collapseID(for: callID))
        else { return plan }
        var out = PushPlan(channel: plan.channel, attempt: plan.attempt, environment: environment, notification: push)
        out.writeByUnixMs = plan.writeByUnixMs
        return out
    }

    /// `apns-collapse-id` of a call's alerts: the call id when it fits APNs' 64 bytes; a longer
    /// id (up to 128 characters) keeps its first 40 bytes, at a character boundary, then `~` and
    /// the 64-bit FNV-1a of the whole id in hex, so two long ids sharing a prefix stay apart.
    public static func collapseID(for callID: String) -> String {
        guard callID.utf8.count > 64 else { return callID }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in callID.utf8 {
            hash ^= UInt64(b)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        var prefix = ""
        for c in callID {
            guard prefix.utf8.count + c.utf8.count <= 40 else { break }
            prefix.append(c)
        }
        let hex = String(hash, radix: 16)
        return prefix + "~" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

extension CallStateMachine.Action {
    init(life: LiveCallStateMachine.Action) {
        self.init()
        self.life = life
    }
}
