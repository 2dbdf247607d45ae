import EventLoop
import Foundation
import TestSupport
import XCTest

/// `examples/producers/python/producer.py` — a real producer in another language, using the
/// `redis` package — against a live router: it sends a call and reads its result back.
final class ProducerExampleTests: XCTestCase {
    func testPythonProducerGetsItsResult() throws {
        let h = try RouterHarness()
        defer { h.close() }
        let script = packageRoot + "/examples/producers/python/producer.py"
        let producer = try ChildProcess("python3", [script, "--redis-url", h.redis.url, "--app", "acme",
                                                    "--voip-token", "a0a0a0a0", "--alert-token", "b0b0b0b0",
                                                    "--timeout", "10"])
        let tick = LoopTimer(loop: h.loop) {}
        defer { tick.close() }
        h.loop.run(until: {
            if !producer.isRunning { return true }
            if !tick.isScheduled { tick.schedule(afterMs: 20) }
            return false
        })
        let out = String(decoding: producer.stdoutPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: producer.stderrPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(producer.process.terminationStatus, 0, "the producer got a result: \(err)")
        let result = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any]
        XCTAssertEqual(result?["outcome"] as? String, "delivered_voip", out)
        XCTAssertEqual(h.requests("a0a0a0a0").count, 1, "the simulator got the VoIP push")
    }
}
