import Foundation
import TestSupport
import XCTest

/// SIGTERM under load: the gateway stops reading, lets calls in flight finish, records their
/// outcomes and exits 0; what it had not read stays in Redis for the next process. No event
/// is lost and none is recorded twice.
final class DrainTests: XCTestCase {
    func testSigtermUnderLoadLosesNoEvent() throws {
        let total = 5_000
        let world = try ProcessWorld(simulator: #""default_scenario": "slow:300""#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""ring_timeout_s": 120"#)])
        let fill = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(world.redis.port)); p = r.pipeline(transaction=False)
            for i in range(\(total)):
                p.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": f"drain-{i}", "type": "incoming_call",
                       "voip_token": f"{i:08x}"})})
            p.execute()
            """])
        XCTAssertEqual(fill.0, 0, fill.2)

        let first = try world.gateway(config: config, consumer: "first", arguments: ["--log-level", "error"])
        waitUntil("the first result") { world.results() >= 1 }
        XCTAssertEqual(first.stop(signal: SIGTERM), 0, "SIGTERM drains and exits 0")
        let afterDrain = world.results()
        XCTAssertLessThan(afterDrain, total, "the drain happened under load")
        let pending = try world.redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw"]).split(separator: "\n").first.map(String.init)
        XCTAssertEqual(pending, "0", "every call the drained process had read got its outcome before it exited")

        let second = try world.gateway(config: config, consumer: "second", arguments: ["--log-level", "error"])
        waitUntil("a result for every call", timeoutMs: 120_000) { world.results() >= total }
        XCTAssertEqual(second.stop(), 0)
        let check = try runCommand("python3", ["-c", """
            import json, collections, redis
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            ids = collections.Counter(json.loads(f["result"])["id"] for _, f in r.xrange("pushgw:{acme}:results"))
            print(len(ids), max(ids.values()), r.xlen("pushgw:{acme}:calls"))
            """])
        XCTAssertEqual(check.1.trimmingCharacters(in: .whitespacesAndNewlines), "\(total) 1 0",
                       "every event has exactly one result and none is left (ids, max per id, calls left): \(check.2)")
    }
}
