import Foundation
import Glibc
import TestSupport
import XCTest

/// A failover under load, as production would meet it: a primary, a replica and three
/// sentinels; `pushgw run` (every role) configured with the sentinels; a Python producer
/// (redis-py's Sentinel client) adding 500 call events a second for 20 s. A few seconds in,
/// the primary is killed with SIGKILL. The sentinels promote the replica and the gateway must
/// follow by itself. Printed: how long no result was recorded, and what asynchronous
/// replication cost (events without a result, or with two); asserted: every event added after
/// the promotion got its result, and the gateway never exited.
final class SentinelFailoverTests: XCTestCase {
    func testAKilledPrimaryUnderSteadyLoadIsReplacedAndEveryLaterEventGetsItsResult() throws {
        let pushgw = try builtPushgw()
        let primary = try RedisServer.start()
        defer { primary.stop() }
        let replica = try RedisServer.start(extraArguments: ["--replicaof", "127.0.0.1", String(primary.port)])
        defer { replica.stop() }
        try waitUntil("the replica to sync") { (try? replica.cli(["INFO", "replication"]))?.contains("master_link_status:up") == true }
        var sentinels: [RedisSentinelServer] = []
        defer { sentinels.forEach { $0.stop() } }
        for _ in 0..<3 {
            sentinels.append(try RedisSentinelServer.start(watching: primary, quorum: 2, downAfterMs: 1_000, failoverTimeoutMs: 5_000))
        }
        try waitUntil("every sentinel to know the replica and the other sentinels") {
            sentinels.allSatisfy { s in
                (try? s.cli(["SENTINEL", "replicas", s.master]))?.contains("\nflags\nslave\n") == true
                    && (try? s.cli(["SENTINEL", "sentinels", s.master]))?.components(separatedBy: "\nip\n").count == 3
            }
        }

        // The APNs simulator and the gateway, as child processes.
        let pki = try TestPKI.shared()
        let dir = makeTemporaryDirectory("pushgw-failover")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let simPort = freeLoopbackPort()
        try """
            { "cert_file": "\(pki.serverCert)", "key_file": "\(pki.serverKey)", "token_keys": { "KEY1234567": "\(pki.jwtPublicKey)" },
              "team_id": "TEAM123456" }
            """.write(toFile: dir + "/sim.json", atomically: true, encoding: .utf8)
        let simulator = try ChildProcess(pushgw, ["simulator", "--config", dir + "/sim.json", "--port", String(simPort)],
                                         captureOutput: false)
        defer { simulator.stop() }
        try waitForPort(simPort)
        let addresses = sentinels.map { "\"127.0.0.1:\($0.port)\"" }.joined(separator: ", ")
        try """
            { "redis": { "url": "redis://mymaster/0", "sentinel": { "master": "mymaster", "addresses": [\(addresses)] } },
              "admin": { "listen": "127.0.0.1:\(freeLoopbackPort())" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simPort)" }, "sandbox": { "endpoint": "127.0.0.1:\(simPort)" },
                        "ca_file": "\(pki.caCert)" },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production",
                                  "ring_timeout_s": 300 } } }
            """.write(toFile: dir + "/gw.json", atomically: true, encoding: .utf8)
        let gatewayLog = dir + "/gw.log"
        let gateway = try ChildProcess("/bin/sh", ["-c", "exec '\(pushgw)' run --config '\(dir)/gw.json' --consumer gw-failover > '\(gatewayLog)' 2>&1"],
                                       captureOutput: false)
        defer { gateway.stop(signal: SIGKILL) }

        // The producer: 500 events a second for 20 s; an XADD that fails is retried every 20 ms
        // (redis-py asks the sentinels again), so an event counts as added once acknowledged.
        // Writes one line per added event: index and the unix ms of the acknowledgement.
        let added = dir + "/added.txt"
        let sentinelList = sentinels.map { "(\"127.0.0.1\", \($0.port))" }.joined(separator: ", ")
        let producer = try ChildProcess("python3", ["-c", """
            import json, sys, time
            from redis.sentinel import Sentinel
            from redis.exceptions import RedisError
            sentinel = Sentinel([\(sentinelList)], socket_timeout=0.5)
            r = sentinel.master_for("mymaster", socket_timeout=0.5)
            out = open("\(added)", "w", buffering=1)
            start = time.time()
            for i in range(10000):
                while time.time() < start + i / 500:
                    time.sleep(0.0005)
                event = {"v": 1, "id": f"fo-{i}", "type": "incoming_call", "voip_token": f"{i:08x}"}
                while True:
                    try:
                        r.xadd("pushgw:{acme}:calls", {"event": json.dumps(event)})
                        break
                    except RedisError:
                        time.sleep(0.02)
                out.write(f"{i} {int(time.time() * 1000)}\\n")
            """], captureOutput: false)
        defer { producer.stop(signal: SIGKILL) }

        sleep(6)
        XCTAssertTrue(gateway.isRunning, "the gateway runs before the kill")
        primary.kill9()
        let killedMs = Self.nowMs()
        try waitUntil("the sentinels to promote the replica", seconds: 60) {
            sentinels[0].primaryPort() == replica.port
        }
        let promotedMs = Self.nowMs()
        try waitUntil("the producer to finish", seconds: 90) { !producer.isRunning }
        XCTAssertEqual(producer.process.terminationStatus, 0, "the producer added every event")

        // Results, read from the new primary until every event added after the promotion has one.
        var ack: [Int: Int64] = [:]
        for line in try String(contentsOfFile: added, encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let i = Int(parts[0]), let ms = Int64(parts[1]) { ack[i] = ms }
        }
        XCTAssertEqual(ack.count, 10_000, "20 s at 500 events a second")
        let after = ack.filter { $0.value > promotedMs }.map(\.key)
        let before = ack.filter { $0.value <= promotedMs }.map(\.key)
        var results = try Self.results(replica)
        let settled = Date().addingTimeInterval(60)
        while after.contains(where: { (results.count[$0] ?? 0) == 0 }) && Date() < settled {
            usleep(500_000)
            results = try Self.results(replica)
        }
        let afterWithout = after.filter { (results.count[$0] ?? 0) == 0 }
        let afterTwice = after.filter { (results.count[$0] ?? 0) > 1 }
        let beforeWithout = before.filter { (results.count[$0] ?? 0) == 0 }
        let beforeTwice = before.filter { (results.count[$0] ?? 0) > 1 }
        // How long routing stopped: the longest gap between results recorded one after another
        // (their entry ids are Redis's clock, in ms) around the kill.
        let times = results.timesMs.sorted()
        let gap = zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 0
        print("failover test: SIGKILL of the primary under 500 events/s; promotion \(promotedMs - killedMs) ms after the kill; "
              + "routing stopped for \(gap) ms (longest gap between results); events added after the promotion: \(after.count), "
              + "\(after.count - afterWithout.count) with their result (\(afterTwice.count) with two); added before it: \(before.count), "
              + "\(beforeWithout.count) without a result, \(beforeTwice.count) with two")

        XCTAssertEqual(afterWithout.count, 0, "every event added after the promotion gets its result: missing \(afterWithout.prefix(20))")
        XCTAssertTrue(gateway.isRunning, "the gateway never exited")
        gateway.stop(signal: SIGTERM)
        XCTAssertEqual(gateway.process.terminationStatus, 0, "and it drains and exits 0 on SIGTERM")
        let log = (try? String(contentsOfFile: gatewayLog, encoding: .utf8)) ?? ""
        XCTAssertEqual(log.components(separatedBy: #""msg":"pushgw starting""#).count - 1, 1, "started once, never restarted")
        XCTAssertTrue(log.contains("redis connection lost") || log.contains("redis connection failed"), "the loss was logged")
    }

    /// Result counts per event index and the ms of every result entry, read from `server`.
    private static func results(_ server: RedisServer) throws -> (count: [Int: Int], timesMs: [Int64]) {
        let (status, out, err) = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(unix_socket_path="\(server.unixSocket)", decode_responses=True)
            for entry_id, fields in r.xrange("pushgw:{acme}:results"):
                print(entry_id.split("-")[0], json.loads(fields["result"])["id"])
            """])
        guard status == 0 else { throw TestSupportError("reading the results failed: \(err)") }
        var count: [Int: Int] = [:]
        var times: [Int64] = []
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let ms = Int64(parts[0]), parts[1].hasPrefix("fo-"), let i = Int(parts[1].dropFirst(3)) else { continue }
            count[i, default: 0] += 1
            times.append(ms)
        }
        return (count, times)
    }

    private static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Polls `condition` every 20 ms for up to `seconds`; throws naming `what` when it never holds.
    private func waitUntil(_ what: String, seconds: Double = 30, _ condition: () -> Bool) throws {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if condition() { return }
            usleep(20_000)
        }
        throw TestSupportError("gave up waiting \(seconds) s for \(what)")
    }
}
