import Retry
import XCTest

/// The retry mover's timing (`MoverPacing`), as tables: when it looks at the due index next,
/// and how a retry scheduled by this process wakes it.
final class MoverPacingTests: XCTestCase {
    func testTheMoverSleepsUntilTheEarliestDueTimeButNeverLongerThanTheIdlePoll() {
        var p = MoverPacing(idlePollMs: 50, spread: 0.2)
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: nil, more: false, random: 0.5), 50, "idle: the poll interval")
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: nil, more: false, random: 0), 45, "spread: 5 ms less")
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: nil, more: false, random: 0.9999), 54, "or up to 5 ms more")
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: 1_020, more: false, random: 0.5), 20, "until the earliest due")
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: 9_000, more: false, random: 0.5), 50, "capped by the idle poll")
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: 990, more: false, random: 0), 0, "overdue: at once")
        XCTAssertEqual(p.lookDone(now: 1_000, earliestDueMs: 9_000, more: true, random: 0), 0, "a full batch: at once")
        XCTAssertEqual(p.nextLookAtMs, 1_000)
    }

    func testARetryScheduledHereWakesTheMoverEarlierButNeverLater() {
        var p = MoverPacing(idlePollMs: 50, spread: 0)
        _ = p.lookDone(now: 1_000, earliestDueMs: nil, more: false, random: 0)
        XCTAssertEqual(p.retryScheduled(dueAtMs: 1_010, now: 1_002), 8, "earlier than the planned look at 1050")
        XCTAssertNil(p.retryScheduled(dueAtMs: 1_030, now: 1_003), "later than the new plan at 1010")
        p.lookStarted()
        XCTAssertNil(p.retryScheduled(dueAtMs: 1_020, now: 1_011), "during a look: remembered, not scheduled")
        XCTAssertEqual(p.lookDone(now: 1_012, earliestDueMs: nil, more: false, random: 0), 8,
                       "the look may have missed it: the remembered due time counts")
        XCTAssertEqual(p.lookDone(now: 1_013, earliestDueMs: nil, more: false, random: 0), 50, "and only once")
    }
}
