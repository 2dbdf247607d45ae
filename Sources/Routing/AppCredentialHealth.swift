/// Whether one app's pushes go to APNs, from what APNs said of its credential and
/// configuration (docs/operations.md, *An app APNs refuses*).
///
/// A credential or configuration refusal (403 auth reasons, BadTopic, TopicDisallowed, …: the
/// dead letters `CallRouter` marks `appUnhealthy`) makes the app unhealthy; after
/// `Policy.refusalsToWithhold` of them in a row its pushes are withheld: every push of the
/// app would be refused the same way (the alert fallback uses the same credential), so its
/// calls are dead-lettered at once with the refusal's reason instead of being sent to be
/// refused, one call in flood after another. One push every `Policy.probeEveryMs` still goes,
/// as a probe: accepted, the app is healthy again (a key re-enabled at Apple's side); a reload
/// of the config starts every app afresh (a fixed credential). Any accepted push makes the app
/// healthy; other answers (a token gone, a timeout) say nothing about the credential.
///
/// ```
/// sending(refusals: 0) ─refused─▶ sending(refusals: n) ─n-th refusal in a row─▶ withholding
///        ▲                                  │ accepted                             │ probe accepted
///        └──────────────────────────────────┴──────────────────────────────────────┘
/// ```
///
/// Pure: no clock (times are passed in, monotonic ms), no I/O; one per app, kept by the router
/// role, which asks `onPushWanted` before each push and reports what came back.
public struct AppCredentialHealth: Equatable, Sendable {
    /// When pushes are withheld and probed.
    public struct Policy: Equatable, Sendable {
        /// Credential or configuration refusals in a row that withhold the app's pushes.
        public var refusalsToWithhold: Int
        /// How often a withheld app's next push goes anyway, as a probe, ms.
        public var probeEveryMs: Int64

        public init(refusalsToWithhold: Int = 3, probeEveryMs: Int64 = 60_000) {
            precondition(refusalsToWithhold >= 1 && probeEveryMs > 0, "a health policy needs a refusal count and a probe period")
            self.refusalsToWithhold = refusalsToWithhold
            self.probeEveryMs = probeEveryMs
        }
    }

    public enum State: Equatable, Sendable {
        /// Pushes go. `refusals`: credential refusals in a row so far, the last one's reason
        /// (0 and nil: healthy).
        case sending(refusals: Int, last: DeadLetterReason?)
        /// Pushes are withheld since `sinceMs`, for `reason`; the next push at or after
        /// `nextProbeAtMs` goes as a probe (`probing` while it is out).
        case withholding(reason: DeadLetterReason, sinceMs: Int64, nextProbeAtMs: Int64, probing: Bool)
    }

    /// What to do with the push the app's call wants to send.
    public enum Decision: Equatable, Sendable {
        /// Send it.
        case send
        /// Send it: it is the probe (report its answer with `onProbeAnswered`).
        case sendAsProbe
        /// Do not send it: `CallRouter.pushWithheld` with this reason.
        case withhold(DeadLetterReason)
    }

    /// What an event changed, for the runner's log.
    public enum Change: Equatable, Sendable {
        case none
        /// The first refusal of a healthy app: it is unhealthy now.
        case becameUnhealthy
        /// Pushes are withheld from now on.
        case startedWithholding
        /// Healthy again (an accepted push or probe).
        case becameHealthy
    }

    public let policy: Policy
    public private(set) var state: State = .sending(refusals: 0, last: nil)

    public init(policy: Policy = Policy()) { self.policy = policy }

    /// Why APNs refuses the app, while it is unhealthy; nil while healthy.
    public var refusal: DeadLetterReason? {
        switch state {
        case let .sending(_, last): return last
        case let .withholding(reason, _, _, _): return reason
        }
    }

    /// Whether its pushes are withheld now.
    public var isWithholding: Bool {
        if case .withholding = state { return true }
        return false
    }

    // MARK: Events

    /// A call of the app wants to push now.
    public mutating func onPushWanted(nowMs: Int64) -> Decision {
        switch state {
        case .sending:
            return .send
        case let .withholding(reason, since, nextProbe, probing):
            guard !probing, nowMs >= nextProbe else { return .withhold(AppCredentialHealth.withheld(reason)) }
            state = .withholding(reason: reason, sinceMs: since, nextProbeAtMs: nextProbe, probing: true)
            return .sendAsProbe
        }
    }

    /// The probe came back, whatever the answer (reported before `onAccepted`/`onRefused`):
    /// the next one goes a period later, unless the answer makes the app healthy.
    public mutating func onProbeAnswered(nowMs: Int64) {
        switch state {
        case .sending:
            return  // tolerated: healthy again meanwhile (an accepted push sent before the withholding)
        case let .withholding(reason, since, _, _):
            state = .withholding(reason: reason, sinceMs: since, nextProbeAtMs: nowMs + policy.probeEveryMs, probing: false)
        }
    }

    /// APNs refused the app's credential or configuration (`reason`), or the credential could
    /// not sign a token.
    public mutating func onRefused(_ reason: DeadLetterReason, nowMs: Int64) -> Change {
        switch state {
        case let .sending(refusals, _):
            let n = refusals + 1
            guard n >= policy.refusalsToWithhold else {
                state = .sending(refusals: n, last: reason)
                return n == 1 ? .becameUnhealthy : .none
            }
            state = .withholding(reason: reason, sinceMs: nowMs, nextProbeAtMs: nowMs + policy.probeEveryMs, probing: false)
            return .startedWithholding
        case let .withholding(_, since, nextProbe, probing):
            // Pushes sent before the withholding, answered now, or the probe refused.
            state = .withholding(reason: reason, sinceMs: since, nextProbeAtMs: nextProbe, probing: probing)
            return .none
        }
    }

    /// APNs accepted a push of the app: its credential and configuration are good.
    public mutating func onAccepted() -> Change {
        switch state {
        case .sending(0, _):
            return .none
        case .sending, .withholding:
            state = .sending(refusals: 0, last: nil)
            return .becameHealthy
        }
    }

    /// The reason a withheld call is dead-lettered with: the refusal's, saying it was not sent.
    static func withheld(_ reason: DeadLetterReason) -> DeadLetterReason {
        let note = " (not sent: APNs refused the app's credential or configuration again and again; replay once fixed)"
        switch reason {
        case let .apnsCredentials(detail): return .apnsCredentials(detail + note)
        case let .apnsConfig(detail): return .apnsConfig(detail + note)
        case .invalidEvent, .apnsRequest, .fcmCredentials, .retriesExhausted, .payloadTooLarge, .invalidPush, .redeliveryLimit:
            return reason  // not an APNs refusal of the app: never withheld for (`onRefused` takes app refusals)
        }
    }
}
