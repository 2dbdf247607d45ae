import APNs
import FCM
import Retry

/// The per-call state machine: VoIP push first, then the alert fallback, then an outcome
/// (docs/protocol.md). One router per call event; it does no I/O and reads no clock: each method is
/// named for what happened, takes the time as unix ms, and returns the `CallAction` the
/// `RouterRole` (GatewayRoles) performs. Runs on the loop thread; a plain value.
///
/// States (one enum case per state, each with the data meaningful in it):
///
///     idle ─start─▶ voipInFlight ⇄ voipWaiting ─▶ alertInFlight ⇄ alertWaiting ─▶ finished
///        └───────────────────────────────▶ alertInFlight / finished
///
/// Decisions worth knowing:
/// - A VoIP push leaves only while `now < deadline`; a retry is scheduled only if it can leave
///   before the deadline and the VoIP policy has attempts left. Otherwise the alert goes with
///   cause `deadline` (the deadline, or the next retry's time, is past) or `retries_exhausted`
///   (the attempts ran out first).
/// - A known-invalid token (invalidated at T) is skipped unless the event says it was
///   registered after T. At start the checks run in this order: no VoIP token
///   (`no_voip_token`), known-invalid VoIP token (`voip_token_invalid`), a VoIP token
///   suspected of iOS's silent ban with a usable alert token (`voip_suspected_blocked`),
///   deadline passed (`deadline`), else the VoIP push.
/// - Without a usable alert token, or when the alert token turns out invalid, the outcome is
///   what the VoIP side alone gives: `undeliverable` (VoIP token invalid or absent), `expired`
///   (deadline), or a dead letter `retries_exhausted: voip` / `payload_too_large: voip`.
/// - The alert retries within `alertTTLMs` from the fallback's start; when the attempts or
///   that window run out it is a dead letter `retries_exhausted: alert`.
/// - Cancellation stops further sends: a waiting retry is dropped (outcome `cancelled`); a push
///   with the APNs client is taken back if it is not written yet (`withdrawPush`: outcome
///   `cancelled`, nothing sent); a written one is left to its answer, which is recorded: 200
///   gives the delivered outcome (the push did arrive), a token answer gives feedback and
///   `cancelled`, a transient one `cancelled`, a credential/config/request error still its dead
///   letter (a human must fix it). No missed-call alert is sent after a cancel.
/// - `BadDeviceToken` (`ReasonClass.tokenInvalidHere`) means "invalid" or "a token of the
///   other environment": when the app's credential reaches both (`reachesBothEnvironments`)
///   the same push is sent once to the other environment before the token is called
///   invalid. Accepted there, the call is delivered with `environmentMismatch` and feedback
///   `environment_mismatch` (the token is not marked invalid), and later pushes of the channel
///   in this call go there too; refused there as well, the token is invalid as for any other
///   token answer. A cancelled call, or a VoIP push past the deadline, is not tried again:
///   its token is not called invalid either.
/// - Transport failures are retryable, except `credentialUnusable` (dead letter
///   `apns_credentials`, app unhealthy) and `unsendable` (dead letter `invalid_push`: the push
///   can never be written). `ExpiredProviderToken` is handled by the APNs client.
/// - An Android device (`CallEvent.fcmToken`) goes through the same states with FCM's
///   messages (docs/protocol.md, *Android devices*): its ring (a high-priority data message
///   whose TTL is the time left to the deadline) is the VoIP stage, its missed-call
///   notification the alert stage, both to its one registration token; FCM's answers come
///   through the same verdict (`PushVerdict`, from FCM's table), a `Retry-After` bounds the
///   retry's backoff from below. Its token is known invalid as a whole (no missed-call
///   notification to a token FCM called gone), and there is no other environment to try.
/// - A waiting call can leave the process: `waiting` is its serializable snapshot (the durable
///   retry schedule keeps it in Redis), and `resume(_:from:now:)` on a fresh router continues
///   exactly where `retryDue(now:)` would have. The deadline is the snapshot's, fixed when the
///   call was first read, so a ring-timeout change in the config does not move a waiting call's.
public struct CallRouter: Sendable {
    /// The app's policy this call follows.
    /// Read in place (`_read`): a getter would copy the policy, and retain each of its strings, at every use.
    public var policy: AppRoutingPolicy { _read { yield sharedPolicy.value } }
    private let sharedPolicy: SharedRoutingPolicy
    private var jitter: Jitter
    private var state: State

