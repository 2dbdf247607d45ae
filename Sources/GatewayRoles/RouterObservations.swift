import APNs
import CallStorage
import FCM
import Routing

/// What the router tells the world as it happens: the events no counter of `RouterRole`
/// or `ApnsClient` carries (per app, per channel, with latencies), and each recorded outcome.
/// The runner's one door out (`RouterRole.observations`, held weakly, called on the loop
/// thread): `GatewayAdmin` implements it for a running gateway (its metrics and console),
/// `GatewayMetrics` for the metrics alone, tests to see the outcomes. Every method does nothing
/// unless implemented, so an observer implements only what it needs.
///
/// Everything else is pulled at scrape time from the counters that exist (`RouterRole.Stats`,
/// `ApnsClientStats`, …), so the hot path pays only for these calls: a dictionary update each.
package protocol RouterObservations: AnyObject {
    /// `count` stream entries of `app` started routing: read (`claimed` false) or taken over
    /// from a dead consumer (`claimed` true). Called once per read, not per entry.
    func eventsReceived(app: String, claimed: Bool, count: Int)
    /// APNs answered a push of `app` on `channel` with `status` (and Apple's `reason` text for
    /// a rejection) `latencySeconds` after it was handed to the client.
    func apnsAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double)
    /// A push of `app` on `channel` got no answer (`ApnsClientError`) after `latencySeconds`.
    func apnsFailed(app: String, channel: PushChannel, error: ApnsClientError, latencySeconds: Double)
    /// FCM answered a message of `app` for an Android device on `channel` (the ring, or the
    /// missed-call notification and `call_ended`) with `status` (and FCM's code for a refusal).
    func fcmAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double)
    /// A message of `app` for an Android device got no answer from FCM, or no access token.
    func fcmFailed(app: String, channel: PushChannel, error: FcmClientError, latencySeconds: Double)
    /// The router fell back from VoIP to the alert push for `cause` (once per call: the
    /// alert's first attempt). A `deadline` cause is also a deadline miss.
    func fallback(app: String, cause: FallbackCause)
    /// An outcome was recorded and its entry acknowledged (or, for a call cancelled while in
    /// the retry schedule, its scheduled retry removed).
    func callRecorded(app: String, record: OutcomeRecord)
    /// A feedback entry of `app` was written with a call's record: a token APNs declared
    /// invalid, or one accepted in the other environment (`feedback.environment`, reason
    /// `environment_mismatch`).
    func tokenFeedback(app: String, feedback: InvalidToken)
    /// With ring receipts on, `count` VoIP tokens of `app` were marked suspected of iOS's
    /// silent VoIP ban (a feedback entry each, reason `voip_suspected_blocked`).
    func voipSuspected(app: String, count: Int)
}

extension RouterObservations {
    package func eventsReceived(app: String, claimed: Bool, count: Int) {}
    package func apnsAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {}
    package func apnsFailed(app: String, channel: PushChannel, error: ApnsClientError, latencySeconds: Double) {}
    package func fcmAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {}
    package func fcmFailed(app: String, channel: PushChannel, error: FcmClientError, latencySeconds: Double) {}
    package func fallback(app: String, cause: FallbackCause) {}
    package func callRecorded(app: String, record: OutcomeRecord) {}
    package func tokenFeedback(app: String, feedback: InvalidToken) {}
    package func voipSuspected(app: String, count: Int) {}
}

extension ApnsClientError {
    /// A short, bounded label value for metrics (`timeout`, `connection_lost`, …): the
    /// associated texts are free-form and must not become label values.
    package var metricLabel: String {
        switch self {
        case .timeout: return "timeout"
        case .connectionLost: return "connection_lost"
        case .connectionFailed: return "connection_failed"
        case .queueFull: return "queue_full"
        case .clientClosed: return "client_closed"
        case .credentialUnusable: return "credential_unusable"
        case .unsendable: return "unsendable"
        case .withdrawn: return "withdrawn"
        }
    }
}

extension FcmClientError {
    /// A short, bounded label value for metrics, as `ApnsClientError.metricLabel`.
    package var metricLabel: String {
        switch self {
        case let .transport(error): return error.metricLabel
        case .accessToken: return "access_token"
        case .clientUnusable: return "client_unusable"
        }
    }
}
