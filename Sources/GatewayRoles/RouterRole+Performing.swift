import APNs
import EventLoop
import CallStorage
import Routing

// Performing: the only place a router's actions become I/O — pushes, the retry schedule, the
// records — and where APNs' answers go back to the router.
extension RouterRole {
    /// Performs one action of a call's router.
    func perform(_ action: CallAction, for call: LiveCall) {
        if let feedback = action.feedback {
            call.feedback.append(InvalidToken(feedback))
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
            guard call.life.onScheduleRequested() == .write else { return }
            schedule(call, channel: plan.channel)
        case let .finish(record):
            run(call.life.onRecordRequested(.outcome(record)), for: call)
        case let .deadLetter(deadLetter):
            if deadLetter.appUnhealthy { appRefused(call.app, deadLetter.reason) }
            run(call.life.onRecordRequested(.deadLetter(deadLetter)), for: call)
        case .withdrawPush:
            if let push = call.pushInFlight { push.client.withdraw(push.ticket) }
        case let .cancelCall(record):
            run(call.life.onRecordRequested(.cancellation(record)), for: call)
        case let .acknowledgeDuplicate(record):
            // An already finished call, a second cancel, a copy of a call another entry
            // finished: its `duplicate` result is written and its entry acknowledged.
            run(call.life.onRecordRequested(.duplicate(record)), for: call)
        }
    }

    func send(_ plan: PushPlan, for call: LiveCall) {
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
                return perform(call.router.pushWithheld(reason, now: Clock.unixMs()), for: call)
            }
        }
        let client: ApnsClient
        do {
            client = try pools.client(credential: call.app.credential, environment: plan.environment)
        } catch {
            if probe { appHealth[call.app.id]?.onProbeAnswered(nowMs: Clock.monotonicMs()) }
            let action = call.router.apnsFailed(.credentialUnusable("\(error)"), now: Clock.unixMs())
            return perform(action, for: call)
        }
        let sentUs = Clock.monotonicUs()
        let ticket = client.send(plan.notification, writeByUnixMs: plan.writeByUnixMs) { [unowned self] result in
            call.pushInFlight = nil
            // A drain cut off by its timeout retired with this push out; the process then
            // closes its clients and the push fails `.clientClosed`. The entry is another
            // process's now: scheduling a retry here would acknowledge it with the process
            // gone before the retry's due index is written (it waited for the repair, past the
            // call's deadline).
            guard !self.lifecycle.hasHandedOver else { return }
            let now = Clock.unixMs()
            let seconds = Double(Clock.monotonicUs() - sentUs) / 1_000_000
            if probe { self.appHealth[call.app.id]?.onProbeAnswered(nowMs: Clock.monotonicMs()) }
            let action: CallAction
            switch result {
            case .failure(.withdrawn):
                // Taken back after a cancel: it never left, and is no APNs failure.
                action = call.router.apnsFailed(.withdrawn, now: now)
            case let .success(response):
                self.observations?.apnsAnswered(app: call.app.id, channel: plan.channel, status: response.status,
                                                reason: response.reason?.text, latencySeconds: seconds)
                // APNs accepted the app's credentials and topic again: healthy (docs/protocol.md).
                if response.isAccepted, self.appHealth[call.app.id] != nil { self.appAccepted(call.app) }
                action = call.router.apnsAnswered(response, now: now)
            case let .failure(error):
                self.observations?.apnsFailed(app: call.app.id, channel: plan.channel, error: error, latencySeconds: seconds)
                action = call.router.apnsFailed(error, now: now)
            }
            self.perform(action, for: call)
        }
        // Nil when the client answered at once (closed, queue full): the completion ran.
        if let ticket, !ticket.isAnswered { call.pushInFlight = (client, ticket) }
    }

    // MARK: An app's credential

    /// APNs refused `app`'s credential or configuration (a dead letter marked `appUnhealthy`).
    func appRefused(_ app: AppRuntime, _ reason: DeadLetterReason) {
        let change = appHealth[app.id, default: AppCredentialHealth(policy: settings.credentialHealth)]
            .onRefused(reason, nowMs: Clock.monotonicMs())
        switch change {
        case .becameUnhealthy:
            log.error("app marked unhealthy", ["app": app.id, "reason": reason.text], limited: true)
        case .startedWithholding:
            log.error("app's pushes withheld: APNs refused its credential or configuration again and again; "
                      + "its calls are dead-lettered at once, one push a period probes it",
                      ["app": app.id, "reason": reason.text, "refusals_in_a_row": settings.credentialHealth.refusalsToWithhold,
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