    /// A router waiting for `start`. `jitter` supplies the backoff's random draws
    /// (in production a stream split off the router role's `Jitter.random()`, `Jitter.constant(_:)` or a seed in tests).
    public init(policy: AppRoutingPolicy, jitter: Jitter) {
        self.init(sharing: SharedRoutingPolicy(policy), jitter: jitter)
    }

    /// A router following a policy its app's other calls share.
    public init(sharing policy: SharedRoutingPolicy, jitter: Jitter) {
        self.sharedPolicy = policy
        self.jitter = jitter
        self.state = .idle
    }

    // MARK: States

    /// The states are inline (a router is ~100 bytes): a box per transition would cost an
    /// allocation for every push of every call, and the call's machine moves its router out of
    /// its state to change it (`CallStateMachine.State.modifying`), so nothing copies it.
    private enum State: Sendable {
        case idle
        case voipInFlight(VoipInFlight)
        case voipWaiting(VoipWaiting)
        case alertInFlight(AlertInFlight)
        case alertWaiting(AlertWaiting)
        case finished(CallOutcome)
    }

    /// What a started call knows in every state.
    private struct Call: Sendable {
        let event: CallEvent
        /// The alert token exists and is not known to be invalid (for an Android device: its
        /// token, and its router may send the missed-call notification).
        let alertUsable: Bool
        /// No VoIP push leaves at or after this time (unix ms): the event's deadline when the
        /// call was first read, carried unchanged through the retry schedule.
        let deadlineMs: Int64
        var attempts: [AttemptRecord] = []
        /// Time of the last APNs answer or transport failure; `latency_ms` ends there.
        var lastAnswerAtMs: Int64?
        /// Time of the first answer that was not an acceptance (for the dead letter's history).
        var firstFailureAtMs: Int64?

        init(event: CallEvent, alertUsable: Bool) {
            self.event = event
            self.alertUsable = alertUsable
            self.deadlineMs = event.deadlineMs
        }

        /// A call continued from its snapshot.
        init(event: CallEvent, snapshot: WaitingCall) {
            self.event = event
            self.alertUsable = snapshot.alertUsable
            self.deadlineMs = snapshot.deadlineMs
            self.attempts = snapshot.attempts
            self.lastAnswerAtMs = snapshot.lastAnswerAtMs
            self.firstFailureAtMs = snapshot.firstFailureAtMs
        }
    }

    /// A VoIP push is with the APNs client.
    private struct VoipInFlight: Sendable {
        var call: Call
        /// This attempt's number (1 = the first send).
        let attempt: Int
        let sentAtMs: Int64
        /// Set when this push went to the other environment than the call's.
        let otherEnvironment: ApnsEnvironment?
        /// A cancel arrived while in flight: nothing more is sent.
        var cancelled = false
    }

    /// A VoIP retry is scheduled.
    private struct VoipWaiting: Sendable {
        var call: Call
        /// Attempts made so far.
        let attemptsMade: Int
        let dueAtMs: Int64
    }

    /// An alert push is with the APNs client.
    private struct AlertInFlight: Sendable {
        var call: Call
        let cause: FallbackCause
        let attempt: Int
        let sentAtMs: Int64
        let otherEnvironment: ApnsEnvironment?
        /// The fallback's start + alert TTL: the alert's expiration and its retry bound.
        let windowEndMs: Int64
        var cancelled = false
    }

    /// An alert retry is scheduled.
    private struct AlertWaiting: Sendable {
        var call: Call
        let cause: FallbackCause
        let attemptsMade: Int
        let windowEndMs: Int64
        let dueAtMs: Int64
    }

    // MARK: Reading

    /// The outcome once finished, else nil.
    public var outcome: CallOutcome? {
        switch state {
        case let .finished(outcome): return outcome
        case .idle, .voipInFlight, .voipWaiting, .alertInFlight, .alertWaiting: return nil
        }
    }

    /// The attempts recorded so far (empty before start and after finish: the final record has them).
    public var attempts: [AttemptRecord] {
        switch state {
        case let .voipInFlight(s): return s.call.attempts
        case let .voipWaiting(s): return s.call.attempts
        case let .alertInFlight(s): return s.call.attempts
        case let .alertWaiting(s): return s.call.attempts
        case .idle, .finished: return []
        }
    }

    /// The snapshot of a call waiting for a retry (after `.scheduleRetry`), to keep in the durable
    /// schedule; nil in every other state. `resume(_:from:now:)` continues from it.
    public var waiting: WaitingCall? {
        switch state {
        case let .voipWaiting(s):
            return snapshot(s.call, .voip(attemptsMade: s.attemptsMade), dueAtMs: s.dueAtMs)
        case let .alertWaiting(s):
            return snapshot(s.call, .alert(cause: s.cause, attemptsMade: s.attemptsMade, windowEndMs: s.windowEndMs),
                            dueAtMs: s.dueAtMs)
        case .idle, .voipInFlight, .alertInFlight, .finished:
            return nil
        }
    }

