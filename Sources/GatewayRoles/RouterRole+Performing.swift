import APNs
import EventLoop
import FCM
import CallStorage
import Routing

// Performing: the only place a call's actions become I/O — pushes, withdrawals, the call's
// timer, the retry schedule, the records, leaving the tables — and where APNs' answers go back
// to the call's machine.
extension RouterRole {
    /// Performs one action of a call's machine (`CallStateMachine`), all of it: feedback, the
    /// app's refusal, withdrawals, the timer, the entry's step, then the pushes. The waits for a
    /// copy are `start`'s (they need the lookup); the router's start and a cancel's telling
    /// happen inside the machine.
    ///
    /// The pushes go last: a push the APNs client answers at once (closed, queue full) runs its
    /// completion inside `send`, and the machine's answer to it is performed there, nested; it
    /// is newer than this action, so nothing of this one may be performed after it (a timer
    /// this action arms would move the one the nested action armed). An action never carries
    /// pushes and a record together: a call is recorded only once no push of it is out.
    func run(_ action: CallStateMachine.Action, for call: LiveCall) {
        for feedback in action.feedback { call.feedback.append(InvalidToken(feedback)) }
        if let reason = action.appRefused { appRefused(call.app, reason) }
        for device in action.withdraw {
            if let out = call.firstPushOut, out.device == device { out.withdraw() }
            for out in call.morePushesOut where out.device == device { out.withdraw() }
        }
        switch action.timer {
        case .unchanged:
            break
        case let .fireAt(at):
            if call.timer == nil { call.timer = LoopTimer(loop: loop) { [unowned self, unowned call] in self.timerFired(call) } }
            call.timer?.schedule(afterMs: max(0, at - Clock.unixMs()))
            if call.machine.awaitsEnd { watchForEnd(call) }
        case .cancel:
            call.timer?.cancel()
        }
        if action.retry != nil, call.firstFailureMs == nil {
            call.firstFailureMs = call.machine.waiting?.firstFailureAtMs ?? Clock.unixMs()
        }
        switch action.life {
        case .none:
            break
        case .write:
            schedule(call)
        case let .writeRecord(record):
            write(record, for: call)
        case .scheduleAgainLater:
            scheduleAgain.append(call)
            if !scheduleAgainTimer.isScheduled { scheduleAgainTimer.schedule(afterMs: settings.scheduleAgainAfterMs) }
        case .recordAgainLater:
            recordAgain.append(call)
            if !recordAgainTimer.isScheduled { recordAgainTimer.schedule(afterMs: settings.recordAgainAfterMs) }
        case let .leave(duplicatesOf: outcome):
            leave(call, duplicatesOf: outcome)
        case .startRouter, .tellRouterCancelled:
            preconditionFailure("call \(call.callID): \(action.life) is performed inside its CallStateMachine")
        case .waitForCopyHere, .waitForCopyElsewhere:
            preconditionFailure("call \(call.callID): \(action.life) is performed by start, which holds the lookup")
        }
        action.forEachPush { send($0, for: call) }
    }

    /// The call's timer fired (its devices' retries, its deadline). Tolerated: a call that left.
    private func timerFired(_ call: LiveCall) {
        guard isLive(call) else { return }
        run(call.machine.onTimer(now: Clock.unixMs()), for: call)
    }

    /// Sends one push of a call to the pool of its app's credential and environment (an FCM
    /// message to its app's FCM client), and hands its answer back to the call's machine under
    /// its device.
    func send(_ push: CallStateMachine.DevicePush, for call: LiveCall) {
        let plan = push.plan, device = push.device
        switch push.purpose {
        case let .fallback(cause) where plan.attempt == 1: observations?.fallback(app: call.app.id, cause: cause)
        case .missedCall: observations?.fallback(app: call.app.id, cause: .unanswered)
        case .noReceipt(.alert): observations?.fallback(app: call.app.id, cause: .noReceipt)
        case .ring, .fallback, .ended, .noReceipt: break
        }
        let notification: PushNotification, environment: ApnsEnvironment
        switch plan.message {
        case let .apns(n, e): (notification, environment) = (n, e)
        case let .fcm(message): return send(message, of: push, for: call)
        }
        // An app APNs refused again and again: its push is withheld, but for one probe a period.
        var probe = false
        if appHealth[call.app.id] != nil {
            switch appHealth[call.app.id]!.onPushWanted(nowMs: Clock.monotonicMs()) {
            case .send:
                break
            case .sendAsProbe:
                probe = true
                log.info("probing a withheld app's credential with one push", ["app": call.app.id, "event": call.callID])
            case let .withhold(reason):
                return run(call.machine.onPushWithheld(device: device, reason, now: Clock.unixMs()), for: call)
            }
        }
        let client: ApnsClient
        do {
            client = try pools.client(credential: call.app.credential, environment: environment)
        } catch {
            if probe { appHealth[call.app.id]?.onProbeAnswered(nowMs: Clock.monotonicMs()) }
            return run(call.machine.onApnsFailed(device: device, .credentialUnusable("\(error)"), now: Clock.unixMs()), for: call)
        }
        let sentUs = Clock.monotonicUs()
        let ticket = client.send(notification, writeByUnixMs: plan.writeByUnixMs, lane: push.lane, share: call.app.share) { [unowned self] result in
            if call.firstPushOut?.device == device { call.firstPushOut = nil }
            call.morePushesOut.removeAll { $0.device == device }
            // A drain cut off by its timeout retired with this push out; the process then
            // closes its clients and the push fails `.clientClosed`. The entry is another
            // process's now: scheduling a retry here would acknowledge it with the process
            // gone before the retry's due index is written (it waited for the repair, past the
            // call's deadline).
            guard !self.lifecycle.hasHandedOver else { return }
            let now = Clock.unixMs()
            let seconds = Double(Clock.monotonicUs() - sentUs) / 1_000_000
            if probe { self.appHealth[call.app.id]?.onProbeAnswered(nowMs: Clock.monotonicMs()) }
            let action: CallStateMachine.Action
            switch result {
            case .failure(.withdrawn):
                // Taken back after a cancel: it never left, and is no APNs failure.
                action = call.machine.onApnsFailed(device: device, .withdrawn, now: now)
            case let .success(response):
                self.observations?.apnsAnswered(app: call.app.id, channel: plan.channel, status: response.status,
                                                reason: response.reason?.text, latencySeconds: seconds)
                // APNs accepted the app's credentials and topic again: healthy (docs/protocol.md).
                if response.isAccepted, self.appHealth[call.app.id] != nil { self.appAccepted(call.app) }
                action = call.machine.onApnsAnswered(device: device, response, now: now)
            case let .failure(error):
                self.observations?.apnsFailed(app: call.app.id, channel: plan.channel, error: error, latencySeconds: seconds)
                action = call.machine.onApnsFailed(device: device, error, now: now)
            }
            self.run(action, for: call)
        }
        // Nil when the client answered at once (closed, queue full): the completion ran.
        if let ticket, !ticket.isAnswered { pushOut(PushOut(device: device, ticket: .apns(client, ticket)), of: call) }
    }

