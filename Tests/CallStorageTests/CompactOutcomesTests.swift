import XCTest
@testable import CallStorage

/// The compact idempotency record's table of codes and its buckets' arithmetic (the record in
/// a real redis-server: CallStoreTests, RetentionWindowsTests).
final class CompactOutcomesTests: XCTestCase {
    /// The one table of codes, both ways: every outcome's code decodes to it, codes are one
    /// byte and distinct, and a code not in the table is an error.
    func testTheOutcomeCodesMapBothWaysAndAnUnknownCodeIsAnError() {
        for (name, code) in CompactOutcome.codes {
            XCTAssertEqual(CompactOutcome.code(of: name), code)
            XCTAssertEqual(try CompactOutcome.decode(code), name)
            XCTAssertEqual(code.utf8.count, 1)
        }
        XCTAssertEqual(Set(CompactOutcome.codes.map(\.value)).count, CompactOutcome.codes.count, "codes are distinct")
        XCTAssertThrowsError(try CompactOutcome.decode("z")) { XCTAssertEqual($0 as? CompactOutcome.UnknownCode, .init(code: "z")) }
        XCTAssertEqual(CompactOutcome.code(ofResultJSON: #"{"outcome":"delivered_voip","id":"x"}"#), "v")
        XCTAssertNil(CompactOutcome.code(ofResultJSON: #"{"outcome":"duplicate","id":"x"}"#), "a duplicate is never stored")
        XCTAssertNil(CompactOutcome.code(ofResultJSON: #"{"outcome":"dead_lettered","id":"x","reason":"invalid_event: id: missing"}"#),
                     "an invalid event's result claims nothing")
        XCTAssertEqual(OutcomeBuckets(windowSeconds: 2).quarterSeconds, 1)
        XCTAssertEqual(OutcomeBuckets(windowSeconds: 86_400).live(atUnixSeconds: 86_400 * 3), [12, 11, 10, 9, 8])
    }
}
