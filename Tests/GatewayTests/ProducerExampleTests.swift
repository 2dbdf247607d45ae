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
        h.loop.run(waitingFor: "the producer to exit with its result") { !producer.isRunning }
        let out = producer.output, err = producer.errorOutput
        XCTAssertEqual(producer.stop(), 0, "the producer got a result: \(err)")
        let result = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any]
        XCTAssertEqual(result?["outcome"] as? String, "delivered_voip", out)
        XCTAssertEqual(h.requests("a0a0a0a0").count, 1, "the simulator got the VoIP push")
    }
}
