import Foundation
import TestSupport
import XCTest

/// `pushgw run` as an operator starts it: the built binary with a config file, a real
/// redis-server, and its admin endpoint reached over HTTP from outside the process.
final class RunAdminTests: XCTestCase {
    func testPushgwRunServesTheAdminEndpointAndStopsCleanly() throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let pki = try SimTestServer.sharedPKI()
        let dir = makeTemporaryDirectory("pushgw-run-admin")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let token = "run-admin-SECRET-\(UUID().uuidString)"
        try (token + "\n").write(toFile: dir + "/admin-token", atomically: true, encoding: .utf8)
        chmod(dir + "/admin-token", 0o600)
        let port = freeLoopbackPort()
        try """
            { "redis": { "url": "\(redis.url)" },
              "admin": { "listen": "127.0.0.1:\(port)", "token_file": "admin-token" },
              "apns": { "production": { "endpoint": "127.0.0.1:1" }, "sandbox": { "endpoint": "127.0.0.1:1" },
                        "ca_file": "\(pki.caCert)" },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production" } } }
            """.write(toFile: dir + "/gw.json", atomically: true, encoding: .utf8)
        let log = dir + "/gw.log"
        let pushgw = packageRoot + "/.build/debug/pushgw"
        let gw = try ChildProcess("/bin/sh", ["-c", "exec '\(pushgw)' run --config '\(dir)/gw.json' --consumer admin-test > '\(log)' 2>&1"],
                                  captureOutput: false)
        defer { gw.stop(signal: SIGKILL) }
        try waitForPort(port)

        XCTAssertEqual(try LoopbackHTTP.blockingRequest("/healthz", port: port).status, 200)
        var ready = try LoopbackHTTP.blockingRequest("/readyz", port: port)
        let end = Date().addingTimeInterval(10)
        while ready.status != 200 && Date() < end {
            usleep(100_000)
            ready = try LoopbackHTTP.blockingRequest("/readyz", port: port)
        }
        XCTAssertEqual(ready.status, 200, "ready once Redis answers: \(ready.body)")
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: port)
        XCTAssertEqual(metrics.status, 200)
        let lines = metrics.body.split(separator: "\n")
        XCTAssertTrue(lines.contains("pushgw_redis_up 1"), metrics.body)
        XCTAssertTrue(lines.contains(#"pushgw_app_unhealthy{app="acme"} 0"#), metrics.body)
        XCTAssertEqual(PrometheusFormatCheck.problems(metrics.body), [])
        XCTAssertEqual(try LoopbackHTTP.blockingRequest("/status", port: port).status, 401)
        let status = try LoopbackHTTP.blockingRequest("/status", port: port, headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(status.status, 200, status.body)

        gw.stop(signal: SIGTERM)
        XCTAssertEqual(gw.process.terminationStatus, 0, "SIGTERM drains and exits 0 with the endpoint open")
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(logText.contains("\"msg\":\"admin endpoint\""), logText)
        XCTAssertFalse(logText.contains(token), "the token never reaches the log")
        XCTAssertFalse(status.raw.contains(token) || metrics.raw.contains(token), "nor an answer")
    }
}
