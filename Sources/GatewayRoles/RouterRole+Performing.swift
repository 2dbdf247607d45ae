import APNs
import EventLoop
import RedisStreams
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
            guard call.life.onRecordRequested() == .write else { return }
            recordOutcome(record, for: call)
        case let .deadLetter(deadLetter):
            if deadLetter.appUnhealthy {
                unhealthyApps[call.app.id] = deadLetter.reason.text
                log.error("app marked unhealthy", ["app": call.app.id, "reason": deadLetter.reason.text], limited: true)
            }
            guard call.life.onRecordRequested() == .write else { return }
            writeDeadLetter(deadLetter, for: call)
        case .withdrawPush:
            if let push = call.pushInFlight { push.client.withdraw(push.ticket) }
        case let .cancelCall(record):
            guard call.life.onRecordRequested() == .write else { return }
            recordCancel(stamped(record, call), of: call)
        case let .acknowledgeDuplicate(record):
            // An already finished call, a second cancel, a copy of a call another entry
            // finished: its `duplicate` result is written and its entry acknowledged.
            guard call.life.onRecordRequested() == .write else { return }
            recordOutcome(record, for: call, keying: .duplicate)
        }
    }

    func send(_ plan: PushPlan, for call: LiveCall) {
        let client: ApnsClient
        do {
            client = try pools.client(credential: call.app.credential, environment: plan.environment)
        } catch {
            let action = call.router.apnsFailed(.credentialUnusable("\(error)"), now: Clock.unixMs())
            return perform(action, for: call)
        }
        let sentUs = Clock.monotonicUs()
        let ticket = client.send(plan.notification, writeByUnixMs: plan.writeByUnixMs) { [unowned self] result in
            call.pushInFlight = nil
            let now = Clock.unixMs()
            let seconds = Double(Clock.monotonicUs() - sentUs) / 1_000_000
            let action: CallAction
            switch result {
            case .failure(.withdrawn):
                // Taken back after a cancel: it never left, and is no APNs failure.
                action = call.router.apnsFailed(.withdrawn, now: now)
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
        // Nil when the client answered at once (closed, queue full): the completion ran.
        if let ticket, !ticket.isAnswered { call.pushInFlight = (client, ticket) }
    }
}