    private func snapshot(_ call: Call, _ stage: WaitingCall.Stage, dueAtMs: Int64) -> WaitingCall {
        WaitingCall(callID: call.event.id, stage: stage, dueAtMs: dueAtMs, deadlineMs: call.deadlineMs,
                    entryTimeMs: call.event.entryTimeMs, alertUsable: call.alertUsable, attempts: call.attempts,
                    lastAnswerAtMs: call.lastAnswerAtMs, firstFailureAtMs: call.firstFailureAtMs)
    }

    // MARK: Events

    /// The call's event was read. Call once, first.
    ///
    /// - Parameters:
    ///   - knownInvalid: when APNs declared the event's VoIP / alert token invalid (unix ms),
    ///     from the gateway's memory of feedback; nil when not known to be invalid.
    ///   - alreadyDone: the outcome already recorded for this `incoming_call` (a redelivery):
    ///     nothing is sent again. Ignored for a `call_cancelled` event.
    ///   - cancelled: a `call_cancelled` for this id was recorded earlier. For an
    ///     `incoming_call` the outcome is then `cancelled` with nothing sent; for a
    ///     `call_cancelled` event it marks a duplicate cancel.
    ///   - voipSuspected: the VoIP token is suspected of iOS's silent VoIP ban (ring receipts'
    ///     guard): the call goes straight to its alert (cause `voip_suspected_blocked`) when
    ///     its alert token is usable.
    ///   - heldBy: what held the call in its stream before it was read (its app's event rate,
    ///     or a pause): a deadline passed by then is that hold's (`StreamHold.cause`), not `deadline`.
    public mutating func start(_ event: CallEvent, now: Int64, knownInvalid: (voip: Int64?, alert: Int64?) = (nil, nil),
                               alreadyDone: CallOutcome? = nil, cancelled: Bool = false, voipSuspected: Bool = false,
                               heldBy: StreamHold? = nil) -> CallAction {
        switch state {
        case .idle:
            break
        case .voipInFlight, .voipWaiting, .alertInFlight, .alertWaiting, .finished:
            preconditionFailure("CallRouter.start called twice for call \(event.id)")
        }
        let alertUsable = event.fcmToken == nil
            ? CallRouter.usable(event.alertToken, invalidSince: knownInvalid.alert, registeredAt: event.alertTokenRegisteredAtMs)
            : event.fcmMissedCall && CallRouter.usable(event.fcmToken, invalidSince: knownInvalid.voip, registeredAt: nil)
        let call = Call(event: event, alertUsable: alertUsable)
        switch event.kind {
        case .callCancelled:
            state = .finished(.cancelled)
            if cancelled { return duplicate(call, of: .cancelled) }
            return CallAction(step: .cancelCall(record(call, .cancelled)))
        case .callAnswered, .callDeclined:
            // Like a cancel, it ends the ring (its call's entries hear it: `CallStateMachine.
            // onEndHeard`) and is recorded with the cancellation marker; a ring ended before
            // makes it a duplicate.
            state = .finished(.cancelled)
            if cancelled { return duplicate(call, of: .cancelled) }
            return CallAction(step: .cancelCall(record(call, event.kind == .callAnswered ? .answered : .declined)))
        case .callRinging:
            // A receipt rings nothing: the call's entries hear it (`CallStateMachine.
            // onRingReceipt`), and it is recorded with its own result, whatever the call got.
            state = .finished(.ringing)
            var receipt = record(call, .ringing)
            (receipt.device, receipt.rangAtMs) = (event.device, event.entryTimeMs)
            return CallAction(step: .finish(receipt))
        case .incomingCall:
            if let alreadyDone {
                state = .finished(alreadyDone)
                return duplicate(call, of: alreadyDone)
            }
            if cancelled { return finish(call, .cancelled) }
            guard event.ringToken != nil else { return fallback(call, .noVoipToken, now: now) }
            guard CallRouter.usable(event.ringToken, invalidSince: knownInvalid.voip,
                                    registeredAt: event.voipTokenRegisteredAtMs) else {
                return fallback(call, .voipTokenInvalid, now: now)
            }
            // A token suspected of iOS's silent VoIP ban goes straight to its alert; without a
            // usable alert token the VoIP push is the only chance, and goes.
            if voipSuspected && call.alertUsable { return fallback(call, .voipSuspectedBlocked, now: now) }
            guard now < call.deadlineMs else { return fallback(call, heldBy?.cause ?? .deadline, now: now) }
            return sendVoip(call, attempt: 1, now: now)
        }
    }

