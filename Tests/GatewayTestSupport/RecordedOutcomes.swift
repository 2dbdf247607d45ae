import APNs
import GatewayRoles
import CallStorage
import Routing

/// A router's `RouterObservations` in tests: every outcome it recorded, in order, with its app.
/// Each report is passed on to `next` (the admin endpoint under test, when there is one), as
/// `pushgw run` has the router report to its `GatewayAdmin`.
package final class RecordedOutcomes: RouterObservations {
    package private(set) var all: [(app: String, record: OutcomeRecord)] = []
    /// Also told everything, after the recording.
    package weak var next: RouterObservations?

    package init() {}

    package func eventsReceived(app: String, claimed: Bool, count: Int) {
        next?.eventsReceived(app: app, claimed: claimed, count: count)
    }

    package func apnsAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {
        next?.apnsAnswered(app: app, channel: channel, status: status, reason: reason, latencySeconds: latencySeconds)
    }

    package func apnsFailed(app: String, channel: PushChannel, error: ApnsClientError, latencySeconds: Double) {
        next?.apnsFailed(app: app, channel: channel, error: error, latencySeconds: latencySeconds)
    }

    /// Per app, the alert fallbacks by cause (what `pushgw_fallbacks_total` counts).
    package private(set) var fallbacks: [String: [FallbackCause: Int]] = [:]

    package func fallback(app: String, cause: FallbackCause) {
        fallbacks[app, default: [:]][cause, default: 0] += 1
        next?.fallback(app: app, cause: cause)
    }

    package func callRecorded(app: String, record: OutcomeRecord) {
        all.append((app, record))
        next?.callRecorded(app: app, record: record)
    }

    /// Every feedback entry written, in order, with its app.
    package private(set) var feedback: [(app: String, feedback: InvalidToken)] = []

    /// Per app, how many VoIP tokens were marked suspected of iOS's silent ban.
    package private(set) var voipSuspected: [String: Int] = [:]

    package func voipSuspected(app: String, count: Int) {
        voipSuspected[app, default: 0] += count
        next?.voipSuspected(app: app, count: count)
    }

    package func tokenFeedback(app: String, feedback entry: InvalidToken) {
        feedback.append((app, entry))
        next?.tokenFeedback(app: app, feedback: entry)
    }
}
