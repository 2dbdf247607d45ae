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
        let world = try ProcessWorld(simulator: #""default_scenario": "slow:300""#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""ring_timeout_s": 120"#)], apns: #""connections": 2"#)

        // Pre-fill: one call per distinct VoIP token, so the simulator's log shows duplicates.
        let fill = try runCommand("python3", ["-c", """
            import json, sys, redis
            r = redis.Redis(port=\(world.redis.port)); p = r.pipeline(transaction=False)
            for i in range(\(total)):
                p.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": f"crash-{i}", "type": "incoming_call",
                       "voip_token": f"{i:08x}"})})
            p.execute()
            """])
        XCTAssertEqual(fill.0, 0, fill.2)

        let gwA = try world.gateway(config: config, consumer: "gw-A", arguments: ["--log-level", "error"])
        let gwBLog = world.directory + "/gw-B.log"
        let gwB = try world.gateway(config: config, consumer: "gw-B", log: gwBLog)
        waitUntil("300 results before the kill") { world.results() >= 300 }
        XCTAssertLessThan(world.results(), total, "the kill must land while calls are in flight")
        gwA.stop(signal: SIGKILL)
        let killedAt = Date()
        // What gw-A held: its lease has not lapsed yet, so nobody has taken these over.
        let held = try world.redis.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw", "-", "+", "100000", "gw-A"])
            .split(separator: "\n").count / 4
        XCTAssertGreaterThan(held, 0, "gw-A died holding entries")
        waitUntil("a result for every call after the kill", timeoutMs: 120_000) { world.results() >= total }
        let allRecorded = Date().timeIntervalSince(killedAt)

        // gw-B took over exactly what gw-A held, as its log says.
        let takeovers = ProcessWorld.logLines(gwBLog, message: "took over abandoned entries (of dead consumers, or left pending here after an error)")
        XCTAssertEqual(takeovers.compactMap { $0["count"] as? Int }.reduce(0, +), held,
                       "gw-B took over the \(held) entries gw-A held, no more, no fewer: \(takeovers)")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let takeoverMs = (takeovers.first?["time"] as? String).flatMap(formatter.date(from:))
            .map { Int64($0.timeIntervalSince(killedAt) * 1000) } ?? -1

        XCTAssertEqual(world.results(), total, "every call has a result after the crash")
        let check = try runCommand("python3", ["-c", """
            import json, collections, redis
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            ids = collections.Counter(json.loads(f["result"])["id"] for _, f in r.xrange("pushgw:{acme}:results"))
            outcomes = collections.Counter(json.loads(f["result"])["outcome"] for _, f in r.xrange("pushgw:{acme}:results"))
            print(len(ids), max(ids.values()), dict(outcomes), r.xlen("pushgw:{acme}:calls"))
            """])
        let fields = check.1.split(separator: " ", maxSplits: 3).map(String.init)
        XCTAssertEqual(fields.first, String(total), "a result for every call id: \(check.1) \(check.2)")
        XCTAssertEqual(fields.count > 1 ? fields[1] : "", "1", "exactly one result per call id")
        XCTAssertTrue(check.1.hasSuffix(" 0\n"), "nothing left in the calls stream: \(check.1)")

        XCTAssertEqual(gwB.stop(), 0)
        var perToken: [String: Int] = [:]
        for request in try world.stopSimulator() {
            if let token = request["token"] as? String { perToken[token, default: 0] += 1 }
        }
        let duplicated = perToken.values.filter { $0 > 1 }.count
        XCTAssertEqual(perToken.count, total, "every call's VoIP push reached APNs")
        print("crash test: \(total) calls, SIGKILL of one of two gateways holding \(held) entries; taken over \(takeoverMs) ms after the kill, all recorded once \(String(format: "%.1f", allRecorded)) s after it; \(duplicated) pushes sent twice (crash between answer and record)")
    }

    /// Issue 24: 100 calls of 3 devices each ring (nobody answers; each waits for its 2 s
    /// deadline in its gateway) when one of two gateways is killed. Every call still ends with
    /// one result naming its 3 devices, and no device of a call recorded before the kill is
    /// pushed again.
    func testSigkillWhileThreeDeviceCallsRingLeavesOneResultPerCallAndRepushesNoRecordedDevice() throws {
        let total = 100
        let world = try ProcessWorld(simulator: #""default_scenario": "slow:100""#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""ring_timeout_s": 2"#)], apns: #""connections": 2"#)
        let gwA = try world.gateway(config: config, consumer: "gw-A", arguments: ["--log-level", "error"])
        let gwBLog = world.directory + "/gw-B.log"
        let gwB = try world.gateway(config: config, consumer: "gw-B", log: gwBLog)
        // Written over a second, so that some calls have rung out when the kill lands and others ring.
        let fill = try runCommand("python3", ["-c", """
            import json, time, redis
            r = redis.Redis(port=\(world.redis.port))
            for i in range(\(total)):
                devices = [{"id": f"dev-{d}", "voip_token": f"{i:06x}{d:02x}", "alert_token": f"a{i:05x}{d:02x}"} for d in range(3)]
                r.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": f"ring-{i}", "type": "incoming_call",
                       "devices": devices})})
                time.sleep(0.03)
            """])
        XCTAssertEqual(fill.0, 0, fill.2)
        waitUntil("some calls rang out before the kill") { world.results() >= 5 }
        gwA.stop(signal: SIGKILL)
        let beforeKill = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            print(" ".join(json.loads(f["result"])["id"] for _, f in r.xrange("pushgw:{acme}:results")))
            """])
        let recordedBeforeKill = Set(beforeKill.1.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
        XCTAssertLessThan(recordedBeforeKill.count, total, "the kill must land while calls ring")
        waitUntil("a result for every call after the kill", timeoutMs: 60_000) { world.results() >= total }

        let check = try runCommand("python3", ["-c", """
            import json, collections, redis
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            results = [json.loads(f["result"]) for _, f in r.xrange("pushgw:{acme}:results")]
            ids = collections.Counter(x["id"] for x in results)
            print(len(ids), max(ids.values()), min(len(x.get("devices", [])) for x in results), r.xlen("pushgw:{acme}:calls"))
            """])
        XCTAssertEqual(check.1, "\(total) 1 3 0\n", "one result per call, each with its 3 devices, nothing left: \(check.1) \(check.2)")
        XCTAssertEqual(gwB.stop(), 0)
        var perToken: [String: Int] = [:]
        for request in try world.stopSimulator() {
            if let token = request["token"] as? String { perToken[token, default: 0] += 1 }
        }
        for i in 0..<total where recordedBeforeKill.contains("ring-\(i)") {
            for d in 0..<3 {
                let token = String(format: "%06x%02x", i, d)
                XCTAssertEqual(perToken[token], 1, "call ring-\(i) was recorded before the kill: device \(d) is not pushed again")
            }
        }
        let twice = perToken.filter { $0.value > 1 }.count
        print("crash test with devices: \(total) calls of 3 devices, \(recordedBeforeKill.count) recorded before the SIGKILL; \(twice) device pushes sent twice (calls ringing in the killed gateway, rung again by the other)")
    }
}
