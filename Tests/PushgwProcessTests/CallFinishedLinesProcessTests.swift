import Foundation
import Glibc
import TestSupport
import XCTest

/// The `call finished` line on the real output of `pushgw run` (docs/operations.md, Logs): one
/// info line per result, `time`, `level`, `msg` first and the fields sorted after them; what
/// happened (outcome, a fallback's `cause`, a dead letter's reason as `error`), APNs' last
/// `status`, `latency_ms`, `attempts`, and the calls entry the result names, also for a call
/// that waited for a retry (whose pushes came from a later entry); and above
/// `log.calls_per_second`, lines that count the calls not logged.
final class CallFinishedLinesProcessTests: XCTestCase {
    func testAnInfoLinePerFinishedCallSaysWhatTheResultSays() throws {
        let gone = "90de0001", flaky = "f1a70001", voip = "a0a00001", alert = "a1e70001"
        let world = try ProcessWorld(simulator: #""scenarios": { "\#(gone)": "unregistered", "\#(flaky)": "flaky:1" }"#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""retry": { "voip": { "base_ms": 50, "cap_ms": 100 } }"#)])
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "call-lines", log: log)
        var entries: [String: String] = [:]
        for (id, event) in [("delivered", #"{"v":1,"id":"delivered","type":"incoming_call","voip_token":"\#(voip)"}"#),
                            ("fallback", #"{"v":1,"id":"fallback","type":"incoming_call","voip_token":"\#(gone)","alert_token":"\#(alert)"}"#),
                            ("retried", #"{"v":1,"id":"retried","type":"incoming_call","voip_token":"\#(flaky)"}"#),
                            ("invalid", #"{"v":1,"id":"invalid","type":"incoming_call","voip_token":"not hex"}"#)] {
            entries[id] = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event", event])
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        waitUntil("a result for each event") { world.results() >= 4 }
        XCTAssertEqual(gw.stop(), 0)

        let text = try String(contentsOfFile: log, encoding: .utf8)
        let raw = text.split(separator: "\n").map(String.init).filter { $0.contains(#""msg":"call finished""#) }
        XCTAssertEqual(raw.count, 4, "one line per call at the default level (info):\n\(text)")
        for line in raw {
            XCTAssertNotNil(line.wholeMatch(of: /\{"time":"[0-9T:.\-]+Z","level":"info","msg":"call finished",.*\}/),
                            "time, level, msg first: \(line)")
            let keys = line.matches(of: /[{,]"([a-z_]+)":/).map { String($0.1) }
            XCTAssertEqual(Array(keys.dropFirst(3)), keys.dropFirst(3).sorted(), "the fields after msg are sorted: \(line)")
        }
        var byID: [String: [String: Any]] = [:]
        for line in ProcessWorld.logLines(log, message: "call finished") {
            if let id = line["event"] as? String { byID[id] = line }
        }
        let results = try resultsByID(world)

        let delivered = try XCTUnwrap(byID["delivered"], text)
        XCTAssertEqual(delivered["app"] as? String, "acme")
        XCTAssertEqual(delivered["outcome"] as? String, "delivered_voip")
        XCTAssertEqual(delivered["status"] as? Int, 200)
        XCTAssertEqual(delivered["provider"] as? String, "apns")
        XCTAssertEqual(delivered["attempts"] as? Int, 1)
        XCTAssertEqual(delivered["entry"] as? String, entries["delivered"], "the calls entry the producer's XADD returned")
        XCTAssertEqual(delivered["latency_ms"] as? Int, results["delivered"]?["latency_ms"] as? Int, "the result's latency")
        XCTAssertNil(delivered["cause"])
        XCTAssertNil(delivered["error"], "a delivered call has no cause")

        let fallback = try XCTUnwrap(byID["fallback"], text)
        XCTAssertEqual(fallback["outcome"] as? String, "delivered_alert")
        XCTAssertEqual(fallback["cause"] as? String, "voip_token_invalid", "the result's cause")
        XCTAssertEqual(fallback["status"] as? Int, 200, "the last push's status: the alert's")
        XCTAssertEqual(fallback["attempts"] as? Int, 2, "the VoIP push (410) and the alert")
        XCTAssertEqual(fallback["entry"] as? String, entries["fallback"])

        let retried = try XCTUnwrap(byID["retried"], text)
        XCTAssertEqual(retried["outcome"] as? String, "delivered_voip")
        XCTAssertEqual(retried["attempts"] as? Int, 2, "503, then 200 from the schedule")
        XCTAssertEqual(retried["entry"] as? String, entries["retried"],
                       "the entry the result names, the call's first, not the retry's")
        XCTAssertEqual(retried["entry"] as? String, results["retried"]?["entry"] as? String)

        let dead = try XCTUnwrap(byID["invalid"], text)
        XCTAssertEqual(dead["outcome"] as? String, "dead_lettered")
        let reason = try XCTUnwrap(results["invalid"]?["reason"] as? String)
        XCTAssertEqual(dead["error"] as? String, reason, "a dead letter's reason is the line's error")
        XCTAssertTrue(reason.hasPrefix("invalid_event: voip_token"), reason)
        XCTAssertEqual(dead["attempts"] as? Int, 0)
        XCTAssertNil(dead["status"], "no push, no status")
        XCTAssertEqual(dead["entry"] as? String, entries["invalid"])
        XCTAssertEqual(ProcessWorld.logLines(log, message: "calls finished and not logged").count, 0, "4 calls are under the cap")
    }

    func testAboveTheConfiguredRateLinesCountTheCallsNotLogged() throws {
        let total = 300, perSecond = 3
        let world = try ProcessWorld()
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()], sections: #""log": { "calls_per_second": \#(perSecond) }"#)
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "call-lines-cap", log: log)
        let script = (0..<total).map { #"XADD pushgw:{acme}:calls * event "{\"v\":1,\"id\":\"burst-\#($0)\",\"type\":\"incoming_call\",\"voip_token\":\"\#(String(format: "%08x", 0xb000 + $0))\"}""# }
            .joined(separator: "\n")
        XCTAssertEqual(try runCommand("redis-cli", ["-p", String(world.redis.port)], stdin: script + "\n").0, 0)
        waitUntil("a result for each call", timeoutMs: 60_000) { world.results() >= total }
        // The drain writes the count of the last second.
        XCTAssertEqual(gw.stop(), 0)

        let logged = ProcessWorld.logLines(log, message: "call finished")
        let counts = ProcessWorld.logLines(log, message: "calls finished and not logged")
        XCTAssertLessThan(logged.count, total, "the cap held lines back")
        XCTAssertFalse(counts.isEmpty, "a line says how many were not logged")
        for line in counts {
            XCTAssertEqual(line["level"] as? String, "info")
            XCTAssertEqual(line["calls_per_second"] as? Int, perSecond)
            XCTAssertGreaterThan(line["count"] as? Int ?? 0, 0, "\(line)")
        }
        XCTAssertEqual(logged.count + counts.reduce(0) { $0 + ($1["count"] as? Int ?? 0) }, total,
                       "every call is logged or counted, once")
        XCTAssertEqual(Set(logged.compactMap { $0["event"] as? String }).count, logged.count, "no call logged twice")
    }

    func testZeroWritesNoLineAndAReloadChangesTheRate() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        // The same admin section both times: a reload that changes it is refused.
        let admin = #""listen": "127.0.0.1:\#(freeLoopbackPort())""#
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()], admin: admin, sections: #""log": { "calls_per_second": 0 }"#)
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "call-lines-reload", log: log)
        func call(_ id: String) throws {
            _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                     #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"a0a00001"}"#])
        }
        try call("unlogged")
        waitUntil("its result") { world.results() >= 1 }
        try world.writeConfig(apps: ["acme": ProcessWorld.app()], admin: admin, sections: #""log": { "calls_per_second": 100 }"#)
        kill(gw.pid, SIGHUP)
        waitUntil("the log line of the reload") { !ProcessWorld.logLines(log, message: "config reloaded").isEmpty }
        try call("logged")
        waitUntil("its result") { world.results() >= 2 }
        XCTAssertEqual(gw.stop(), 0)
        let lines = ProcessWorld.logLines(log, message: "call finished")
        XCTAssertEqual(lines.compactMap { $0["event"] as? String }, ["logged"], "none at 0, one at 100 after the reload")
        XCTAssertEqual(ProcessWorld.logLines(log, message: "calls finished and not logged").count, 0, "0 counts nothing either")
    }

    /// Each result of `acme` by its call id, as the results stream holds it.
    private func resultsByID(_ world: ProcessWorld) throws -> [String: [String: Any]] {
        let (status, out, err) = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            print(json.dumps({json.loads(f["result"]).get("id", ""): json.loads(f["result"]) for _, f in r.xrange("pushgw:{acme}:results")}))
            """])
        guard status == 0, let object = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: [String: Any]] else {
            throw TestSupportError("reading the results: \(err)")
        }
        return object
    }
}
