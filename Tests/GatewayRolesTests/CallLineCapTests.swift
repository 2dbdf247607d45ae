import XCTest
@testable import GatewayRoles

/// The cap of `call finished` lines (`log.calls_per_second`): the first calls of a second are
/// logged, the others counted; the count is told once, by the summary's timer or before the
/// next second's first line, whichever comes first.
final class CallLineCapTests: XCTestCase {
    func testTheFirstCallsOfASecondAreLoggedAndTheOthersCountedOnce() {
        var cap = CallLineCap(perSecond: 2)
        XCTAssertEqual(cap.admit(nowMs: 10_000), .log(notLoggedBefore: 0), "the first call starts a second")
        XCTAssertEqual(cap.admit(nowMs: 10_100), .log(notLoggedBefore: 0))
        XCTAssertEqual(cap.admit(nowMs: 10_400), .count(armSummaryAfterMs: 600), "the first counted arms the summary at the second's end")
        XCTAssertEqual(cap.admit(nowMs: 10_500), .count(armSummaryAfterMs: nil), "the timer is armed already")
        XCTAssertEqual(cap.takeNotLogged(), 2, "the summary tells 2")
        XCTAssertEqual(cap.takeNotLogged(), 0, "once")
        XCTAssertEqual(cap.admit(nowMs: 10_999), .count(armSummaryAfterMs: 1), "a call before the second ends is still in it")
        // The next second's first call comes before the summary's timer fired: it tells the count.
        XCTAssertEqual(cap.admit(nowMs: 11_000), .log(notLoggedBefore: 1))
        XCTAssertEqual(cap.takeNotLogged(), 0, "told once")
        XCTAssertEqual(cap.admit(nowMs: 20_000), .log(notLoggedBefore: 0), "a quiet spell starts a new second")
    }
}