    /// A call that waited for a retry in the durable schedule is due: continue it on this fresh
    /// router from `snapshot` (taken from `waiting` by whichever process scheduled it) and its
    /// event, as `retryDue(now:)` would have on the original router. Call once, first, instead of
    /// `start`.
    ///
    /// - Parameters:
    ///   - event: the call's event, decoded with `snapshot.entryTimeMs` as its entry time (so
    ///     latency still counts from the producer's entry, not from the retry's).
    ///   - alreadyDone: an outcome recorded meanwhile for the call id: nothing is sent.
    ///   - cancelled: a `call_cancelled` was recorded meanwhile: the outcome is `cancelled`
    ///     with the history so far, as `cancelReceived` gives during a wait.
    /// - Returns: what `retryDue` returns; or a dead letter `invalid_event: retry: …` when the
    ///   snapshot does not belong to the event (corrupt schedule data: a human must look).
    public mutating func resume(_ event: CallEvent, from snapshot: WaitingCall, now: Int64,
                                alreadyDone: CallOutcome? = nil, cancelled: Bool = false) -> CallAction {
        switch state {
        case .idle:
            break
        case .voipInFlight, .voipWaiting, .alertInFlight, .alertWaiting, .finished:
            preconditionFailure("CallRouter.resume called on a started router for call \(event.id)")
        }
        let call = Call(event: event, snapshot: snapshot)
        guard event.kind == .incomingCall, event.id == snapshot.callID else {
            let problem = "the saved state of call \(InvalidEvent.quote(snapshot.callID)) came with a \(event.kind.rawValue) "
                + "event of call \(InvalidEvent.quote(event.id))"
            return deadLetter(call, .invalidEvent("retry: " + problem), appUnhealthy: false)
        }
        if let alreadyDone {
            state = .finished(alreadyDone)
            return duplicate(call, of: alreadyDone)
        }
        switch snapshot.stage {
        case let .voip(attemptsMade):
            state = .voipWaiting(VoipWaiting(call: call, attemptsMade: attemptsMade, dueAtMs: snapshot.dueAtMs))
        case let .alert(cause, attemptsMade, windowEndMs):
            state = .alertWaiting(AlertWaiting(call: call, cause: cause, attemptsMade: attemptsMade,
                                               windowEndMs: windowEndMs, dueAtMs: snapshot.dueAtMs))
        }
        if cancelled { return cancelReceived(now: now) }
        return retryDue(now: now)
    }

    /// APNs answered the push in flight (accepted or rejected).
    public mutating func apnsAnswered(_ response: PushNotificationResponse, now: Int64) -> CallAction {
        answered(PushVerdict(response), status: response.status, reason: response.reason?.text, error: nil,
                 apnsID: response.apnsID, now: now)
    }

    /// The push in flight got no answer (timeout, connection lost, …).
    public mutating func apnsFailed(_ error: ApnsClientError, now: Int64) -> CallAction {
        answered(PushVerdict(error), status: nil, reason: nil, error: error.description, apnsID: nil, now: now)
    }

    /// FCM answered the message in flight (accepted or refused).
    public mutating func fcmAnswered(_ response: FcmResponse, now: Int64) -> CallAction {
        answered(PushVerdict(response, credential: policy.fcmCredential ?? ""), status: response.status,
                 reason: response.isAccepted ? nil : response.reasonText, error: nil, apnsID: response.messageName, now: now)
    }

    /// The message in flight got no answer from FCM (transport, or no access token).
    public mutating func fcmFailed(_ error: FcmClientError, now: Int64) -> CallAction {
        answered(PushVerdict(error, credential: policy.fcmCredential ?? ""), status: nil, reason: nil, error: error.description,
                 apnsID: nil, now: now)
    }

    /// The runner did not send the push this router asked for: APNs has refused the app's
    /// credential or configuration again and again (`AppCredentialHealth`), and every push of
    /// the app would be refused the same way, the alert fallback too. The call is dead-lettered
    /// at once with `reason`, no attempt recorded (none was made); a call cancelled meanwhile
    /// is `cancelled`.
    public mutating func pushWithheld(_ reason: DeadLetterReason, now: Int64) -> CallAction {
        switch state {
        case .idle, .voipWaiting, .alertWaiting, .finished:
            preconditionFailure("a push withheld with no push asked for")
        case let .voipInFlight(s):
            if s.cancelled { return finish(s.call, .cancelled) }
            return deadLetter(s.call, reason, appUnhealthy: false)
        case let .alertInFlight(s):
            if s.cancelled { return finish(s.call, .cancelled) }
            return deadLetter(s.call, reason, appUnhealthy: false)
        }
    }

