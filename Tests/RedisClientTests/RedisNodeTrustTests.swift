import EventLoop
import TestSupport
import XCTest
@testable import RedisClient

/// Which nodes get the Redis credentials (docs/operations.md, "Which nodes get the
/// credentials"): a cluster node or a sentinel that names a host nobody configured or the
/// cluster announced — a `-MOVED`, an `-ASK`, a slot map, a primary — gets nothing sent there.
/// The hostile nodes are `RecordingRedisNode`s on other loopback addresses (127.0.0.2 is
/// another host for pushgw's checks), recording every connection and command; each refusal test
/// has a twin that allows the host and sees the password arrive, so the recorder would show a
/// leak.
final class RedisNodeTrustTests: XCTestCase {
    private static let password = "cluster-SECRET-7"
    private var loop: EventLoop!
    private var nodes: [RecordingRedisNode] = []

    override func setUp() {
        loop = EventLoop()
    }

    override func tearDown() {
        loop.close()
        nodes.forEach { $0.stop() }
    }

    /// A node on `host` that plays the handshake, then `answer` (given the command and the
    /// node itself; nil: `+OK`).
    private func node(_ host: String, _ answer: @escaping @Sendable (_ args: [String], _ me: RecordingRedisNode) -> String?) throws
        -> RecordingRedisNode {
        let node = try RecordingRedisNode(host: host) { args, me in
            RecordingRedisNode.handshake(args) ?? answer(args, me) ?? "+OK\r\n"
        }
        nodes.append(node)
        return node
    }

    /// A seed on 127.0.0.1 that owns every slot (it answers `CLUSTER SLOTS`, not `SHARDS`, as
    /// a server before 7.0 does) and answers data commands with `redirect`.
    private func seed(slotsOwner: (@Sendable () -> (host: String, port: Int))? = nil,
                      redirect: @escaping @Sendable () -> String?) throws -> RecordingRedisNode {
        try node("127.0.0.1") { args, me in
            switch (args.first?.uppercased(), args.dropFirst().first?.uppercased()) {
            case ("CLUSTER", "SHARDS"): return "-ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.\r\n"
            case ("CLUSTER", "SLOTS"): return RecordingRedisNode.slots(owner: slotsOwner?() ?? (me.host, me.port))
            default: return redirect()
            }
        }
    }

    private func cluster(seed: RecordingRedisNode, allowedHosts: [String]? = nil) throws -> RedisCluster {
        let url = try RedisURL(parsing: "redis://pushgw:\(Self.password)@cluster/0")
        let client = RedisCluster(loop: loop, config: .init(seeds: [Endpoint(host: seed.host, port: seed.port)],
                                                            connection: .init(url: url), minRefreshGapMs: 0,
                                                            allowedHosts: allowedHosts?.map { HostPattern(parsing: $0)! }))
        client.start()
        return client
    }

    private func call(_ client: RedisCluster, _ args: [String]) -> Result<RedisReply, RedisError> {
        var result: Result<RedisReply, RedisError>?
        client.send(args, key: "pushgw:{acme}:calls") { result = $0 }
        drive(loop, waitingFor: "the answer to \(args[0])", until: { result != nil })
        return result ?? .failure(.disconnected)
    }

    private func sentAuth(_ node: RecordingRedisNode) -> Bool {
        node.commands.contains { $0.first?.uppercased() == "AUTH" && $0.contains(Self.password) }
    }

    // MARK: Redirects

    func testAMovedToAnUnknownHostSendsItNothing() throws {
        let stranger = try node("127.0.0.2") { _, _ in nil }
        let seed = try seed { "-MOVED 15495 127.0.0.2:\(stranger.port)\r\n" }
        let client = try cluster(seed: seed)
        defer { client.close() }
        var reported: [RedisNodeRefusal] = []
        client.onRefusal = { reported.append($0) }
        let result = call(client, ["XADD", "pushgw:{acme}:calls", "*", "event", "{}"])
        guard case .failure(.refusedNode(let refusal)) = result else { return XCTFail("expected a refusal, got \(result)") }
        XCTAssertEqual(refusal.kind, .moved)
        XCTAssertEqual(refusal.node, Endpoint(host: "127.0.0.2", port: stranger.port))
        XCTAssertEqual(reported, [refusal])
        XCTAssertEqual(client.stats.refused, [.moved: 1])
        XCTAssertTrue(sentAuth(seed), "the seed, a configured node, got the credentials")
        pause(loop, ms: 200)
        XCTAssertEqual(stranger.connections, 0, "not even a TCP connection")
        XCTAssertEqual(stranger.commands, [])
        XCTAssertTrue("\(RedisError.refusedNode(refusal))".contains("redis.cluster.allowed_hosts"), "the error names the fix")
    }

