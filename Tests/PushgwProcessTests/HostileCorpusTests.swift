import Foundation
import Glibc
import TestSupport
import XCTest

/// The hostile-event corpus against a live `pushgw run` (the AddressSanitizer build when
/// `make test` runs it through scripts/test-asan.sh): every hand-made case of the
/// hostile-input study and 2,000 seeded mutations of valid events, interleaved with valid
/// calls (`Tests/Corpus/hostile_events.py`). The gateway must survive all of it as one
/// process, give every calls entry exactly one result naming that entry, dead-letter the
/// invalid ones with a reason naming the field, and deliver every valid call; then its console
/// and the CLI of the same build get the hostile numbers of `Tests/Corpus/hostile_numbers.py`.
final class HostileCorpusTests: XCTestCase {
    func testALiveGatewaySurvivesTheCorpusWithOneResultPerEntry() throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let pki = try TestPKI.make()
        let dir = pki.directory
        let simPort = freeLoopbackPort()
        let adminPort = freeLoopbackPort()
        let adminToken = "hostile-numbers-token-\(UUID().uuidString)"
        try (adminToken + "\n").write(toFile: dir + "/admin-token", atomically: true, encoding: .utf8)
        chmod(dir + "/admin-token", 0o600)
        try """
            { "cert_file": "server.pem", "key_file": "server.key", "token_keys": { "KEY1234567": "AuthKey.pub.pem" },
              "team_id": "TEAM123456", "default_scenario": "ok" }
            """.write(toFile: dir + "/hostile-sim.json", atomically: true, encoding: .utf8)
        try """
            { "redis": { "url": "\(redis.url)" },
              "admin": { "listen": "127.0.0.1:\(adminPort)", "token_file": "admin-token" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simPort)" }, "sandbox": { "endpoint": "127.0.0.1:\(simPort)" },
                        "ca_file": "ca.pem", "connections": 2 },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "AuthKey.p8" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production",
                                  "ring_timeout_s": 600 } } }
            """.write(toFile: dir + "/hostile-gw.json", atomically: true, encoding: .utf8)
        let pushgw = try builtPushgw()
        print("hostile corpus: gateway \(pushgw)")
        let simulator = try ChildProcess(pushgw, ["simulator", "--config", dir + "/hostile-sim.json", "--port", String(simPort)],
                                         captureOutput: false)
        defer { simulator.stop() }
        try waitForPort(simPort)
        let gateway = try ChildProcess(pushgw, ["run", "--config", dir + "/hostile-gw.json", "--consumer", "hostile",
                                                "--log-level", "warn"], captureOutput: true, mergeStderr: true)
        defer { if gateway.isRunning { gateway.stop(signal: SIGKILL) } }
        let pid = gateway.pid