    /// The time of the scheduled retry came, on the router that scheduled it. The gateway does
    /// not keep that router: `resume` continues a fresh one from the snapshot through here
    /// (tests call it directly to check that both paths agree).
    public mutating func retryDue(now: Int64) -> CallAction {
        switch state {
        case .idle:
            preconditionFailure("CallRouter.retryDue before start")
        case let .voipWaiting(s):
            // Never a VoIP push after the deadline, even if the retry came due late.
            guard now < s.call.deadlineMs else { return fallback(s.call, .deadline, now: now) }
            return sendVoip(s.call, attempt: s.attemptsMade + 1, now: now)
        case let .alertWaiting(s):
            guard now < s.windowEndMs else {
                return deadLetter(s.call, .retriesExhausted(.alert), appUnhealthy: false)
            }
            return sendAlert(s.call, cause: s.cause, attempt: s.attemptsMade + 1, windowEndMs: s.windowEndMs, now: now)
        case .voipInFlight, .alertInFlight, .finished:
            // Tolerated: a retry dropped meanwhile (a cancel) may still come due.
            return .none
        }
    }

    /// A `call_cancelled` for this call arrived while it is live.
    public mutating func cancelReceived(now: Int64) -> CallAction {
        switch state {
        case .idle:
            preconditionFailure("CallRouter.cancelReceived before start")
        case var .voipInFlight(s):
            guard !s.cancelled else { return .none }
            s.cancelled = true
            state = .voipInFlight(s)
            return CallAction(step: .withdrawPush)
        case var .alertInFlight(s):
            guard !s.cancelled else { return .none }
            s.cancelled = true
            state = .alertInFlight(s)
            return CallAction(step: .withdrawPush)
        case let .voipWaiting(s):
            return finish(s.call, .cancelled)
        case let .alertWaiting(s):
            return finish(s.call, .cancelled)
        case .finished:
            return .none
        }
    }

    // MARK: Transitions

    private mutating func answered(_ verdict: PushVerdict, status: Int?, reason: String?, error: String?,
                                   apnsID: String?, now: Int64) -> CallAction {
        switch state {
        case .idle, .voipWaiting, .alertWaiting:
            preconditionFailure("an APNs answer with no push in flight")
        case .finished:
            // Cannot happen (no state finishes with a push in flight); ignored if it does.
            return .none
        case let .voipInFlight(s) where verdict == .withdrawn:
            precondition(s.cancelled, "a VoIP push withdrawn without a cancel (call \(s.call.event.id))")
            return finish(s.call, .cancelled)
        case let .alertInFlight(s) where verdict == .withdrawn:
            precondition(s.cancelled, "an alert withdrawn without a cancel (call \(s.call.event.id))")
            return finish(s.call, .cancelled)
        case let .voipInFlight(s):
            var call = s.call
            call.attempts.append(AttemptRecord(sentAtMs: s.sentAtMs, channel: .voip, status: status, reason: reason,
                                               error: error, apnsID: apnsID, environment: s.otherEnvironment,
                                               provider: call.event.provider))
            call.lastAnswerAtMs = now
            if CallRouter.isFailure(verdict), call.firstFailureAtMs == nil { call.firstFailureAtMs = now }
            return voipDecided(s, call: call, verdict, now: now)
        case let .alertInFlight(s):
            var call = s.call
            call.attempts.append(AttemptRecord(sentAtMs: s.sentAtMs, channel: .alert, status: status, reason: reason,
                                               error: error, apnsID: apnsID, environment: s.otherEnvironment,
                                               provider: call.event.provider))
            call.lastAnswerAtMs = now
            if CallRouter.isFailure(verdict), call.firstFailureAtMs == nil { call.firstFailureAtMs = now }
            return alertDecided(s, call: call, verdict, now: now)
        }
    }

