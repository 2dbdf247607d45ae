import EventLoop
import TestSupport
import XCTest
@testable import CallStorage
@testable import RedisClient

/// `RedisCluster` against a real three-primary cluster (one per class, `LocalRedisCluster`):
/// commands and scripts reach the owner of their slot, and a slot migrated by hand
/// (`CLUSTER SETSLOT … MIGRATING/IMPORTING` + `MIGRATE`) while commands run is followed through
/// its `-ASK` and `-MOVED` answers with every command answered once.
final class RedisClusterTests: XCTestCase {
    nonisolated(unsafe) private static var cluster: LocalRedisCluster?
    nonisolated(unsafe) private static var startFailure: String?
    private var loop: EventLoop!

    override class func setUp() {
        super.setUp()
        do { cluster = try LocalRedisCluster.start(primaries: 3) } catch { startFailure = "\(error)" }
    }

    override class func tearDown() {
        cluster?.stop()
        cluster = nil
        super.tearDown()
    }

    override func setUp() {
        if let failure = Self.startFailure { XCTFail("cannot start the cluster: \(failure)") }
        loop = EventLoop()
    }

    override func tearDown() {
        loop.close()
    }

    private func client(seeds: [Endpoint]? = nil) throws -> RedisCluster {
        let cluster = try XCTUnwrap(Self.cluster)
        let client = RedisCluster(loop: loop, config: .init(seeds: seeds ?? [cluster.seeds[0]],
                                                            connection: .init(url: try RedisURL(parsing: "redis://127.0.0.1/0"),
                                                                              clientName: "pushgw-test")))
        client.start()
        return client
    }

    private func call(_ client: RedisCluster, _ args: [String], key: String) -> Result<RedisReply, RedisError> {
        var result: Result<RedisReply, RedisError>?
        client.send(args, key: key) { result = $0 }
        drive(loop, waitingFor: "the reply to \(args[0])", until: { result != nil })
        return result ?? .failure(.disconnected)
    }

    func testCommandsAndScriptsReachTheOwnerOfTheirSlot() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let client = try client()
        defer { client.close() }
        let apps = (0..<30).map { "app-\($0)" }
        for app in apps {
            XCTAssertEqual(try call(client, ["SET", "pushgw:{\(app)}:probe", app], key: "pushgw:{\(app)}:probe").get(), .status("OK"))
        }
        XCTAssertEqual(client.map.coveredSlots, HashSlot.count)
        XCTAssertEqual(Set(client.map.primaries.map(\.port)), Set(try cluster.primaries().map(\.port)))
        var ownersUsed = Set<Int>()
        for app in apps {
            let slot = HashSlot(key: app)
            let owner = try cluster.owner(of: slot)
            ownersUsed.insert(owner.port)
            XCTAssertEqual(try owner.cli(["GET", "pushgw:{\(app)}:probe"]), app + "\n", "\(app) is on the owner of slot \(slot)")
        }
        XCTAssertEqual(ownersUsed.count, 3, "thirty apps fall on all three primaries")
        XCTAssertEqual(client.stats.moved + client.stats.asked, 0, "a fresh map sends every command straight to its owner")