        let script = packageRoot + "/Tests/Corpus/hostile_events.py"
        let manifest = dir + "/hostile-manifest.jsonl"
        var writeArgs = [script, "write", String(redis.port), manifest]
        if let seed = ProcessInfo.processInfo.environment["PUSHGW_CORPUS_SEED"] { writeArgs.append(seed) }
        let started = Date()
        let written = try runCommand("python3", writeArgs)
        XCTAssertEqual(written.0, 0, "writing the corpus: \(written.2)")
        let plan = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(written.1.utf8)) as? [String: Any], written.1)
        let entries = try XCTUnwrap(plan["entries"] as? Int)
        print("hostile corpus: seed \(plan["seed"] ?? "?") (replay with PUSHGW_CORPUS_SEED), \(entries) entries: "
              + "\(plan["cases"] ?? 0) hand-made cases, \(plan["mutations"] ?? 0) mutations, \(plan["valid"] ?? 0) valid calls")

        // Every entry's result, within a bounded wait; the gateway must stay the same process.
        func results() -> Int { Int((try? redis.cli(["XLEN", "pushgw:{acme}:results"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0 }
        waitUntil("one result per calls entry (\(results()) of \(entries)), the gateway running",
                  timeoutMs: 180_000, pollMs: 50) { results() >= entries || !gateway.isRunning }
        let tail = String(gateway.output.suffix(2_000))
        XCTAssertTrue(gateway.isRunning, "the gateway died during the corpus; its log ends with:\n\(tail)")
        XCTAssertEqual(results(), entries, "one result per calls entry")
        print("hostile corpus: \(results()) results in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")

        let checked = try runCommand("python3", [script, "check", String(redis.port), manifest])
        XCTAssertEqual(checked.0, 0, "checking the corpus: \(checked.2)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(checked.1.utf8)) as? [String: Any], checked.1)
        XCTAssertEqual(report["problem_count"] as? Int, 0, "\(report["problems"] ?? "")")
        XCTAssertEqual(report["calls_left"] as? Int, 0, "every calls entry acknowledged and deleted")
        print("hostile corpus: \(report["dead"] ?? 0) dead letters, \(report["duplicates"] ?? 0) duplicate answers, "
              + "\(report["problem_count"] ?? "?") problems")

        // The log quoted hostile ids and types: escaped, never raw (the JSON escapes of C0 aside).
        let logText = gateway.output
        let raw = logText.split(separator: "\n").filter { line in
            line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value)
                || (0x2066...0x2069).contains($0.value) || $0.value == 0x200E || $0.value == 0x200F || $0.value == 0x061C }
        }
        XCTAssertTrue(raw.isEmpty, "log lines with raw control or bidi characters: \(raw.prefix(3))")

        // The numbers a person types, in the console of the same gateway and the CLI of the same
        // build, against the corpus's dead letters: refused with their bounds, never a crash.
        try hostileNumbers(pushgw: pushgw, config: dir + "/hostile-gw.json", adminPort: adminPort, token: adminToken, redis: redis)

        XCTAssertTrue(gateway.isRunning && gateway.pid == pid, "one gateway process throughout (pid \(pid))")
        let status = gateway.stop(signal: SIGTERM)
        XCTAssertTrue(gateway.process.terminationReason == .exit, "the gateway exited, not killed by a signal")
        XCTAssertEqual(status, 0, "the gateway exits 0 on SIGTERM; its log ends with:\n\(String(gateway.output.suffix(2_000)))")
    }

    /// `Tests/Corpus/hostile_numbers.py` through the console (the preview, the replay POST,
    /// the list's filters, cursors, job numbers) and `pushgw dead` / `pushgw run`: every rate,
    /// duration, count and drain time out of its bounds is a 400 (console) or exit 2 (CLI)
    /// naming them; dates, ids and job numbers are read or refused; the bounds are accepted.
    private func hostileNumbers(pushgw: String, config: String, adminPort: Int, token: String, redis: RedisServer) throws {
        let generated = try runCommand("python3", [packageRoot + "/Tests/Corpus/hostile_numbers.py"])
        XCTAssertEqual(generated.0, 0, generated.2)
        let corpus = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(generated.1.utf8)) as? [String: [String]])
        func list(_ name: String) -> [String] { corpus[name] ?? [] }
        func form(_ items: [(String, String)]) -> String {
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            return items.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        }
        // The CLI of the same build against the corpus's dead letters: exit 2 with the bounds,
        // never a signal.
        let bounds = "from 1/h to 10000/s"
        var checked = 0
        func cli(_ args: [String], mentions: String) throws {
            let (status, out, err) = try runCommand(pushgw, args)
            XCTAssertEqual(status, 2, "\(args.map { $0.prefix(30) }) exited \(status): \(err.prefix(300))")
            XCTAssertTrue(err.contains(mentions), "\(args.map { $0.prefix(30) }): \(err.prefix(300))")
            XCTAssertEqual(out, "")
            checked += 1
        }
        for rate in list("rates") {
            try cli(["dead", "replay", "--all", "--dry-run", "--rate", rate, "--config", config], mentions: bounds)
        }
        for duration in list("durations") {
            try cli(["dead", "purge", "--all", "--dry-run", "--older-than", duration, "--config", config], mentions: "at most 100 years")
        }
        for count in list("counts") {
            try cli(["dead", "list", "--limit", count, "--config", config], mentions: "from 1 to 10000")
        }
        for drain in list("drain_ms") {
            try cli(["run", "--drain-ms", drain, "--config", config], mentions: "from 0 to 3600000")
        }

        // The console.
        try waitForPort(adminPort)
        let signIn = try LoopbackHTTP.blockingRequest("/console/signin", method: "POST", port: adminPort,
                                                      headers: ["Content-Type": "application/x-www-form-urlencoded"],
                                                      body: form([("token", token), ("name", "hostile-numbers")]))
        let cookie = try XCTUnwrap(signIn.headers["set-cookie"]?.split(separator: ";").first.map(String.init), signIn.raw)
        func get(_ path: String, _ items: [(String, String)]) throws -> HTTPReply {
            try LoopbackHTTP.blockingRequest(path + "?" + form(items), port: adminPort, headers: ["Cookie": cookie])
        }
        let listPage = try get("/console/dead", [("app", "acme")])
        let csrf = try XCTUnwrap(listPage.body.range(of: #"name="csrf" value=""#).map { String(listPage.body[$0.upperBound...].prefix(64)) })
        // Its id only: the entry's event may be any bytes.
        let deadID = try redis.cli(["EVAL", "return redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1][1]", "1", "pushgw:{acme}:dead"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(deadID.contains("-"), "a dead letter of the corpus: \(deadID)")
        for rate in list("rates") {
            for items in [[("action", "replay-all"), ("app", "acme"), ("rate", rate)], [("action", "replay"), ("ids", "acme/" + deadID), ("rate", rate)]] {
                let reply = try get("/console/dead/preview", items)
                XCTAssertEqual(reply.status, 400, "preview at rate \(rate.debugDescription.prefix(40))")
                XCTAssertTrue(reply.body.contains(bounds), "the bounds are named: \(rate.prefix(40))")
            }
            let posted = try LoopbackHTTP.blockingRequest("/console/dead/replay", method: "POST", port: adminPort,
                                                          headers: ["Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"],
                                                          body: form([("csrf", csrf), ("ids", "acme/" + deadID), ("rate", rate)]))
            XCTAssertEqual(posted.status, 400, "replay POST at rate \(rate.debugDescription.prefix(40))")
            checked += 3
        }
        for duration in list("durations") {
            for field in ["since", "older"] {
                XCTAssertEqual(try get("/console/dead", [(field, duration)]).status, 400, "\(field)=\(duration.prefix(40))")
                XCTAssertEqual(try get("/console/dead/preview", [("action", "purge-all"), (field, duration)]).status, 400)
                checked += 2
            }
        }
        for date in list("dates") {
            for field in ["since", "older"] {
                let status = try get("/console/dead/preview", [("action", "purge-all"), (field, date)]).status
                XCTAssertTrue([200, 400].contains(status), "\(field)=\(date.prefix(40)): \(status)")
                checked += 1
            }
        }
        for id in list("ids") {
            XCTAssertTrue([200, 400].contains(try get("/console/dead", [("before", "acme/" + id)]).status), id)
            XCTAssertTrue([200, 400].contains(try get("/console/dead/preview", [("action", "replay"), ("ids", "acme/" + id)]).status), id)
            XCTAssertTrue([200, 400].contains(try get("/console/dead/preview", [("action", "replay-all"), ("from", "acme/" + id)]).status), id)
            XCTAssertEqual(try LoopbackHTTP.blockingRequest("/console/dead/acme/" + id, port: adminPort, headers: ["Cookie": cookie]).status, 404)
            checked += 4
        }
        for job in list("jobs") {
            XCTAssertEqual(try LoopbackHTTP.blockingRequest("/console/jobs/" + job, port: adminPort, headers: ["Cookie": cookie]).status, 404)
            checked += 1
        }
        for rate in list("valid_rates") {
            XCTAssertEqual(try get("/console/dead/preview", [("action", "replay-all"), ("app", "acme"), ("rate", rate)]).status, 200, rate)
        }
        for duration in list("valid_durations") {
            XCTAssertEqual(try get("/console/dead/preview", [("action", "purge-all"), ("older", duration)]).status, 200, duration)
        }

        let slowest = try runCommand(pushgw, ["dead", "replay", "--all", "--dry-run", "--app", "acme", "--rate", "1/h", "--config", config])
        XCTAssertEqual(slowest.0, 0, slowest.2)
        XCTAssertTrue(slowest.1.contains("would be replayed at 1/h; nothing changed"), String(slowest.1.suffix(300)))
        XCTAssertEqual(try redis.cli(["XLEN", "pushgw:{acme}:calls"]).trimmingCharacters(in: .whitespacesAndNewlines), "0", "nothing replayed")
        print("hostile corpus: \(checked) hostile numbers refused by the console and the CLI")
    }
}
