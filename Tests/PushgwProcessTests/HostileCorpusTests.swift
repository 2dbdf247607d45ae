import Foundation
import Glibc
import TestSupport
import XCTest

/// The hostile-event corpus against a live `pushgw run` (the AddressSanitizer build when
/// `make test` runs it through scripts/test-asan.sh): every hand-made case of the
/// hostile-input study and 2,000 seeded mutations of valid events, interleaved with valid
/// calls (`Tests/Corpus/hostile_events.py`). The gateway must survive all of it as one
/// process, give every calls entry exactly one result naming that entry, dead-letter the
/// invalid ones with a reason naming the field, and deliver every valid call.
final class HostileCorpusTests: XCTestCase {
    func testALiveGatewaySurvivesTheCorpusWithOneResultPerEntry() throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let pki = try TestPKI.make()
        let dir = pki.directory
        let simPort = freeLoopbackPort()
        try """
            { "cert_file": "server.pem", "key_file": "server.key", "token_keys": { "KEY1234567": "AuthKey.pub.pem" },
              "team_id": "TEAM123456", "default_scenario": "ok" }
            """.write(toFile: dir + "/hostile-sim.json", atomically: true, encoding: .utf8)
        try """
            { "redis": { "url": "\(redis.url)" },
              "admin": { "listen": "127.0.0.1:\(freeLoopbackPort())" },
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

        XCTAssertTrue(gateway.isRunning && gateway.pid == pid, "one gateway process throughout (pid \(pid))")
        let status = gateway.stop(signal: SIGTERM)
        XCTAssertTrue(gateway.process.terminationReason == .exit, "the gateway exited, not killed by a signal")
        XCTAssertEqual(status, 0, "the gateway exits 0 on SIGTERM; its log ends with:\n\(String(gateway.output.suffix(2_000)))")
    }
}
