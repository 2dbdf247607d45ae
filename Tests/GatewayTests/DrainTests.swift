import Foundation
import TestSupport
import XCTest

/// SIGTERM under load: the gateway stops reading, lets calls in flight finish, records their
/// outcomes and exits 0; what it had not read stays in Redis for the next process. No event
/// is lost and none is recorded twice.
final class DrainTests: XCTestCase {
    func testSigtermUnderLoadLosesNoEvent() throws {
        let total = 5_000
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let pki = try SimTestServer.sharedPKI()
        let dir = makeTemporaryDirectory("pushgw-drain")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pushgw = packageRoot + "/.build/debug/pushgw"
        let simPort = freeLoopbackPort()
        try """
            { "cert_file": "\(pki.serverCert)", "key_file": "\(pki.serverKey)", "token_keys": { "KEY1234567": "\(pki.jwtPublicKey)" },
              "team_id": "TEAM123456", "default_scenario": "slow:300" }
            """.write(toFile: dir + "/sim.json", atomically: true, encoding: .utf8)
        let sim = try ChildProcess(pushgw, ["simulator", "--config", dir + "/sim.json", "--port", String(simPort)], captureOutput: false)
        defer { sim.stop() }
        try waitForPort(simPort)
        try """
            { "redis": { "url": "\(redis.url)" }, "admin": { "listen": "127.0.0.1:\(freeLoopbackPort())" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simPort)" }, "sandbox": { "endpoint": "127.0.0.1:\(simPort)" },
                        "ca_file": "\(pki.caCert)" },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production",
                                  "ring_timeout_s": 120 } } }
            """.write(toFile: dir + "/gw.json", atomically: true, encoding: .utf8)
        let fill = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(redis.port)); p = r.pipeline(transaction=False)
            for i in range(\(total)):
                p.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": f"drain-{i}", "type": "incoming_call",
                       "voip_token": f"{i:08x}"})})
            p.execute()
            """])
        XCTAssertEqual(fill.0, 0, fill.2)
        func results() -> Int {
            Int((try? redis.cli(["XLEN", "pushgw:{acme}:results"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        }

        let first = try ChildProcess(pushgw, ["run", "--config", dir + "/gw.json", "--consumer", "first", "--log-level", "error"],
                                     captureOutput: false)
        var waited = 0
        while results() < 1 && waited < 1000 { usleep(10_000); waited += 1 }
        first.stop(signal: SIGTERM)
        XCTAssertEqual(first.process.terminationStatus, 0, "SIGTERM drains and exits 0")
        let afterDrain = results()
        XCTAssertLessThan(afterDrain, total, "the drain happened under load")
        let pending = try redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw"]).split(separator: "\n").first.map(String.init)
        XCTAssertEqual(pending, "0", "every call the drained process had read got its outcome before it exited")

        let second = try ChildProcess(pushgw, ["run", "--config", dir + "/gw.json", "--consumer", "second", "--log-level", "error"],
                                      captureOutput: false)
        defer { second.stop() }
        let end = Date().addingTimeInterval(60)
        while results() < total && Date() < end { usleep(50_000) }
        let check = try runCommand("python3", ["-c", """
            import json, collections, redis
            r = redis.Redis(port=\(redis.port), decode_responses=True)
            ids = collections.Counter(json.loads(f["result"])["id"] for _, f in r.xrange("pushgw:{acme}:results"))
            print(len(ids), max(ids.values()), r.xlen("pushgw:{acme}:calls"))
            """])
        XCTAssertEqual(check.1.trimmingCharacters(in: .whitespacesAndNewlines), "\(total) 1 0",
                       "every event has exactly one result and none is left (ids, max per id, calls left)")
    }
}
