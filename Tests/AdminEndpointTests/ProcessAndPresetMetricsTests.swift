import CallStorage
import Routing
import TestSupport
import XCTest
@testable import AdminEndpoint

/// The `process_*` figures parsed from fixed `/proc` text, and the per-app series shown at 0
/// before their first event, which never crowd out series that come with events.
final class ProcessAndPresetMetricsTests: XCTestCase {
    func testProcStatIsReadFromTheLastParenthesisOn() throws {
        // A command name with spaces and parentheses of its own; utime 250, stime 50 ticks,
        // starttime 1000 ticks, vsize 123456789, rss 2000 pages.
        let stat = "4242 (push gw) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 2000 "
            + "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        let figures = try XCTUnwrap(ProcessFigures.parse(stat: stat, bootTimeSeconds: 1_764_000_000, ticksPerSecond: 100,
                                                         pageBytes: 4096))
        XCTAssertEqual(figures.cpuSeconds, 3)
        XCTAssertEqual(figures.startTimeSeconds, 1_764_000_010)
        XCTAssertEqual(figures.virtualBytes, 123_456_789)
        XCTAssertEqual(figures.residentBytes, 2000 * 4096)
        XCTAssertNil(ProcessFigures.parse(stat: "4242 (short) S 1 2", bootTimeSeconds: 0, ticksPerSecond: 100, pageBytes: 4096))
        XCTAssertEqual(ProcessFigures.bootTime(procStat: "cpu  1 2 3\nintr 5\nbtime 1764000000\nprocesses 9\n"), 1_764_000_000)
        XCTAssertNil(ProcessFigures.bootTime(procStat: "cpu 1\n"))
    }

    func testThisProcessIsReadFromProc() throws {
        let figures = try XCTUnwrap(ProcessFigures.read(), "/proc/self is readable on Linux")
        XCTAssertGreaterThan(figures.residentBytes, 0)
        XCTAssertGreaterThan(try XCTUnwrap(figures.openFDs), 2)
        XCTAssertLessThanOrEqual(figures.startTimeSeconds, Date().timeIntervalSince1970 + 1)
        let m = GatewayMetrics()
        var s = GatewaySnapshot()
        s.process = figures
        m.update(s)
        let text = m.render()
        XCTAssertTrue(text.contains("\n# TYPE process_cpu_seconds_total counter\n"), text)
        XCTAssertTrue(text.contains("\nprocess_open_fds \(PrometheusText.format(try XCTUnwrap(figures.openFDs)))\n"), text)
        XCTAssertEqual(PrometheusFormatCheck.problems(text), [])
    }

    func testTokensSuspectedOfTheSilentVoipBanAreCountedAndAnAppMissingReceiptsIsAGauge() {
        let m = GatewayMetrics()
        m.preset(apps: ["acme", "beta"])
        m.voipSuspected(app: "acme", count: 2)
        var s = GatewaySnapshot()
        s.apps = ["acme", "beta"]
        s.appsWithReceipts = ["acme"]
        s.appsMissingReceipts = ["acme": 5]
        m.update(s)
        let text = m.render()
        XCTAssertTrue(text.contains(#"pushgw_voip_suspected_blocked_total{app="acme"} 2"#), text)
        XCTAssertTrue(text.contains(#"pushgw_app_receipts_missing{app="acme"} 1"#), text)
        XCTAssertFalse(text.contains(#"pushgw_app_receipts_missing{app="beta"}"#), "only apps with receipts on have the gauge")
        XCTAssertEqual(PrometheusFormatCheck.problems(text), [])
    }

    func testXaddToRingingIsObservedPerDeviceThatRang() {
        let m = GatewayMetrics()
        var record = OutcomeRecord(outcome: .deliveredVoip, id: "c1", type: .incomingCall, app: "acme", entry: "1764584040000-0",
                                   channel: .voip, latencyMs: 4)
        record.devices = [DeviceRecord(id: "a", outcome: .deliveredVoip, rangAtMs: 1_764_584_040_180),
                          DeviceRecord(id: "b", outcome: .deliveredAlert, cause: .noReceipt)]
        XCTAssertEqual(GatewayMetrics.ringLatenciesMs(record), [180], "the device that rang, from its call's XADD")
        m.callRecorded(app: "acme", record: record)
        let text = m.render()
        XCTAssertTrue(text.contains(#"pushgw_ring_latency_seconds_bucket{app="acme",le="0.1"} 0"#), text)
        XCTAssertTrue(text.contains(#"pushgw_ring_latency_seconds_bucket{app="acme",le="0.25"} 1"#), text)
        XCTAssertTrue(text.contains(#"pushgw_ring_latency_seconds_count{app="acme"} 1"#), text)
        XCTAssertEqual(PrometheusFormatCheck.problems(text), [])
    }

    func testEveryAppsSeriesStartAtZeroAndLeaveTheCapToObservedOnes() {
        let m = GatewayMetrics(registry: MetricsRegistry(maxSeriesPerFamily: 2))
        m.preset(apps: ["acme", "beta"])
        var text = m.render()
        for app in ["acme", "beta"] {
            XCTAssertTrue(text.contains(#"pushgw_ring_receipts_total{app="\#(app)"} 0"#))
            XCTAssertTrue(text.contains(#"pushgw_voip_suspected_blocked_total{app="\#(app)"} 0"#))
            for outcome in CallOutcome.allCases where outcome != .duplicate && outcome != .ringing {
                XCTAssertTrue(text.contains(#"pushgw_events_finished_total{app="\#(app)",outcome="\#(outcome.rawValue)"} 0"#), outcome.rawValue)
            }
            for reason in DeadLetterReason.codes {
                XCTAssertTrue(text.contains(#"pushgw_dead_letters_total{app="\#(app)",reason="\#(reason)"} 0"#), reason)
            }
            for reason in ["Unregistered", "ExpiredToken", "BadDeviceToken", "DeviceTokenNotForTopic", "other"] {
                XCTAssertTrue(text.contains(#"pushgw_tokens_invalidated_total{app="\#(app)",channel="alert",reason="\#(reason)"} 0"#), reason)
            }
        }
        XCTAssertFalse(text.contains(#"outcome="duplicate""#))
        XCTAssertFalse(text.contains(#"outcome="ringing""#), "a receipt is not a finished call")
        // Two observed label sets still fit beside the presets; a third is dropped.
        m.apnsAnswered(app: "acme", channel: .voip, status: 410, reason: "Unregistered", latencySeconds: 0.1)
        m.apnsAnswered(app: "acme", channel: .voip, status: 400, reason: "BadDeviceToken", latencySeconds: 0.1)
        m.apnsAnswered(app: "acme", channel: .voip, status: 500, reason: "InternalServerError", latencySeconds: 0.1)
        m.tokenFeedback(app: "beta", feedback: InvalidToken(token: "aa", channel: .voip, reason: "Unregistered", timestampMs: 1))
        m.tokenFeedback(app: "beta", feedback: InvalidToken(token: "bb", channel: .voip, reason: "environment_mismatch",
                                                            timestampMs: 1, environment: "sandbox"))
        text = m.render()
        XCTAssertTrue(text.contains(#"pushgw_apns_responses_total{app="acme",channel="voip",status="410",reason="Unregistered"} 1"#), text)
        XCTAssertTrue(text.contains(#"pushgw_apns_responses_total{app="acme",channel="voip",status="400",reason="BadDeviceToken"} 1"#), text)
        XCTAssertFalse(text.contains(#"status="500""#), "the cap holds for observed series")
        XCTAssertTrue(text.contains(#"pushgw_tokens_invalidated_total{app="beta",channel="voip",reason="Unregistered"} 1"#), text)
        XCTAssertTrue(text.contains(#"pushgw_tokens_invalidated_total{app="beta",channel="voip",reason="BadDeviceToken"} 0"#),
                      "a token accepted in the other environment is not invalidated")
        XCTAssertTrue(text.contains(#"pushgw_token_feedback_total{app="beta",channel="voip",reason="environment_mismatch"} 1"#), text)
    }
}