    private mutating func voipDecided(_ s: VoipInFlight, call: Call, _ verdict: PushVerdict, now: Int64) -> CallAction {
        switch verdict {
        case let .accepted(apnsID):
            return finish(call, .deliveredVoip, channel: .voip, apnsID: apnsID, environmentMismatch: s.otherEnvironment,
                          feedback: mismatch(call, .voip, s.otherEnvironment, now: now))
        case let .tokenInvalid(reason, timestampMs, otherEnvironmentMayAccept):
            if otherEnvironmentMayAccept && s.otherEnvironment == nil && policy.reachesBothEnvironments {
                // Before the token is called invalid, the other environment gets the push once.
                if s.cancelled { return finish(call, .cancelled) }
                guard now < call.deadlineMs else { return fallback(call, .deadline, now: now) }
                return sendVoip(call, attempt: s.attempt, now: now, otherEnvironment: true)
            }
            let feedback = TokenFeedback(token: call.event.ringToken ?? "", channel: .voip, reason: reason,
                                         timestampMs: timestampMs ?? now, timestampFromAPNs: timestampMs != nil,
                                         provider: call.event.provider)
            if s.cancelled { return finish(call, .cancelled, feedback: feedback) }
            // An Android device's missed-call notification would go to the same token, gone.
            if call.event.fcmToken != nil { return withoutFallback(call, .voipTokenInvalid, feedback: feedback) }
            return fallback(call, .voipTokenInvalid, now: now, feedback: feedback)
        case let .transient(throttled, retryAfterMs):
            if s.cancelled { return finish(call, .cancelled) }
            let deadline = call.deadlineMs
            guard now < deadline else { return fallback(call, .deadline, now: now) }
            guard policy.voipRetry.allowsAnotherAttempt(after: s.attempt) else {
                return fallback(call, .retriesExhausted, now: now)
            }
            let delay = max(policy.voipRetry.delayMs(forRetry: s.attempt - 1, random: jitter.next(), throttled: throttled),
                            retryAfterMs ?? 0)
            // The retry must be able to leave before the deadline; else the alert goes now.
            guard now + delay < deadline else { return fallback(call, .deadline, now: now) }
            state = .voipWaiting(VoipWaiting(call: call, attemptsMade: s.attempt, dueAtMs: now + delay))
            return CallAction(step: .scheduleRetry(RetryPlan(channel: .voip, attempt: s.attempt + 1,
                                                             atMs: now + delay, delayMs: delay)))
        case .payloadTooLarge:
            if s.cancelled { return finish(call, .cancelled) }
            return fallback(call, .payload, now: now)
        case let .deadLetter(reason, appUnhealthy):
            return deadLetter(call, reason, appUnhealthy: appUnhealthy)
        case .withdrawn:
            preconditionFailure("a withdrawn push is answered in answered(_:…)")
        }
    }

    private mutating func alertDecided(_ s: AlertInFlight, call: Call, _ verdict: PushVerdict, now: Int64) -> CallAction {
        switch verdict {
        case let .accepted(apnsID):
            return finish(call, .deliveredAlert, channel: .alert, apnsID: apnsID, cause: s.cause,
                          environmentMismatch: s.otherEnvironment, feedback: mismatch(call, .alert, s.otherEnvironment, now: now))
        case let .tokenInvalid(reason, timestampMs, otherEnvironmentMayAccept):
            if otherEnvironmentMayAccept && s.otherEnvironment == nil && policy.reachesBothEnvironments {
                if s.cancelled { return finish(call, .cancelled) }
                return sendAlert(call, cause: s.cause, attempt: s.attempt, windowEndMs: s.windowEndMs, now: now,
                                 otherEnvironment: true)
            }
            let feedback = TokenFeedback(token: call.event.alertToken ?? call.event.fcmToken ?? "", channel: .alert,
                                         reason: reason, timestampMs: timestampMs ?? now, timestampFromAPNs: timestampMs != nil,
                                         provider: call.event.provider)
            if s.cancelled { return finish(call, .cancelled, feedback: feedback) }
            return withoutFallback(call, s.cause, feedback: feedback)
        case let .transient(throttled, retryAfterMs):
            if s.cancelled { return finish(call, .cancelled) }
            guard policy.alertRetry.allowsAnotherAttempt(after: s.attempt) else {
                return deadLetter(call, .retriesExhausted(.alert), appUnhealthy: false)
            }
            let delay = max(policy.alertRetry.delayMs(forRetry: s.attempt - 1, random: jitter.next(), throttled: throttled),
                            retryAfterMs ?? 0)
            guard now + delay < s.windowEndMs else {
                return deadLetter(call, .retriesExhausted(.alert), appUnhealthy: false)
            }
            state = .alertWaiting(AlertWaiting(call: call, cause: s.cause, attemptsMade: s.attempt,
                                               windowEndMs: s.windowEndMs, dueAtMs: now + delay))
            return CallAction(step: .scheduleRetry(RetryPlan(channel: .alert, attempt: s.attempt + 1,
                                                             atMs: now + delay, delayMs: delay)))
        case .payloadTooLarge:
            return deadLetter(call, .payloadTooLarge(.alert), appUnhealthy: false)
        case let .deadLetter(reason, appUnhealthy):
            return deadLetter(call, reason, appUnhealthy: appUnhealthy)
        case .withdrawn:
            preconditionFailure("a withdrawn push is answered in answered(_:…)")
        }
    }