    private func pushOut(_ out: PushOut, of call: LiveCall) {
        if call.firstPushOut == nil { call.firstPushOut = out } else { call.morePushesOut.append(out) }
    }

    /// Sends an FCM message of a call (an Android device's) with its app's FCM credential. APNs'
    /// refusals of the app (`AppCredentialHealth`) do not hold it back: that health is the APNs
    /// credential's. A credential whose client cannot be made (its service-account file) is a
    /// dead letter naming it.
    private func send(_ message: FcmMessage, of push: CallStateMachine.DevicePush, for call: LiveCall) {
        let device = push.device, channel = push.plan.channel
        let client: FcmClient
        do {
            client = try fcmPools.client(credential: call.app.policy.fcmCredential ?? "")
        } catch {
            return run(call.machine.onFcmFailed(device: device, .clientUnusable(error.problem), now: Clock.unixMs()), for: call)
        }
        let sentUs = Clock.monotonicUs()
        let ticket = client.send(message, writeByUnixMs: push.plan.writeByUnixMs) { [unowned self] result in
            if call.firstPushOut?.device == device { call.firstPushOut = nil }
            call.morePushesOut.removeAll { $0.device == device }
            guard !self.lifecycle.hasHandedOver else { return }  // as for APNs (`send(_:for:)`)
            let now = Clock.unixMs()
            let seconds = Double(Clock.monotonicUs() - sentUs) / 1_000_000
            let action: CallStateMachine.Action
            switch result {
            case let .success(response):
                self.observations?.fcmAnswered(app: call.app.id, channel: channel, status: response.status,
                                               reason: response.isAccepted ? nil : response.reasonText, latencySeconds: seconds)
                action = call.machine.onFcmAnswered(device: device, response, now: now)
            case let .failure(error):
                if error != .transport(.withdrawn) {
                    self.observations?.fcmFailed(app: call.app.id, channel: channel, error: error, latencySeconds: seconds)
                }
                action = call.machine.onFcmFailed(device: device, error, now: now)
            }
            self.run(action, for: call)
        }
        if !ticket.isAnswered { pushOut(PushOut(device: device, ticket: .fcm(client, ticket)), of: call) }
    }

    // MARK: An app's credential

    /// APNs refused `app`'s credential or configuration (a dead letter marked `appUnhealthy`).
    func appRefused(_ app: AppRuntime, _ reason: DeadLetterReason) {
        let change = appHealth[app.id, default: AppCredentialHealth(policy: settings.credentialHealth)]
            .onRefused(reason, nowMs: Clock.monotonicMs())
        switch change {
        case .becameUnhealthy:
            log.error("app marked unhealthy", ["app": app.id, "error": reason.text], limited: true)
        case .startedWithholding:
            log.error("app's pushes withheld: APNs refused its credential or configuration again and again; "
                      + "its calls are dead-lettered at once, one push a period probes it",
                      ["app": app.id, "error": reason.text, "refusals_in_a_row": settings.credentialHealth.refusalsToWithhold,
                       "probe_every_ms": settings.credentialHealth.probeEveryMs,
                       "fix": "fix the app's key, certificate or bundle id and reload (SIGHUP), then replay its dead letters"])
        case .none, .becameHealthy:
            break
        }
    }

    /// APNs accepted a push of `app`, which was marked unhealthy: healthy again.
    private func appAccepted(_ app: AppRuntime) {
        let wasWithholding = appHealth[app.id]?.isWithholding ?? false
        guard appHealth[app.id]?.onAccepted() == .becameHealthy else { return }
        appHealth[app.id] = nil  // a healthy app has no entry
        log.info("app healthy again: APNs accepted a push", ["app": app.id, "was_withheld": wasWithholding])
    }
}
