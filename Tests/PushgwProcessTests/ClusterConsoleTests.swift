import Foundation
import Glibc
import RedisClient
import TestSupport
import XCTest

extension ClusterProcessTests {
    /// The admin endpoint and the operators' console of `pushgw run` on the three primaries of
    /// the class's cluster. On `redis.cluster` the console opens a cluster client of its own,
    /// and the probe behind `/readyz` and the backlog figures sends one command per app: both
    /// are checked over real HTTP on loopback, with one app's dead letter on each primary.
    func testTheConsoleAndTheAdminEndpointOnThreePrimaries() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let apps = try appsOverEveryPrimary(cluster, named: "console-app", perPrimary: 1)
        let world = try ProcessWorld()
        defer { world.stop() }
        let token = "cluster-console-token-\(UUID().uuidString)"
        try (token + "\n").write(toFile: world.directory + "/admin-token", atomically: true, encoding: .utf8)
        chmod(world.directory + "/admin-token", 0o600)
        let port = freeLoopbackPort()
        let (gateway, log) = try world.gateway(on: cluster, apps: Dictionary(uniqueKeysWithValues: apps.map { ($0, ProcessWorld.app()) }),
                                               consumer: "gw-console", roles: nil,
                                               admin: #""listen": "127.0.0.1:\#(port)", "token_file": "admin-token""#)
        func owner(_ app: String) throws -> RedisServer { try cluster.owner(of: HashSlot(key: app)) }
        func length(_ app: String, _ stream: String) -> Int {
            Int(((try? owner(app).cli(["XLEN", "pushgw:{\(app)}:\(stream)"])) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        // An event with a readable id and a refused field: dead-lettered at once, no push.
        for app in apps {
            let event = #"{"v":1,"id":"\#(app)-bad","type":"incoming_call","voip_token":42}"#
            _ = try owner(app).cli(["XADD", "pushgw:{\(app)}:calls", "*", "event", event])
        }
        guard waitUntil("a dead letter in every app", timeoutMs: 30_000, {
            !gateway.isRunning || apps.allSatisfy { length($0, "dead") == 1 && length($0, "results") == 1 }
        }), gateway.isRunning else {
            return XCTFail("the gateway's log:\n" + textSoFar(log).split(separator: "\n").suffix(30).joined(separator: "\n"))
        }

        // The admin endpoint: Redis up, every app's backlog read (one command per app).
        try waitForPort(port)
        try waitUntil("/readyz to answer 200") { try LoopbackHTTP.blockingRequest("/readyz", port: port).status == 200 }
        var status: [String: Any] = [:]
        try waitUntil("/status to show every app's backlog") {
            let reply = try LoopbackHTTP.blockingRequest("/status", port: port, headers: ["Authorization": "Bearer " + token])
            status = (try? JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any]) ?? [:]
            return Set(((status["backlog"] as? [String: Any]) ?? [:]).keys) == Set(apps)
        }
        XCTAssertEqual(status["redis_reachable"] as? Bool, true)
        XCTAssertEqual(status["ready"] as? Bool, true)
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: port)
        XCTAssertEqual(metrics.status, 200)
        let lines = metrics.body.split(separator: "\n")
        XCTAssertTrue(lines.contains("pushgw_redis_up 1"), metrics.body)
        for app in apps {
            XCTAssertTrue(lines.contains { $0.hasPrefix(#"pushgw_backlog_entries{app="\#(app)"} "#) }, "\(app)'s backlog is sampled")
        }
        XCTAssertEqual(PrometheusFormatCheck.problems(metrics.body), [])

        // The console: sign in, list, show, replay one, purge another.
        let signIn = try LoopbackHTTP.blockingRequest("/console/signin", method: "POST", port: port,
                                                      headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                                      body: "token=\(formEscaped(token))&name=cluster-test")
        XCTAssertEqual(signIn.status, 303, signIn.raw)
        let cookie = try XCTUnwrap(signIn.headers["set-cookie"]?.split(separator: ";").first.map(String.init), signIn.raw)
        func page(_ path: String, method: String = "GET", form: [(String, String)] = []) throws -> HTTPReply {
            let body = form.map { "\($0.0)=\(formEscaped($0.1))" }.joined(separator: "&")
            return try LoopbackHTTP.blockingRequest(path, method: method, port: port,
                                                    headers: ["Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"], body: body)
        }
        let overview = try page("/console/overview")
        XCTAssertEqual(overview.status, 200)
        XCTAssertFalse(overview.body.contains("dead-letter figures unavailable"), "every app's dead-letter figures were read")
        let list = try page("/console/dead")
        XCTAssertEqual(list.status, 200, list.body)
        let listed = matches(#"data-id="([^"]+)""#, in: list.body)
        XCTAssertEqual(Set(listed.compactMap { $0.split(separator: "/").first.map(String.init) }), Set(apps),
                       "the dead letters of the apps on every primary")
        let csrf = try XCTUnwrap(matches(#"name="csrf" value="([0-9a-f]+)""#, in: list.body).first)
        func reference(_ app: String) throws -> String { try XCTUnwrap(listed.first { $0.hasPrefix(app + "/") }) }

        let replayed = apps[0], purged = apps[1]
        let shown = try page("/console/dead/" + reference(replayed))
        XCTAssertEqual(shown.status, 200)
        XCTAssertTrue(shown.body.contains(#"<td class="call">\#(replayed)-bad</td>"#), shown.body)
        let preview = try page("/console/dead/preview?action=replay&ids=" + formEscaped(try reference(replayed)))
        XCTAssertTrue(preview.body.contains(#"id="dry-run""#), preview.body)

        func confirm(_ action: String, _ app: String) throws {
            let posted = try page("/console/dead/" + action, method: "POST", form: [("csrf", csrf), ("ids", try reference(app)), ("rate", "20/s")])
            XCTAssertEqual(posted.status, 303, posted.body)
            let job = try XCTUnwrap(posted.headers["location"], posted.raw)
            var state = ""
            try waitUntil("the \(action) job to end") {
                state = matches(#"id="job-state" data-state="([a-z]+)""#, in: try page(job).body).first ?? ""
                return state != "running" && !state.isEmpty
            }
            XCTAssertEqual(state, "done", "\(action) of \(app)'s dead letter")
        }
        try confirm("replay", replayed)
        // Routed again: the event is still refused, so a second result and a dead letter of its own.
        XCTAssertTrue(waitUntil("the replay's result") { length(replayed, "results") == 2 })
        XCTAssertFalse(try owner(replayed).cli(["XRANGE", "pushgw:{\(replayed)}:dead", "-", "+"])
                       .contains(try reference(replayed).split(separator: "/")[1]), "the replayed dead letter is gone")
        XCTAssertTrue(waitUntil("the replay's own dead letter") { length(replayed, "dead") == 1 })
        try confirm("purge", purged)
        XCTAssertEqual(length(purged, "dead"), 0, "the purged dead letter is gone")
        XCTAssertEqual(length(apps[2], "dead"), 1, "the third app's is untouched")
        let audit = try page("/console/audit")
        XCTAssertEqual(audit.status, 200)
        XCTAssertTrue(audit.body.contains("replay") && audit.body.contains("purge"), audit.body)

        // The console's own cluster client reached every primary, and nothing spanned slots.
        for primary in try cluster.primaries() {
            XCTAssertTrue(try primary.cli(["CLIENT", "LIST"]).contains("name=pushgw-console "), "a console connection to :\(primary.port)")
        }
        for node in cluster.nodes {
            XCTAssertFalse(try node.cli(["INFO", "errorstats"]).contains("CROSSSLOT"), ":\(node.port) refused no command as CROSSSLOT")
        }
        XCTAssertFalse(textSoFar(log).contains("CROSSSLOT"))
        XCTAssertEqual(gateway.stop(), 0)
    }

    /// The groups of `pattern`'s first capture in `text`, in order.
    private func matches(_ pattern: String, in text: String) -> [String] {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            Range(match.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    /// `text` as a form value (`application/x-www-form-urlencoded`).
    private func formEscaped(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }
}
