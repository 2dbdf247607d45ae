import GatewayConfiguration
import Routing
import TestSupport
import XCTest
@testable import APNs
@testable import AdminEndpoint
@testable import GatewayRoles
@testable import CallStorage
@testable import RedisClient

/// The metrics registry and pushgw's metrics, as text: no sockets.
final class MetricsTests: XCTestCase {
    func testCountersGaugesAndHistogramsRenderAsGoldenText() {
        let r = MetricsRegistry()
        let requests = r.counter("pushgw_test_requests_total", help: "Requests.", labels: ["app", "status"])
        requests.inc(["beta", "410"], by: 3)
        requests.inc(["acme", "200"])
        requests.inc(["acme", "200"])
        let inFlight = r.gauge("pushgw_test_in_flight", help: "In flight.")
        inFlight.set([], 7)
        let latency = r.histogram("pushgw_test_latency_seconds", help: "Latency.", labels: ["channel"], buckets: [0.01, 0.1, 1])
        for v in [0.0078125, 0.0625, 0.5, 3] { latency.observe(["voip"], v) }
        let empty = r.counter("pushgw_test_empty_total", help: "Nothing yet.", labels: ["app"])
        _ = empty
        let plain = r.counter("pushgw_test_plain_total", help: "No labels.")
        _ = plain

        XCTAssertEqual(r.render(), """
            # HELP pushgw_test_requests_total Requests.
            # TYPE pushgw_test_requests_total counter
            pushgw_test_requests_total{app="acme",status="200"} 2
            pushgw_test_requests_total{app="beta",status="410"} 3
            # HELP pushgw_test_in_flight In flight.
            # TYPE pushgw_test_in_flight gauge
            pushgw_test_in_flight 7
            # HELP pushgw_test_latency_seconds Latency.
            # TYPE pushgw_test_latency_seconds histogram
            pushgw_test_latency_seconds_bucket{channel="voip",le="0.01"} 1
            pushgw_test_latency_seconds_bucket{channel="voip",le="0.1"} 2
            pushgw_test_latency_seconds_bucket{channel="voip",le="1"} 3
            pushgw_test_latency_seconds_bucket{channel="voip",le="+Inf"} 4
            pushgw_test_latency_seconds_sum{channel="voip"} 3.5703125
            pushgw_test_latency_seconds_count{channel="voip"} 4
            # HELP pushgw_test_empty_total Nothing yet.
            # TYPE pushgw_test_empty_total counter
            # HELP pushgw_test_plain_total No labels.
            # TYPE pushgw_test_plain_total counter
            pushgw_test_plain_total 0

            """, "families in registration order, series sorted by label values, labelled families empty until used")
        XCTAssertTrue(PrometheusFormatCheck.problems(r.render()).isEmpty, "\(PrometheusFormatCheck.problems(r.render()))")
    }

    func testABucketBoundIsInclusive() {
        let r = MetricsRegistry()
        let h = r.histogram("pushgw_test_seconds", help: "h", buckets: [0.1, 1])
        h.observe([], 0.1)
        h.observe([], 1)
        XCTAssertEqual(h.series()?.counts, [1, 1, 0], "le means less than or equal")
        h.observe([], .nan)
        XCTAssertEqual(h.series()?.count, 2, "NaN is not an observation")
    }

    func testLabelValuesAndHelpAreEscaped() {
        let r = MetricsRegistry()
        let c = r.counter("pushgw_test_total", help: "Back\\slash and\nnewline, \"quotes\" stay.", labels: ["reason"])
        c.inc(["a\"b\\c\nd"])
        XCTAssertEqual(r.render(), """
            # HELP pushgw_test_total Back\\\\slash and\\nnewline, "quotes" stay.
            # TYPE pushgw_test_total counter
            pushgw_test_total{reason="a\\"b\\\\c\\nd"} 1

            """)
        XCTAssertTrue(PrometheusFormatCheck.problems(r.render()).isEmpty)
        XCTAssertNil(PrometheusFormatCheck.referenceParserComplaint(r.render()))
    }

