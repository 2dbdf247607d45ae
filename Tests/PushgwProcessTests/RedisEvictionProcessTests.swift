import Foundation
import TestSupport
import XCTest

/// `pushgw run` started against a Redis whose `maxmemory-policy` evicts (docs/operations.md,
/// "Redis sizing"): the first reading, at start, logs the error with its fix and makes it a
/// `/readyz` problem and `pushgw_redis_evicting_policy 1` for that node.
final class RedisEvictionProcessTests: XCTestCase {
    func testAGatewayStartedAgainstAnAllkeysLRURedisReportsIt() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        _ = try world.redis.cli(["CONFIG", "SET", "maxmemory", "100mb", "maxmemory-policy", "allkeys-lru"])
        let port = freeLoopbackPort()
        // The bearer token gets /readyz's details; an anonymous probe only the failed checks.
        let token = "eviction-process-admin-\(UUID().uuidString)"
        try (token + "\n").write(toFile: world.directory + "/admin-token", atomically: true, encoding: .utf8)
        chmod(world.directory + "/admin-token", 0o600)
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()],
                                           admin: #""listen": "127.0.0.1:\#(port)", "token_file": "admin-token""#)
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "evicting", log: log)
        try waitForPort(port)
        let node = "127.0.0.1:\(world.redis.port)"
        var ready = HTTPReply.closedWithoutAnswer
        try waitUntil("/readyz to name the evicting policy") {
            ready = try LoopbackHTTP.blockingRequest("/readyz", port: port, headers: ["Authorization": "Bearer " + token])
            // The policy's problem alone: the first PING may still be out when INFO answers.
            return ready.status == 503 && ready.body.contains("maxmemory-policy allkeys-lru") && !ready.body.contains("PING")
        }
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(ready.body.utf8)) as? [String: Any], ready.body)
        let problems = try XCTUnwrap(body["problems"] as? [[String: Any]], ready.body)
        XCTAssertEqual(problems.map { $0["check"] as? String }, ["redis"], "the policy is the only problem: \(ready.body)")
        let detail = problems.first?["detail"] as? String ?? ""
        XCTAssertTrue(detail.hasPrefix("\(node) has maxmemory-policy allkeys-lru with maxmemory 104857600 bytes"), detail)
        XCTAssertTrue(detail.contains("set maxmemory-policy noeviction"), detail)
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: port).body.split(separator: "\n")
        XCTAssertTrue(metrics.contains(#"pushgw_redis_evicting_policy{node="\#(node)"} 1"#), metrics.joined(separator: "\n"))
        XCTAssertTrue(metrics.contains(#"pushgw_redis_evicted_keys_total{node="\#(node)"} 0"#))
        XCTAssertEqual(gw.stop(signal: SIGTERM), 0)
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").filter { $0.contains("redis may evict") }
        XCTAssertEqual(lines.count, 1, "one error line at start")
        XCTAssertTrue(lines.first?.contains(#""level":"error""#) == true, String(lines.first ?? ""))
        XCTAssertTrue(lines.first?.contains(#""policy":"allkeys-lru""#) == true && lines.first?.contains("CONFIG SET maxmemory-policy noeviction") == true,
                      String(lines.first ?? ""))
    }
}
