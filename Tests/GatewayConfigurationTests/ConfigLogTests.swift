import Foundation
@testable import GatewayConfiguration
import GatewayTestSupport
import XCTest

/// `log` (config/README.md): `calls_per_second` defaults to 100, takes 0 (no `call finished`
/// line) up to 100,000, and a value out of range is an error at its path.
final class ConfigLogTests: XCTestCase {
    private var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    func testCallsPerSecondDefaultsTo100AndTakesZero() throws {
        XCTAssertEqual(try fixture.check(ConfigFixture.example).config?.log, LogConfig(callsPerSecond: 100))
        for n in [0, 5, 100_000] {
            let report = try fixture.check(setting(ConfigFixture.example, "log.calls_per_second", n))
            XCTAssertTrue(report.problems.isEmpty, "\(report.problems)")
            XCTAssertEqual(report.config?.log.callsPerSecond, n)
        }
    }

    func testOutOfRangeValuesAndUnknownKeysAreReported() throws {
        for (value, fragment) in [(-1, "not a non-negative whole number"), (100_001, "over the limit of 100000")] as [(Any, String)] {
            let report = try fixture.check(setting(ConfigFixture.example, "log.calls_per_second", value))
            XCTAssertNil(report.config, "\(value) is refused")
            let p = try XCTUnwrap(problem(at: "log.calls_per_second", in: report, severity: .error))
            XCTAssertTrue(p.problem.contains(fragment), p.description)
            XCTAssertTrue(p.fix.contains("from 0 to 100000") || p.fix.contains("at least 0"), p.description)
        }
        let typo = try fixture.check(setting(ConfigFixture.example, "log.calls_per_sec", 5))
        XCTAssertNotNil(typo.config, "an unknown key is a warning")
        XCTAssertTrue(typo.problems.contains { $0.path.hasPrefix("log") }, "\(typo.problems)")
    }
}
