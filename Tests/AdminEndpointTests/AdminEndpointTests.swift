import BuildVersion
import APNsSimulator
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import TestSupport
import XCTest
@testable import AdminEndpoint

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
        XCTAssertTrue(h.wait("readiness once Redis answered a PING") { h.admin.readiness().isReady })
        let ready = try h.get("/readyz")
        XCTAssertEqual(ready.status, 200, ready.body)
        XCTAssertEqual(ready.body, #"{"ready":true}"#)

        h.router.redis.stop()
        XCTAssertTrue(h.wait("unreadiness once PINGs stop succeeding") { !h.admin.readiness().isReady })
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
        XCTAssertTrue(h.wait("readiness again after Redis came back") { h.admin.readiness().isReady })
        XCTAssertEqual(try h.get("/readyz").status, 200)
    }

    /// Redis at `maxmemory` answers PINGs but refuses every write: `/readyz` says so, per node,
    /// and the refused writes are counted; once memory is back it is ready again.
    func testReadyzFollowsRedisRefusingWrites() throws {
        let (path, token) = try tokenFile()
        h = try AdminHarness(tokenFile: path)
        XCTAssertTrue(h.wait("readiness once Redis answered a PING") { h.admin.readiness().isReady })
        _ = try h.router.redis.cli(["CONFIG", "SET", "maxmemory", "1"])
        defer { _ = try? h.router.redis.cli(["CONFIG", "SET", "maxmemory", "0"]) }
        XCTAssertTrue(h.wait("unreadiness once the write probe is refused") { !h.admin.readiness().isReady })
        XCTAssertEqual(try h.get("/readyz").status, 503)
        let down = try h.get("/readyz", headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(down.status, 503)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(down.body.utf8)) as? [String: Any], down.body)
        let problems = try XCTUnwrap(json["problems"] as? [[String: Any]])
        XCTAssertEqual(problems.map { $0["check"] as? String }, ["redis_writes"], down.body)
        XCTAssertEqual(problems.first?["node"] as? String, "primary")
        XCTAssertTrue((problems.first?["detail"] as? String)?.hasPrefix("refuses writes: redis: OOM ") == true, down.body)
        let metrics = lines(try h.get("/metrics"))
        XCTAssertTrue(metrics.contains("pushgw_redis_up 1"), "reachable: it answers")
        XCTAssertTrue(metrics.contains { $0.hasPrefix(#"pushgw_redis_write_refusals_total{connection="write",reason="OOM"} "#) },
                      metrics.filter { $0.contains("refusals") }.joined(separator: "\n"))
        _ = try h.router.redis.cli(["CONFIG", "SET", "maxmemory", "0"])
        XCTAssertTrue(h.wait("readiness again once writes land") { h.admin.readiness().isReady })
        XCTAssertEqual(try h.get("/readyz").status, 200)
    }

    /// One app's refused credential is that app's problem, not the process's: `/readyz` stays
    /// 200 (an orchestrator acting on it would take every other app down too), and the app is
    /// reported per app: the metrics and `/status`.
    func testAnAppRefusedByAPNsIsReportedPerAppAndTheProcessStaysReady() throws {
        let (file, token) = try tokenFile()
        h = try AdminHarness(tokenFile: file)
        XCTAssertTrue(h.wait("readiness once Redis answered a PING") { h.admin.readiness().isReady })
        h.router.call("b1", voip: "a0a0", alert: "b0b0", app: "broken")
        XCTAssertTrue(h.router.waitForRecords(1))
        let reply = try h.get("/readyz")
        XCTAssertEqual(reply.status, 200, reply.body)
        let metrics = lines(try h.get("/metrics"))
        XCTAssertTrue(metrics.contains(#"pushgw_app_unhealthy{app="broken"} 1"#))
        XCTAssertTrue(metrics.contains(#"pushgw_app_unhealthy{app="acme"} 0"#))
        XCTAssertTrue(metrics.contains(#"pushgw_app_pushes_withheld{app="broken"} 0"#), "one refusal does not withhold yet")
        XCTAssertTrue(metrics.contains(#"pushgw_dead_letters_total{app="broken",reason="apns_credentials"} 1"#))
        let status = try h.get("/status", headers: ["Authorization": "Bearer \(token)"])
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any], status.body)
        XCTAssertEqual(json["ready"] as? Bool, true)
        XCTAssertEqual(json["unhealthy_apps"] as? [String: String], ["broken": "apns_credentials: InvalidProviderToken"])
        XCTAssertEqual((json["withheld_apps"] as? [String: Any])?.count, 0)
    }

    /// A paused app (docs/operations.md, "Pausing an app") is reported per app once the router
    /// read the pause: `pushgw_app_paused` 1 for it and 0 for the others, `paused_apps` in
    /// `/status`; the resume sets it back to 0.
    func testAPausedAppIsReportedByItsGaugeAndStatus() throws {
        let (file, token) = try tokenFile()
        h = try AdminHarness(tokenFile: file)
        let paused = h.router.keys("acme").paused
        // As `pushgw apps pause` does: the pause, then a new stamp for the routers.
        h.router.command("HSET", paused, "since_ms", "1", "user", "tester", "reason", "")
        h.router.command("SET", "pushgw:pauses-changed", "1")
        XCTAssertTrue(h.wait("the router read the pause") { h.router.runner.pausedApps == ["acme"] })
        // Scrapes within a second get the same text (`metricsMaxAgeMs`).
        XCTAssertTrue(h.wait("a scrape after the pause") { (try? self.h.get("/metrics").body.contains(#"pushgw_app_paused{app="acme"} 1"#)) == true })
        let metrics = lines(try h.get("/metrics"))
        XCTAssertTrue(metrics.contains(#"pushgw_app_paused{app="acme"} 1"#), metrics.filter { $0.contains("paused") }.joined(separator: "\n"))
        XCTAssertTrue(metrics.contains(#"pushgw_app_paused{app="beta"} 0"#))
        let status = try h.get("/status", headers: ["Authorization": "Bearer \(token)"])
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any], status.body)
        XCTAssertEqual(json["paused_apps"] as? [String], ["acme"])
        h.router.command("DEL", paused)
        h.router.command("SET", "pushgw:pauses-changed", "2")
        XCTAssertTrue(h.wait("the router read the resume") { h.router.runner.pausedApps.isEmpty })
        XCTAssertTrue(h.wait("a scrape after the resume") { (try? self.h.get("/metrics").body.contains(#"pushgw_app_paused{app="acme"} 0"#)) == true })
    }

    /// `/readyz` answers anyone: it names the checks that failed, and only the bearer token
    /// gets their details (Redis errors can name its user, host and port).
    func testAnAnonymousReadyzNamesTheFailedChecksButNotTheirDetails() throws {
        let (path, token) = try tokenFile()
        h = try AdminHarness(tokenFile: path)
        XCTAssertTrue(h.wait("readiness once Redis answered a PING") { h.admin.readiness().isReady })
        h.router.redis.stop()
        XCTAssertTrue(h.wait("unreadiness once PINGs fail") { h.admin.readiness().problems.first?.detail.contains("last error") == true })
        let anonymous = try h.get("/readyz")
        XCTAssertEqual(anonymous.status, 503)
        XCTAssertEqual(anonymous.body, #"{"problems":[{"check":"redis"}],"ready":false}"#)
        let wrong = try h.get("/readyz", headers: ["Authorization": "Bearer not-the-token"])
        XCTAssertEqual(wrong.body, anonymous.body, "a wrong token sees what anyone sees")
        let bearer = try h.get("/readyz", headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(bearer.status, 503)
        XCTAssertTrue(bearer.body.contains(#""detail":"no successful PING for "#) && bearer.body.contains("last error"), bearer.body)
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

    /// Bearer checks are rate-limited per address like the console's sign-in: before, the
    /// bearer API took 10,143 guesses a second.
    func testWrongBearerTokensFromOneAddressAreMostlyRefusedUnchecked() throws {
        let (path, token) = try tokenFile()
        h = try AdminHarness(tokenFile: path)
        let replies = try h.whileTurning("1,000 wrong bearer tokens") { port -> [Int] in
            (0..<1_000).map { i in
                (try? LoopbackHTTP.blockingRequest("/status", port: port, headers: ["Authorization": "Bearer guess-\(i)"]))?.status ?? 0
            }
        }
        let checked = replies.filter { $0 == 401 }.count
        XCTAssertEqual(checked + replies.filter { $0 == 429 }.count, 1_000, "\(Set(replies))")
        XCTAssertTrue((4...8).contains(checked), "a handful checked, not 1,000: \(checked)")
        // The flood may have outlasted its last wait on a quiet machine: wrong tokens until one
        // is checked start a fresh wait, inside which the right one comes.
        var fresh = try h.get("/status", headers: ["Authorization": "Bearer fresh-guess"])
        while fresh.status == 429 {
            usleep(50_000)
            fresh = try h.get("/status", headers: ["Authorization": "Bearer fresh-guess"])
        }
        XCTAssertEqual(fresh.status, 401, fresh.raw)
        let refused = try h.get("/status", headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(refused.status, 429, "the right token waits too")
        XCTAssertNotNil(refused.headers["retry-after"].flatMap(Int.init), refused.raw)
        XCTAssertEqual(try h.get("/readyz", headers: ["Authorization": "Bearer " + token]).body, try h.get("/readyz").body,
                       "an unchecked token on /readyz gets what anyone gets")
        XCTAssertEqual(try h.get("/status", headers: ["Authorization": "Bearer " + token], from: "127.0.0.2").status, 200,
                       "another address is not held up")
        XCTAssertEqual(try h.get("/healthz").status, 200, "the open paths need no token and stay open")
        let bursts = h.logLines.all.filter { $0.contains("wrong admin tokens from one address") }
        XCTAssertEqual(bursts.count, 1, "\(bursts)")
        XCTAssertTrue(bursts.first?.contains(#""via":"bearer""#) == true, bursts.first ?? "")
    }

    /// Idle connections without a token cannot keep the probes out: before, 64 of them,
    /// reopened as they closed, left 0 of 5 probes answered in 25 s.
    func testTwoHundredIdleConnectionsReopenedAsTheyCloseLeaveTheProbesAnswering() throws {
        let (path, _) = try tokenFile()
        h = try AdminHarness(tokenFile: path)
        let flood = ConnectionFlood(port: h.port, count: 200)
        defer { flood.stop() }
        h.router.runFor(500)
        let probes = try h.whileTurning("probes under the flood") { port -> [(String, (status: Int, ms: Int)?)] in
            (0..<15).map { i in
                usleep(100_000)
                let path = ["/healthz", "/readyz", "/metrics"][i % 3]
                return (path, ConnectionFlood.probe(path, port: port, limitMs: 1_000))
            }
        }
        XCTAssertEqual(probes.filter { $0.1 == nil }.map(\.0), [], "every probe answered within 1 s")
        XCTAssertEqual(probes.filter { $0.0 == "/healthz" }.compactMap { $0.1?.status }, [200, 200, 200, 200, 200])
        XCTAssertGreaterThan(flood.reopenedCount, 15, "the flood held its 200 by reopening what the endpoint closed")
        print("connection flood: 200 idle connections held, \(flood.reopenedCount) reopened; probe answers in ms: "
              + probes.map { "\($0.0) \($0.1.map { String($0.ms) } ?? "none")" }.joined(separator: ", "))
        h.router.call("under-flood", voip: "a0a0")
        XCTAssertTrue(h.router.waitForRecords(1), "and the router routes")
    }

    /// DNS rebinding: a page of another site, its name made to resolve to 127.0.0.1, sends
    /// its own name in Host. Before, any Host was answered.
    func testOnlyRequestsNamingThisEndpointInHostAreAnswered() throws {
        h = try AdminHarness(publicHosts: ["pushgw.example.com"])
        func reply(host: String?) throws -> HTTPReply {
            let line = host.map { "Host: \($0)\r\n" } ?? ""
            return try LoopbackHTTP.exchange("GET /metrics HTTP/1.1\r\n\(line)Connection: close\r\n\r\n", port: h.port, on: h.loop)
        }
        for allowed in ["127.0.0.1:\(h.port)", "127.0.0.1", "localhost:\(h.port)", "LOCALHOST", "[::1]:\(h.port)", "10.0.0.5:9464",
                        "pushgw.example.com", "PushGW.Example.com.:443"] {
            XCTAssertEqual(try reply(host: allowed).status, 200, allowed)
        }
        for refused in ["evil.example", "evil.example:\(h.port)", "pushgw.example.com.evil.example", "localhost.evil.example",
                        "127.0.0.1:x", "[::1", "[::1]x"] {
            let r = try reply(host: refused)
            XCTAssertEqual(r.status, 421, "\(refused): \(r.raw.prefix(120))")
            XCTAssertFalse(r.body.contains("pushgw_"), "no metrics for \(refused)")
        }
        XCTAssertEqual(try reply(host: nil).status, 400, "a request without Host")
        let twice = try LoopbackHTTP.exchange("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
                                              port: h.port, on: h.loop)
        XCTAssertEqual(twice.status, 400, "two Host headers")
    }

    /// The body's framing is not left to guesswork: before, the first of two conflicting
    /// Content-Lengths was taken and `Transfer-Encoding: Chunked` went through.
    func testAmbiguousBodyFramingIsRefusedBeforeDispatchAndTheConnectionClosed() throws {
        let (path, token) = try tokenFile()
        h = try AdminHarness(tokenFile: path, console: true)
        let body = "token=\(token)&name=x"
        let head = "POST /console/signin HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        let followUp = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        let cases = [
            ("two Content-Lengths", head + "Content-Length: \(body.utf8.count)\r\nContent-Length: 5\r\n\r\n" + body),
            ("a Content-Length that is not a number", head + "Content-Length: +\(body.utf8.count)\r\n\r\n" + body),
            ("Transfer-Encoding: Chunked", head + "Transfer-Encoding: Chunked\r\n\r\n"
                + String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n"),
            ("Transfer-Encoding and Content-Length", head + "Content-Length: \(body.utf8.count)\r\nTransfer-Encoding: chunked\r\n\r\n"
                + String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n"),
        ]
        for (what, request) in cases {
            // A second request follows on the same connection: it must not be answered.
            let reply = try LoopbackHTTP.exchange(request + followUp, port: h.port, on: h.loop)
            XCTAssertEqual(reply.status, 400, "\(what): \(reply.raw.prefix(200))")
            XCTAssertNil(reply.headers["set-cookie"], "\(what): the sign-in never ran")
            XCTAssertEqual(reply.headers["connection"], "close", what)
            XCTAssertFalse(reply.raw.contains("pushgw_"), "\(what): nothing after it on the connection is answered")
        }
        XCTAssertFalse(h.logLines.all.contains { $0.contains("console sign-in") }, "no sign-in was dispatched")
        let plain = try h.get("/console/signin", method: "POST", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: body)
        XCTAssertEqual(plain.status, 303, "a plain Content-Length body still signs in")
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

    func testAWeakTokenClosesTheAdminAPIAsConfigCheckWouldRefuseIt() throws {
        let (path, _) = try tokenFile()
        try "guess\n".write(toFile: path, atomically: true, encoding: .utf8)
        h = try AdminHarness(tokenFile: path)
        XCTAssertEqual(try h.get("/status", headers: ["Authorization": "Bearer guess"]).status, 403, "the weak token opens nothing")
        XCTAssertTrue(h.logLines.all.contains { $0.contains("admin API closed") && $0.contains("shorter than 32 characters") },
                      "\(h.logLines.all)")
        XCTAssertFalse(h.logLines.all.contains { $0.contains("guess") }, "the token is not logged")
    }

    func testAPortInUseIsRetriedWithoutStoppingTheGateway() throws {
        h = try AdminHarness()
        var lines: [String] = []
        var settings = GatewayAdmin.Settings()
        settings.rebindEveryMs = 100
        let second = GatewayAdmin(loop: h.loop, config: AdminConfig(listen: "127.0.0.1:\(h.port)"), apps: h.router.apps,
                                  store: h.router.store, pools: h.router.pools, runner: nil,
                                  log: Log(minimum: .info) { lines.append($0) }, settings: settings)
        second.start()
        defer { second.close() }
        XCTAssertNil(second.port, "the port is taken")
        let refused = lines.filter { $0.contains(#""msg":"admin endpoint cannot listen; retrying""#) }
        XCTAssertEqual(refused.count, 1, "the error is logged once, with its fix: \(lines)")
        XCTAssertTrue(refused.first?.contains("PUSHGW_ADMIN_LISTEN") == true && refused.first?.contains(#""retry_ms":100"#) == true,
                      refused.first ?? "")
        h.router.call("still-routing", voip: "a0a0")
        XCTAssertTrue(h.router.waitForRecords(1), "the router works without its admin endpoint")

        // The port is freed: the next try binds it.
        h.admin.close()
        XCTAssertTrue(h.wait("the second endpoint to bind the freed port") { second.port != nil })
        XCTAssertEqual(second.port, h.port)
        XCTAssertTrue(lines.contains { $0.contains(#""msg":"admin endpoint listening after all""#) }, "\(lines)")
        XCTAssertEqual(lines.filter { $0.contains("cannot listen") }.count, 1, "retries are not logged one by one")
        XCTAssertEqual(try LoopbackHTTP.request("GET", "/healthz", port: h.port, loop: h.loop).status, 200)
        XCTAssertEqual(GatewayAdmin.Settings().rebindEveryMs, 5_000, "the documented retry period")
    }

    // MARK: Limits (docs/operations.md)

    func testRequestHeadersOver8KiBAreRefused() throws {
        h = try AdminHarness()
        let within = try h.get("/healthz", headers: ["X-Pad": String(repeating: "a", count: 7 * 1024)])
        XCTAssertEqual(within.status, 200, "7 KiB of headers are served")
        let over = try h.get("/healthz", headers: ["X-Pad": String(repeating: "a", count: 9 * 1024)])
        XCTAssertTrue([400, 413, 431].contains(over.status), "9 KiB of headers are refused, got \(over.status): \(over.raw.prefix(200))")
        XCTAssertNotEqual(over.body, "ok\n", "the refused request was not served")
        XCTAssertEqual(try h.get("/healthz").status, 200, "the endpoint still serves")
    }

    func testBodiesOver64KiBAreRefused() throws {
        h = try AdminHarness()
        // The open paths answer GET and HEAD only: a POST within the limit reaches the routes (405).
        let within = try h.get("/healthz", method: "POST", body: String(repeating: "b", count: 60 * 1024))
        XCTAssertEqual(within.status, 405, "a 60 KiB body reaches the routes")
        let over = try h.get("/healthz", method: "POST", body: String(repeating: "b", count: 65 * 1024))
        XCTAssertEqual(over.status, 413, "a 65 KiB body is refused before the routes: \(over.raw.prefix(200))")
    }

    func testAConnectionIdlePastTheLimitIsClosed() throws {
        h = try AdminHarness(settings: { $0.idleTimeoutSeconds = 1 })
        // Nothing sent: the server closes the connection (the client would give up after 10 s).
        let silent = try LoopbackHTTP.exchange("", port: h.port, on: h.loop)
        XCTAssertEqual(silent.status, 0, "closed without an answer: \(silent.raw)")
        // Half a request, then silence: closed too (or answered with an error, never held open).
        let half = try LoopbackHTTP.exchange("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", port: h.port, on: h.loop)
        XCTAssertNotEqual(half.status, 200, "a request that never ends is not served: \(half.raw)")
        XCTAssertEqual(try h.get("/healthz").status, 200, "a prompt request is served")
        XCTAssertEqual(GatewayAdmin.Settings().idleTimeoutSeconds, 10, "the documented limit")
    }

    func testAnAddressBeyondLoopbackIsWarnedAbout() throws {
        h = try AdminHarness()
        XCTAssertFalse(h.logLines.all.contains { $0.contains("beyond loopback") }, "127.0.0.1 is loopback: no warning")
        // 192.0.2.1 (TEST-NET-1) is on no interface here: the bind fails, so no socket ever
        // listens beyond loopback, but the start-up check sees the address.
        var lines: [String] = []
        let outside = GatewayAdmin(loop: h.loop, config: AdminConfig(listen: "192.0.2.1:9464"), apps: h.router.apps,
                                   store: h.router.store, pools: h.router.pools, runner: nil,
                                   log: Log(minimum: .info) { lines.append($0) })
        outside.start()
        defer { outside.close() }
        let warning = lines.filter { $0.contains(#""msg":"admin endpoint listens beyond loopback"#) }
        XCTAssertEqual(warning.count, 1, "\(lines)")
        XCTAssertTrue(warning.first?.contains(#""level":"warn""#) == true && warning.first?.contains("192.0.2.1:9464") == true,
                      warning.first ?? "")
    }

    func testStatusReportsEveryDocumentedField() throws {
        let (file, token) = try tokenFile()
        h = try AdminHarness(tokenFile: file)
        XCTAssertTrue(h.wait("readiness once Redis answered a PING") { h.admin.readiness().isReady })
        h.router.call("s1", voip: "a0a0", app: "acme")
        h.router.call("s2", voip: "a0a0", app: "broken")
        XCTAssertTrue(h.router.waitForRecords(2))
        XCTAssertTrue(h.wait("the backlog probe to see acme's empty stream") { h.admin.snapshot().backlog["acme"]?.length == 0 })
        let reply = try h.get("/status", headers: ["Authorization": "Bearer " + token])
        XCTAssertEqual(reply.status, 200, reply.body)
        XCTAssertEqual(reply.headers["content-type"], "application/json")
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any], reply.body)
        XCTAssertEqual(Set(status.keys), ["version", "commit", "apps", "ready", "draining", "redis_reachable", "calls_in_flight",
                                          "unhealthy_apps", "withheld_apps", "receipts_missing_apps", "paused_apps", "pools", "backlog"], reply.body)
        XCTAssertEqual(status["version"] as? String, BuildVersion.version)
        XCTAssertEqual(status["commit"] as? String, BuildVersion.commit)
        XCTAssertEqual(status["apps"] as? [String], ["acme", "beta", "broken", "other"])
        XCTAssertEqual(status["ready"] as? Bool, true, "the broken app is its own problem, not the process's")
        XCTAssertEqual(status["draining"] as? Bool, false)
        XCTAssertEqual(status["redis_reachable"] as? Bool, true)
        XCTAssertEqual(status["calls_in_flight"] as? Int, 0)
        XCTAssertEqual(status["unhealthy_apps"] as? [String: String], ["broken": "apns_credentials: InvalidProviderToken"])
        let pools = try XCTUnwrap(status["pools"] as? [[String: Any]], reply.body)
        XCTAssertEqual(pools.map { "\($0["credential"] ?? "")/\($0["environment"] ?? "")" }, ["good/production", "wrong/production"])
        let good = try XCTUnwrap(pools.first)
        XCTAssertEqual(Set(good.keys), ["credential", "environment", "in_flight", "queued", "connections", "sent", "answered"])
        XCTAssertEqual(good["sent"] as? Int, 1)
        XCTAssertEqual(good["answered"] as? Int, 1)
        XCTAssertEqual(good["in_flight"] as? Int, 0)
        XCTAssertEqual(good["queued"] as? Int, 0)
        XCTAssertEqual((good["connections"] as? [String: Int])?["active"], 1)
        let backlog = try XCTUnwrap(status["backlog"] as? [String: [String: Int]], reply.body)
        XCTAssertEqual(backlog["acme"], ["length": 0, "pending": 0])
    }
}
