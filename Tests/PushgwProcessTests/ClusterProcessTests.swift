import Foundation
import GatewayTestSupport
import Glibc
import RedisClient
import TestSupport
import XCTest

/// `pushgw run` on a real Redis Cluster of three primaries (`LocalRedisCluster`, one per
/// class): six apps whose slots fall on all three primaries, events added on each app's owner,
/// every outcome checked from the results streams, retries counted with `MONITOR` on every
/// node, and no `CROSSSLOT` anywhere.
final class ClusterProcessTests: XCTestCase {
    nonisolated(unsafe) private(set) static var cluster: LocalRedisCluster?
    nonisolated(unsafe) private static var startFailure: String?
    /// The gateways run as the least-privileged user of one Redis, plus what the cluster client
    /// reads the slot map with (docs/operations.md, "Redis Cluster"), set on every node.
    /// What docs/operations.md gives a gateway on a cluster (`DocumentedACL`).
    static var clusterLeastPrivilege: [String] { get throws { try DocumentedACL.gatewayOnCluster() } }

    override class func setUp() {
        super.setUp()
        do {
            let started = try LocalRedisCluster.start(primaries: 3)
            try started.setUser(GatewayRedis.aclUser, password: GatewayRedis.aclPassword, rules: clusterLeastPrivilege)
            cluster = started
        } catch {
            startFailure = "\(error)"
        }
    }

    override class func tearDown() {
        cluster?.stop()
        cluster = nil
        super.tearDown()
    }

    override func setUp() {
        if let failure = Self.startFailure { XCTFail("cannot start the cluster: \(failure)") }
    }

    /// `perPrimary` app ids (`NAME-N`) on each primary.
    func appsOverEveryPrimary(_ cluster: LocalRedisCluster, named name: String = "cl-app", perPrimary: Int = 2) throws -> [String] {
        var byPrimary: [Int: [String]] = [:]
        for i in 0..<100 {
            let app = "\(name)-\(i)"
            let owner = try cluster.owner(of: HashSlot(key: app)).port
            if byPrimary[owner, default: []].count < perPrimary { byPrimary[owner, default: []].append(app) }
        }
        XCTAssertEqual(byPrimary.count, 3)
        return byPrimary.values.flatMap { $0 }.sorted()
    }

    /// `redis-cli MONITOR` of every node, each into a file of its own.
    private func monitors(_ cluster: LocalRedisCluster, in directory: String) throws -> [(ChildProcess, String)] {
        try cluster.nodes.enumerated().map { i, node in
            let file = directory + "/monitor-\(i).txt"
            let monitor = try ChildProcess("/bin/sh", ["-c", "exec stdbuf -oL redis-cli -p \(node.port) monitor > '\(file)'"],
                                           captureOutput: false)
            try waitUntil("MONITOR to show a command") {
                _ = try node.cli(["ECHO", "monitor-ready"])
                return textSoFar(file).contains("monitor-ready")
            }
            return (monitor, file)
        }
    }

