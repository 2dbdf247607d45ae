import Foundation
import TestSupport
import XCTest

/// `pushgw run` as an operator starts it: the built binary with a config file, a real
/// redis-server, and its admin endpoint reached over HTTP from outside the process.
final class RunAdminTests: XCTestCase {
    func testPushgwRunServesTheAdminEndpointAndStopsCleanly() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let token = "run-admin-SECRET-\(UUID().uuidString)"
        let tokenFile = world.directory + "/admin-token"
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        let port = freeLoopbackPort()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()],
                                           admin: #""listen": "127.0.0.1:\#(port)", "token_file": "admin-token""#)
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "admin-test", log: log)
        try waitForPort(port)

        XCTAssertEqual(try LoopbackHTTP.blockingRequest("/healthz", port: port).status, 200)
        var ready = try LoopbackHTTP.blockingRequest("/readyz", port: port)
        try waitUntil("/readyz to answer 200 once Redis answers") {
            ready = try LoopbackHTTP.blockingRequest("/readyz", port: port)
            return ready.status == 200
        }
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: port)
        XCTAssertEqual(metrics.status, 200)
        let lines = metrics.body.split(separator: "\n")
        XCTAssertTrue(lines.contains("pushgw_redis_up 1"), metrics.body)
        XCTAssertTrue(lines.contains(#"pushgw_app_unhealthy{app="acme"} 0"#), metrics.body)
        XCTAssertEqual(PrometheusFormatCheck.problems(metrics.body), [])
        XCTAssertEqual(try LoopbackHTTP.blockingRequest("/status", port: port).status, 401)
        let status = try LoopbackHTTP.blockingRequest("/status", port: port, headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(status.status, 200, status.body)

        XCTAssertEqual(gw.stop(signal: SIGTERM), 0, "SIGTERM drains and exits 0 with the endpoint open")
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(logText.contains("\"msg\":\"admin endpoint\""), logText)
        XCTAssertFalse(logText.contains(token), "the token never reaches the log")
        XCTAssertFalse(status.raw.contains(token) || metrics.raw.contains(token), "nor an answer")
    }

    func testReadyzAnswers503WhileASigtermDrains() throws {
        // The push is never answered, so the drain waits its full --drain-ms for it.
        let world = try ProcessWorld(simulator: #""default_scenario": "blackhole""#)
        defer { world.stop() }
        let port = freeLoopbackPort()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()], admin: #""listen": "127.0.0.1:\#(port)""#)
        let gw = try world.gateway(config: config, consumer: "drain-ready", arguments: ["--drain-ms", "3000"])
        try waitForPort(port)
        try waitUntil("/readyz to answer 200 once Redis answers") {
            try LoopbackHTTP.blockingRequest("/readyz", port: port).status == 200
        }
        _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                 #"{"v":1,"id":"held","type":"incoming_call","voip_token":"a0a0"}"#])
        try waitUntil("the call to be in flight") {
            try LoopbackHTTP.blockingRequest("/metrics", port: port).body.split(separator: "\n").contains("pushgw_calls_in_flight 1")
        }

        kill(gw.pid, SIGTERM)
        var draining = HTTPReply.closedWithoutAnswer
        try waitUntil("/readyz to answer 503 during the drain") {
            draining = try LoopbackHTTP.blockingRequest("/readyz", port: port)
            return draining.status == 503
        }
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(draining.body.utf8)) as? [String: Any], draining.body)
        let problems = try XCTUnwrap(body["problems"] as? [[String: Any]], draining.body)
        XCTAssertEqual(problems.map { $0["check"] as? String }, ["draining"], draining.body)
        XCTAssertNil(problems.first?["detail"], "an anonymous probe learns the check, not its detail: \(draining.body)")
        XCTAssertEqual(try LoopbackHTTP.blockingRequest("/healthz", port: port).status, 200, "alive while draining")
        XCTAssertEqual(gw.waitForExit(), 0, "the drain ends and the process exits 0")
    }
}
