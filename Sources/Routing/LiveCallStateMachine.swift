/// The life of one stream entry while the router role holds it in memory: from its admission
/// (read or taken over) until it leaves the process — recorded, put in the retry schedule, or
/// left pending in Redis after a failed lookup. `CallRouter` decides what a call does with
/// APNs; this machine decides which of the runner's steps may happen to the entry now, so a
/// record is never written twice, a cancellation reaches the call whatever it is doing, the
/// copies waiting for it are answered once it leaves, and an outcome this process knows is
/// never lost to a Redis error: it stays here, held, until its record lands (docs/architecture.md,
/// *How a call event travels through the router*).
///
/// Pure: no clock, no I/O. The runner (`RouterRole`, GatewayRoles) calls one `on…` method per
/// thing that happened and performs the returned `Action`. Races the runner tolerates return
/// `.none` and say so; a pair that cannot happen stops the process with what happened.
///
/// ```
/// lookingUp ─┬─ route ───────────────────────▶ routing ─retry─▶ scheduling ─scheduled─▶ gone
///            └─ wait ─▶ waitingForCopy ─route─┘   │   ▲ found cancelled │
///                       (looked up again)         │   └─────────────────┘
///                                                 └─end─▶ recording ─recorded─▶ gone
///                                                           │    ▲
///                                                    failed ▼    │ again due
///                                                       holdingOutcome
/// lookingUp, waitingForCopy ─lookup failed─▶ gone
/// refused at admission: recording(routed: false) ─recorded─▶ gone (failed: holdingOutcome, as above)
/// ```
public struct LiveCallStateMachine: Equatable, Sendable {
    /// What an entry's record step writes: the end its router reached, or its refusal at
    /// admission. Every record step is idempotent (recorded once per event id, acknowledged in
    /// the same script), so the same record may be written again after an error.
    /// Indirect: a record is large (a dead letter's is ~250 bytes), and the machine's state and
    /// its actions are copied on every step of the call; boxed once, each copy moves a reference.
    public indirect enum Record: Equatable, Sendable {
        /// The call's outcome, recorded once per event id.
        case outcome(OutcomeRecord)
        /// The `duplicate` result of an event whose id has an outcome already.
        case duplicate(OutcomeRecord)
        /// A dead letter with its record.
        case deadLetter(DeadLetter)
        /// The outcome of a call with devices (recorded once per event id, as `outcome`) that
        /// is no dead letter, though some devices' rings were: with each such device's dead
        /// letter (`DeadLetter.device`), written with the outcome in one step.
        case outcomeWithDeadLetters(OutcomeRecord, [DeadLetter])
        /// A `call_cancelled` event's step: the call's marker, its scheduled retry removed with
        /// its `cancelled` outcome, and this record, the cancel event's own result.
        case cancellation(OutcomeRecord)
    }

    public enum State: Equatable, Sendable {
        /// Admitted; its lookup (outcome, cancellation, tokens, in-flight claim) is in flight.
        /// `cancelHeard`: a cancel of the call was recorded meanwhile (it starts as cancelled).
        case lookingUp(cancelHeard: Bool)
        /// A copy of a call another entry routes (in this process or another): waits for it to
        /// leave, then is looked up again or answered as its duplicate (`CallCopies`).
        case waitingForCopy(cancelHeard: Bool)
        /// Its router started (or resumed): pushes go out and their answers come back.
        case routing
        /// Its router waits for a retry: the schedule step is in flight, or waits to be tried
        /// again after a Redis error. It leaves the process once the step succeeded.
        case scheduling
        /// Its record (outcome, dead letter, cancellation) is being written; `routed` is false
        /// for an entry refused at admission (invalid, poison), which no copy waits for.
        case recording(routed: Bool, record: Record)
        /// Its record step failed (Redis refused or did not answer): the outcome is held here
        /// and written again after a pause, until it lands or the process stops. The entry stays
        /// pending for this live consumer, so no sweep or take-over routes it again, and its
        /// copies keep waiting for it: a call whose APNs answer is known is never pushed again.
        case holdingOutcome(routed: Bool, record: Record)
        /// It left the process (recorded, scheduled, or left pending after a failed step).
        case gone
    }

