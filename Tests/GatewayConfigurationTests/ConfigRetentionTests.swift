import CallStorage
import Foundation
@testable import GatewayConfiguration
import GatewayTestSupport
import XCTest

/// `apps.APP.retention` (config/README.md): absent keys keep today's windows; each bound and
/// each unit mistake is named with its file, key and fix; a cancellation forgotten before the
/// app's calls stop pushing is warned about.
final class ConfigRetentionTests: XCTestCase {
    private var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    func testTheWindowsDefaultToTodaysAndAreReadPerApp() throws {
        let plain = try fixture.check(ConfigFixture.example).config
        XCTAssertEqual(plain?.apps["acme"]?.retention, RetentionWindows(resultSeconds: 86_400, cancelSeconds: 86_400,
                                                                        invalidTokenSeconds: 2_592_000))
        var json = setting(ConfigFixture.example, "apps.acme.retention.result_window_s", 3_600)
        json = setting(json, "apps.acme.retention.cancel_window_s", 90_000)
        json = setting(json, "apps.acme.retention.invalid_token_ttl_s", 7 * 86_400)
        let report = try fixture.check(json)
        XCTAssertTrue(report.problems.isEmpty, "\(report.problems)")
        XCTAssertEqual(report.config?.apps["acme"]?.retention,
                       RetentionWindows(resultSeconds: 3_600, cancelSeconds: 90_000, invalidTokenSeconds: 604_800))
        XCTAssertEqual(report.config?.retentionWindows["acme"]?.resultSeconds, 3_600, "what the store is given, by app")
        for (id, app) in report.config?.apps ?? [:] where id != "acme" {
            XCTAssertEqual(app.retention, .defaults, "another app keeps the defaults: \(id)")
        }
    }

    /// The compact record is off by default and on where `result_detail_s` is written: then the
    /// result key lives the detail, else the window.
    func testResultDetailTurnsTheCompactRecordOnForItsAppOnly() throws {
        let plain = try fixture.check(ConfigFixture.example).config?.apps["acme"]?.retention
        XCTAssertEqual(plain?.compactRecord, false)
        XCTAssertEqual(plain?.detailSeconds, 86_400, "without it the whole result lives the window")
        XCTAssertEqual(plain?.liveBuckets(atUnixSeconds: 1_764_000_000), [], "and no bucket is read")
        XCTAssertEqual(plain?.recordedCode("v"), "", "or written")
        let json = setting(ConfigFixture.example, "apps.acme.retention.result_detail_s", 900)
        let report = try fixture.check(json)
        let compact = report.config?.apps["acme"]?.retention
        XCTAssertEqual(compact?.compactRecord, true)
        XCTAssertEqual(compact?.detailSeconds, 900)
        XCTAssertEqual(compact?.liveBuckets(atUnixSeconds: 1_764_000_000).count, 5)
        XCTAssertEqual(compact?.recordedCode("v"), "v")
        for (id, app) in report.config?.apps ?? [:] where id != "acme" {
            XCTAssertEqual(app.retention.compactRecord, false, "another app keeps the default: \(id)")
        }
    }

    func testEachWindowIsBoundedAndItsUnitNamedWithItsFileAndKey() throws {
        let rows: [(String, Any, String, String)] = [
            ("result_window_s", 2_592_001, "over the limit of 2592000 s (30 days)", "from 1 to 2592000"),
            ("result_window_s", 0, "not a positive whole number", "at least 1"),
            ("result_window_s", 86_400_000, "reads as milliseconds", "write 86400"),
            ("result_window_s", "24h", "a duration with a unit", "write 86400 without quotes"),
            ("cancel_window_s", "90000", "expected a number, found a string", "without quotes"),
            ("cancel_window_s", -5, "not a positive whole number", "at least 1"),
            ("cancel_window_s", true, "expected a positive whole number, found", "without quotes"),
            ("invalid_token_ttl_s", "30d", "a duration with a unit", "write 2592000 without quotes"),
            ("invalid_token_ttl_s", 31_536_001, "over the limit of 31536000 s (365 days)", "such as 2592000"),
            ("invalid_token_ttl_s", 1.5, "expected a positive whole number", "without quotes"),
        ]
        for (key, value, fragment, fix) in rows {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.retention.\(key)", value))
            XCTAssertNil(report.config, "\(key) \(value) is refused")
            let p = try XCTUnwrap(problem(at: "apps.acme.retention.\(key)", in: report, severity: .error), "\(key) \(value)")
            XCTAssertTrue(p.problem.contains(fragment), "\(key) \(value): \(p.description)")
            XCTAssertTrue(p.description.hasPrefix(p.file + ": apps.acme.retention.\(key): "), "names the file and key: \(p.description)")
            XCTAssertTrue(p.fix.contains(fix), "says what to write: \(p.description)")
        }
    }

