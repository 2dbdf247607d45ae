import Foundation
import GatewayTestSupport
import Glibc
import RedisClient
import TestSupport
import XCTest

/// A primary's failure on Redis Cluster under load, with the accounting of
/// `SentinelFailoverTests`: three primaries with one replica each (node timeout 1 s), `pushgw
/// run` (router, retry) on one app, a producer adding 300 events a second to the slot's primary for
/// 12 s; 4 s in, the app's primary is killed with SIGKILL. The cluster promotes its replica and
/// the gateway must follow by itself. Printed: the promotion's delay, how long no result was
/// recorded, and the events added before the promotion with no result or two (asynchronous
/// replication); asserted: every event added after the promotion got its result, and the
/// gateway never exited.
final class ClusterFailoverTests: XCTestCase {
    func testAKilledPrimaryIsReplacedByItsReplicaAndEveryLaterEventGetsItsResult() throws {
        let cluster = try LocalRedisCluster.start(primaries: 3, replicasPerPrimary: 1)
        defer { cluster.stop() }
        try cluster.setUser(GatewayRedis.aclUser, password: GatewayRedis.aclPassword, rules: ClusterProcessTests.clusterLeastPrivilege)
        let name = "failover-app"
        let slot = HashSlot(key: name)
        let world = try ProcessWorld()
        defer { world.stop() }
        let (gateway, log) = try world.gateway(on: cluster, apps: [name: ProcessWorld.app()], consumer: "gw-failover")
        let primary = try cluster.owner(of: slot)
        let seed = try XCTUnwrap(cluster.nodes.first { $0 !== primary })

        // An XADD that fails is retried every 20 ms (the producer reads the slot map again), so
        // an event counts as added once acknowledged: one line per event, index and unix ms.
        let added = world.directory + "/added.txt"
        let total = 3_600
        let producer = try ChildProcess("/usr/bin/python3", ["-c", """
            import json, time, redis
            # Finds the slot's primary itself (CLUSTER SLOTS of a node that stays up): redis-py
            # 4.3's cluster client does not recover from a killed primary.
            seed = redis.Redis(port=\(seed.port), socket_timeout=0.5)
            key = "pushgw:{\(name)}:calls"
            slot = seed.execute_command("CLUSTER", "KEYSLOT", key)
            def owner():
                for start, end, primary, *rest in seed.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end:
                        return redis.Redis(host=primary[0], port=primary[1], socket_timeout=0.5)
            r = owner()
            out = open("\(added)", "w", buffering=1)
            start = time.time()
            for i in range(\(total)):
                while time.time() < start + i / 300:
                    time.sleep(0.0005)
                event = {"v": 1, "id": f"fo-{i}", "type": "incoming_call", "voip_token": f"{i:08x}"}
                while True:
                    try:
                        r.xadd(key, {"event": json.dumps(event)})
                        break
                    except Exception:
                        time.sleep(0.02)
                        try:
                            r = owner() or r
                        except Exception:
                            pass
                out.write(f"{i} {int(time.time() * 1000)}\\n")
            """], captureOutput: false)
        defer { producer.stop(signal: SIGKILL) }

        sleep(4)
        XCTAssertTrue(gateway.isRunning, "the gateway runs before the kill")
        primary.kill9()
        let killedMs = Int64(Date().timeIntervalSince1970 * 1000)
        var promoted: RedisServer?
        XCTAssertTrue(waitUntil("the cluster to promote the replica", timeoutMs: 60_000, pollMs: 50) {
            promoted = try? cluster.owner(of: slot, asking: seed)
            return promoted.map { $0 !== primary } ?? false
        })
        let promotedMs = Int64(Date().timeIntervalSince1970 * 1000)
        let newPrimary = try XCTUnwrap(promoted)
        XCTAssertTrue(waitUntil("the producer to finish", timeoutMs: 90_000) { !producer.isRunning })
        XCTAssertEqual(producer.exitStatus, 0, "the producer added every event")

        var ack: [Int: Int64] = [:]
        for line in textSoFar(added).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let i = Int(parts[0]), let ms = Int64(parts[1]) { ack[i] = ms }
        }
        XCTAssertEqual(ack.count, total)
        let after = ack.filter { $0.value > promotedMs }.map(\.key)
        let before = ack.filter { $0.value <= promotedMs }.map(\.key)
        func results() -> (count: [Int: Int], timesMs: [Int64]) {
            var count: [Int: Int] = [:], times: [Int64] = []
            let text = (try? newPrimary.cli(["XRANGE", "pushgw:{\(name)}:results", "-", "+"])) ?? ""
            var entryMs: Int64?
            for line in text.split(separator: "\n") {
                if let dash = line.firstIndex(of: "-"), let ms = Int64(line[..<dash]), line.dropFirst(line.distance(from: line.startIndex, to: dash) + 1).allSatisfy(\.isNumber) {
                    entryMs = ms
                } else if line.hasPrefix("{"),
                          let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                          let id = object["id"] as? String, id.hasPrefix("fo-"), let i = Int(id.dropFirst(3)) {
                    count[i, default: 0] += 1
                    if let entryMs { times.append(entryMs) }
                }
            }
            return (count, times)
        }
        var found = results()
        _ = waitUntil("every event added after the promotion to get its result", timeoutMs: 60_000, pollMs: 500, failing: false) {
            found = results()
            return after.allSatisfy { (found.count[$0] ?? 0) > 0 }
        }
        let afterWithout = after.filter { (found.count[$0] ?? 0) == 0 }
        let afterTwice = after.filter { (found.count[$0] ?? 0) > 1 }
        let beforeWithout = before.filter { (found.count[$0] ?? 0) == 0 }
        let beforeTwice = before.filter { (found.count[$0] ?? 0) > 1 }
        let times = found.timesMs.sorted()
        let gap = zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 0
        print("cluster failover test: SIGKILL of the app's primary under 300 events/s; promotion \(promotedMs - killedMs) ms after the kill; "
              + "routing stopped for \(gap) ms (longest gap between results); events added after the promotion: \(after.count), "
              + "\(after.count - afterWithout.count) with their result (\(afterTwice.count) with two); added before it: \(before.count), "
              + "\(beforeWithout.count) without a result, \(beforeTwice.count) with two")
        XCTAssertFalse(after.isEmpty, "events were added after the promotion")
        XCTAssertEqual(afterWithout.count, 0, "every event added after the promotion gets its result: missing \(afterWithout.prefix(20))")
        XCTAssertTrue(gateway.isRunning, "the gateway never exited")
        XCTAssertEqual(gateway.stop(), 0, "and it drains and exits 0 on SIGTERM")
        XCTAssertFalse(textSoFar(log).contains("CROSSSLOT"))
    }
}
