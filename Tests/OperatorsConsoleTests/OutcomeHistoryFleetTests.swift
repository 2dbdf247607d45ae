import CallStorage
@testable import OperatorsConsole
import XCTest

/// What a gateway adds to the fleet's counts (`OutcomeHistory.unflushed`, `flushed`): each count
/// once, what a failed add did not take again at the next, nothing of a minute the ring reused.
final class OutcomeHistoryFleetTests: XCTestCase {
    func testEachCountIsAddedOnceAndWhatWasNotTakenComesAgain() {
        var history = OutcomeHistory()
        let t0: Int64 = 1_000 * 60_000
        for _ in 0..<3 { history.record(app: "acme", outcome: "delivered_voip", cause: nil, latencyMs: 5, nowMs: t0) }
        history.record(app: "beta", outcome: "expired", cause: nil, latencyMs: nil, nowMs: t0 + 60_000)
        let first = history.unflushed()
        let fiveMs = OutcomeHistory.bucket(latencyMs: 5)
        XCTAssertEqual(first, [FleetMinuteCounts(minute: 1_000, app: "acme", outcomes: ["delivered_voip": 3], latency: [fiveMs: 3]),
                               FleetMinuteCounts(minute: 1_001, app: "beta", outcomes: ["expired": 1])])
        XCTAssertEqual(history.unflushed(), first, "not flushed (the add failed): the same counts again")
        history.flushed(first)
        XCTAssertEqual(history.unflushed(), [], "flushed: nothing left")
        history.record(app: "acme", outcome: "delivered_voip", cause: nil, latencyMs: 5, nowMs: t0 + 30_000)
        XCTAssertEqual(history.unflushed(), [FleetMinuteCounts(minute: 1_000, app: "acme", outcomes: ["delivered_voip": 1], latency: [fiveMs: 1])],
                       "a call counted after the flush: only it")
        let late = history.unflushed()
        history.record(app: "acme", outcome: "cancelled", cause: nil, latencyMs: nil, nowMs: t0 + Int64(OutcomeHistory.minutes) * 60_000)
        history.flushed(late)
        XCTAssertEqual(history.unflushed().filter { $0.app == "acme" },
                       [FleetMinuteCounts(minute: 1_000 + Int64(OutcomeHistory.minutes), app: "acme", outcomes: ["cancelled": 1])],
                       "a flush of a minute the ring reused since marks nothing of the new minute")
        XCTAssertEqual(history.window(app: "acme", minutes: 60, nowMs: t0 + Int64(OutcomeHistory.minutes) * 60_000).outcomes,
                       ["cancelled": 1], "the overview's own figures are untouched by flushing")
    }
}