    func testAShortIdempotencyWindowAndACancellationForgottenEarlyAreWarnedAbout() throws {
        var json = setting(ConfigFixture.example, "apps.acme.retention.result_window_s", 2)
        json = setting(json, "apps.acme.retention.cancel_window_s", 600)
        let report = try fixture.check(json)
        XCTAssertEqual(report.config?.apps["acme"]?.retention.resultSeconds, 2, "a warning does not refuse the config")
        let short = try XCTUnwrap(problem(at: "apps.acme.retention.result_window_s", in: report, severity: .warning))
        XCTAssertTrue(short.problem.contains("routed again"), short.description)
        let early = try XCTUnwrap(problem(at: "apps.acme.retention.cancel_window_s", in: report, severity: .warning))
        XCTAssertTrue(early.problem.contains("86400 s"), "names how long the app's calls may push: \(early.description)")
        XCTAssertTrue(early.fix.contains("at least 86400"), early.description)
    }

    /// `result_detail_s`: how long result:ID keeps the whole result JSON, 900 s by default, bounded
    /// like the windows, never past the window; shorter than the ring it is warned about.
    func testTheResultDetailIsReadBoundedAndWarnedAboutWhenShorterThanTheRing() throws {
        XCTAssertEqual(try fixture.check(ConfigFixture.example).config?.apps["acme"]?.retention.resultDetailSeconds, 900)
        var json = setting(ConfigFixture.example, "apps.acme.ring_timeout_s", 60)
        json = setting(json, "apps.acme.retention.result_detail_s", 3_600)
        let long = try fixture.check(json)
        XCTAssertEqual(long.config?.apps["acme"]?.retention.resultDetailSeconds, 3_600)
        XCTAssertEqual(long.config?.apps["acme"]?.retention.detailSeconds, 3_600)
        XCTAssertFalse(long.problems.contains { $0.description.contains("retention.result_detail_s") }, "\(long.problems)")

        let short = try fixture.check(setting(json, "apps.acme.retention.result_detail_s", 30))
        XCTAssertEqual(short.config?.apps["acme"]?.retention.resultDetailSeconds, 30, "a warning does not refuse the config")
        let warned = try XCTUnwrap(problem(at: "apps.acme.retention.result_detail_s", in: short, severity: .warning), "\(short.problems)")
        XCTAssertTrue(warned.problem.contains("60 s"), "names the ring timeout: \(warned.description)")
        XCTAssertTrue(warned.fix.contains("at least 60"), warned.description)

        let over = try fixture.check(setting(ConfigFixture.example, "apps.acme.retention.result_detail_s", 2_592_001))
        XCTAssertNil(over.config)
        XCTAssertNotNil(problem(at: "apps.acme.retention.result_detail_s", in: over, severity: .error))
        XCTAssertEqual(RetentionWindows(resultSeconds: 600).detailSeconds, 600, "the detail never outlasts the window")
    }

    func testUnknownKeysAndAWrongTypeAreNamed() throws {
        let typo = try fixture.check(setting(ConfigFixture.example, "apps.acme.retention.result_window", 60))
        let p = try XCTUnwrap(problem(at: "apps.acme.retention.result_window", in: typo, severity: .warning), "\(typo.problems)")
        XCTAssertTrue(p.fix.contains("result_window_s"), p.description)
        let notObject = try fixture.check(setting(ConfigFixture.example, "apps.acme.retention", 86_400))
        XCTAssertNil(notObject.config)
        XCTAssertNotNil(problem(at: "apps.acme.retention", in: notObject, severity: .error))
    }

    func testDurationsWithAUnitReadAsSeconds() {
        XCTAssertEqual(RetentionWindows.secondsOf("24h"), 86_400)
        XCTAssertEqual(RetentionWindows.secondsOf("30d"), 2_592_000)
        XCTAssertEqual(RetentionWindows.secondsOf("5 min"), 300)
        XCTAssertEqual(RetentionWindows.secondsOf("1500ms"), 2, "rounded up to whole seconds")
        XCTAssertNil(RetentionWindows.secondsOf("soon"))
        XCTAssertNil(RetentionWindows.secondsOf("24 hours"), "only the units it names")
        XCTAssertEqual(RetentionWindows.spoken(2_592_000), "30 days")
        XCTAssertEqual(RetentionWindows.spoken(86_400), "24 h")
        XCTAssertEqual(RetentionWindows.spoken(90), "90 s")
    }
}