    /// What the runner does for an event.
    public enum Action: Equatable, Sendable {
        /// Nothing (a tolerated race: see the event's doc).
        case none
        /// Start (or resume) the call's router; `cancelled`: the call was cancelled meanwhile.
        case startRouter(cancelled: Bool)
        /// Wait for the copy routing in this process to leave.
        case waitForCopyHere
        /// Look the call up again later: another live process routes a copy.
        case waitForCopyElsewhere
        /// Tell the router the call was cancelled (`CallRouter.cancelReceived`).
        case tellRouterCancelled
        /// Send the requested schedule step (the router's snapshot into the retry schedule).
        case write
        /// Write the record (the first time, or again after a failure).
        case writeRecord(Record)
        /// The schedule step failed: try it again after a pause.
        case scheduleAgainLater
        /// The record step failed: hold the outcome and write it again after a pause.
        case recordAgainLater
        /// Drop the entry from the process's tables. Its waiting copies are duplicates of
        /// `duplicatesOf` when an outcome was recorded; otherwise each is looked up again.
        case leave(duplicatesOf: CallOutcome?)
    }

    public private(set) var state: State

    /// An entry admitted for routing: its lookup goes out next.
    public init() { state = .lookingUp(cancelHeard: false) }

    /// An entry refused at admission (invalid event, poison, unreadable retry): its dead
    /// letter is written at once (the runner performs `writeRecord` of it), and it never routes.
    public static func refusedAtAdmission(_ deadLetter: DeadLetter) -> LiveCallStateMachine {
        var machine = LiveCallStateMachine()
        machine.state = .recording(routed: false, record: .deadLetter(deadLetter))
        return machine
    }

    /// Whether its router runs or ran: the copy other copies of the call wait for (unless a
    /// `call_cancelled` entry, which never pushes).
    public var hasStarted: Bool {
        switch state {
        case .routing, .scheduling, .recording(routed: true, _), .holdingOutcome(routed: true, _): return true
        case .lookingUp, .waitingForCopy, .recording(routed: false, _), .holdingOutcome(routed: false, _), .gone: return false
        }
    }

    // MARK: Events

    /// The lookup answered: what `CallCopies` decides for the entry (`kind`, `alreadyDone`,
    /// `claimHolder`, `consumer`, `copyRoutingHere` as it takes them), the call counting as
    /// cancelled when Redis' marker or a cancel in the same read (`cancelled`) or one heard
    /// meanwhile says so. Tolerated: an entry gone meanwhile (its lookup had failed in another
    /// batch) is ignored.
    public mutating func onLookupAnswered(_ kind: CallEvent.Kind, alreadyDone: Bool, cancelled: Bool, claimHolder: String?,
                                          consumer: String, copyRoutingHere: Bool) -> Action {
        switch state {
        case let .lookingUp(cancelHeard), let .waitingForCopy(cancelHeard):
            let cancelled = cancelled || cancelHeard
            switch CallCopies.decide(kind: kind, alreadyDone: alreadyDone, cancelled: cancelled, claimHolder: claimHolder,
                                     consumer: consumer, copyRoutingHere: copyRoutingHere) {
            case .route:
                state = .routing
                return .startRouter(cancelled: cancelled)
            case .waitForCopyHere:
                state = .waitingForCopy(cancelHeard: cancelHeard)
                return .waitForCopyHere
            case .waitForCopyElsewhere:
                state = .waitingForCopy(cancelHeard: cancelHeard)
                return .waitForCopyElsewhere
            }
        case .gone:
            return .none
        case .routing, .scheduling, .recording, .holdingOutcome:
            preconditionFailure("a lookup answered for an entry in state \(state): it was looked up once")
        }
    }

    /// A cancel of this call was read by another entry (before or after this one). Before its
    /// router starts the call remembers it; a routing call's router is told (and takes its push
    /// back if it is not written yet). Tolerated: a call being scheduled meets the cancellation
    /// marker in the schedule step; one being recorded, holding its outcome or gone has its end.
    public mutating func onCancelHeard() -> Action {
        switch state {
        case .lookingUp:
            state = .lookingUp(cancelHeard: true)
            return .none
        case .waitingForCopy:
            state = .waitingForCopy(cancelHeard: true)
            return .none
        case .routing:
            return .tellRouterCancelled
        case .scheduling, .recording, .holdingOutcome, .gone:
            return .none
        }
    }

