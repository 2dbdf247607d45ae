import Foundation
import Glibc
import TestSupport
import XCTest

/// The fault suite (docs/operations.md, "Faults"): real `pushgw run` processes, a real
/// redis-server and the APNs simulator as a process, each fault made the way it happens in
/// production (SIGSTOP, SIGKILL, copies written back to back, an APNs too slow for the load).
/// Times asserted are bounds with a margin on what a call can wait, measured from logs; the
/// figures of each run are printed.
final class FaultTests: XCTestCase {
    private var fleet: GatewayFleet?

    override func tearDown() {
        fleet?.close()
        fleet = nil
    }

    // MARK: Redis hangs

    func testEveryEventFinishesWithinTenSecondsOfEachRedisHangEnding() throws {
        let fleet = try GatewayFleet(app: #", "ring_timeout_s": 120"#)
        self.fleet = fleet
        let gw = try fleet.startGateway(consumer: "hang")
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { fleet.unfinishedEntries() == 0 && gw.lines("pushgw starting").count == 1 })
        let redisPID = try XCTUnwrap(Int32(try fleet.redis.cli(["INFO", "server"]).split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("process_id:") }?.dropFirst("process_id:".count).trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        defer { kill(redisPID, SIGCONT) }
        // A producer writing 40 calls a second on one pooled connection opened before the hangs:
        // its XADD during a hang waits in Redis' input and is served when Redis resumes.
        let written = fleet.directory + "/written.txt"
        let producer = try ChildProcess("python3", ["-u", "-c", """
            import json, time, redis
            r = redis.Redis(port=\(fleet.redis.port))
            out = open("\(written)", "a", buffering=1)
            i = 0
            while True:
                cid = f"hang-{i}"
                r.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": cid, "type": "incoming_call",
                       "voip_token": cid.encode().hex(), "deadline": int(time.time() * 1000) + 120000})})
                out.write(cid + "\\n")
                i += 1
                time.sleep(0.025)
            """], captureOutput: false)
        defer { producer.stop(signal: SIGKILL) }
        func writtenIDs() -> [String] {
            ((try? String(contentsOfFile: written, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        usleep(1_500_000)
        var recoveries: [Double] = []
        for hang in 1...5 {
            kill(redisPID, SIGSTOP)
            usleep(8_000_000)
            kill(redisPID, SIGCONT)
            let resumed = Date()
            usleep(300_000)  // the producer's XADD sent during the hang returns and is noted
            let due = writtenIDs()
            let missing = fleet.waitForResults(due, seconds: 10 - Date().timeIntervalSince(resumed))
            recoveries.append(Date().timeIntervalSince(resumed))
            XCTAssertEqual(missing, [], "hang \(hang): every event written before Redis resumed finished within 10 s of it")
            usleep(1_500_000)
        }
        producer.stop(signal: SIGKILL)
        let all = writtenIDs()
        XCTAssertEqual(fleet.waitForResults(all, seconds: 10), [], "and every event written at all")
        let results = fleet.results()
        // The producer's client (redis-py) sends an XADD again when its connection broke during
        // a hang: that copy gets a `duplicate` result (docs/protocol.md); the event one outcome.
        let notOne = all.filter { (results[$0] ?? []).filter { $0 != "duplicate" }.count != 1 }
        XCTAssertEqual(notOne, [], "exactly one outcome per event: \(notOne.map { "\($0): \(results[$0] ?? [])" })")
        print("fault suite: 5 Redis hangs of 8 s under 40 calls/s, \(all.count) calls; all finished "
              + recoveries.map { String(format: "%.1f", $0) }.joined(separator: ", ") + " s after each SIGCONT")
    }

    // MARK: Copies routed together

    func testFourHundredCopiesWrittenWithTheirOriginalsArePushedOnceByOneAndByTwoGateways() throws {
        let fleet = try GatewayFleet(simulator: #", "raised_max_streams": 1000"#, app: #", "ring_timeout_s": 60"#)
        self.fleet = fleet
        // At debug level each gateway logs the entries it finished: a failure names who pushed.
        let one = try fleet.startGateway(consumer: "copies-1", logLevel: "debug")
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { one.lines("pushgw starting").count == 1 && fleet.unfinishedEntries() == 0 })
        let solo = (0..<400).map { "solo-\($0)" }
        try fleet.call(solo.flatMap { [$0, $0] })
        XCTAssertEqual(fleet.waitForResults(solo, seconds: 30), [], "every pair finished (one gateway)")
        let two = try fleet.startGateway(consumer: "copies-2", logLevel: "debug")
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { two.lines("pushgw starting").count == 1 })
        usleep(1_500_000)  // both are reading
        let shared = (0..<400).map { "pair-\($0)" }
        try fleet.call(shared.flatMap { [$0, $0] })
        XCTAssertEqual(fleet.waitForResults(shared, seconds: 30), [], "every pair finished (two gateways)")
        XCTAssertTrue(GatewayFleet.wait(seconds: 10) { fleet.unfinishedEntries() == 0 }, "every copy acknowledged")
        fleet.stopSimulator()  // flushes its request log
        let pushes = fleet.voipPushesByCall()
        for (label, ids) in [("one gateway", solo), ("two gateways", shared)] {
            let doubles = ids.filter { (pushes[$0] ?? 0) > 1 }
            XCTAssertEqual(doubles, [], "\(label): no call pushed twice\n" + fleet.history(of: Array(doubles.prefix(3))))
            XCTAssertEqual(ids.filter { pushes[$0] == nil }, [], "\(label): every call pushed")
        }
        // Each call: its outcome, and the copy's `duplicate` result (docs/protocol.md).
        let results = fleet.results()
        XCTAssertEqual((solo + shared).filter { (results[$0] ?? []).filter { $0 != "duplicate" }.count != 1 }, [],
                       "one outcome per call")
        XCTAssertEqual((solo + shared).filter { (results[$0] ?? []).filter { $0 == "duplicate" }.count != 1 }, [],
                       "one duplicate result per copy")
        print("fault suite: 2 × 400 pairs written back to back, \(pushes.values.filter { $0 > 1 }.count) calls pushed twice")
    }

    // MARK: APNs down

    func testAfterAnAPNsOutageTheFirstDeliveryIsWithinTwoSecondsOfItsReturn() throws {
        let fleet = try GatewayFleet(app: #", "ring_timeout_s": 60"#)
        self.fleet = fleet
        let gw = try fleet.startGateway(consumer: "outage")
        try waitForPort(gw.adminPort)
        try fleet.call(["warm-up"])
        XCTAssertEqual(fleet.waitForResults(["warm-up"], seconds: 15), [])
        fleet.stopSimulator(signal: SIGKILL)
        let killed = Date()
        // Calls keep coming while APNs is gone: they wait in the pool's queue and retries.
        var ids: [String] = []
        while Date().timeIntervalSince(killed) < 10 {
            let batch = (0..<5).map { "outage-\(ids.count + $0)" }
            try fleet.call(batch)
            ids += batch
            usleep(500_000)
        }
        let ready = try LoopbackHTTP.blockingRequest("/readyz", port: gw.adminPort)
        XCTAssertEqual(ready.status, 503, "not ready while APNs is unreachable")
        XCTAssertTrue(ready.body.contains(#""check":"apns""#) && ready.body.contains(#""credential":"k""#), ready.body)
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: gw.adminPort).body
        XCTAssertTrue(metrics.contains(#"pushgw_apns_up{credential="k",environment="production"} 0"#), "the pool is down in the metrics")
        try fleet.startSimulator()
        let returned = Int64(Date().timeIntervalSince1970 * 1000)
        XCTAssertEqual(fleet.waitForResults(ids, seconds: 20), [], "every call finished after APNs returned")
        fleet.stopSimulator()
        let firstAnswer = fleet.simulatorRequests().compactMap { $0["time_ms"] as? Int64 }.filter { $0 >= returned }.min()
        let delay = (firstAnswer ?? .max) - returned
        XCTAssertLessThanOrEqual(delay, 2_000, "the first push reached APNs within 2 s of its return")
        let down = gw.lines("APNs unreachable: connecting failed")
        let back = gw.lines("APNs reachable again")
        XCTAssertEqual(back.count, 1, "the return is logged")
        let failedConnects = back.first.flatMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["failed_connects"] as? Int } ?? 0
        XCTAssertGreaterThanOrEqual(failedConnects, 8, "connects were tried about every second while calls waited: \(back)")
        XCTAssertLessThanOrEqual(down.count, 3, "and logged at most every 10 s: \(down.count) lines")
        print("fault suite: APNs killed 10 s under 10 calls/s; first push \(delay) ms after its return, "
              + "\(failedConnects) failed connects, \(down.count) outage lines")
    }

    // MARK: APNs stalled

    func testAStalledAPNsWithAFullQueueGetsNoPushPastItsBudgetAndNoPushTwice() throws {
        // Four streams, each answer 800 ms late: pushes queue behind each other. A push has 2 s to
        // be written and, once written, 2 s to be answered.
        let fleet = try GatewayFleet(simulator: #", "initial_max_streams": 4, "raised_max_streams": 4, "default_scenario": "slow:800""#,
                                     apns: #", "connections": 1, "request_timeout_ms": 2000, "max_queued": 20"#,
                                     app: #", "ring_timeout_s": 60"#)
        self.fleet = fleet
        let gw = try fleet.startGateway(consumer: "stall")
        try waitForPort(gw.adminPort)
        let ids = (0..<40).map { "stall-\($0)" }
        try fleet.call(ids)
        XCTAssertEqual(fleet.waitForResults(ids, seconds: 40), [], "every call finished")
        fleet.stopSimulator()
        let attempts = fleet.attemptTimes()
        var late: [String] = []
        var received = 0
        for request in fleet.simulatorRequests() {
            guard let token = request["token"] as? String, let at = request["time_ms"] as? Int64 else { continue }
            received += 1
            let call = GatewayFleet.callID(fromToken: token)
            // The attempt it belongs to: the latest one handed to the APNs client before it arrived.
            guard let sent = attempts[call]?.filter({ $0 <= at }).max() else { late.append("\(call): no attempt before it"); continue }
            if at - sent > 2_000 + 200 { late.append("\(call): arrived \(at - sent) ms after its attempt started") }
        }
        XCTAssertEqual(late, [], "no push written after its 2 s budget")
        let accepted = fleet.simulatorRequests().filter { ($0["status"] as? Int) == 200 }
        let perCall = Dictionary(grouping: accepted.compactMap { ($0["token"] as? String).map(GatewayFleet.callID(fromToken:)) }) { $0 }
        XCTAssertEqual(perCall.filter { $0.value.count > 1 }.keys.sorted(), [], "no call accepted by APNs twice")
        print("fault suite: 40 calls into 4 streams answering in 800 ms; \(received) pushes reached APNs, none past its budget, "
              + "\(perCall.filter { $0.value.count > 1 }.count) calls accepted twice")
    }
}
