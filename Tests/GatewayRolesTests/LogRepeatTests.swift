import Foundation
import XCTest
@testable import GatewayRoles

/// Lines that repeat in a loop are bounded: the same limited message about the same subject is
/// written at most once per interval, and the next line written counts what was dropped.
final class LogRepeatTests: XCTestCase {
    private func fields(_ line: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
    }

    func testALimitedLineRepeatsAtMostOncePerIntervalAndCountsTheDroppedOnes() {
        var now: Int64 = 0
        var lines: [String] = []
        let log = Log(minimum: .info, repeats: Log.Repeats(intervalMs: 10_000, clock: { now }), write: { lines.append($0) })
        for _ in 0..<1_000 {
            log.warn("accepting failed", ["error": "Too many open files"], limited: true)
            now += 5
        }
        XCTAssertEqual(lines.count, 1, "1,000 repeats within 5 s make one line: \(lines.count)")
        XCTAssertNil(fields(lines[0])["suppressed"], "the first line has dropped nothing")
        now = 10_000
        log.warn("accepting failed", ["error": "Too many open files"], limited: true)
        XCTAssertEqual(lines.count, 2, "a repeat after the interval is written")
        XCTAssertEqual(fields(lines[1])["suppressed"] as? Int, 999, "and counts the lines dropped since the last one")
    }

    func testTheSubjectKeepsLinesAboutDifferentAppsOrPoolsApart() {
        var lines: [String] = []
        let log = Log(minimum: .info, repeats: Log.Repeats(clock: { 0 }), write: { lines.append($0) })
        log.error("app marked unhealthy", ["app": "acme", "reason": "x"], limited: true)
        log.error("app marked unhealthy", ["app": "beta", "reason": "x"], limited: true)
        log.error("app marked unhealthy", ["app": "acme", "reason": "y"], limited: true)
        log.warn("APNs unreachable", ["credential": "k", "environment": "production"], limited: true)
        log.warn("APNs unreachable", ["credential": "k", "environment": "sandbox"], limited: true)
        XCTAssertEqual(lines.map { fields($0)["app"] as? String ?? fields($0)["environment"] as? String ?? "" },
                       ["acme", "beta", "production", "sandbox"])
    }

    func testUnlimitedLinesAreAllWritten() {
        var lines: [String] = []
        let log = Log(minimum: .info, repeats: Log.Repeats(clock: { 0 }), write: { lines.append($0) })
        for i in 0..<3 { log.warn("config warning", ["problem": "p\(i)"]) }
        XCTAssertEqual(lines.count, 3, "config warnings and other one-off lines are not limited")
    }
}
