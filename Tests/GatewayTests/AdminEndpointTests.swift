import APNsSimulator
import EventLoop
import Foundation
@testable import Gateway
import TestSupport
import XCTest

/// The admin endpoint over real HTTP on loopback, on the router's loop, with a real
/// redis-server and the APNs simulator behind the router (`AdminHarness`).
final class AdminEndpointTests: XCTestCase {
    private var h: AdminHarness!
    private var directory: String?

    override func tearDown() {
        h?.close()
        h = nil
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Writes a token file (mode 600) and returns (path, token).
    private func tokenFile() throws -> (String, String) {
        let dir = makeTemporaryDirectory("pushgw-admin")
        directory = dir
        let token = "admin-SECRET-\(UUID().uuidString)"
        let path = dir + "/admin-token"
        try (token + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return (path, token)
    }

    private func lines(_ reply: HTTPReply) -> [Substring] { reply.body.split(separator: "\n") }

    func testHealthzAnswersOkWhileTheLoopRuns() throws {
        h = try AdminHarness()
        let reply = try h.get("/healthz")
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.body, "ok\n")
        XCTAssertEqual(reply.headers["cache-control"], "no-store")
        XCTAssertEqual(try h.get("/healthz", method: "HEAD").status, 200)
    }

    func testReadyzFollowsRedis() throws {
        h = try AdminHarness()
        XCTAssertTrue(h.wait { h.admin.readiness().isReady }, "ready once Redis answered a PING")
        let ready = try h.get("/readyz")
        XCTAssertEqual(ready.status, 200, ready.body)
        XCTAssertEqual(ready.body, #"{"ready":true}"#)

        h.router.redis.stop()
        XCTAssertTrue(h.wait { !h.admin.readiness().isReady }, "not ready once PINGs stop succeeding")
        let down = try h.get("/readyz")
        XCTAssertEqual(down.status, 503)
        XCTAssertEqual(down.headers["content-type"], "application/json")
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(down.body.utf8)) as? [String: Any], down.body)
        XCTAssertEqual(json["ready"] as? Bool, false)
        let problems = try XCTUnwrap(json["problems"] as? [[String: Any]])
        XCTAssertEqual(problems.map { $0["check"] as? String }, ["redis"], "the body names what is not ready: \(down.body)")
        XCTAssertTrue(lines(try h.get("/metrics")).contains("pushgw_redis_up 0"))
        XCTAssertEqual(try h.get("/healthz").status, 200, "alive even when not ready")

        try h.router.redis.restart()
        XCTAssertTrue(h.wait(timeoutMs: 20_000) { h.admin.readiness().isReady }, "ready again after Redis came back")
        XCTAssertEqual(try h.get("/readyz").status, 200)
    }