        let script = RedisScript("return redis.call('GET', KEYS[1]) .. ARGV[1]")
        for app in apps.prefix(6) {
            let key = "pushgw:{\(app)}:probe"
            var result: Result<RedisReply, RedisError>?
            script.run(on: client.channel(slot: HashSlot(key: key)), keys: [key], args: ["!"]) { result = $0 }
            drive(loop, waitingFor: "the script's reply", until: { result != nil })
            XCTAssertEqual(try result?.get().string, app + "!", "EVAL, then EVALSHA on a node that may not know it (NOSCRIPT → EVAL)")
        }
    }

    /// Slots moved behind the client's back (its map read before, and not read again during
    /// the test: a refresh could correct it before a command finds it stale): each command on a
    /// moved slot goes to the former owner, which answers `-MOVED`, and is followed once to the
    /// new owner, whose slot the map then names. (That a `-MOVED` also asks for a refresh is
    /// `RedisClusterStateMachineTests`'.)
    func testAStaleMapIsCorrectedByMovedAnswers() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let client = RedisCluster(loop: loop, config: .init(seeds: cluster.seeds,
                                                            connection: .init(url: try RedisURL(parsing: "redis://127.0.0.1/0"),
                                                                              clientName: "pushgw-test"),
                                                            refreshEveryMs: 600_000, minRefreshGapMs: 600_000))
        client.start()
        defer { client.close() }
        _ = call(client, ["PING"], key: "warm-up")
        try expectMovedFollowed(client, cluster: cluster, apps: (0..<6).map { "stale-app-\($0)" }, loop: loop)
    }

    /// docs/protocol.md, "On Redis Cluster": a producer with redis-py's cluster client adds events
    /// to six apps on all three primaries and reads one result by id, each command one key.
    func testAProducersClusterClientReachesEveryAppsKeys() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let apps = (0..<6).map { "producer-app-\($0)" }
        let script = """
            import sys
            from redis.cluster import RedisCluster, ClusterNode
            r = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", int(sys.argv[1]))], decode_responses=True)
            for app in sys.argv[2:]:
                key = "pushgw:{" + app + "}:"
                r.xadd(key + "calls", {"event": '{"v":1,"id":"c-' + app + '","type":"incoming_call"}'})
                r.set(key + "result:c-" + app, '{"outcome":"delivered_voip"}')
                assert r.get(key + "result:c-" + app).startswith("{")
            print("ok")
            """
        let (status, out, err) = try runCommand("/usr/bin/python3", ["-c", script, String(cluster.seeds[0].port)] + apps)
        XCTAssertEqual(status, 0, err)
        XCTAssertEqual(out, "ok\n")
        var owners = Set<Int>()
        for app in apps {
            let owner = try cluster.owner(of: HashSlot(key: app))
            owners.insert(owner.port)
            XCTAssertEqual(try owner.cli(["XLEN", "pushgw:{\(app)}:calls"]), "1\n", "\(app)'s event is on its slot's owner")
        }
        XCTAssertGreaterThan(owners.count, 1, "the apps are spread over primaries")
    }

    /// A slot migrated key by key while INCRs run on its keys: every INCR is answered once
    /// (the counters' sum equals the INCRs sent), through `-ASK` during the migration and
    /// `-MOVED` after it.
    func testASlotMigratedWhileCommandsRun() throws {
        let cluster = try XCTUnwrap(Self.cluster)
        let client = try client()
        defer { client.close() }
        let tag = "migrating-app"
        let slot = HashSlot(key: tag)
        _ = call(client, ["PING"], key: tag)
        let from = try cluster.owner(of: slot)
        let to = try XCTUnwrap(try cluster.primaries().first { $0 !== from })
        let keys = (0..<200).map { "pushgw:{\(tag)}:counter:\($0)" }
        var sent = 0, answered = 0, failures: [RedisError] = []
        func round(_ n: Int) {
            let target = answered + n
            for i in 0..<n {
                let key = keys[(sent + i * 7) % keys.count]
                client.send(["INCR", key], key: key) { result in
                    answered += 1
                    if case .failure(let error) = result { failures.append(error) }
                }
            }
            sent += n
            drive(loop, waitingFor: "a round of INCRs", until: { answered >= target })
        }
        round(400)
        try cluster.beginMigration(of: slot, from: from, to: to)
        while try cluster.migrateKeys(of: slot, from: from, to: to, count: 15) > 0 {
            round(100)
        }
        round(200)
        try cluster.finishMigration(of: slot, from: from, to: to)
        round(300)

        XCTAssertEqual(failures, [])
        XCTAssertEqual(answered, sent)
        var total = 0
        for key in keys { total += Int(try to.cli(["GET", key]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
        XCTAssertEqual(total, sent, "every INCR ran exactly once")
        XCTAssertEqual(try from.cli(["CLUSTER", "COUNTKEYSINSLOT", String(slot.value)]), "0\n")
        XCTAssertGreaterThan(client.stats.asked, 0, "keys already moved were asked for on the importing node")
        XCTAssertGreaterThan(client.stats.moved, 0, "the finished migration answered MOVED")
        XCTAssertEqual(client.map.owner(of: slot)?.port, to.port)
        print("slot \(slot) migrated from :\(from.port) to :\(to.port) under \(sent) INCRs: followed \(client.stats.asked) ASK and \(client.stats.moved) MOVED redirects, \(client.stats.refreshes) map refreshes")
    }

    /// An app's blocking read lost with its connection may have been served by Redis (its
    /// entries then pending for the consumer, their reply lost): the store reports it, so the
    /// router claims its own entries back within seconds. A read that came back does not.
    func testAReadLostWithItsConnectionIsReportedAndAnAnsweredOneIsNot() throws {
        let nodes = try XCTUnwrap(Self.cluster)
        let client = try client()
        let app = AppKeys(prefix: "pushgw", app: "lost-read")
        let store = CallStore(config: .init(), apps: [app], topology: .cluster(client), readBlockMs: 30_000)
        defer { store.close() }
        var reported = 0
        store.onReadReplyMayBeLost = { reported += 1 }
        XCTAssertNotNil(complete(loop) { store.ensureGroup(app, completion: $0) }.value())
        let owner = try nodes.owner(of: HashSlot(key: app.calls))
        _ = try owner.cli(["XADD", app.calls, "*", "event", "{}"])
        let answered = complete(loop) { store.readNew(apps: [app], consumer: "c1", count: 10, blockMs: 5_000, completion: $0) }
        XCTAssertEqual(answered.value()?[app]?.count, 1, "the entry written before the read")
        XCTAssertEqual(reported, 0, "an answered read is not reported")

        var lost: Result<[AppKeys: [StreamEntry]], RedisError>?
        store.readNew(apps: [app], consumer: "c1", count: 10, blockMs: 20_000) { lost = $0 }
        /// The id of the app's read connection while it blocks in `XREADGROUP` on the owner.
        func blockedRead() -> String? {
            let list = (try? owner.cli(["CLIENT", "LIST"])) ?? ""
            return list.split(separator: "\n").first { $0.contains(" name=pushgw-test-read:lost-read ") && $0.contains(" cmd=xreadgroup") }
                .flatMap { $0.split(separator: " ").first { $0.hasPrefix("id=") }?.dropFirst(3) }.map(String.init)
        }
        var killed = false
        drive(loop, waitingFor: "the app's read blocking on its primary, then killed", until: {
            guard !killed, let id = blockedRead() else { return killed }
            killed = (try? owner.cli(["CLIENT", "KILL", "ID", id])) == "1\n"
            return false
        })
        drive(loop, waitingFor: "the lost read's answer", until: { lost != nil })
        guard case .failure(.disconnected)? = lost else { return XCTFail("the read fails with its connection: \(String(describing: lost))") }
        XCTAssertEqual(reported, 1, "the lost read is reported once")
    }
}

/// `RedisCluster` on a cluster that runs TLS everywhere (docs/operations.md, "Which nodes get
/// the credentials"): clients on the TLS ports only, the cluster bus and replication over TLS
/// (`tls-cluster yes`, `tls-replication yes`), as redis-server 7 of Debian 12 runs it. The
/// slot map names each node's TLS port, certificates are verified against the test CA, and a
/// stale map is corrected by `-MOVED` answers over TLS too.
final class RedisClusterOverTLSTests: XCTestCase {
    func testCommandsReachEveryPrimaryOverTLSAndMovedIsFollowed() throws {
        let cluster = try LocalRedisCluster.start(primaries: 3, transport: .tls)
        defer { cluster.stop() }
        let loop = EventLoop()
        defer { loop.close() }
        let node = cluster.nodes[0]
        let client = RedisCluster(loop: loop, config: .init(seeds: [cluster.seeds[0]],
                                                            connection: .init(url: try RedisURL(parsing: "rediss://cluster/0"),
                                                                              tls: node.tls, clientName: "pushgw-test"),
                                                            refreshEveryMs: 600_000, minRefreshGapMs: 600_000))
        client.start()
        defer { client.close() }
        func call(_ args: [String], key: String) -> Result<RedisReply, RedisError> {
            var result: Result<RedisReply, RedisError>?
            client.send(args, key: key) { result = $0 }
            drive(loop, waitingFor: "the reply to \(args[0])", until: { result != nil })
            return result ?? .failure(.disconnected)
        }
        let apps = (0..<12).map { "app-\($0)" }
        for app in apps {
            XCTAssertEqual(try call(["SET", "pushgw:{\(app)}:probe", app], key: "pushgw:{\(app)}:probe").get(), .status("OK"))
        }
        XCTAssertEqual(Set(client.map.primaries.map(\.port)), Set(try cluster.primaries().map(\.port)),
                       "the map names the TLS ports (the nodes have no plain port)")
        XCTAssertEqual(Set(apps.map { try? cluster.owner(of: HashSlot(key: $0)).port }).count, 3, "every primary served")
        try expectMovedFollowed(client, cluster: cluster, apps: (0..<3).map { "tls-stale-app-\($0)" }, loop: loop)
        XCTAssertEqual(client.stats.refused, [:], "every node of the cluster is on a seed's host")
        let clients = try node.cli(["CLIENT", "LIST"])
        XCTAssertTrue(clients.contains("name=pushgw-test"), "pushgw's connection is on the node")
    }
}

/// Moves the slot of each of `apps` (distinct slots, no keys yet) to another primary behind
/// `client`'s back, then writes and deletes a key of each through it: each write goes to the
/// former owner by the stale map, is answered `-MOVED` and followed once, and the map then names
/// the new owner. The slots are moved back at the end. `client` must not refresh meanwhile.
func expectMovedFollowed(_ client: RedisCluster, cluster: LocalRedisCluster, apps: [String], loop: EventLoop,
                         file: StaticString = #filePath, line: UInt = #line) throws {
    func call(_ args: [String], key: String) -> Result<RedisReply, RedisError> {
        var result: Result<RedisReply, RedisError>?
        client.send(args, key: key) { result = $0 }
        drive(loop, waitingFor: "the reply to \(args[0])", until: { result != nil })
        return result ?? .failure(.disconnected)
    }
    let slots = apps.map { HashSlot(key: $0) }
    XCTAssertEqual(Set(slots).count, apps.count, "one slot per app", file: file, line: line)
    let movedBefore = client.stats.moved
    var moves: [(slot: HashSlot, from: RedisServer, to: RedisServer)] = []
    defer { for move in moves { _ = try? cluster.moveSlot(move.slot, to: move.from) } }
    for slot in slots {
        let from = try cluster.owner(of: slot)
        let to = try XCTUnwrap(try cluster.primaries().first { $0 !== from }, file: file, line: line)
        try cluster.moveSlot(slot, to: to)
        moves.append((slot, from, to))
    }
    for (app, move) in zip(apps, moves) {
        let key = "pushgw:{\(app)}:moved"
        XCTAssertEqual(client.map.owner(of: move.slot)?.port, move.from.port, "the client's map is stale for \(app)", file: file, line: line)
        XCTAssertEqual(try call(["SET", key, "1"], key: key).get(), .status("OK"), file: file, line: line)
        XCTAssertEqual(client.map.owner(of: move.slot)?.port, move.to.port, "the MOVED answer corrected the map", file: file, line: line)
        XCTAssertEqual(try move.to.cli(["GET", key]), "1\n", "the write reached the new owner", file: file, line: line)
        XCTAssertEqual(try call(["DEL", key], key: key).get(), .integer(1), file: file, line: line)
    }
    XCTAssertEqual(client.stats.moved - movedBefore, apps.count, "each write on a moved slot was followed once", file: file, line: line)
}