    /// The router reached an end (finish, dead letter, cancellation, duplicate): its record is
    /// written once. Tolerated: a second end while the first is being written or held is dropped.
    public mutating func onRecordRequested(_ record: Record) -> Action {
        switch state {
        case .routing:
            state = .recording(routed: true, record: record)
            return .writeRecord(record)
        case .recording, .holdingOutcome:
            return .none
        case .lookingUp, .waitingForCopy, .scheduling, .gone:
            preconditionFailure("a record requested for an entry in state \(state): only a routing call ends")
        }
    }

    /// The record step failed (Redis refused the write, or the connection was lost before the
    /// answer, so it may or may not have run): the outcome is held, and written again later.
    public mutating func onRecordFailed() -> Action {
        switch state {
        case let .recording(routed, record):
            state = .holdingOutcome(routed: routed, record: record)
            return .recordAgainLater
        case .lookingUp, .waitingForCopy, .routing, .scheduling, .holdingOutcome, .gone:
            preconditionFailure("a record step failed for an entry in state \(state): it had none in flight")
        }
    }

    /// The pause after a failed record step is over: the same record is written again.
    public mutating func onRecordAgainDue() -> Action {
        switch state {
        case let .holdingOutcome(routed, record):
            state = .recording(routed: routed, record: record)
            return .writeRecord(record)
        case .lookingUp, .waitingForCopy, .routing, .scheduling, .recording, .gone:
            preconditionFailure("a record due again for an entry in state \(state): only a held outcome is")
        }
    }

    /// The router waits for a retry: the call goes to the retry schedule.
    public mutating func onScheduleRequested() -> Action {
        switch state {
        case .routing:
            state = .scheduling
            return .write
        case .lookingUp, .waitingForCopy, .scheduling, .recording, .holdingOutcome, .gone:
            preconditionFailure("a retry requested for an entry in state \(state): only a routing call waits")
        }
    }

    /// The schedule step failed (Redis unreachable): the call stays, its entry pending.
    public mutating func onScheduleFailed() -> Action {
        switch state {
        case .scheduling:
            return .scheduleAgainLater
        case .lookingUp, .waitingForCopy, .routing, .recording, .holdingOutcome, .gone:
            preconditionFailure("a schedule step failed for an entry in state \(state)")
        }
    }

    /// The pause after a failed schedule step is over. Tolerated: a call that left meanwhile.
    public mutating func onScheduleAgainDue() -> Action {
        switch state {
        case .scheduling:
            return .write
        case .gone:
            return .none
        case .lookingUp, .waitingForCopy, .routing, .recording, .holdingOutcome:
            preconditionFailure("a schedule step due again for an entry in state \(state)")
        }
    }

    /// The schedule step found the call cancelled (a cancel was recorded while its push was
    /// out): the router finishes it as cancelled.
    public mutating func onScheduleFoundCancelled() -> Action {
        switch state {
        case .scheduling:
            state = .routing
            return .tellRouterCancelled
        case .lookingUp, .waitingForCopy, .routing, .recording, .holdingOutcome, .gone:
            preconditionFailure("a schedule step answered for an entry in state \(state)")
        }
    }

    /// The call is in the retry schedule (or its entry was taken over by another process
    /// before): it leaves; its copies look the call up again.
    public mutating func onScheduled() -> Action {
        switch state {
        case .scheduling:
            state = .gone
            return .leave(duplicatesOf: nil)
        case .lookingUp, .waitingForCopy, .routing, .recording, .holdingOutcome, .gone:
            preconditionFailure("a schedule step answered for an entry in state \(state)")
        }
    }

    /// Its record was written (`outcome`: the outcome it recorded, or for a duplicate the first
    /// outcome it names; nil when nothing was written, the result there being the entry's own).
    public mutating func onRecorded(outcome: CallOutcome?) -> Action {
        switch state {
        case .recording:
            state = .gone
            return .leave(duplicatesOf: outcome)
        case .lookingUp, .waitingForCopy, .routing, .scheduling, .holdingOutcome, .gone:
            preconditionFailure("a record written for an entry in state \(state)")
        }
    }

    /// Its lookup failed: nothing is known of the call yet (no push went), so the entry stays
    /// pending in Redis, to be claimed back once Redis answers, and leaves the process.
    /// Tolerated: an entry already gone.
    public mutating func onStepFailed() -> Action {
        switch state {
        case .lookingUp, .waitingForCopy:
            state = .gone
            return .leave(duplicatesOf: nil)
        case .gone:
            return .none
        case .routing, .scheduling, .recording, .holdingOutcome:
            preconditionFailure("a lookup failed for an entry in state \(state): it had none in flight")
        }
    }
}
