import Foundation
@testable import GatewayConfiguration
import GatewayTestSupport
import XCTest

/// `apps.APP.limits` (config/README.md): absent keys keep the defaults; each bound is named
/// with its key and file, and a burst needs a rate.
final class ConfigLimitsTests: XCTestCase {
    private var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    func testLimitsAreAbsentByDefaultAndReadWhenGiven() throws {
        XCTAssertEqual(try fixture.check(ConfigFixture.example).config?.apps["acme"]?.limits, AppLimits())
        var json = setting(ConfigFixture.example, "apps.acme.limits.max_in_flight", 200)
        json = setting(json, "apps.acme.limits.events_per_second", 50)
        json = setting(json, "apps.acme.limits.burst", 100)
        let report = try fixture.check(json)
        XCTAssertTrue(report.problems.isEmpty, "\(report.problems)")
        XCTAssertEqual(report.config?.apps["acme"]?.limits, AppLimits(maxInFlight: 200, eventsPerSecond: 50, burst: 100))
    }

    func testEachLimitIsBoundedAndNamedWithItsFileAndKey() throws {
        let rows: [(String, Any, String, String)] = [
            ("max_in_flight", 10_001, "over the limit of 10000", "from 1 to 10000"),
            ("max_in_flight", 0, "not a positive whole number", "at least 1"),
            ("events_per_second", 100_001, "over the limit of 100000", "from 1 to 100000"),
            ("events_per_second", "50", "expected a number, found a string", "without quotes"),
            ("burst", 6_000_001, "over the limit of 6000000", "from 1 to 6000000"),
        ]
        for (key, value, fragment, fix) in rows {
            var json = setting(ConfigFixture.example, "apps.acme.limits.events_per_second", 10)
            json = setting(json, "apps.acme.limits.\(key)", value)
            let report = try fixture.check(json)
            XCTAssertNil(report.config, "\(key) \(value) is refused")
            let p = try XCTUnwrap(problem(at: "apps.acme.limits.\(key)", in: report, severity: .error), "\(key) \(value)")
            XCTAssertTrue(p.problem.contains(fragment), p.description)
            XCTAssertTrue(p.description.hasPrefix(p.file + ": apps.acme.limits.\(key): "), "names the file and key: \(p.description)")
            XCTAssertTrue(p.fix.contains(fix), "says what to write: \(p.description)")
        }
    }

    func testABurstWithoutARateAndUnknownKeysAreRefused() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.limits.burst", 100))
        XCTAssertNil(report.config)
        let p = try XCTUnwrap(problem(at: "apps.acme.limits.burst", in: report, severity: .error))
        XCTAssertTrue(p.fix.contains("events_per_second"), p.description)
        let typo = try fixture.check(setting(ConfigFixture.example, "apps.acme.limits.max_inflight", 100))
        XCTAssertTrue(typo.problems.contains { $0.path.hasPrefix("apps.acme.limits") }, "\(typo.problems)")
        let notObject = try fixture.check(setting(ConfigFixture.example, "apps.acme.limits", 5))
        XCTAssertNil(notObject.config)
        XCTAssertNotNil(problem(at: "apps.acme.limits", in: notObject, severity: .error))
    }
}
