import Foundation
import Glibc
import TestSupport
import XCTest

/// At least once across processes: two `pushgw run` processes share one Redis; one is killed
/// with SIGKILL while 5,000 calls are in flight. Every call must end with exactly one result;
/// pushes sent twice (a crash between APNs' answer and its record) are counted and printed.
final class CrashTests: XCTestCase {
    func testSigkillOfOneGatewayLosesNoCallAndRecordsEachOnce() throws {
        let total = 5_000
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let pki = try TestPKI.make()
        let dir = pki.directory
        let simPort = freeLoopbackPort()
        let simLog = dir + "/crash-apns.jsonl"
        try """
            { "cert_file": "server.pem", "key_file": "server.key", "token_keys": { "KEY1234567": "AuthKey.pub.pem" },
              "team_id": "TEAM123456", "default_scenario": "slow:300", "log_file": "\(simLog)" }
            """.write(toFile: dir + "/crash-sim.json", atomically: true, encoding: .utf8)
        try """
            { "redis": { "url": "\(redis.url)" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simPort)" }, "sandbox": { "endpoint": "127.0.0.1:\(simPort)" },
                        "ca_file": "ca.pem", "connections": 2 },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "AuthKey.p8" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production",
                                  "ring_timeout_s": 120 } } }
            """.write(toFile: dir + "/crash-gw.json", atomically: true, encoding: .utf8)
        let pushgw = packageRoot + "/.build/debug/pushgw"
        let simulator = try ChildProcess(pushgw, ["simulator", "--config", dir + "/crash-sim.json", "--port", String(simPort)],
                                         captureOutput: false)
        defer { simulator.stop() }
        try waitForPort(simPort)

        // Pre-fill: one call per distinct VoIP token, so the simulator's log shows duplicates.
        let fill = try runCommand("python3", ["-c", """
            import json, sys, redis
            r = redis.Redis(port=\(redis.port)); p = r.pipeline(transaction=False)
            for i in range(\(total)):
                p.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": f"crash-{i}", "type": "incoming_call",
                       "voip_token": f"{i:08x}"})})
            p.execute()
            """])
        XCTAssertEqual(fill.0, 0, fill.2)

        let gwA = try ChildProcess(pushgw, ["run", "--config", dir + "/crash-gw.json", "--consumer", "gw-A",
                                            "--log-level", "error"], captureOutput: false)
        let gwBLog = dir + "/crash-gw-B.log"
        _ = FileManager.default.createFile(atPath: gwBLog, contents: nil)
        let gwB = try ChildProcess("/bin/sh", ["-c", "exec '\(pushgw)' run --config '\(dir)/crash-gw.json' --consumer gw-B > '\(gwBLog)'"],
                                   captureOutput: false)
        defer { gwA.stop(signal: SIGKILL); gwB.stop() }
        func results() -> Int { Int((try? redis.cli(["XLEN", "pushgw:{acme}:results"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0 }
        var waited = 0
        while results() < 300 && waited < 600 { usleep(10_000); waited += 1 }
        XCTAssertLessThan(results(), total, "the kill must land while calls are in flight")
        gwA.stop(signal: SIGKILL)
        let killedAt = Date()
        while results() < total && Date().timeIntervalSince(killedAt) < 60 { usleep(50_000) }
        let allRecorded = Date().timeIntervalSince(killedAt)
        // When gw-B first took over gw-A's entries, from its own log.
        let killedAtMs = Int64(killedAt.timeIntervalSince1970 * 1000)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let takeover = (try? String(contentsOfFile: gwBLog, encoding: .utf8))?.split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { ($0["msg"] as? String)?.hasPrefix("took over abandoned entries") == true }
            .flatMap { ($0["time"] as? String).flatMap(formatter.date(from:)) }
        let takeoverMs = takeover.map { Int64($0.timeIntervalSince1970 * 1000) - killedAtMs }
        XCTAssertNotNil(takeoverMs, "gw-B logged its take-over")
        XCTAssertLessThanOrEqual(takeoverMs ?? .max, 5_000, "a dead gateway's entries are taken over within 5 s")

        XCTAssertEqual(results(), total, "every call has a result after the crash")
        let check = try runCommand("python3", ["-c", """
            import json, collections, redis
            r = redis.Redis(port=\(redis.port), decode_responses=True)
            ids = collections.Counter(json.loads(f["result"])["id"] for _, f in r.xrange("pushgw:{acme}:results"))
            outcomes = collections.Counter(json.loads(f["result"])["outcome"] for _, f in r.xrange("pushgw:{acme}:results"))
            print(len(ids), max(ids.values()), dict(outcomes), r.xlen("pushgw:{acme}:calls"))
            """])
        let fields = check.1.split(separator: " ", maxSplits: 3).map(String.init)
        XCTAssertEqual(fields.first, String(total), "a result for every call id: \(check.1) \(check.2)")
        XCTAssertEqual(fields.count > 1 ? fields[1] : "", "1", "exactly one result per call id")
        XCTAssertTrue(check.1.hasSuffix(" 0\n"), "nothing left in the calls stream: \(check.1)")

        simulator.stop()  // flushes the request log
        let log = try String(contentsOfFile: simLog, encoding: .utf8)
        var perToken: [String: Int] = [:]
        for line in log.split(separator: "\n") {
            if let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
               let token = obj["token"] as? String { perToken[token, default: 0] += 1 }
        }
        let duplicated = perToken.values.filter { $0 > 1 }.count
        XCTAssertEqual(perToken.count, total, "every call's VoIP push reached APNs")
        print("crash test: \(total) calls, SIGKILL of one of two gateways; taken over \(takeoverMs ?? -1) ms after the kill, all recorded once \(String(format: "%.1f", allRecorded)) s after it; \(duplicated) pushes sent twice (crash between answer and record)")
    }
}