    func testTheRouterOnThreePrimaries() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let apps = try appsOverEveryPrimary(cluster)
        let world = try ProcessWorld(simulator: #""scenarios": { "0a290002": "too_many", "dead0001": "unregistered" }"#)
        defer { world.stop() }
        let app = ProcessWorld.app(#""retry": { "voip": { "max_attempts": 2, "base_ms": 100, "cap_ms": 300 } }"#)
        let watched = try monitors(cluster, in: world.directory)
        defer { watched.forEach { $0.0.stop() } }
        let (gateway, log) = try world.gateway(on: cluster, apps: Dictionary(uniqueKeysWithValues: apps.map { ($0, app) }),
                                               consumer: "gw-cluster", roles: nil)

        // Per app: a call delivered as VoIP, one throttled (429, one retry, then the alert),
        // one whose VoIP token is gone (the alert, and feedback), and one invalid event.
        for name in apps {
            let owner = try cluster.owner(of: HashSlot(key: name))
            let calls = "pushgw:{\(name)}:calls"
            for (id, voip) in [("ok", "a0a0"), ("throttled", "0a290002"), ("gone", "dead0001")] {
                let event = #"{"v":1,"id":"\#(name)-\#(id)","type":"incoming_call","voip_token":"\#(voip)","alert_token":"b1b1"}"#
                _ = try owner.cli(["XADD", calls, "*", "event", event])
            }
            _ = try owner.cli(["XADD", calls, "*", "event", "not json"])
        }
        func results(_ name: String) -> [String] {
            guard let owner = try? cluster.owner(of: HashSlot(key: name)),
                  let text = try? owner.cli(["XRANGE", "pushgw:{\(name)}:results", "-", "+"]) else { return [] }
            return text.split(separator: "\n").filter { $0.hasPrefix("{") }.map(String.init)
        }
        guard waitUntil("four results in every app", timeoutMs: 60_000, { !gateway.isRunning || apps.allSatisfy { results($0).count >= 4 } }), gateway.isRunning else {
            return XCTFail("four results in every app, the gateway running; its log:\n"
                           + textSoFar(log).split(separator: "\n").suffix(30).joined(separator: "\n"))
        }
        for name in apps {
            let outcomes = results(name).compactMap { line -> String? in
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                return (object?["id"] as? String ?? "invalid") + "=" + (object?["outcome"] as? String ?? "?")
            }.sorted()
            XCTAssertEqual(outcomes, ["\(name)-gone=delivered_alert", "\(name)-ok=delivered_voip",
                                      "\(name)-throttled=delivered_alert", "invalid=dead_lettered"], name)
            let owner = try cluster.owner(of: HashSlot(key: name))
            XCTAssertEqual(try owner.cli(["XLEN", "pushgw:{\(name)}:calls"]), "0\n", "every entry acknowledged and deleted")
            XCTAssertEqual(try owner.cli(["XLEN", "pushgw:{\(name)}:dead"]), "1\n", "the invalid event is a dead letter")
            XCTAssertEqual(try owner.cli(["XLEN", "pushgw:{\(name)}:feedback"]), "1\n", "the gone token's feedback")
        }
        XCTAssertEqual(gateway.isRunning, true)

        // Every dead letter replayed with the CLI on the cluster: routed again (dead-lettered
        // again, the event is still invalid), the old dead letter gone, a fifth result.
        let (status, out, err) = try runCommand(world.pushgw, ["dead", "replay", "--all", "--yes", "--config", world.directory + "/gateway.json"])
        XCTAssertEqual(status, 0, out + err)
        XCTAssertTrue(waitUntil("the replays' results", timeoutMs: 30_000) { apps.allSatisfy { results($0).count >= 5 } })
        for name in apps {
            let owner = try cluster.owner(of: HashSlot(key: name))
            XCTAssertEqual(try owner.cli(["XLEN", "pushgw:{\(name)}:dead"]), "1\n", "the replay's own dead letter, the old one gone")
            XCTAssertEqual(try owner.cli(["XLEN", "pushgw:{\(name)}:calls"]), "0\n")
        }

        // Retries, counted on every node: one schedule (its index command) and one move (the
        // XADD of the mover's script) per throttled call.
        let lines = watched.flatMap { textSoFar($0.1).split(separator: "\n") }
        let scheduled = lines.filter { $0.contains(#""ZADD" "pushgw:retry-due" "LT""#) }.count
        let moved = lines.filter { $0.contains("[0 lua]") && $0.contains(#""XADD""#) && $0.contains(#""retry""#) && $0.contains(":calls") }.count
        XCTAssertEqual(scheduled, apps.count, "one retry scheduled per throttled call")
        XCTAssertEqual(moved, apps.count, "and moved once")
        let logText = textSoFar(log)
        XCTAssertFalse(logText.contains("CROSSSLOT"), "no command spanned slots")
        XCTAssertFalse(lines.contains { $0.contains("CROSSSLOT") })
        for node in cluster.nodes {
            XCTAssertEqual(try node.cli(["ACL", "LOG"]).trimmingCharacters(in: .whitespacesAndNewlines), "", "the least-privileged user was refused nothing on :\(node.port)")
        }
        print("cluster e2e: \(apps.count) apps on 3 primaries, \(scheduled) retries scheduled and \(moved) moved (MONITOR), no CROSSSLOT")
    }

    /// What an idle gateway with 100 apps sends to the cluster, counted with `MONITOR` on every
    /// node over 35 s (one whole period of the per-app blocking reads, which block 30 s).
    func testAnIdleGatewayWithAHundredApps() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let world = try ProcessWorld()
        defer { world.stop() }
        let apps = Dictionary(uniqueKeysWithValues: (0..<100).map { ("idle-\($0)", ProcessWorld.app()) })
        let (gateway, _) = try world.gateway(on: cluster, apps: apps, consumer: "gw-idle")
        // Start-up work (groups, script loads, the first reads) is over once every app's group exists.
        XCTAssertTrue(waitUntil("every app's group", timeoutMs: 30_000) {
            apps.keys.allSatisfy { name in
                ((try? cluster.owner(of: HashSlot(key: name)).cli(["EXISTS", "pushgw:{\(name)}:calls"])) ?? "") == "1\n"
            }
        })
        sleep(2)
        let watched = try monitors(cluster, in: world.directory)
        let windowS: UInt32 = 35
        sleep(windowS)
        watched.forEach { $0.0.stop() }
        XCTAssertEqual(gateway.stop(), 0)
        var perCommand: [String: Int] = [:]
        for (_, file) in watched {
            for line in textSoFar(file).split(separator: "\n") where !line.contains("[0 lua]") && !line.contains("monitor-ready") {
                guard let close = line.firstIndex(of: "]") else { continue }
                let command = line[line.index(after: close)...].split(separator: " ").first.map {
                    $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).uppercased() } ?? "?"
                perCommand[command, default: 0] += 1
            }
        }
        let total = perCommand.values.reduce(0, +)
        let perSecond = Double(total) / Double(windowS)
        print("idle gateway on the cluster (100 apps, 3 primaries, roles router,retry): \(total) commands in \(windowS) s = \(String(format: "%.1f", perSecond))/s; by command \(perCommand)")
        XCTAssertGreaterThan(perCommand["XREADGROUP"] ?? 0, 0, "the per-app reads are counted")
        XCTAssertLessThanOrEqual(perCommand["XREADGROUP"] ?? 0, 2 * apps.count, "one read per app per 30 s, not per router read")
        XCTAssertLessThan(perSecond, 50, "nothing polls per app: \(perCommand)")
    }

    /// The eviction check reads every primary (docs/operations.md, "Redis sizing"): one primary
    /// with an evicting policy is the one `/readyz` problem, named by its address, and the only
    /// node whose `pushgw_redis_evicting_policy` is 1.
    func testAnEvictingPrimaryIsNamedAlone() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let primaries = try cluster.primaries()
        XCTAssertEqual(primaries.count, 3)
        let evicting = primaries[1]
        _ = try evicting.cli(["CONFIG", "SET", "maxmemory", "100mb", "maxmemory-policy", "volatile-lfu"])
        defer { _ = try? evicting.cli(["CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction"]) }
        let world = try ProcessWorld()
        defer { world.stop() }
        let port = freeLoopbackPort()
        // The bearer token gets /readyz's details; an anonymous probe only the failed checks.
        let token = "cluster-eviction-token-\(UUID().uuidString)"
        try (token + "\n").write(toFile: world.directory + "/admin-token", atomically: true, encoding: .utf8)
        chmod(world.directory + "/admin-token", 0o600)
        let apps = try appsOverEveryPrimary(cluster, named: "ev-app", perPrimary: 1)
        let (gateway, _) = try world.gateway(on: cluster, apps: Dictionary(uniqueKeysWithValues: apps.map { ($0, ProcessWorld.app()) }),
                                             consumer: "gw-evicting",
                                             admin: #""listen": "127.0.0.1:\#(port)", "token_file": "admin-token""#)
        try waitForPort(port)
        var ready = HTTPReply.closedWithoutAnswer
        try waitUntil("/readyz to name the evicting primary") {
            ready = try LoopbackHTTP.blockingRequest("/readyz", port: port, headers: ["Authorization": "Bearer " + token])
            return ready.body.contains("maxmemory-policy volatile-lfu") && !ready.body.contains("no successful")
        }
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(ready.body.utf8)) as? [String: Any], ready.body)
        let details = (body["problems"] as? [[String: Any]] ?? []).compactMap { $0["detail"] as? String }
        XCTAssertEqual(details.count, 1, ready.body)
        XCTAssertTrue(details.first?.hasPrefix("127.0.0.1:\(evicting.port) has maxmemory-policy volatile-lfu") == true, ready.body)
        try waitUntil("every primary's reading") {
            let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: port).body.split(separator: "\n")
            return primaries.allSatisfy { node in
                metrics.contains(#"pushgw_redis_evicting_policy{node="127.0.0.1:\#(node.port)"} \#(node === evicting ? 1 : 0)"#)
            }
        }
        XCTAssertEqual(gateway.stop(), 0)
    }

    /// A second gateway SIGKILLed while its pushes are out: the first takes its entries over
    /// once its lease lapsed, and every event gets exactly one result.
    func testAKilledGatewaysEntriesAreTakenOver() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let name = "takeover-app"
        let owner = try cluster.owner(of: HashSlot(key: name))
        // Pushes take 2 s: the killed gateway holds its calls in flight.
        let world = try ProcessWorld(simulator: #""default_scenario": "slow:2000""#)
        defer { world.stop() }
        let (doomed, _) = try world.gateway(on: cluster, apps: [name: ProcessWorld.app()], consumer: "gw-doomed")
        let total = 20
        for i in 0..<total {
            let event = #"{"v":1,"id":"to-\#(i)","type":"incoming_call","voip_token":"\#(String(format: "%08x", i))"}"#
            _ = try owner.cli(["XADD", "pushgw:{\(name)}:calls", "*", "event", event])
        }
        func pending() -> Int {
            Int((try? owner.cli(["XPENDING", "pushgw:{\(name)}:calls", "pushgw"]))?.split(separator: "\n").first ?? "") ?? 0
        }
        XCTAssertTrue(waitUntil("the doomed gateway to read every event", timeoutMs: 30_000) { pending() == total })
        doomed.stop(signal: SIGKILL)
        let (survivor, log) = try world.gateway(on: cluster, apps: [name: ProcessWorld.app()], consumer: "gw-survivor")
        func results() -> [String] {
            ((try? owner.cli(["XRANGE", "pushgw:{\(name)}:results", "-", "+"])) ?? "").split(separator: "\n")
                .filter { $0.hasPrefix("{") }.compactMap { line in
                    (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
                }
        }
        XCTAssertTrue(waitUntil("a result for every event", timeoutMs: 60_000) { results().count >= total })
        usleep(500_000)
        XCTAssertEqual(results().count, total, "one result per event")
        XCTAssertEqual(Set(results()).count, total)
        XCTAssertEqual(pending(), 0)
        XCTAssertTrue(survivor.isRunning)
        XCTAssertFalse(ProcessWorld.logLines(log, message: "took over abandoned entries (of dead consumers, or left pending here after an error)").isEmpty,
                       "the survivor says it took them over")
        XCTAssertFalse(textSoFar(log).contains("CROSSSLOT"))
    }

    /// One app's slot migrated to another primary, key by key (`CLUSTER SETSLOT … MIGRATING /
    /// IMPORTING` + `MIGRATE`), while 2,000 of its events are added and routed: every event
    /// gets exactly one result, and the gateway says how many redirects it followed.
    func testAnAppsSlotMigratedWhileItsEventsRoute() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let name = "reshard-app"
        let slot = HashSlot(key: name)
        let world = try ProcessWorld()
        defer { world.stop() }
        let (gateway, log) = try world.gateway(on: cluster, apps: [name: ProcessWorld.app()], consumer: "gw-reshard")
        let from = try cluster.owner(of: slot)
        let to = try XCTUnwrap(try cluster.primaries().first { $0 !== from })
        let total = 2_000
        // 400 events a second through redis-py's cluster client, which follows redirects too.
        let producer = try ChildProcess("/usr/bin/python3", ["-c", """
            import json, time
            from redis.cluster import RedisCluster, ClusterNode
            r = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", \(cluster.seeds[0].port))])
            start = time.time()
            for i in range(\(total)):
                r.xadd("pushgw:{\(name)}:calls", {"event": json.dumps({"v": 1, "id": f"rs-{i}", "type": "incoming_call",
                       "voip_token": f"{i:08x}"})})
                time.sleep(max(0, start + (i + 1) / 400 - time.time()))
            """], captureOutput: false)
        defer { producer.stop(signal: SIGKILL) }
        func results(on node: RedisServer) -> Int {
            Int((try? node.cli(["XLEN", "pushgw:{\(name)}:results"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        }
        XCTAssertTrue(waitUntil("the first results", timeoutMs: 30_000) { results(on: from) >= 200 })
        try cluster.beginMigration(of: slot, from: from, to: to)
        var movedKeys = 0
        while true {
            let n = try cluster.migrateKeys(of: slot, from: from, to: to, count: 50)
            if n == 0 { break }
            movedKeys += n
            usleep(20_000)
        }
        try cluster.finishMigration(of: slot, from: from, to: to)
        XCTAssertTrue(waitUntil("a result for every event", timeoutMs: 90_000) { !gateway.isRunning || results(on: to) >= total })
        XCTAssertEqual(producer.waitForExit(), 0)
        usleep(500_000)
        let lines = try to.cli(["XRANGE", "pushgw:{\(name)}:results", "-", "+"]).split(separator: "\n").filter { $0.hasPrefix("{") }
        let ids = lines.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
        }
        XCTAssertEqual(ids.count, total, "one result per event")
        XCTAssertEqual(Set(ids).count, total, "no event has two")
        XCTAssertEqual(try to.cli(["XLEN", "pushgw:{\(name)}:calls"]), "0\n", "every entry acknowledged")
        XCTAssertEqual(gateway.stop(), 0)
        let followed = ProcessWorld.logLines(log, message: "redis cluster redirects followed")
        let write = followed.first { $0["connection"] as? String == "write" }
        let moved = write?["moved"] as? Int ?? -1, asked = write?["asked"] as? Int ?? -1
        XCTAssertGreaterThan(moved + asked, 0, "the migration was followed through redirects")
        XCTAssertFalse(textSoFar(log).contains("CROSSSLOT"))
        print("resharding: slot \(slot) of \(name) moved from :\(from.port) to :\(to.port) (\(movedKeys) keys) while \(total) events routed: \(ids.count) results, \(Set(ids).count) distinct; the gateway followed \(asked) ASK and \(moved) MOVED redirects, retried \(write?["retried_later"] ?? 0) TRYAGAIN/CLUSTERDOWN answers later")
    }
}

extension ProcessWorld {
    /// `pushgw run --role ROLES` (all roles with nil) on `cluster` (`redis.cluster.seeds`: every node) for
    /// `apps`, as the least-privileged ACL user (`ClusterProcessTests.clusterLeastPrivilege`,
    /// which the cluster's nodes must have), logging to a file of `directory`; the gateway and
    /// its log's path. `admin` is the admin section's members, as for `writeConfig`.
    func gateway(on cluster: LocalRedisCluster, apps: [String: String], consumer: String,
                 roles: String? = "router,retry", admin: String? = nil) throws -> (ChildProcess, String) {
        let seeds = cluster.seeds.map { "\"\($0)\"" }.joined(separator: ", ")
        let config = try writeConfig(apps: apps, admin: admin, redis: #""cluster": { "seeds": [\#(seeds)] }"#,
                                     redisURL: "redis://\(GatewayRedis.aclUser):\(GatewayRedis.aclPassword)@127.0.0.1:\(cluster.seeds[0].port)/0")
        let log = directory + "/\(consumer).log"
        return (try gateway(config: config, consumer: consumer, arguments: roles.map { ["--role", $0] } ?? [], log: log), log)
    }
}
