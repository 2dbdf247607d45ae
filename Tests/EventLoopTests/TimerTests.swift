import XCTest
import TestSupport
@testable import EventLoop

final class TimerTests: XCTestCase {
    func testTimerFiresOnceAndCanBeRearmed() {
        let loop = EventLoop()
        var fired = 0
        let timer = LoopTimer(loop: loop) { fired += 1 }
        timer.schedule(afterMs: 1)
        loop.run(waitingFor: "the timer to fire") { fired == 1 }
        XCTAssertFalse(timer.isScheduled, "a one-shot timer is disarmed after it fires")
        timer.schedule(afterMs: 1)
        loop.run(waitingFor: "the re-armed timer to fire") { fired == 2 }
        XCTAssertEqual(fired, 2)
        timer.close()
        loop.close()
    }

    func testCancelledTimerDoesNotFire() {
        let loop = EventLoop()
        var fired = false
        var done = false
        let timer = LoopTimer(loop: loop) { fired = true }
        let end = LoopTimer(loop: loop) { done = true }
        timer.schedule(afterMs: 5)
        end.schedule(afterMs: 30)
        timer.cancel()
        loop.run(waitingFor: "the later timer to fire") { done }
        XCTAssertFalse(fired, "a cancelled timer must not run its action")
        timer.close(); end.close(); loop.close()
    }
}