    func testAnAskToAnUnknownHostSendsItNothing() throws {
        let stranger = try node("127.0.0.2") { _, _ in nil }
        let seed = try seed { "-ASK 15495 127.0.0.2:\(stranger.port)\r\n" }
        let client = try cluster(seed: seed)
        defer { client.close() }
        let result = call(client, ["XADD", "pushgw:{acme}:calls", "*", "event", "{}"])
        guard case .failure(.refusedNode(let refusal)) = result else { return XCTFail("expected a refusal, got \(result)") }
        XCTAssertEqual(refusal.kind, .ask)
        XCTAssertEqual(client.stats.refused, [.ask: 1])
        pause(loop, ms: 200)
        XCTAssertEqual(stranger.connections, 0)
        XCTAssertEqual(stranger.commands, [])
    }

    /// The twin of the two above: with the stranger's host allowed, the redirect is followed
    /// and the recorder sees the password, which is what the refusals keep from it.
    func testAnAllowedHostIsFollowedAndGetsTheCredentials() throws {
        let other = try node("127.0.0.2") { args, _ in args.first?.uppercased() == "XADD" ? "$3\r\n1-1\r\n" : nil }
        let seed = try seed { "-ASK 15495 127.0.0.2:\(other.port)\r\n" }
        let client = try cluster(seed: seed, allowedHosts: ["127.0.0.0/24"])
        defer { client.close() }
        XCTAssertEqual(try call(client, ["XADD", "pushgw:{acme}:calls", "*", "event", "{}"]).get(), .bulk(Array("1-1".utf8)))
        XCTAssertTrue(sentAuth(other), "a followed redirect carries the credentials: what a refusal keeps from a stranger")
        XCTAssertEqual(other.commands.last?.first, "XADD")
        XCTAssertEqual(client.stats.refused, [:])
        XCTAssertEqual(client.stats.asked, 1)
    }

    // MARK: Slot maps

    /// The seed names a primary on another host (trusted: the cluster announced it); that
    /// primary, asked first at the next refresh, answers a map naming a stranger: the map is not
    /// used, the seed's is, and the stranger gets nothing.
    func testASlotMapNamingAStrangerIsNotUsed() throws {
        let stranger = try node("127.0.0.2") { _, _ in nil }
        let liar = try node("127.0.0.3") { args, _ in
            if args.first?.uppercased() == "CLUSTER" {
                return args.dropFirst().first?.uppercased() == "SHARDS" ? "-ERR unknown subcommand\r\n"
                    : RecordingRedisNode.slots(owner: ("127.0.0.2", stranger.port))
            }
            return args.first?.uppercased() == "GET" ? "$5\r\nvalue\r\n" : nil
        }
        let seed = try seed(slotsOwner: { ("127.0.0.3", liar.port) }) { nil }
        let client = try cluster(seed: seed)
        defer { client.close() }
        var reported: [RedisNodeRefusal] = []
        client.onRefusal = { reported.append($0) }
        XCTAssertEqual(try call(client, ["GET", "pushgw:{acme}:calls"]).get(), .bulk(Array("value".utf8)),
                       "the primary the seed announced serves the slot")
        client.requestRefresh()
        drive(loop, waitingFor: "a second map", until: { client.stats.refreshes >= 2 })
        XCTAssertEqual(client.map.primaries, [Endpoint(host: "127.0.0.3", port: liar.port)], "the seed's map, not the liar's")
        XCTAssertEqual(reported.map(\.kind), [.slotMap])
        XCTAssertEqual(reported.first?.namedBy, Endpoint(host: "127.0.0.3", port: liar.port))
        XCTAssertEqual(client.stats.refused, [.slotMap: 1])
        XCTAssertEqual(try call(client, ["GET", "pushgw:{acme}:calls"]).get(), .bulk(Array("value".utf8)))
        pause(loop, ms: 200)
        XCTAssertEqual(stranger.connections, 0)
    }

    /// With `allowed_hosts`, even a seed's map is held to the list: a seed naming a primary
    /// outside it leaves the slots without an owner (commands fail, naming the refusal).
    func testWithAllowedHostsASeedsMapIsCheckedToo() throws {
        let stranger = try node("127.0.0.2") { _, _ in nil }
        let seed = try seed(slotsOwner: { ("127.0.0.2", stranger.port) }) { nil }
        let client = try cluster(seed: seed, allowedHosts: ["10.0.0.0/8"])
        defer { client.close() }
        let result = call(client, ["GET", "pushgw:{acme}:calls"])
        guard case .failure(.connectFailed(let why)) = result else { return XCTFail("expected no map, got \(result)") }
        XCTAssertTrue(why.contains("not a trusted node"), why)
        XCTAssertEqual(client.stats.refused[.slotMap, default: 0], 1, "counted once per refresh")
        pause(loop, ms: 200)
        XCTAssertEqual(stranger.connections, 0)
    }

    // MARK: Sentinels