    func testNumbersAreWrittenAsPrometheusReadsThem() {
        XCTAssertEqual(PrometheusText.format(3), "3")
        XCTAssertEqual(PrometheusText.format(0), "0")
        XCTAssertEqual(PrometheusText.format(-2), "-2")
        XCTAssertEqual(PrometheusText.format(0.005), "0.005")
        XCTAssertEqual(PrometheusText.format(2.5), "2.5")
        XCTAssertEqual(PrometheusText.format(1e20), "1e+20")
        XCTAssertEqual(PrometheusText.format(.infinity), "+Inf")
        XCTAssertEqual(PrometheusText.format(-.infinity), "-Inf")
        XCTAssertEqual(PrometheusText.format(.nan), "NaN")
    }

    func testNamesFollowPrometheusRules() {
        XCTAssertTrue(PrometheusText.isValidMetricName("pushgw_apns_requests_total"))
        XCTAssertTrue(PrometheusText.isValidMetricName("ns:rule_1"))
        XCTAssertFalse(PrometheusText.isValidMetricName("1abc"))
        XCTAssertFalse(PrometheusText.isValidMetricName("push-gw"))
        XCTAssertFalse(PrometheusText.isValidMetricName(""))
        XCTAssertTrue(PrometheusText.isValidLabelName("app"))
        XCTAssertFalse(PrometheusText.isValidLabelName("__name__"), "names starting with __ are Prometheus' own")
        XCTAssertFalse(PrometheusText.isValidLabelName("a:b"))
    }

    func testLabelSetsBeyondTheCapAreDroppedAndCounted() {
        let r = MetricsRegistry(maxSeriesPerFamily: 2)
        let c = r.counter("pushgw_test_total", help: "h", labels: ["reason"])
        c.inc(["a"])
        c.inc(["b"])
        c.inc(["c"])
        c.inc(["a"])
        XCTAssertEqual(c.labelSets, [["a"], ["b"]], "a third label set is not kept")
        XCTAssertEqual(c.value(["a"]), 2, "existing label sets still count")
        XCTAssertEqual(r.droppedSeries, 1)
    }

    func testRemoveAllForgetsLabelSetsButKeepsAnUnlabelledSeries() {
        let r = MetricsRegistry()
        let g = r.gauge("pushgw_test", help: "h", labels: ["pool"])
        g.set(["x"], 1)
        g.removeAll()
        XCTAssertEqual(g.labelSets, [])
        let plain = r.gauge("pushgw_plain", help: "h")
        plain.set([], 5)
        plain.removeAll()
        XCTAssertEqual(plain.value(), 0)
    }

    func testTheFormatCheckCatchesMistakes() {
        XCTAssertFalse(PrometheusFormatCheck.problems("x 1\n").isEmpty, "a sample needs a TYPE first")
        XCTAssertFalse(PrometheusFormatCheck.problems("# TYPE x_total counter\nx_total{a=\"b} 1\n").isEmpty, "unterminated label value")
        XCTAssertFalse(PrometheusFormatCheck.problems("""
            # TYPE h histogram
            h_bucket{le="1"} 2
            h_bucket{le="+Inf"} 1
            h_sum 1
            h_count 1

            """).isEmpty, "buckets are cumulative")
        XCTAssertFalse(PrometheusFormatCheck.problems("# TYPE g gauge\ng 1").isEmpty, "the text ends with a newline")
        XCTAssertNotNil(PrometheusFormatCheck.referenceParserComplaint("x{a=\"b} 1\n"), "the reference parser refuses it too")
    }

    // MARK: pushgw's metrics