    /// The alert fallback for `cause`, or, with no usable alert token, the VoIP side's outcome.
    private mutating func fallback(_ call: Call, _ cause: FallbackCause, now: Int64,
                                   feedback: TokenFeedback? = nil) -> CallAction {
        guard call.alertUsable else { return withoutFallback(call, cause, feedback: feedback) }
        return sendAlert(call, cause: cause, attempt: 1, windowEndMs: now + policy.alertTTLMs, now: now,
                         feedback: feedback)
    }

    /// The outcome when the alert cannot help (no usable alert token, or it proved invalid).
    private mutating func withoutFallback(_ call: Call, _ cause: FallbackCause, feedback: TokenFeedback?) -> CallAction {
        switch cause {
        case .noVoipToken, .voipTokenInvalid, .voipSuspectedBlocked:
            // (A suspected token without a usable alert token is pushed VoIP: never here.)
            return finish(call, .undeliverable, feedback: feedback)
        case .deadline:
            return finish(call, .expired, feedback: feedback)
        case .rateLimited, .paused:
            // The result says why it expired: its app's rate or its pause held it past its deadline.
            return finish(call, .expired, cause: cause, feedback: feedback)
        case .retriesExhausted:
            return deadLetter(call, .retriesExhausted(.voip), appUnhealthy: false, feedback: feedback)
        case .payload:
            return deadLetter(call, .payloadTooLarge(.voip), appUnhealthy: false, feedback: feedback)
        case .unanswered, .noReceipt:
            // The call's machine sends the missed-call alert of an unanswered call and an
            // escalation's alert, never a device's router; were it ever asked to, nothing rang
            // before the deadline.
            return finish(call, .expired, feedback: feedback)
        }
    }

    /// `otherEnvironment`: the try in the other environment after a `BadDeviceToken`; later
    /// pushes of the channel follow where its last attempt went (`otherEnvironment(of:_:)`).
    private mutating func sendVoip(_ call: Call, attempt: Int, now: Int64, otherEnvironment: Bool = false) -> CallAction {
        let event = call.event
        if event.fcmToken != nil {
            guard let ring = FcmMessages.ring(event, nowMs: now, deadlineMs: call.deadlineMs) else {
                return deadLetter(call, .invalidPush("FCM: the ring message cannot be written"), appUnhealthy: false)
            }
            state = .voipInFlight(VoipInFlight(call: call, attempt: attempt, sentAtMs: now, otherEnvironment: nil))
            return CallAction(step: .sendVoip(PushPlan(channel: .voip, attempt: attempt, fcm: ring, writeByUnixMs: call.deadlineMs)))
        }
        let other = otherEnvironment ? self.environment(event).other : self.otherEnvironment(of: call, .voip)
        do {
            let push = try PushNotification(deviceToken: event.voipToken ?? "", topic: policy.voipTopic,
                                            pushType: .voip, payload: event.voipPayload, priority: .immediate,
                                            expiration: call.deadlineMs / 1000)
            state = .voipInFlight(VoipInFlight(call: call, attempt: attempt, sentAtMs: now, otherEnvironment: other))
            return CallAction(step: .sendVoip(PushPlan(channel: .voip, attempt: attempt,
                                                       environment: other ?? environment(event), notification: push,
                                                       writeByUnixMs: call.deadlineMs)))
        } catch {
            return deadLetter(call, .invalidPush(error.description), appUnhealthy: false)
        }
    }