    func testAnAppRefusedByAPNsMakesTheProcessNotReady() throws {
        h = try AdminHarness()
        XCTAssertTrue(h.wait { h.admin.readiness().isReady })
        h.router.call("b1", voip: "a0a0", alert: "b0b0", app: "broken")
        XCTAssertTrue(h.router.waitForRecords(1))
        let reply = try h.get("/readyz")
        XCTAssertEqual(reply.status, 503)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any])
        let problems = try XCTUnwrap(json["problems"] as? [[String: Any]])
        XCTAssertEqual(problems.first?["check"] as? String, "app")
        XCTAssertEqual(problems.first?["app"] as? String, "broken")
        XCTAssertEqual(problems.first?["detail"] as? String, "apns_credentials: InvalidProviderToken")
        let metrics = lines(try h.get("/metrics"))
        XCTAssertTrue(metrics.contains(#"pushgw_app_unhealthy{app="broken"} 1"#))
        XCTAssertTrue(metrics.contains(#"pushgw_app_unhealthy{app="acme"} 0"#))
        XCTAssertTrue(metrics.contains(#"pushgw_dead_letters_total{app="broken",reason="apns_credentials"} 1"#))
    }

    func testMetricsAfterKnownTraffic() throws {
        h = try AdminHarness(simulator: { $0.scenarios = ["dead0001": .unregistered] })
        for i in 1...3 { h.router.call("ok-\(i)", voip: "a0a0000\(i)", alert: "b0b0000\(i)") }
        h.router.call("gone-1", voip: "dead0001", alert: "a1e70001")
        h.router.xaddRaw("acme", "{not json")
        XCTAssertTrue(h.router.waitForRecords(5))
        // Let the backlog probe see the stream after the last acknowledgement.
        h.router.runFor(300)

        let reply = try h.get("/metrics")
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8")
        let got = lines(reply)
        for line in [
            #"pushgw_events_finished_total{app="acme",outcome="delivered_voip"} 3"#,
            #"pushgw_events_finished_total{app="acme",outcome="delivered_alert"} 1"#,
            #"pushgw_events_finished_total{app="acme",outcome="dead_lettered"} 1"#,
            #"pushgw_dead_letters_total{app="acme",reason="invalid_event"} 1"#,
            #"pushgw_event_latency_seconds_count{channel="voip"} 3"#,
            #"pushgw_event_latency_seconds_count{channel="alert"} 1"#,
            "pushgw_invalid_events_total 1",
            "pushgw_calls_in_flight 0",
            // 3 VoIP pushes accepted, 1 VoIP push answered 410, 1 alert push accepted: one shared pool.
            #"pushgw_apns_requests_total{credential="good",environment="production"} 5"#,
            #"pushgw_apns_answers_total{credential="good",environment="production"} 5"#,
            #"pushgw_apns_timeouts_total{credential="good",environment="production"} 0"#,
            #"pushgw_apns_in_flight{credential="good",environment="production"} 0"#,
            #"pushgw_apns_queued{credential="good",environment="production"} 0"#,
            #"pushgw_apns_connections{credential="good",environment="production",state="active"} 1"#,
            #"pushgw_apns_connections{credential="good",environment="production",state="connecting"} 0"#,
            // Pushed by the router as it happens.
            #"pushgw_events_received_total{app="acme",source="read"} 5"#,
            #"pushgw_apns_responses_total{app="acme",channel="voip",status="200",reason=""} 3"#,
            #"pushgw_apns_responses_total{app="acme",channel="voip",status="410",reason="Unregistered"} 1"#,
            #"pushgw_apns_responses_total{app="acme",channel="alert",status="200",reason=""} 1"#,
            #"pushgw_apns_answer_latency_seconds_count{channel="voip"} 4"#,
            #"pushgw_apns_answer_latency_seconds_count{channel="alert"} 1"#,
            #"pushgw_fallbacks_total{app="acme",cause="voip_token_invalid"} 1"#,
            #"pushgw_apns_connections_opened_total{credential="good",environment="production"} 1"#,
            #"pushgw_apns_jwt_renewals_total{credential="good"} 0"#,
            #"pushgw_app_unhealthy{app="acme"} 0"#,
            "pushgw_redis_up 1",
            #"pushgw_redis_connection_ready{connection="read"} 1"#,
            #"pushgw_redis_connection_ready{connection="write"} 1"#,
            #"pushgw_backlog_entries{app="acme"} 0"#,
            #"pushgw_pending_entries{app="acme"} 0"#,
        ] {
            XCTAssertTrue(got.contains(Substring(line)), "missing line: \(line)\n\(reply.body)")
        }
        XCTAssertEqual(PrometheusFormatCheck.problems(reply.body), [], "the text is well-formed Prometheus 0.0.4")
        XCTAssertNil(PrometheusFormatCheck.referenceParserComplaint(reply.body), "prometheus_client parses the text")
    }

    func testTheAdminAPIRefusesWithoutOrWithAWrongTokenAndAcceptsTheRightOne() throws {
        let (file, token) = try tokenFile()
        h = try AdminHarness(tokenFile: file)
        var seen: [HTTPReply] = []
        let none = try h.get("/status")
        XCTAssertEqual(none.status, 401)
        XCTAssertEqual(none.headers["www-authenticate"], "Bearer realm=\"pushgw\"")
        let wrong = try h.get("/status", headers: ["Authorization": "Bearer not-" + token])
        XCTAssertEqual(wrong.status, 401)
        let unknownWithoutToken = try h.get("/dead-letters")
        XCTAssertEqual(unknownWithoutToken.status, 401, "unknown paths are 404 only after authentication")
        let right = try h.get("/status", headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(right.status, 200, right.body)
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(right.body.utf8)) as? [String: Any])
        XCTAssertEqual(status["apps"] as? [String], ["acme", "beta", "broken", "other"])
        let unknown = try h.get("/dead-letters", headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(unknown.status, 404)
        seen += [none, wrong, unknownWithoutToken, right, unknown, try h.get("/metrics"), try h.get("/readyz")]

        for reply in seen {
            XCTAssertFalse(reply.raw.contains(token), "the token never appears in a response: \(reply.raw)")
        }
        XCTAssertFalse(h.logLines.all.isEmpty, "the admin endpoint logs its start")
        for line in h.logLines.all {
            XCTAssertFalse(line.contains(token), "the token never appears in the log: \(line)")
        }
    }

    func testWithoutATokenFileEverythingBeyondTheOpenPathsIsForbidden() throws {
        h = try AdminHarness()
        let reply = try h.get("/status", headers: ["Authorization": "Bearer guess"])
        XCTAssertEqual(reply.status, 403)
        XCTAssertTrue(reply.body.contains("no admin.token_file"), reply.body)
        XCTAssertEqual(try h.get("/metrics").status, 200)
    }

    func testAnUnreadableTokenFileClosesTheAdminAPI() throws {
        h = try AdminHarness(tokenFile: "/nonexistent/admin-token")
        XCTAssertEqual(try h.get("/status", headers: ["Authorization": "Bearer x"]).status, 403, "fails closed")
        XCTAssertTrue(h.logLines.all.contains { $0.contains("admin API closed") && $0.contains("nonexistent") },
                      "\(h.logLines.all)")
    }

    func testAPortInUseIsRetriedWithoutStoppingTheGateway() throws {
        h = try AdminHarness()
        let second = GatewayAdmin(loop: h.loop, config: AdminConfig(listen: "127.0.0.1:\(h.port)"), apps: h.router.apps,
                                  store: h.router.store, pools: h.router.pools, runner: nil,
                                  log: Log(minimum: .error) { _ in })
        second.start()
        defer { second.close() }
        XCTAssertNil(second.port, "the port is taken")
        h.router.call("still-routing", voip: "a0a0")
        XCTAssertTrue(h.router.waitForRecords(1), "the router works without its admin endpoint")
    }
}
