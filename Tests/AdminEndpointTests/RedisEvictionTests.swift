import Foundation
import GatewayTestSupport
import TestSupport
import XCTest
@testable import AdminEndpoint

/// A Redis whose `maxmemory-policy` evicts deletes pushgw's idempotency window when full
/// (docs/operations.md, "Redis sizing"): the gateway reads the policy of every node it writes
/// to (`RedisEvictionCheck`, here every 100 ms instead of every minute) and reports it in
/// `/readyz`, `/metrics` and the log until it is fixed, and counts the keys evicted.
final class RedisEvictionTests: XCTestCase {
    private var h: AdminHarness!
    /// The bearer token: the anonymous `/readyz` names failed checks without their details.
    private let token = "eviction-test-admin-\(UUID().uuidString)"

    /// The admin token file of the harness.
    private func tokenFile() throws -> String {
        let path = TestScratch.file("eviction-admin-token")
        try (token + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func readiness() throws -> (status: Int, problems: [[String: Any]]) {
        let reply = try h.get("/readyz", headers: ["Authorization": "Bearer " + token])
        let body = try JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any]
        return (reply.status, body?["problems"] as? [[String: Any]] ?? [])
    }

    private func metric(_ line: String) throws -> Bool {
        try h.get("/metrics").body.split(separator: "\n").contains { $0 == line }
    }

    private func redisNode() -> String { "127.0.0.1:\(h.router.redis.port)" }

    func testAnEvictingPolicyIsReportedUntilItIsFixed() throws {
        h = try AdminHarness(tokenFile: tokenFile(), settings: { $0.evictionCheckEveryMs = 100; $0.metricsMaxAgeMs = 0 })
        let node = redisNode()
        XCTAssertTrue(h.wait("the first reading") { (try? self.metric(#"pushgw_redis_evicting_policy{node="\#(node)"} 0"#)) == true })
        XCTAssertEqual(try readiness().status, 200, "noeviction (Redis' default) is fine")

        _ = try h.router.redis.cli(["CONFIG", "SET", "maxmemory", "64mb", "maxmemory-policy", "allkeys-lru"])
        XCTAssertTrue(h.wait("/readyz to report the policy") {
            ((try? self.readiness().problems) ?? []).contains { ($0["detail"] as? String)?.contains("maxmemory-policy") == true }
        })
        let problems = try readiness().problems
        XCTAssertEqual(problems.map { $0["check"] as? String }, ["redis"])
        let detail = problems.first?["detail"] as? String ?? ""
        XCTAssertTrue(detail.hasPrefix("\(node) has maxmemory-policy allkeys-lru with maxmemory 67108864 bytes"), detail)
        XCTAssertTrue(detail.contains("set maxmemory-policy noeviction"), "the fix: \(detail)")
        XCTAssertTrue(try metric(#"pushgw_redis_evicting_policy{node="\#(node)"} 1"#))
        let errors = h.logLines.all.filter { $0.contains("redis may evict pushgw's keys") }
        XCTAssertEqual(errors.count, 1, "one error when it is found, not one per reading: \(errors)")
        XCTAssertTrue(errors.first?.contains(#""level":"error""#) == true && errors.first?.contains("noeviction") == true,
                      errors.first ?? "")

        _ = try h.router.redis.cli(["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        XCTAssertTrue(h.wait("/readyz to be 200 again") { (try? self.readiness().status) == 200 })
        XCTAssertTrue(try metric(#"pushgw_redis_evicting_policy{node="\#(node)"} 0"#))
        XCTAssertTrue(h.logLines.all.contains { $0.contains("redis no longer evicts keys") })
    }

    func testKeysTheNodeEvictsAreCountedAndLogged() throws {
        h = try AdminHarness(tokenFile: tokenFile(), settings: { $0.evictionCheckEveryMs = 100; $0.metricsMaxAgeMs = 0 })
        let node = redisNode()
        XCTAssertTrue(h.wait("the first reading") { (try? self.metric(#"pushgw_redis_evicted_keys_total{node="\#(node)"} 0"#)) == true })
        let used = try h.router.redis.cli(["INFO", "memory"]).split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("used_memory:") }.flatMap { Int($0.dropFirst("used_memory:".count).trimmingCharacters(in: .whitespaces)) }
        let limit = try XCTUnwrap(used) + 1_000_000
        _ = try h.router.redis.cli(["CONFIG", "SET", "maxmemory", String(limit), "maxmemory-policy", "allkeys-lru"])
        // 3 MB of keys into 1 MB of room.
        let value = String(repeating: "x", count: 1_000)
        let commands = (0..<3_000).map { "SET filler:\($0) \(value)" }.joined(separator: "\n") + "\n"
        let (status, _, err) = try runCommand("redis-cli", ["-s", h.router.redis.unixSocket], stdin: commands)
        XCTAssertEqual(status, 0, err)
        let evicted = Int(try h.router.redis.cli(["INFO", "stats"]).split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("evicted_keys:") }?.dropFirst("evicted_keys:".count).trimmingCharacters(in: .whitespaces) ?? "") ?? 0
        XCTAssertGreaterThan(evicted, 1_000, "Redis evicted")
        // Redis goes on evicting as the router writes (its heartbeat): at least what it said then.
        let series = #"pushgw_redis_evicted_keys_total{node="\#(node)"} "#
        var counted = 0
        XCTAssertTrue(h.wait("the evictions to be counted") {
            let line = (try? self.h.get("/metrics").body.split(separator: "\n").first { $0.hasPrefix(series) }) ?? nil
            counted = line.flatMap { Int($0.dropFirst(series.count)) } ?? 0
            return counted >= evicted
        })
        let logged = h.logLines.all.filter { $0.contains("redis evicted keys") }
        XCTAssertFalse(logged.isEmpty, "the evictions are logged")
        XCTAssertTrue(logged.allSatisfy { $0.contains(#""level":"error""#) && $0.contains("noeviction") }, logged.joined(separator: "\n"))
    }

    /// Through Sentinel the node judged is the primary the sentinels named.
    func testThroughSentinelThePrimaryIsJudged() throws {
        h = try AdminHarness(tokenFile: tokenFile(), redis: .sentinel, settings: { $0.evictionCheckEveryMs = 100 })
        _ = try h.router.redis.cli(["CONFIG", "SET", "maxmemory", "64mb", "maxmemory-policy", "volatile-lru"])
        // Until the first PING the redis check fails too: wait for the policy's own problem.
        var details: [String] = []
        XCTAssertTrue(h.wait("/readyz to report the policy") {
            details = ((try? self.readiness().problems) ?? []).compactMap { $0["detail"] as? String }
            return details.contains { $0.contains("maxmemory-policy") }
        })
        XCTAssertTrue(details.contains { $0.hasPrefix("\(redisNode()) has maxmemory-policy volatile-lru") }, "\(details)")
    }

    /// An ACL without `+info` (the least permissions of docs/operations.md have it): one warning
    /// with the fix, and the check is not a readiness problem.
    func testAUserRefusedINFOIsWarnedOnce() throws {
        h = try AdminHarness(redis: .leastPrivilege, settings: { $0.evictionCheckEveryMs = 100 })
        _ = try h.router.redis.cli(["ACL", "SETUSER", GatewayRedis.aclUser, "-info"])
        XCTAssertTrue(h.wait("the warning") { self.h.logLines.all.contains { $0.contains("eviction is not watched") } })
        h.router.runFor(500)
        let warnings = h.logLines.all.filter { $0.contains("eviction is not watched") }
        XCTAssertEqual(warnings.count, 1, warnings.joined(separator: "\n"))
        XCTAssertTrue(warnings.first?.contains("grant +info") == true, warnings.first ?? "")
        XCTAssertEqual(try readiness().status, 200)
        XCTAssertTrue(try h.router.redis.cli(["ACL", "LOG"]).contains("info"), "refused by Redis, as the test wants")
        _ = try h.router.redis.cli(["ACL", "LOG", "RESET"])   // the harness checks nothing else was refused
    }

    func testTheINFOAnswerIsRead() {
        let info = "# Memory\r\nused_memory:1024\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\nmaxmemory_policy:allkeys-lfu\r\n"
            + "# Stats\r\nevicted_keys:17\r\nexpired_keys:3\r\n"
        let node = RedisEvictionCheck.read(info: info, node: "n:1")
        XCTAssertEqual(node, RedisEvictionCheck.Node(name: "n:1", maxmemory: 104_857_600, policy: "allkeys-lfu", evictedKeys: 17))
        XCTAssertEqual(node?.evicts, true)
        XCTAssertEqual(RedisEvictionCheck.read(info: info.replacingOccurrences(of: "allkeys-lfu", with: "noeviction"), node: "n")?.evicts, false)
        XCTAssertEqual(RedisEvictionCheck.read(info: info.replacingOccurrences(of: "maxmemory:104857600", with: "maxmemory:0"), node: "n")?.evicts,
                       false, "without a limit Redis never evicts")
        XCTAssertNil(RedisEvictionCheck.read(info: "# Memory\r\nused_memory:1\r\n", node: "n"))
    }
}
