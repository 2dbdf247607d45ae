import XCTest
import TestSupport
@testable import EventLoop

final class TurnBatchTests: XCTestCase {
    func testItemsOfOneTurnAreHandedOverTogetherInOrderOnTheNextIteration() {
        let loop = EventLoop()
        var batches: [[Int]] = []
        let batch = TurnBatch<Int>(loop: loop) { batches.append($0) }
        let producer = LoopTimer(loop: loop) {
            let before = batches.count
            for i in 1...3 { batch.add(i) }
            XCTAssertEqual(batches.count, before, "nothing is handed over within the turn that added it")
            XCTAssertEqual(batch.count, 3)
        }
        producer.schedule(afterMs: 1)
        loop.run(waitingFor: "the first batch") { batches.count == 1 }
        XCTAssertEqual(batches, [[1, 2, 3]])
        XCTAssertEqual(batch.count, 0)

        // A later turn makes a batch of its own.
        producer.schedule(afterMs: 1)
        loop.run(waitingFor: "the second batch") { batches.count == 2 }
        XCTAssertEqual(batches, [[1, 2, 3], [1, 2, 3]])
        producer.close(); batch.close(); loop.close()
    }

    func testFlushNowHandsOverAtOnceAndTheTimerDoesNotRepeatIt() {
        let loop = EventLoop()
        var batches: [[String]] = []
        let batch = TurnBatch<String>(loop: loop) { batches.append($0) }
        batch.add("a")
        batch.flushNow()
        XCTAssertEqual(batches, [["a"]])
        batch.flushNow()
        XCTAssertEqual(batches, [["a"]], "an empty batch is never handed over")
        var done = false
        let end = LoopTimer(loop: loop) { done = true }
        end.schedule(afterMs: 20)
        loop.run(waitingFor: "the 20 ms timer") { done }
        XCTAssertEqual(batches, [["a"]], "the cancelled end-of-turn timer does not hand the items over twice")
        end.close(); batch.close(); loop.close()
    }
}
