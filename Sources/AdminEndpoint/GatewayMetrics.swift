import APNs
import FCM
import BuildVersion
import GatewayConfiguration
import GatewayRoles
import CallStorage
import RedisClient
import Routing

/// Every metric pushgw exposes on `/metrics` (documented one by one in docs/operations.md).
///
/// Two kinds of sources:
/// - pushed: `RouterObservations` calls made by the router as things happen (per app, per
///   channel, latencies) and each recorded outcome (`callRecorded`);
/// - pulled: the counters the modules keep anyway (`RouterRole.Stats`, `ApnsClientStats`,
///   `RedisConnection.Stats`, the backlog probe), copied into the registry by `update(_:)`
///   right before each scrape is rendered, so the hot path pays nothing for them.
///
/// Loop-owned, like the registry.
package final class GatewayMetrics: RouterObservations {
    package let registry: MetricsRegistry

    /// Upper bounds of the APNs answer latency, seconds: APNs answers in tens of ms; a
    /// second or more means a slow or overloaded path.
    static let apnsLatencyBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Upper bounds of the XADD-to-answer latency, seconds: from a few ms for a direct VoIP
    /// push to minutes for an alert that needed retries.
    static let eventLatencyBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]

    // MARK: Events (pushed)
    let eventsReceived: CounterFamily
    let eventsFinished: CounterFamily
    let duplicates: CounterFamily
    let ringReceipts: CounterFamily
    let voipSuspectedBlocked: CounterFamily
    let deadLetters: CounterFamily
    let fallbacks: CounterFamily
    let tokenFeedback: CounterFamily
    let tokensInvalidated: CounterFamily
    let environmentMismatches: CounterFamily
    let deadlineMisses: CounterFamily
    let eventLatency: HistogramFamily
    let ringLatency: HistogramFamily
    // MARK: APNs answers (pushed)
    let apnsResponses: CounterFamily
    let apnsFailures: CounterFamily
    let apnsLatency: HistogramFamily
    let fcmResponses: CounterFamily
    let fcmFailures: CounterFamily
    let fcmLatency: HistogramFamily
    // MARK: Router (pulled)
    let callsInFlight: GaugeFamily
    let invalidEvents: CounterFamily
    let poisonEntries: CounterFamily
    let lostEntries: CounterFamily
    let retriesScheduled: CounterFamily
    let retriesFired: CounterFamily
    let routerRedisErrors: CounterFamily
    let appUnhealthy: GaugeFamily
    let appCallsInFlight: GaugeFamily
    let appThrottled: CounterFamily
    let appPushesWithheld: GaugeFamily
    /// 1 while an operator has the app paused (as this router last read it), else 0.
    let appPaused: GaugeFamily
    let appReceiptsMissing: GaugeFamily
    // MARK: APNs pools (pulled)
    let apnsRequests: CounterFamily
    let apnsAnswers: CounterFamily
    let apnsTimeouts: CounterFamily
    let apnsLost: CounterFamily
    let apnsResends: CounterFamily
    let apnsGoaways: CounterFamily
    let apnsConnectionsOpened: CounterFamily
    let apnsConnectFailures: CounterFamily
    let apnsDeadConnections: CounterFamily
    let apnsQueueFull: CounterFamily
    let apnsExpiredUnsent: CounterFamily
    let apnsInFlight: GaugeFamily
    let apnsPeakInFlight: GaugeFamily
    let apnsStreamLimit: GaugeFamily
    let apnsQueued: GaugeFamily
    let apnsConnections: GaugeFamily
    let apnsUp: GaugeFamily
    let apnsUnreachableSeconds: GaugeFamily
    let jwtRenewals: CounterFamily
    // MARK: Redis (pulled)
    let redisUp: GaugeFamily
    let redisConnectionReady: GaugeFamily
    let redisConnects: CounterFamily
    let redisConnectFailures: CounterFamily
    let redisDisconnects: CounterFamily
    let redisWatchdogFirings: CounterFamily
    let redisRefusedNodes: CounterFamily
    let redisEvictingPolicy: GaugeFamily
    let redisEvictedKeys: CounterFamily
    let redisWriteRefusals: CounterFamily
    let backlogEntries: GaugeFamily
    let certificateExpiry: GaugeFamily
    let deadLettersToTrim: GaugeFamily
    let deadLettersTrimmed: CounterFamily
    // MARK: Webhooks (pulled, the latency pushed)
    let webhooksSent: CounterFamily
    let webhookFailures: CounterFamily
    let webhookLatency: HistogramFamily
    let pendingEntries: GaugeFamily
    // MARK: The registry itself
    let droppedSeries: CounterFamily
    // MARK: The build and the process (Prometheus' standard names)
    let buildInfo: GaugeFamily
    let processCPUSeconds: CounterFamily
    let processResidentMemory: GaugeFamily
    let processVirtualMemory: GaugeFamily
    let processStartTime: GaugeFamily
    let processOpenFDs: GaugeFamily
    let processMaxFDs: GaugeFamily

    package init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        let r = registry
        eventsReceived = r.counter("pushgw_events_received_total",
                                   help: "Call events that started routing in this process, by app and source (read from the stream, or claimed from a dead consumer).",
                                   labels: ["app", "source"])
        eventsFinished = r.counter("pushgw_events_finished_total",
                                   help: "Call events whose outcome was recorded and whose entry was acknowledged, by app and outcome.",
                                   labels: ["app", "outcome"])
        duplicates = r.counter("pushgw_duplicate_events_total",
                               help: "Call events whose id already had an outcome, answered with a duplicate result and nothing sent, by app and the first outcome.",
                               labels: ["app", "first_outcome"])
        ringReceipts = r.counter("pushgw_ring_receipts_total",
                                 help: "Ring receipts (call_ringing events) recorded, by app; not counted among the finished events, which they would dilute.",
                                 labels: ["app"])
        voipSuspectedBlocked = r.counter("pushgw_voip_suspected_blocked_total",
                                         help: "VoIP tokens marked suspected of iOS's silent VoIP ban (their last VoIP rings accepted, no ring receipt): their calls skip VoIP and go straight to the alert, by app.",
                                         labels: ["app"])
        deadLetters = r.counter("pushgw_dead_letters_total",
                                help: "Events written to the dead-letter stream, by app and reason code.",
                                labels: ["app", "reason"])
        fallbacks = r.counter("pushgw_fallbacks_total",
                              help: "Calls that fell back from the VoIP push to the alert push, by app and cause.",
                              labels: ["app", "cause"])
        tokenFeedback = r.counter("pushgw_token_feedback_total",
                                  help: "Feedback entries written: tokens APNs declared invalid, by app, channel and Apple's reason (other for a reason not in Apple's table), and tokens accepted in the other environment (reason environment_mismatch).",
                                  labels: ["app", "channel", "reason"])
        tokensInvalidated = r.counter("pushgw_tokens_invalidated_total",
                                      help: "Tokens marked known invalid (later calls skip them for the app's retention.invalid_token_ttl_s, 30 days by default, unless registered again), by app, channel and Apple's reason (other for a reason not in Apple's table).",
                                      labels: ["app", "channel", "reason"])
        environmentMismatches = r.counter("pushgw_environment_mismatches_total",
                                          help: "Tokens refused with BadDeviceToken in the app's environment and accepted in the other one (delivered, not marked invalid), by app, channel and the environment that accepted them.",
                                          labels: ["app", "channel", "environment"])
        deadlineMisses = r.counter("pushgw_deadline_misses_total",
                                   help: "Calls whose VoIP push was not accepted before the call's deadline (fallback with cause deadline, rate_limited or paused, or outcome expired), by app.",
                                   labels: ["app"])
        eventLatency = r.histogram("pushgw_event_latency_seconds",
                                   help: "From the stream entry's time (XADD) to the APNs answer that finished the call, by the channel of that answer.",
                                   labels: ["channel"], buckets: GatewayMetrics.eventLatencyBuckets)
        ringLatency = r.histogram("pushgw_ring_latency_seconds",
                                  help: "With ring receipts: from the call's stream entry (XADD) to a device's ring receipt (the call_ringing entry's time), by app.",
                                  labels: ["app"], buckets: GatewayMetrics.eventLatencyBuckets)
        apnsResponses = r.counter("pushgw_apns_responses_total",
                                  help: "APNs answers to pushes, by app, channel, HTTP status and Apple's reason (empty when accepted).",
                                  labels: ["app", "channel", "status", "reason"])
        apnsFailures = r.counter("pushgw_apns_failures_total",
                                 help: "Pushes that got no answer from APNs, by app, channel and error.",
                                 labels: ["app", "channel", "error"])
        apnsLatency = r.histogram("pushgw_apns_answer_latency_seconds",
                                  help: "From handing a push to the APNs client to APNs' answer, by channel.",
                                  labels: ["channel"], buckets: GatewayMetrics.apnsLatencyBuckets)
        fcmResponses = r.counter("pushgw_fcm_responses_total",
                                 help: "FCM answers to messages for Android devices, by app, channel (voip: the ring, alert: the missed-call notification and call_ended), HTTP status and FCM's error code (empty when accepted).",
                                 labels: ["app", "channel", "status", "reason"])
        fcmFailures = r.counter("pushgw_fcm_failures_total",
                                help: "Messages for Android devices that got no answer from FCM (or no access token), by app, channel and error.",
                                labels: ["app", "channel", "error"])
        fcmLatency = r.histogram("pushgw_fcm_answer_latency_seconds",
                                 help: "From handing a message to the FCM client to FCM's answer (its access token's exchange included), by channel.",
                                 labels: ["channel"], buckets: GatewayMetrics.apnsLatencyBuckets)

        callsInFlight = r.gauge("pushgw_calls_in_flight", help: "Call events being routed by this process.")
        invalidEvents = r.counter("pushgw_invalid_events_total", help: "Stream entries that were not a valid call event (dead-lettered).")
        poisonEntries = r.counter("pushgw_poison_entries_total",
                                  help: "Stream entries dead-lettered after too many deliveries without an outcome.")
        lostEntries = r.counter("pushgw_lost_entries_total",
                                help: "Pending entries of dead consumers that were gone from the stream when claimed.")
        retriesScheduled = r.counter("pushgw_retries_scheduled_total", help: "Push retries scheduled after transient failures.")
        retriesFired = r.counter("pushgw_retries_fired_total", help: "Scheduled push retries that came due.")
        routerRedisErrors = r.counter("pushgw_router_redis_errors_total",
                                      help: "Redis operations of the router that failed (the entry stays pending and is routed again).")
        appCallsInFlight = r.gauge("pushgw_app_calls_in_flight",
                                   help: "Call events of the app being routed by this process (its limits.max_in_flight caps them), by app.",
                                   labels: ["app"])
        appThrottled = r.counter("pushgw_app_throttled_seconds_total",
                                 help: "Seconds the app's events waited in its stream for its limits.events_per_second, by app (apps with a rate only).",
                                 labels: ["app"])
        appUnhealthy = r.gauge("pushgw_app_unhealthy",
                               help: "1 when APNs refused the app's credentials or configuration lately, else 0, by app.",
                               labels: ["app"])
        appPushesWithheld = r.gauge("pushgw_app_pushes_withheld",
                                    help: "1 while the app's pushes are withheld after APNs refused its credentials or configuration again and again (its calls dead-lettered at once, one probe push a minute), else 0, by app.",
                                    labels: ["app"])
        appPaused = r.gauge("pushgw_app_paused",
                            help: "1 while an operator has the app paused (pushgw apps pause: its calls wait in its stream, unread), as this router last read it, else 0, by app.",
                            labels: ["app"])
        appReceiptsMissing = r.gauge("pushgw_app_receipts_missing",
                                     help: "1 while no device of the app sent a ring receipt for its last calls (its backend stopped adding call_ringing: no token is suspected of a ban meanwhile), else 0, by app with ring receipts on.",
                                     labels: ["app"])

        let pool = ["credential", "environment"]
        apnsRequests = r.counter("pushgw_apns_requests_total",
                                 help: "Pushes written to an APNs stream, resends included, by pool.", labels: pool)
        apnsAnswers = r.counter("pushgw_apns_answers_total",
                                help: "Pushes APNs answered (any status), by pool.", labels: pool)
        apnsTimeouts = r.counter("pushgw_apns_timeouts_total",
                                 help: "Pushes that got no answer within the request timeout, by pool.", labels: pool)
        apnsLost = r.counter("pushgw_apns_lost_total",
                             help: "Pushes written and then lost with their connection (APNs may have delivered them), by pool.",
                             labels: pool)
        apnsResends = r.counter("pushgw_apns_resends_total",
                                help: "Pushes resent by the client, not counted as attempts: unprocessed (REFUSED_STREAM, GOAWAY) or provider_token (after 403 ExpiredProviderToken), by pool.",
                                labels: pool + ["why"])
        apnsGoaways = r.counter("pushgw_apns_goaways_total", help: "GOAWAY frames received from APNs, by pool.", labels: pool)
        apnsConnectionsOpened = r.counter("pushgw_apns_connections_opened_total",
                                          help: "Connections to APNs started, by pool.", labels: pool)
        apnsConnectFailures = r.counter("pushgw_apns_connect_failures_total",
                                        help: "Connections to APNs that failed before becoming ready, by pool.", labels: pool)
        apnsDeadConnections = r.counter("pushgw_apns_dead_connections_total",
                                        help: "Connections to APNs closed because a PING went unanswered, by pool.", labels: pool)
        apnsQueueFull = r.counter("pushgw_apns_queue_full_total",
                                  help: "Pushes refused at once because the pool's queue was full, by pool.", labels: pool)
        apnsExpiredUnsent = r.counter("pushgw_apns_expired_unsent_total",
                                      help: "Pushes whose time to be written ran out while they waited for a stream: failed unsent (also in timeouts), by pool.",
                                      labels: pool)
        apnsInFlight = r.gauge("pushgw_apns_in_flight", help: "Pushes written and waiting for APNs' answer, by pool.", labels: pool)
        apnsPeakInFlight = r.gauge("pushgw_apns_peak_in_flight",
                                   help: "Most pushes ever in flight at once across the pool's connections, by pool.", labels: pool)
        apnsStreamLimit = r.gauge("pushgw_apns_max_concurrent_streams",
                                  help: "Highest SETTINGS_MAX_CONCURRENT_STREAMS any of the pool's connections was given by APNs, by pool.",
                                  labels: pool)
        apnsQueued = r.gauge("pushgw_apns_queued", help: "Pushes waiting for a free stream, by pool.", labels: pool)
        apnsConnections = r.gauge("pushgw_apns_connections", help: "Connections to APNs, by pool and state.",
                                  labels: pool + ["state"])
        apnsUp = r.gauge("pushgw_apns_up",
                         help: "0 while the pool cannot connect to APNs (its connects fail and none is up), else 1, by pool.",
                         labels: pool)
        apnsUnreachableSeconds = r.gauge("pushgw_apns_unreachable_seconds",
                                         help: "How long the pool has been unable to connect to APNs, 0 when it can, by pool.",
                                         labels: pool)
        jwtRenewals = r.counter("pushgw_apns_jwt_renewals_total",
                                help: "Provider tokens (JWT) replaced by a new one, by credential.", labels: ["credential"])

        redisUp = r.gauge("pushgw_redis_up", help: "1 when Redis answered a PING lately, else 0.")
        redisConnectionReady = r.gauge("pushgw_redis_connection_ready",
                                       help: "1 when the Redis connection is connected and its handshake done, by connection (read, write).",
                                       labels: ["connection"])
        redisConnects = r.counter("pushgw_redis_connects_total",
                                  help: "Times the Redis connection became ready, by connection.", labels: ["connection"])
        redisConnectFailures = r.counter("pushgw_redis_connect_failures_total",
                                         help: "Failed Redis connection attempts, by connection.", labels: ["connection"])
        redisDisconnects = r.counter("pushgw_redis_disconnects_total",
                                     help: "Ready Redis connections that were lost, by connection.", labels: ["connection"])
        redisWatchdogFirings = r.counter("pushgw_redis_watchdog_firings_total",
                                         help: "Times a Redis connection was dropped because its replies stalled, by connection.",
                                         labels: ["connection"])
        redisWriteRefusals = r.counter("pushgw_redis_write_refusals_total",
                                       help: "Commands and scripts Redis refused because it refuses writes (OOM, NOREPLICAS, MISCONF, READONLY), by connection and reason.",
                                       labels: ["connection", "reason"])
        certificateExpiry = r.gauge("pushgw_certificate_expiry_timestamp_seconds",
                                    help: "When a certificate stops being valid, unix seconds: each certificate credential (kind credential, by credential name) and the APNs CA file (kind ca, its soonest-expiring valid certificate), read at start and at each reload.",
                                    labels: ["certificate", "kind"])
        deadLettersToTrim = r.gauge("pushgw_dead_letters_to_be_trimmed",
                                    help: "Dead letters the next retention run will remove (by age within one interval, by count and by size), per app.",
                                    labels: ["app"])
        deadLettersTrimmed = r.counter("pushgw_dead_letters_trimmed_total",
                                       help: "Dead letters removed by retention, per app and why (age, count or size).",
                                       labels: ["app", "why"])
        webhooksSent = r.counter("pushgw_webhooks_sent_total",
                                 help: "Webhook attempts, per app and status: the receiver's HTTP status, error (no answer: DNS, connect, TLS, timeout) or refused (a loopback or private address).",
                                 labels: ["app", "status"])
        webhookFailures = r.counter("pushgw_webhook_failures_total",
                                    help: "Webhook attempts that did not deliver, per app and what followed: retried (network error, 5xx, 429) or dead_lettered (another 4xx, or retried past retry_for_seconds).",
                                    labels: ["app", "result"])
        webhookLatency = r.histogram("pushgw_webhook_latency_seconds",
                                     help: "From sending a webhook to the receiver's answer, per app.",
                                     labels: ["app"], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
        backlogEntries = r.gauge("pushgw_backlog_entries",
                                 help: "Entries in the app's calls stream (not yet finished: waiting or in flight), by app; refreshed every few seconds.",
                                 labels: ["app"])
        pendingEntries = r.gauge("pushgw_pending_entries",
                                 help: "Entries of the app's calls stream delivered to a gateway and not yet acknowledged, by app; refreshed every few seconds.",
                                 labels: ["app"])
        redisRefusedNodes = r.counter("pushgw_redis_refused_nodes_total",
                                      help: "Redis nodes not trusted with the credentials, so never dialled, by how they were named (moved, ask, slot_map, sentinel).",
                                      labels: ["kind"])
        redisEvictingPolicy = r.gauge("pushgw_redis_evicting_policy",
                                      help: "1 when the Redis node's maxmemory-policy deletes keys at its maxmemory (set noeviction), else 0, by node.",
                                      labels: ["node"])
        redisEvictedKeys = r.counter("pushgw_redis_evicted_keys_total",
                                     help: "Keys the Redis node evicted (growth of its evicted_keys) while this process watched it, by node.",
                                     labels: ["node"])
        droppedSeries = r.counter("pushgw_metrics_dropped_series_total",
                                  help: "Observations dropped because their metric had too many label sets.")
        buildInfo = r.gauge("pushgw_build_info", help: "Always 1: the version and the git commit this pushgw was built from.",
                            labels: ["version", "commit"])
        buildInfo.set([BuildVersion.version, BuildVersion.commit], 1)
        processCPUSeconds = r.counter("process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.")
        processResidentMemory = r.gauge("process_resident_memory_bytes", help: "Resident memory size in bytes.")
        processVirtualMemory = r.gauge("process_virtual_memory_bytes", help: "Virtual memory size in bytes.")
        processStartTime = r.gauge("process_start_time_seconds", help: "Start time of the process since unix epoch in seconds.")
        processOpenFDs = r.gauge("process_open_fds", help: "Number of open file descriptors.")
        processMaxFDs = r.gauge("process_max_fds", help: "Maximum number of open file descriptors.")
    }

    /// Apple's reasons that write a token off (the token classes of `ApnsReason.table`), and
    /// `other`: the values of the `reason` label of the token counters.
    static let tokenReasons = ApnsReason.table.filter { $0.kind == .tokenInvalid || $0.kind == .tokenInvalidHere }.map(\.text) + ["other"]

    /// Shows every series an app's calls can make at 0 from the start (outcomes, dead-letter
    /// reasons, fallback causes, token feedback and invalidation reasons, deadline misses, APNs
    /// acceptances), so `rate()` and `increase()` see an app's first event of each kind instead
    /// of a series that appears with it. Called with the configured apps at start and at each
    /// reload; series of removed apps stay (counters never go back).
    package func preset(apps: [String]) {
        let channels = PushChannel.allCases.map(\.rawValue)
        let outcomes = CallOutcome.allCases.filter { $0 != .duplicate && $0 != .ringing }.map(\.rawValue)
        for app in apps {
            for source in ["read", "claimed"] { eventsReceived.preset([app, source]) }
            for outcome in outcomes {
                eventsFinished.preset([app, outcome])
                duplicates.preset([app, outcome])
            }
            for reason in DeadLetterReason.codes { deadLetters.preset([app, reason]) }
            for cause in FallbackCause.allCases { fallbacks.preset([app, cause.rawValue]) }
            deadlineMisses.preset([app])
            ringReceipts.preset([app])
            voipSuspectedBlocked.preset([app])
            for channel in channels {
                for reason in GatewayMetrics.tokenReasons {
                    tokenFeedback.preset([app, channel, reason])
                    tokensInvalidated.preset([app, channel, reason])
                }
                tokenFeedback.preset([app, channel, "environment_mismatch"])
                for environment in ApnsEnvironment.allCases { environmentMismatches.preset([app, channel, environment.rawValue]) }
                apnsResponses.preset([app, channel, "200", ""])
            }
        }
    }

    // MARK: Pushed

    package func eventsReceived(app: String, claimed: Bool, count: Int) {
        eventsReceived.inc([app, claimed ? "claimed" : "read"], by: Double(count))
    }

    package func apnsAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {
        if status == 200, reason == nil {
            usual[app, default: UsualCounts()].accepted[GatewayMetrics.index(of: channel)] += 1
        } else {
            apnsResponses.inc([app, channel.rawValue, String(status), reason ?? ""])
        }
        apnsLatency.observe(GatewayMetrics.channelLabels[GatewayMetrics.index(of: channel)], latencySeconds)
    }

    /// The router's counts on the usual path (an accepted push, a finished call), added up per
    /// app and moved into their families when the metrics are read (`render`, `update`): per
    /// event one lookup by app, where each series' label values were built and hashed.
    private struct UsualCounts {
        var accepted = [Double](repeating: 0, count: PushChannel.allCases.count)
        var finished = [Double](repeating: 0, count: CallOutcome.allCases.count)
    }
    private var usual: [String: UsualCounts] = [:]
    /// `[channel]`, the latency histograms' label values, made once.
    private static let channelLabels = PushChannel.allCases.map { [$0.rawValue] }

    private static func index(of channel: PushChannel) -> Int { channel == .voip ? 0 : 1 }

    /// Moves the usual counts into their families.
    private func flushUsualCounts() {
        for (app, counts) in usual {
            for (i, channel) in PushChannel.allCases.enumerated() where counts.accepted[i] > 0 {
                apnsResponses.inc([app, channel.rawValue, "200", ""], by: counts.accepted[i])
            }
            for (i, outcome) in CallOutcome.allCases.enumerated() where counts.finished[i] > 0 {
                eventsFinished.inc([app, outcome.rawValue], by: counts.finished[i])
            }
        }
        usual.removeAll(keepingCapacity: true)
    }

    package func apnsFailed(app: String, channel: PushChannel, error: ApnsClientError, latencySeconds: Double) {
        apnsFailures.inc([app, channel.rawValue, error.metricLabel])
    }

    package func fcmAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {
        // FCM's codes are a table (`FcmErrorCode`); one not in it is counted as `other`.
        let code = reason.map { FcmErrorCode(text: $0, status: status).unlistedSpelling == nil ? $0 : "other" } ?? ""
        fcmResponses.inc([app, channel.rawValue, String(status), code])
        fcmLatency.observe([channel.rawValue], latencySeconds)
    }

    package func fcmFailed(app: String, channel: PushChannel, error: FcmClientError, latencySeconds: Double) {
        fcmFailures.inc([app, channel.rawValue, error.metricLabel])
    }

    package func fallback(app: String, cause: FallbackCause) {
        fallbacks.inc([app, cause.rawValue])
        if cause == .deadline || cause == .rateLimited || cause == .paused { deadlineMisses.inc([app]) }
    }

    package func voipSuspected(app: String, count: Int) {
        voipSuspectedBlocked.inc([app], by: Double(count))
    }

    /// The certificates' expiry times, replacing the ones set before (a reload may drop some).
    package func certificateExpiries(_ expiries: [CertificateExpiry]) {
        certificateExpiry.removeAll()
        for e in expiries { certificateExpiry.set([e.name, e.kind], Double(e.notAfterS)) }
    }

    /// One feedback entry written (bounded labels: Apple's reason table, `environment_mismatch`, `other`).
    package func tokenFeedback(app: String, feedback: InvalidToken) {
        let reason: String
        if feedback.environment != nil {
            reason = feedback.reason
            environmentMismatches.inc([app, feedback.channel.rawValue, feedback.environment ?? ""])
        } else {
            if feedback.channel == .fcm {
                reason = FcmErrorCode(text: feedback.reason, status: 0).unlistedSpelling == nil ? feedback.reason : "other"
            } else if case .unknown = ApnsReason(text: feedback.reason, status: 0) {
                reason = "other"
            } else {
                reason = feedback.reason
            }
            // Without an environment the feedback entry came with a known-invalid mark (`InvalidToken`).
            tokensInvalidated.inc([app, feedback.channel.rawValue, reason])
        }
        tokenFeedback.inc([app, feedback.channel.rawValue, reason])
    }

    /// A dead letter's reason code, its label: the code part only (`apns_credentials`, not
    /// `apns_credentials: BadTopic`), so the label's values stay bounded.
    private static func reasonCode(_ reason: String?) -> String {
        reason.map { String($0.prefix { $0 != ":" }) } ?? "unknown"
    }

    package func callRecorded(app: String, record: OutcomeRecord) {
        if record.outcome == .duplicate {
            // Not an outcome of its own: the first one was counted when it was recorded.
            duplicates.inc([app, record.firstOutcome?.rawValue ?? "unknown"])
            return
        }
        if record.outcome == .ringing {
            // A receipt is no call: counted apart, so the finished calls' ratios stay the calls'.
            ringReceipts.inc([app])
            return
        }
        usual[app, default: UsualCounts()].finished[record.outcome.ordinal] += 1
        switch record.outcome {
        case .deadLettered:
            deadLetters.inc([app, GatewayMetrics.reasonCode(record.reason)])
        case .expired:
            deadlineMisses.inc([app])
        case .deliveredVoip, .deliveredAlert, .undeliverable, .cancelled, .answered, .declined, .ringing, .duplicate:
            break
        }
        if record.outcome != .deadLettered, let devices = record.devices {
            // A call with devices that is no dead letter wrote one per device that was (its outcome says so).
            for device in devices where device.outcome == .deadLettered {
                deadLetters.inc([app, GatewayMetrics.reasonCode(device.reason)])
            }
        }
        if let latencyMs = record.latencyMs,
           let channel = record.channel ?? record.attempts.last?.channel {
            eventLatency.observe(GatewayMetrics.channelLabels[GatewayMetrics.index(of: channel)], Double(latencyMs) / 1000)
        }
        if record.devices != nil {
            for latencyMs in GatewayMetrics.ringLatenciesMs(record) { ringLatency.observe([app], Double(latencyMs) / 1000) }
        }
    }

    /// With ring receipts, each device's XADD→ringing of a call's record: from its entry's time
    /// (the id of the producer's calls entry) to the device's `rang_at` (its receipt entry's
    /// time), ms, at least 0 (two clocks of one Redis); none for a device that did not ring.
    package static func ringLatenciesMs(_ record: OutcomeRecord) -> [Int64] {
        guard let devices = record.devices, let entry = record.entry, let entryMs = Int64(entry.prefix { $0 != "-" }) else { return [] }
        return devices.compactMap { $0.rangAtMs.map { max(0, $0 - entryMs) } }
    }

    // MARK: Pulled

    /// Copies `snapshot` into the pulled families. Call right before `render()`.
    package func update(_ snapshot: GatewaySnapshot) {
        flushUsualCounts()
        if let stats = snapshot.router {
            callsInFlight.set([], Double(snapshot.callsInFlight))
            invalidEvents.set(total: Double(stats.invalidEvents))
            poisonEntries.set(total: Double(stats.poison))
            lostEntries.set(total: Double(stats.lostEntries))
            retriesScheduled.set(total: Double(stats.retriesScheduled))
            retriesFired.set(total: Double(stats.retriesFired))
            routerRedisErrors.set(total: Double(stats.redisErrors))
        }
        appUnhealthy.removeAll()
        appPushesWithheld.removeAll()
        appReceiptsMissing.removeAll()
        appCallsInFlight.removeAll()
        appPaused.removeAll()
        if snapshot.router != nil {
            for app in snapshot.apps {
                appCallsInFlight.set([app], Double(snapshot.callsInFlightByApp[app] ?? 0))
                appPaused.set([app], snapshot.pausedApps.contains(app) ? 1 : 0)
            }
        }
        for (app, seconds) in snapshot.throttledSecondsByApp { appThrottled.set([app], total: seconds) }
        for app in snapshot.apps {
            appUnhealthy.set([app], snapshot.unhealthyApps[app] == nil ? 0 : 1)
            appPushesWithheld.set([app], snapshot.withheldApps[app] == nil ? 0 : 1)
        }
        for app in snapshot.appsWithReceipts { appReceiptsMissing.set([app], snapshot.appsMissingReceipts[app] == nil ? 0 : 1) }

        let poolFamilies: [ValueFamily] = [apnsRequests, apnsAnswers, apnsTimeouts, apnsLost, apnsResends, apnsGoaways,
                                           apnsConnectionsOpened, apnsConnectFailures, apnsDeadConnections, apnsQueueFull,
                                           apnsExpiredUnsent, apnsInFlight, apnsPeakInFlight, apnsStreamLimit, apnsQueued,
                                           apnsConnections, apnsUp, apnsUnreachableSeconds, jwtRenewals]
        for family in poolFamilies { family.removeAll() }
        for pool in snapshot.pools {
            let l = [pool.credential, pool.environment]
            let s = pool.stats
            apnsRequests.set(l, total: Double(s.sent))
            apnsAnswers.set(l, total: Double(s.answered))
            apnsTimeouts.set(l, total: Double(s.timeouts))
            apnsLost.set(l, total: Double(s.lost))
            apnsResends.set(l + ["unprocessed"], total: Double(s.resentUnprocessed))
            apnsResends.set(l + ["provider_token"], total: Double(s.resentAfterTokenRenewal))
            apnsGoaways.set(l, total: Double(s.goaways))
            apnsConnectionsOpened.set(l, total: Double(s.connectionsOpened))
            apnsConnectFailures.set(l, total: Double(s.connectFailures))
            apnsDeadConnections.set(l, total: Double(s.deadConnections))
            apnsQueueFull.set(l, total: Double(s.queueFullRejections))
            apnsExpiredUnsent.set(l, total: Double(s.expiredUnsent))
            apnsInFlight.set(l, Double(pool.inFlight))
            apnsPeakInFlight.set(l, Double(s.peakInFlight))
            apnsStreamLimit.set(l, Double(s.peakAnnouncedStreams))
            apnsQueued.set(l, Double(pool.queued))
            for (state, count) in pool.connectionsByState { apnsConnections.set(l + [state], Double(count)) }
            apnsUp.set(l, pool.unreachableForMs == nil ? 1 : 0)
            apnsUnreachableSeconds.set(l, Double(pool.unreachableForMs ?? 0) / 1000)
        }
        for (credential, renewals) in snapshot.jwtRenewals { jwtRenewals.set([credential], total: Double(renewals)) }

        redisUp.set([], snapshot.redisReachable ? 1 : 0)
        for link in snapshot.redisLinks {
            redisConnectionReady.set([link.name], link.ready ? 1 : 0)
            redisConnects.set([link.name], total: Double(link.stats.ready))
            redisConnectFailures.set([link.name], total: Double(link.stats.connectFailures))
            redisDisconnects.set([link.name], total: Double(link.stats.lost))
            redisWatchdogFirings.set([link.name], total: Double(link.stats.watchdogFirings))
            for (refusal, count) in link.writeRefusals { redisWriteRefusals.set([link.name, refusal.code], total: Double(count)) }
        }
        // Stale figures are worse than none: an app whose backlog could not be read lately
        // has no series until it can.
        backlogEntries.removeAll()
        pendingEntries.removeAll()
        for (app, backlog) in snapshot.backlog {
            backlogEntries.set([app], Double(backlog.length))
            pendingEntries.set([app], Double(backlog.pending))
        }
        deadLettersToTrim.removeAll()
        for (app, count) in snapshot.deadLettersToTrim { deadLettersToTrim.set([app], Double(count)) }
        for (app, trimmed) in snapshot.deadLettersTrimmed {
            deadLettersTrimmed.set([app, "age"], total: Double(trimmed.byAge))
            deadLettersTrimmed.set([app, "count"], total: Double(trimmed.byCount))
            deadLettersTrimmed.set([app, "size"], total: Double(trimmed.bySize))
        }
        for (app, stats) in snapshot.webhooks {
            for (status, count) in stats.sent { webhooksSent.set([app, status], total: Double(count)) }
            webhookFailures.set([app, "retried"], total: Double(stats.retried))
            webhookFailures.set([app, "dead_lettered"], total: Double(stats.deadLettered))
        }
        for (kind, count) in snapshot.redisRefusedNodes { redisRefusedNodes.set([kind], total: Double(count)) }
        redisEvictingPolicy.removeAll()
        for (node, evicts) in snapshot.redisEvictingNodes { redisEvictingPolicy.set([node], evicts ? 1 : 0) }
        for (node, count) in snapshot.redisEvictedKeys { redisEvictedKeys.set([node], total: Double(count)) }
        if let p = snapshot.process {
            processCPUSeconds.set(total: p.cpuSeconds)
            processResidentMemory.set([], p.residentBytes)
            processVirtualMemory.set([], p.virtualBytes)
            processStartTime.set([], p.startTimeSeconds)
            if let open = p.openFDs { processOpenFDs.set([], open) }
            if let max = p.maxFDs { processMaxFDs.set([], max) }
        }
        droppedSeries.set(total: Double(registry.droppedSeries))
    }

    /// The registry as Prometheus text.
    package func render() -> String {
        flushUsualCounts()
        return registry.render()
    }
}

