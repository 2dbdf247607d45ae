import EventLoop
import XCTest
@testable import APNs

/// Apple's reason table: one row per string, each classified once.
final class ApnsReasonTests: XCTestCase {
    func testEveryReasonStringAppearsOnceAndRoundTrips() {
        let texts = ApnsReason.table.map(\.text)
        XCTAssertEqual(Set(texts).count, texts.count, "no reason string twice in the table")
        for row in ApnsReason.table {
            let parsed = ApnsReason(text: row.text, status: row.status)
            XCTAssertEqual(parsed, row.reason, "\(row.text) parses to its case")
            XCTAssertEqual(parsed.text, row.text)
            XCTAssertEqual(parsed.status, row.status)
        }
        for newer in ["UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken", "ExpiredToken"] {
            XCTAssertFalse(ApnsReason(text: newer, status: 0).isUnknown, "\(newer) is in the table")
        }
    }

    func testClassificationFollowsDesignTable() {
        let expected: [(String, ReasonClass)] = [
            ("Unregistered", .tokenInvalid), ("ExpiredToken", .tokenInvalid), ("BadDeviceToken", .tokenInvalidHere),
            ("DeviceTokenNotForTopic", .tokenInvalid),
            ("TooManyRequests", .retryable), ("InternalServerError", .retryable), ("ServiceUnavailable", .retryable),
            ("Shutdown", .retryable),
            ("InvalidProviderToken", .credentialOrConfig), ("BadTopic", .credentialOrConfig),
            ("TopicDisallowed", .credentialOrConfig), ("BadCertificate", .credentialOrConfig),
            ("PayloadTooLarge", .requestError), ("BadPriority", .requestError),
        ]
        for (text, kind) in expected {
            XCTAssertEqual(ApnsReason(text: text, status: 0).kind, kind, text)
        }
    }

    func testUnknownReasonsGoByStatus() {
        XCTAssertEqual(ApnsReason(text: "SomethingNew", status: 410).kind, .tokenInvalid)
        XCTAssertEqual(ApnsReason(text: "SomethingNew", status: 403).kind, .credentialOrConfig)
        XCTAssertEqual(ApnsReason(text: "SomethingNew", status: 502).kind, .retryable)
        XCTAssertEqual(ApnsReason(text: "SomethingNew", status: 429).kind, .retryable)
        XCTAssertEqual(ApnsReason(text: "SomethingNew", status: 400).kind, .requestError)
        XCTAssertEqual(ApnsReason(text: "SomethingNew", status: 400).text, "SomethingNew")
    }

    func testErrorBodyParsing() {
        let body = Array(#"{"reason": "Unregistered", "timestamp":1700000000123}"#.utf8)
        XCTAssertEqual(ErrorBody.parse(body).reason, "Unregistered")
        XCTAssertEqual(ErrorBody.parse(body).timestampMs, 1700000000123)
        XCTAssertNil(ErrorBody.parse(Array("not json".utf8)).reason)
    }

    func testReconnectBackoffDoublesToItsCap() {
        let backoff = ReconnectBackoff(baseMs: 100, capMs: 30_000)
        let delays = (0..<10).map { backoff.delayMs(attempt: $0, unit: 1) }
        XCTAssertEqual(delays, [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000])
        XCTAssertEqual(backoff.delayMs(attempt: 2, unit: 0), 200, "jitter stays in the upper half")
        XCTAssertEqual(backoff.delayMs(attempt: 80, unit: 1), 30_000, "no overflow")
    }
}

extension ApnsReason {
    var isUnknown: Bool { if case .unknown = self { return true }; return false }
}