    func testObservationsAndSnapshotsBecomePushgwSeries() {
        let m = GatewayMetrics()
        m.eventsReceived(app: "acme", claimed: false, count: 2)
        m.eventsReceived(app: "acme", claimed: true, count: 1)
        m.apnsAnswered(app: "acme", channel: .voip, status: 200, reason: nil, latencySeconds: 0.02)
        m.apnsAnswered(app: "acme", channel: .voip, status: 410, reason: "Unregistered", latencySeconds: 0.03)
        m.apnsAnswered(app: "acme", channel: .alert, status: 200, reason: nil, latencySeconds: 0.2)
        m.apnsFailed(app: "acme", channel: .voip, error: .connectionLost("peer reset"), latencySeconds: 1)
        m.fallback(app: "acme", cause: .voipTokenInvalid)
        m.fallback(app: "acme", cause: .deadline)
        m.fallback(app: "acme", cause: .rateLimited)
        m.fallback(app: "acme", cause: .paused)
        m.callRecorded(app: "acme", record: OutcomeRecord(outcome: .deliveredVoip, id: "1", type: .incomingCall, app: "acme",
                                                         channel: .voip, latencyMs: 40))
        m.callRecorded(app: "acme", record: OutcomeRecord(outcome: .deliveredAlert, id: "2", type: .incomingCall, app: "acme",
                                                         channel: .alert, cause: .deadline, latencyMs: 31_000))
        m.callRecorded(app: "acme", record: OutcomeRecord(outcome: .expired, id: "3", type: .incomingCall, app: "acme"))
        m.callRecorded(app: "beta", record: OutcomeRecord(outcome: .deadLettered, id: "4", type: .incomingCall, app: "beta",
                                                         reason: "apns_credentials: InvalidProviderToken"))
        m.callRecorded(app: "acme", record: OutcomeRecord(outcome: .duplicate, firstOutcome: .deliveredVoip, id: "1",
                                                         type: .incomingCall, app: "acme"))
        m.certificateExpiries([CertificateExpiry(name: "old-cert", kind: "credential", notAfterS: 1)])
        m.certificateExpiries([CertificateExpiry(name: "beta-cert", kind: "credential", notAfterS: 1_795_000_000),
                               CertificateExpiry(name: "apns.ca_file", kind: "ca", notAfterS: 1_800_000_000)])
        m.tokenFeedback(app: "acme", feedback: InvalidToken(token: "aa", channel: .voip, reason: "Unregistered", timestampMs: 1))
        m.tokenFeedback(app: "acme", feedback: InvalidToken(token: "bb", channel: .voip, reason: "BadDeviceToken", timestampMs: 1))
        m.tokenFeedback(app: "acme", feedback: InvalidToken(token: "cc", channel: .voip, reason: "Whatever\nnew", timestampMs: 1))
        m.tokenFeedback(app: "acme", feedback: InvalidToken(token: "dd", channel: .alert, reason: "environment_mismatch",
                                                            timestampMs: 1, environment: "sandbox"))

        var s = GatewaySnapshot()
        var router = RouterRole.Stats()
        router.retriesScheduled = 4
        router.retriesFired = 3
        router.invalidEvents = 1
        s.router = router
        s.callsInFlight = 2
        s.apps = ["acme", "beta"]
        s.unhealthyApps = ["beta": "apns_credentials: InvalidProviderToken"]
        s.pausedApps = ["acme"]
        var stats = ApnsClientStats()
        stats.sent = 5
        stats.answered = 4
        stats.resentAfterTokenRenewal = 1
        stats.expiredUnsent = 2
        stats.peakInFlight = 7
        stats.peakAnnouncedStreams = 1000
        s.pools = [GatewaySnapshot.Pool(credential: "acme-key", environment: "production", stats: stats, inFlight: 1, queued: 0,
                                        connectionsByState: ["active": 2])]
        s.jwtRenewals = ["acme-key": 1]
        var redis = RedisConnection.Stats()
        redis.ready = 1
        s.redisLinks = [GatewaySnapshot.RedisLink(name: "write", ready: true, stats: redis,
                                                  writeRefusals: [.outOfMemory: 3, .noReplicas: 1])]
        s.redisReachable = true
        s.backlog = ["acme": Backlog(length: 12, pending: 2)]
        m.update(s)
        let text = m.render()

        for line in [
            #"pushgw_events_received_total{app="acme",source="read"} 2"#,
            #"pushgw_events_received_total{app="acme",source="claimed"} 1"#,
            #"pushgw_events_finished_total{app="acme",outcome="delivered_voip"} 1"#,
            #"pushgw_events_finished_total{app="acme",outcome="expired"} 1"#,
            #"pushgw_duplicate_events_total{app="acme",first_outcome="delivered_voip"} 1"#,
            #"pushgw_dead_letters_total{app="beta",reason="apns_credentials"} 1"#,
            #"pushgw_fallbacks_total{app="acme",cause="voip_token_invalid"} 1"#,
            #"pushgw_certificate_expiry_timestamp_seconds{certificate="beta-cert",kind="credential"} 1795000000"#,
            #"pushgw_certificate_expiry_timestamp_seconds{certificate="apns.ca_file",kind="ca"} 1800000000"#,
            #"pushgw_token_feedback_total{app="acme",channel="voip",reason="Unregistered"} 1"#,
            #"pushgw_token_feedback_total{app="acme",channel="voip",reason="BadDeviceToken"} 1"#,
            #"pushgw_token_feedback_total{app="acme",channel="voip",reason="other"} 1"#,
            #"pushgw_token_feedback_total{app="acme",channel="alert",reason="environment_mismatch"} 1"#,
            #"pushgw_environment_mismatches_total{app="acme",channel="alert",environment="sandbox"} 1"#,
            #"pushgw_fallbacks_total{app="acme",cause="rate_limited"} 1"#,
            #"pushgw_fallbacks_total{app="acme",cause="paused"} 1"#,
            #"pushgw_deadline_misses_total{app="acme"} 4"#,
            #"pushgw_event_latency_seconds_bucket{channel="voip",le="0.05"} 1"#,
            #"pushgw_event_latency_seconds_bucket{channel="alert",le="30"} 0"#,
            #"pushgw_event_latency_seconds_bucket{channel="alert",le="60"} 1"#,
            #"pushgw_apns_responses_total{app="acme",channel="voip",status="200",reason=""} 1"#,
            #"pushgw_apns_responses_total{app="acme",channel="voip",status="410",reason="Unregistered"} 1"#,
            #"pushgw_apns_failures_total{app="acme",channel="voip",error="connection_lost"} 1"#,
            #"pushgw_apns_answer_latency_seconds_count{channel="voip"} 2"#,
            #"pushgw_apns_answer_latency_seconds_bucket{channel="alert",le="0.25"} 1"#,
            "pushgw_calls_in_flight 2",
            #"pushgw_redis_write_refusals_total{connection="write",reason="OOM"} 3"#,
            #"pushgw_redis_write_refusals_total{connection="write",reason="NOREPLICAS"} 1"#,
            "pushgw_retries_scheduled_total 4",
            "pushgw_retries_fired_total 3",
            "pushgw_invalid_events_total 1",
            #"pushgw_app_unhealthy{app="acme"} 0"#,
            #"pushgw_app_unhealthy{app="beta"} 1"#,
            #"pushgw_app_paused{app="acme"} 1"#,
            #"pushgw_app_paused{app="beta"} 0"#,
            #"pushgw_apns_requests_total{credential="acme-key",environment="production"} 5"#,
            #"pushgw_apns_answers_total{credential="acme-key",environment="production"} 4"#,
            #"pushgw_apns_resends_total{credential="acme-key",environment="production",why="provider_token"} 1"#,
            #"pushgw_apns_connections{credential="acme-key",environment="production",state="active"} 2"#,
            #"pushgw_apns_in_flight{credential="acme-key",environment="production"} 1"#,
            #"pushgw_apns_expired_unsent_total{credential="acme-key",environment="production"} 2"#,
            #"pushgw_apns_peak_in_flight{credential="acme-key",environment="production"} 7"#,
            #"pushgw_apns_max_concurrent_streams{credential="acme-key",environment="production"} 1000"#,
            #"pushgw_apns_jwt_renewals_total{credential="acme-key"} 1"#,
            "pushgw_redis_up 1",
            #"pushgw_redis_connection_ready{connection="write"} 1"#,
            #"pushgw_redis_connects_total{connection="write"} 1"#,
            #"pushgw_backlog_entries{app="acme"} 12"#,
            #"pushgw_pending_entries{app="acme"} 2"#,
            "pushgw_metrics_dropped_series_total 0",
        ] {
            XCTAssertTrue(text.split(separator: "\n").contains(Substring(line)), "missing line: \(line)\n\(text)")
        }
        XCTAssertFalse(text.contains("old-cert"), "a reload's set of certificates replaces the one before")
        XCTAssertFalse(text.contains("peer reset"), "free-form error texts never become label values")
        XCTAssertFalse(text.contains(#"outcome="duplicate""#), "a duplicate is not an outcome of its own")
        XCTAssertEqual(PrometheusFormatCheck.problems(text), [])
        XCTAssertNil(PrometheusFormatCheck.referenceParserComplaint(text))

        // A pool that went away and a backlog that could not be read lately disappear.
        m.update(GatewaySnapshot())
        let later = m.render()
        XCTAssertFalse(later.contains("pushgw_apns_requests_total{"), "pulled series follow the snapshot")
        XCTAssertFalse(later.contains("pushgw_backlog_entries{"), "no stale backlog")
        XCTAssertTrue(later.contains(#"pushgw_events_finished_total{app="acme",outcome="delivered_voip"} 1"#),
                      "pushed counters stay")
    }

    /// A call with devices that is no dead letter wrote a dead letter per device that was one:
    /// each counts in `pushgw_dead_letters_total`, by its own reason code; the call's other
    /// devices do not.
    func testADeviceDeadLetteredInACallWithDevicesCountsAsADeadLetter() {
        let m = GatewayMetrics()
        var call = OutcomeRecord(outcome: .deliveredVoip, id: "d-1", type: .incomingCall, app: "acme", channel: .voip)
        call.devices = [DeviceRecord(id: "bob-iphone", outcome: .deliveredVoip, channel: .voip),
                        DeviceRecord(id: "bob-pixel", outcome: .deadLettered, reason: "fcm_credentials: credentials.firebase: refused"),
                        DeviceRecord(id: "bob-ipad", outcome: .deadLettered, reason: "apns_credentials: InvalidProviderToken")]
        m.callRecorded(app: "acme", record: call)
        let text = m.render()
        for line in [#"pushgw_dead_letters_total{app="acme",reason="fcm_credentials"} 1"#,
                     #"pushgw_dead_letters_total{app="acme",reason="apns_credentials"} 1"#,
                     #"pushgw_events_finished_total{app="acme",outcome="delivered_voip"} 1"#] {
            XCTAssertTrue(text.split(separator: "\n").contains(Substring(line)), "missing line: \(line)\n\(text)")
        }
        XCTAssertFalse(text.contains(#"outcome="dead_lettered"} 1"#), "the call itself is no dead letter")
    }

    func testEveryPushgwMetricIsDocumented() throws {
        let doc = try String(contentsOfFile: packageRoot + "/docs/operations.md", encoding: .utf8)
        let text = GatewayMetrics().render()
        let names = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        XCTAssertGreaterThan(names.count, 30)
        for name in names {
            XCTAssertTrue(name.hasPrefix("pushgw_") || name.hasPrefix("process_"), "\(name): every metric is pushgw_… or Prometheus' process_…")
            XCTAssertTrue(doc.contains("`\(name)`"), "docs/operations.md documents \(name)")
        }
    }
}

