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

    /// A drain that lasts longer than the consumer's lease (3 s) keeps the lease: the other
    /// gateway takes over none of the draining one's calls while their pushes are out, so no
    /// phone rings twice. Before, heartbeats stopped when the drain began, the lease lapsed
    /// 3 s later and the other gateway pushed the draining one's calls again.
    func testADrainLongerThanTheLeaseKeepsItsCallsFromBeingTakenOver() throws {
        let total = 3
        // Each push's answer takes 4 s (the simulator holds them back, one after another): the
        // drain outlasts the 3 s lease, and its 60 s timeout lets every call finish.
        let world = try ProcessWorld(simulator: #""default_scenario": "slow:4000""#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""ring_timeout_s": 60"#)])
        let firstLog = world.directory + "/draining.log"
        let first = try world.gateway(config: config, consumer: "draining", arguments: ["--drain-ms", "60000"], log: firstLog)
        waitUntil("the first gateway to register") {
            ((try? world.redis.cli(["XINFO", "GROUPS", "pushgw:{acme}:calls"])) ?? "").contains("pushgw")
        }
        for i in 0..<total {
            _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                     #"{"v":1,"id":"long-drain-\#(i)","type":"incoming_call","voip_token":"\#(String(format: "%08x", 0xd000 + i))"}"#])
        }
        func held(by consumer: String) -> Int {
            ((try? world.redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw", "-", "+", "1000", consumer])) ?? "")
                .split(separator: "\n").count / 4
        }
        XCTAssertTrue(waitUntil("the first gateway to hold every call", timeoutMs: 30_000) { held(by: "draining") == total })
        let secondLog = world.directory + "/other.log"
        let second = try world.gateway(config: config, consumer: "other", log: secondLog)
        usleep(500_000)
        let stopped = Date()
        XCTAssertEqual(first.stop(signal: SIGTERM, timeoutMs: 60_000), 0, "the drain lets the slow pushes finish and exits 0")
        let drained = Date().timeIntervalSince(stopped)
        XCTAssertGreaterThan(drained, 3.5, "the drain outlasted the 3 s lease (\(drained) s)")
        XCTAssertTrue(waitUntil("a result for every call", timeoutMs: 60_000) { world.results() >= total })
        XCTAssertEqual(second.stop(), 0)
        var perToken: [String: Int] = [:]
        for request in try world.stopSimulator() {
            if let token = request["token"] as? String { perToken[token, default: 0] += 1 }
        }
        XCTAssertEqual(perToken.count, total, "every call rang")
        XCTAssertEqual(perToken.filter { $0.value > 1 }.count, 0, "no call rang twice: \(perToken.filter { $0.value > 1 })")
        let takeovers = ProcessWorld.logLines(secondLog, message: "took over abandoned entries (of dead consumers, or left pending here after an error)")
        XCTAssertEqual(takeovers.count, 0, "nothing of the draining gateway was taken over: \(takeovers)")
        XCTAssertEqual(world.results(), total, "one result per call")
        if world.results() != total {
            print("pending:\n" + ((try? world.redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw", "-", "+", "100"])) ?? ""))
            print("registry:\n" + ((try? world.redis.cli(["KEYS", "*"])) ?? ""))
            print("retry:\n" + ((try? world.redis.cli(["ZRANGE", "pushgw:{acme}:retry", "0", "3", "WITHSCORES"])) ?? "") + ((try? world.redis.cli(["TIME"])) ?? ""))
            print("retrydata:\n" + ((try? world.redis.cli(["HGETALL", "pushgw:{acme}:retry:data"])) ?? "").prefix(1500))
            print("draining:\n" + ((try? String(contentsOfFile: firstLog, encoding: .utf8)) ?? ""))
            print("other:\n" + ((try? String(contentsOfFile: secondLog, encoding: .utf8)) ?? ""))
        }
    }

    /// A drain cut off by its timeout with pushes still out hands those calls over with its
    /// consumer name: another gateway takes them over at once and they ring within their
    /// deadline (at least once: their answers were not known). Before, closing the APNs
    /// clients failed those pushes after the retirement, and the exiting process scheduled
    /// them as retries whose due index it never wrote: they waited for the 5-minute repair,
    /// past their deadline.
    func testADrainCutOffByItsTimeoutHandsItsCallsOverToRingInTime() throws {
        let total = 3
        let world = try ProcessWorld(simulator: #""default_scenario": "slow:6000""#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""ring_timeout_s": 60"#)])
        let first = try world.gateway(config: config, consumer: "cut-off", arguments: ["--drain-ms", "1000", "--log-level", "error"])
        waitUntil("the first gateway to register") {
            ((try? world.redis.cli(["XINFO", "GROUPS", "pushgw:{acme}:calls"])) ?? "").contains("pushgw")
        }
        for i in 0..<total {
            _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                     #"{"v":1,"id":"cut-off-\#(i)","type":"incoming_call","voip_token":"\#(String(format: "%08x", 0xc000 + i))"}"#])
        }
        XCTAssertTrue(waitUntil("the first gateway to hold every call", timeoutMs: 30_000) {
            ((try? world.redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw", "-", "+", "100", "cut-off"])) ?? "")
                .split(separator: "\n").count / 4 == total
        })
        let takerLog = world.directory + "/taker.log"
        let second = try world.gateway(config: config, consumer: "taker", log: takerLog)
        usleep(500_000)
        XCTAssertEqual(first.stop(signal: SIGTERM), 0, "the drain's timeout ends it, exit 0")
        XCTAssertEqual(world.results(), 0, "the drain was cut off with every push out")
        // Taken over at once and answered 6 s later: well inside the 60 s deadline.
        let allRecorded = waitUntil("a result for every call", timeoutMs: 40_000, failing: false) { world.results() >= total }
        if !allRecorded {
            print("pending:\n" + ((try? world.redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw", "-", "+", "100"])) ?? ""))
            print("consumers:\n" + ((try? world.redis.cli(["ZRANGE", "pushgw:consumers", "0", "-1", "WITHSCORES"])) ?? "") + ((try? world.redis.cli(["KEYS", "*"])) ?? ""))
            print("taker:\n" + ((try? String(contentsOfFile: takerLog, encoding: .utf8)) ?? ""))
        }
        XCTAssertTrue(allRecorded, "every call recorded within 40 s of the drain")
        XCTAssertEqual(second.stop(), 0)
        let outcomes = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            print(sorted(json.loads(f["result"])["outcome"] for _, f in r.xrange("pushgw:{acme}:results")))
            """])
        XCTAssertEqual(outcomes.1.trimmingCharacters(in: .whitespacesAndNewlines), "['delivered_voip', 'delivered_voip', 'delivered_voip']",
                       outcomes.2)
        var perToken: [String: Int] = [:]
        for request in try world.stopSimulator() {
            if let token = request["token"] as? String { perToken[token, default: 0] += 1 }
        }
        XCTAssertEqual(perToken.count, total, "every call rang")
        XCTAssertTrue(perToken.values.allSatisfy { $0 <= 2 }, "at most once more, as their answers were not known: \(perToken)")
    }
}