    private func sentinelConnection(_ sentinel: RecordingRedisNode, allowedHosts: [String]? = nil) throws -> (RedisConnection, RedisSentinels) {
        let options = RedisSentinelOptions(master: "mymaster", addresses: [Endpoint(host: sentinel.host, port: sentinel.port)],
                                           allowedHosts: allowedHosts?.map { HostPattern(parsing: $0)! })
        let config = RedisConnection.Config(url: try RedisURL(parsing: "redis://pushgw:\(Self.password)@mymaster/0"),
                                            sentinel: options)
        let sentinels = RedisSentinels(loop: loop, options: options, tls: config.tls, watchdogMs: config.watchdogMs)
        let connection = RedisConnection(loop: loop, config: config, sentinels: sentinels)
        connection.start()
        return (connection, sentinels)
    }

    func testASentinelNamingAnUnknownPrimarySendsItNothing() throws {
        let stranger = try node("127.0.0.2") { _, _ in nil }
        let sentinel = try node("127.0.0.1") { args, _ in
            args.first?.uppercased() == "SENTINEL"
                ? "*2\r\n\(RecordingRedisNode.bulk("127.0.0.2"))\(RecordingRedisNode.bulk(String(stranger.port)))" : nil
        }
        let (connection, sentinels) = try sentinelConnection(sentinel)
        defer { connection.close(); sentinels.close() }
        var reported: [RedisNodeRefusal] = []
        sentinels.onRefusal = { reported.append($0) }
        var result: Result<RedisReply, RedisError>?
        connection.send(["PING"]) { result = $0 }
        drive(loop, waitingFor: "the PING to fail", until: { result != nil })
        guard case .failure(.connectFailed(let why))? = result else { return XCTFail("expected a refusal, got \(String(describing: result))") }
        XCTAssertTrue(why.contains("redis.sentinel.allowed_hosts"), why)
        XCTAssertGreaterThanOrEqual(sentinels.refused, 1)
        XCTAssertEqual(reported.first?.node, Endpoint(host: "127.0.0.2", port: stranger.port))
        pause(loop, ms: 200)
        XCTAssertEqual(stranger.connections, 0)
        XCTAssertEqual(stranger.commands, [])
    }

    /// The twin: the same sentinel with the host allowed sends the connection there, AUTH first.
    func testASentinelsPrimaryOnAnAllowedHostGetsTheCredentials() throws {
        let primary = try node("127.0.0.2") { _, _ in nil }
        let sentinel = try node("127.0.0.1") { args, _ in
            args.first?.uppercased() == "SENTINEL"
                ? "*2\r\n\(RecordingRedisNode.bulk("127.0.0.2"))\(RecordingRedisNode.bulk(String(primary.port)))" : nil
        }
        let (connection, sentinels) = try sentinelConnection(sentinel, allowedHosts: ["127.0.0.2"])
        defer { connection.close(); sentinels.close() }
        var result: Result<RedisReply, RedisError>?
        connection.send(["PING"]) { result = $0 }
        drive(loop, waitingFor: "the PING", until: { result != nil })
        XCTAssertEqual(try result?.get(), .status("PONG"))
        XCTAssertTrue(sentAuth(primary))
        XCTAssertEqual(sentinels.refused, 0)
    }

    /// A `+switch-master` naming a stranger is ignored: the connection stays on its primary.
    func testASwitchMasterToAnUnknownHostIsIgnored() throws {
        let real = try RedisServer.start()
        defer { real.stop() }
        let stranger = try node("127.0.0.2") { _, _ in nil }
        let sentinel = try node("127.0.0.1") { args, _ in
            switch args.first?.uppercased() {
            case "SENTINEL":
                return "*2\r\n\(RecordingRedisNode.bulk("127.0.0.1"))\(RecordingRedisNode.bulk(String(real.port)))"
            case "SUBSCRIBE":
                let announcement = "mymaster 127.0.0.1 \(real.port) 127.0.0.2 \(stranger.port)"
                return "*3\r\n\(RecordingRedisNode.bulk("subscribe"))\(RecordingRedisNode.bulk("+switch-master")):1\r\n"
                    + "*3\r\n\(RecordingRedisNode.bulk("message"))\(RecordingRedisNode.bulk("+switch-master"))\(RecordingRedisNode.bulk(announcement))"
            default:
                return nil
            }
        }
        let options = RedisSentinelOptions(master: "mymaster", addresses: [Endpoint(host: sentinel.host, port: sentinel.port)])
        let config = RedisConnection.Config(url: try RedisURL(parsing: "redis://mymaster/0"), sentinel: options)
        let sentinels = RedisSentinels(loop: loop, options: options, tls: config.tls, watchdogMs: config.watchdogMs)
        let connection = RedisConnection(loop: loop, config: config, sentinels: sentinels)
        connection.start()
        defer { connection.close(); sentinels.close() }
        drive(loop, waitingFor: "the announcement", until: { sentinels.refused >= 1 })
        var result: Result<RedisReply, RedisError>?
        connection.send(["SET", "k", "stays"]) { result = $0 }
        drive(loop, waitingFor: "the SET", until: { result != nil })
        XCTAssertEqual(try result?.get(), .status("OK"))
        XCTAssertEqual(try real.cli(["GET", "k"]), "stays\n")
        XCTAssertEqual(stranger.connections, 0)
    }
}