    private mutating func sendAlert(_ call: Call, cause: FallbackCause, attempt: Int, windowEndMs: Int64, now: Int64,
                                    feedback: TokenFeedback? = nil, otherEnvironment: Bool = false) -> CallAction {
        let event = call.event
        if event.fcmToken != nil {
            guard let missed = FcmMessages.missedCall(event, nowMs: now, windowEndMs: windowEndMs) else {
                return deadLetter(call, .invalidPush("FCM: the missed-call message cannot be written"), appUnhealthy: false,
                                  feedback: feedback)
            }
            state = .alertInFlight(AlertInFlight(call: call, cause: cause, attempt: attempt, sentAtMs: now,
                                                 otherEnvironment: nil, windowEndMs: windowEndMs))
            return CallAction(feedback: feedback,
                              step: .sendAlert(PushPlan(channel: .alert, attempt: attempt, fcm: missed), cause: cause))
        }
        let other = otherEnvironment ? self.environment(event).other : self.otherEnvironment(of: call, .alert)
        do {
            let push = try PushNotification(deviceToken: event.alertToken ?? "", bundleID: policy.bundleID,
                                            pushType: .alert, payload: event.alertPayload, priority: .immediate,
                                            expiration: windowEndMs / 1000)
            state = .alertInFlight(AlertInFlight(call: call, cause: cause, attempt: attempt, sentAtMs: now,
                                                 otherEnvironment: other, windowEndMs: windowEndMs))
            return CallAction(feedback: feedback,
                              step: .sendAlert(PushPlan(channel: .alert, attempt: attempt,
                                                        environment: other ?? environment(event), notification: push),
                                               cause: cause))
        } catch {
            return deadLetter(call, .invalidPush(error.description), appUnhealthy: false, feedback: feedback)
        }
    }

    private mutating func finish(_ call: Call, _ outcome: CallOutcome, channel: PushChannel? = nil,
                                 apnsID: String? = nil, cause: FallbackCause? = nil, environmentMismatch: ApnsEnvironment? = nil,
                                 feedback: TokenFeedback? = nil) -> CallAction {
        state = .finished(outcome)
        var record = record(call, outcome, channel: channel, apnsID: apnsID, cause: cause)
        record.environmentMismatch = environmentMismatch
        return CallAction(feedback: feedback, step: .finish(record))
    }

    /// The feedback of a token accepted in `environment`, the other one than the call's; nil
    /// when it went to the call's own.
    private func mismatch(_ call: Call, _ channel: PushChannel, _ environment: ApnsEnvironment?, now: Int64) -> TokenFeedback? {
        guard let environment else { return nil }
        let token = (channel == .voip ? call.event.voipToken : call.event.alertToken) ?? ""
        return TokenFeedback(token: token, channel: channel, reason: TokenFeedback.environmentMismatch, timestampMs: now,
                             timestampFromAPNs: false, environment: environment)
    }

    /// The other environment when the channel's last push went there (it was tried there after
    /// a `BadDeviceToken`: later pushes of the call follow it); nil for the call's own.
    private func otherEnvironment(of call: Call, _ channel: PushChannel) -> ApnsEnvironment? {
        call.attempts.last { $0.channel == channel }?.environment
    }

    private mutating func deadLetter(_ call: Call, _ reason: DeadLetterReason, appUnhealthy: Bool,
                                     feedback: TokenFeedback? = nil) -> CallAction {
        state = .finished(.deadLettered)
        let record = record(call, .deadLettered, reason: reason.text)
        return CallAction(feedback: feedback,
                          step: .deadLetter(DeadLetter(reason: reason, appUnhealthy: appUnhealthy, record: record)))
    }

    /// The answer to an event whose id already has an outcome: nothing sent, the first outcome named.
    private func duplicate(_ call: Call, of first: CallOutcome) -> CallAction {
        CallAction(step: .acknowledgeDuplicate(record(call, .duplicate, firstOutcome: first)))
    }

    private func record(_ call: Call, _ outcome: CallOutcome, firstOutcome: CallOutcome? = nil, channel: PushChannel? = nil,
                        apnsID: String? = nil, cause: FallbackCause? = nil, reason: String? = nil) -> OutcomeRecord {
        OutcomeRecord(outcome: outcome, firstOutcome: firstOutcome, id: call.event.id, type: call.event.kind, app: policy.appID,
                      channel: channel, apnsID: apnsID, cause: cause, reason: reason,
                      latencyMs: call.lastAnswerAtMs.map { $0.clampedDifference(call.event.entryTimeMs) }, attempts: call.attempts)
    }

    private func environment(_ event: CallEvent) -> ApnsEnvironment {
        guard let sandbox = event.sandbox else { return policy.environment }
        return sandbox ? .sandbox : .production
    }

    private static func isFailure(_ verdict: PushVerdict) -> Bool {
        if case .accepted = verdict { return false }
        return true
    }

    /// A token is usable when present and either not known invalid or registered after it was
    /// declared invalid (Apple: stop pushing "until the device registers a token with a later
    /// timestamp", Apple's response docs).
    static func usable(_ token: String?, invalidSince: Int64?, registeredAt: Int64?) -> Bool {
        guard token != nil else { return false }
        guard let invalidSince else { return true }
        guard let registeredAt else { return false }
        return registeredAt > invalidSince
    }
}