/// The pulled figures of one scrape, gathered from the live objects by `GatewayAdmin` (or
/// built by hand in tests).
package struct GatewaySnapshot {
    /// One APNs pool (credential × environment).
    package struct Pool {
        package var credential: String
        package var environment: String
        package var stats: ApnsClientStats
        package var inFlight: Int
        package var queued: Int
        /// Connection counts by state name (`active`, …).
        package var connectionsByState: [String: Int]
        /// How long the pool has been unable to connect (ms); nil while it can.
        package var unreachableForMs: Int64?

        package init(credential: String, environment: String, stats: ApnsClientStats, inFlight: Int, queued: Int,
                    connectionsByState: [String: Int]) {
            self.credential = credential
            self.environment = environment
            self.stats = stats
            self.inFlight = inFlight
            self.queued = queued
            self.connectionsByState = connectionsByState
        }
    }

    /// One Redis connection of the process (`read`: the blocking reads; `write`: the rest).
    package struct RedisLink {
        package var name: String
        package var ready: Bool
        package var stats: RedisConnection.Stats
        /// Refused writes on the connection, by why (`RedisConnection.writeRefusals`).
        package var writeRefusals: [RedisError.WriteRefusal: Int]

        package init(name: String, ready: Bool, stats: RedisConnection.Stats, writeRefusals: [RedisError.WriteRefusal: Int] = [:]) {
            self.name = name
            self.ready = ready
            self.stats = stats
            self.writeRefusals = writeRefusals
        }
    }

    /// The router's counters; nil when this process runs no router.
    package var router: RouterRole.Stats?
    package var callsInFlight = 0
    /// App id → its calls being routed by this process (`RouterRole.inFlightByApp`).
    package var callsInFlightByApp: [String: Int] = [:]
    /// App id → seconds its events waited for its rate (`RouterRole.throttledSecondsByApp`).
    package var throttledSecondsByApp: [String: Double] = [:]
    /// Every configured app id.
    package var apps: [String] = []
    /// App id → why APNs refused it (`RouterRole.unhealthyApps`).
    package var unhealthyApps: [String: String] = [:]
    /// The apps an operator paused, as the router last read it (`RouterRole.pausedApps`).
    package var pausedApps: Set<String> = []
    /// App id → for how long its pushes have been withheld and when the next probe goes, ms
    /// (`RouterRole.withheldApps`).
    package var withheldApps: [String: (forMs: Int64, nextProbeInMs: Int64)] = [:]
    /// The apps with ring receipts on.
    package var appsWithReceipts: [String] = []
    /// App id → its calls in a row without any ring receipt, for apps whose receipts are
    /// missing (`RouterRole.appsMissingReceipts`).
    package var appsMissingReceipts: [String: Int64] = [:]

    /// How the operators' console says why APNs refuses an app, and whether its pushes are withheld.
    package func refusal(of app: String) -> String? {
        guard let reason = unhealthyApps[app] else { return nil }
        guard let withheld = withheldApps[app] else { return reason }
        return reason + " — pushes withheld for \(withheld.forMs / 1000) s, next probe in \(withheld.nextProbeInMs / 1000) s"
    }
    package var pools: [Pool] = []
    /// Credential name → `ProviderTokenSource.renewals` (token credentials only).
    package var jwtRenewals: [String: Int] = [:]
    package var redisLinks: [RedisLink] = []
    /// Whether Redis answered a PING lately (`RedisProbe`).
    package var redisReachable = false
    /// App id → its stream's length and pending count, for apps read lately.
    package var backlog: [String: Backlog] = [:]
    /// `RedisNodeRefusal.Kind` → nodes refused as untrusted, over every cluster client and the
    /// sentinels of the process.
    package var redisRefusedNodes: [String: Int] = [:]
    /// Node → whether its maxmemory-policy evicts (`RedisEvictionCheck`), for the nodes read lately.
    package var redisEvictingNodes: [String: Bool] = [:]
    /// Node → keys it evicted while this process watched it.
    package var redisEvictedKeys: [String: Int64] = [:]
    /// The process's CPU, memory and descriptors (`ProcessFigures.read()`); nil: not read.
    package var process: ProcessFigures?
    /// App id → dead letters the next retention run will remove (deadletters role only).
    var deadLettersToTrim: [String: Int64] = [:]
    /// App id → dead letters removed by retention so far, by age, by count and by size.
    var deadLettersTrimmed: [String: (byAge: Int64, byCount: Int64, bySize: Int64)] = [:]
    /// App id → the webhooks role's figures (webhooks role only).
    var webhooks: [String: WebhooksRole.Stats] = [:]

    package init() {}
}
