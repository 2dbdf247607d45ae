import DeadLetters
import Foundation
import GatewayTestSupport
import XCTest
@testable import GatewayConfiguration

/// `apps.APP.dead_letters`: the retention of each app's dead-letter stream.
final class ConfigDeadLettersTests: XCTestCase {
    var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    func testRetentionDefaultsToTenThousandEntriesFourteenDaysAndSixtyFourMegabytes() throws {
        let config = try XCTUnwrap(try fixture.check(ConfigFixture.example).config)
        XCTAssertEqual(config.apps["beta"]?.deadLetters, DeadLetterRetentionPolicy(maxEntries: 10_000, maxAgeSeconds: 14 * 86_400,
                                                                                   maxBytes: 64 << 20))
        XCTAssertEqual(DeadLetterRetentionPolicy.default, config.apps["acme"]?.deadLetters)
    }

    func testRetentionIsReadPerApp() throws {
        var json = setting(ConfigFixture.example, "apps.acme.dead_letters", ["max_entries": 500, "max_age_days": 3, "max_megabytes": 5])
        json = setting(json, "apps.beta.dead_letters", ["max_age_days": 30])
        let report = try fixture.check(json)
        XCTAssertEqual(report.problems.map(\.description), [])
        let config = try XCTUnwrap(report.config)
        XCTAssertEqual(config.apps["acme"]?.deadLetters, DeadLetterRetentionPolicy(maxEntries: 500, maxAgeSeconds: 3 * 86_400,
                                                                                   maxBytes: 5 << 20))
        XCTAssertEqual(config.apps["beta"]?.deadLetters, DeadLetterRetentionPolicy(maxEntries: 10_000, maxAgeSeconds: 30 * 86_400),
                       "an omitted key keeps its default")
    }

    func testBadRetentionValuesAreNamedWithTheirPath() throws {
        let cases: [(Any, String, String)] = [
            (["max_entries": 0], "apps.acme.dead_letters.max_entries", "is not a positive whole number"),
            (["max_age_days": "14"], "apps.acme.dead_letters.max_age_days", "expected a number, found a string"),
            (["max_age_days": 5000], "apps.acme.dead_letters.max_age_days", "over the limit of 3650"),
            (["max_megabytes": 65_537], "apps.acme.dead_letters.max_megabytes", "over the limit of 65536"),
            (["max_megabytes": 0], "apps.acme.dead_letters.max_megabytes", "is not a positive whole number"),
            (["max_megabytes": 1e300], "apps.acme.dead_letters.max_megabytes", "expected a positive whole number"),
            (true, "apps.acme.dead_letters", "expected an object"),
        ]
        for (value, path, text) in cases {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.dead_letters", value))
            XCTAssertNil(report.config, "\(value) makes the config unusable")
            let found = problem(at: path, in: report, severity: .error)
            XCTAssertTrue(found?.problem.contains(text) == true, "\(path): \(found?.problem ?? "none")")
        }
    }

    func testAMisspelledRetentionKeyIsAWarningWithTheNearestName() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.dead_letters", ["max_entrie": 5]))
        XCTAssertNotNil(report.config, "unknown keys are warnings")
        let found = problem(at: "apps.acme.dead_letters.max_entrie", in: report, severity: .warning)
        XCTAssertEqual(found?.fix, "did you mean \"max_entries\"?")
    }
}
