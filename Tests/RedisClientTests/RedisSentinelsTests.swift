import EventLoop
import TestSupport
import XCTest
@testable import RedisClient

/// Connections through Redis Sentinel, against real sentinels (`redis-server --sentinel`)
/// watching real servers: finding the primary, a sentinel that is down, none reachable, and
/// failovers (forced and after a SIGKILL) followed without a restart.
final class RedisSentinelsTests: XCTestCase {
    private var servers: [RedisServer] = []
    private var sentinels: [RedisSentinelServer] = []
    private var loop: EventLoop!

    override func setUp() {
        loop = EventLoop()
    }

    override func tearDown() {
        loop.close()
        sentinels.forEach { $0.stop() }
        servers.forEach { $0.stop() }
    }

    /// A primary, optionally a replica in sync with it, and one sentinel watching them.
    private func deploy(withReplica: Bool) throws -> (primary: RedisServer, replica: RedisServer?, sentinel: RedisSentinelServer) {
        let primary = try RedisServer.start()
        servers.append(primary)
        var replica: RedisServer?
        if withReplica {
            let r = try RedisServer.start(extraArguments: ["--replicaof", "127.0.0.1", String(primary.port)])
            servers.append(r)
            replica = r
            XCTAssertTrue(wait("the replica to sync") { (try? r.cli(["INFO", "replication"]))?.contains("master_link_status:up") == true })
        }
        let sentinel = try RedisSentinelServer.start(watching: primary, downAfterMs: 500, failoverTimeoutMs: 3_000)
        sentinels.append(sentinel)
        if withReplica {
            XCTAssertTrue(wait("the sentinel to learn of the replica") {
                // Listed from the primary's INFO, and connected ("flags slave", no "disconnected").
                let replicas = (try? sentinel.cli(["SENTINEL", "replicas", sentinel.master])) ?? ""
                return replicas.contains(String(replica!.port)) && replicas.contains("\nflags\nslave\n")
            })
        }
        return (primary, replica, sentinel)
    }

    /// Polls `condition` every 50 ms for up to `seconds`, running the loop in between.
    private func wait(_ what: String, seconds: Int64 = 30, _ condition: () -> Bool) -> Bool {
        let end = Clock.monotonicMs() + seconds * 1000
        while Clock.monotonicMs() < end {
            if condition() { return true }
            pause(loop, ms: 50)
        }
        XCTFail("gave up waiting \(seconds) s for \(what)")
        return false
    }

    private func connection(_ addresses: [RedisSentinelOptions.Address], url: String = "redis://mymaster/0",
                            tls: RedisTLSOptions = RedisTLSOptions(), sentinelsOverTLS: Bool = false, password: String? = nil,
                            events: ((RedisConnection.Event) -> Void)? = nil) throws -> RedisConnection {
        let options = RedisSentinelOptions(master: "mymaster", addresses: addresses, password: password, tls: sentinelsOverTLS)
        let c = RedisConnection(loop: loop, config: .init(url: try RedisURL(parsing: url), tls: tls, sentinel: options,
                                                          watchdogMs: 2_000, backoff: ReconnectBackoff(baseMs: 20, capMs: 200)))
        c.onEvent = events
        c.start()
        return c
    }

    /// The port of the server `connection` talks to, as that server reports it.
    private func serverPort(_ connection: RedisConnection) -> Int? {
        guard let info = callUntilSuccess(connection, ["INFO", "server"])?.string else { return nil }
        let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("tcp_port:") }
        return line.flatMap { Int($0.dropFirst("tcp_port:".count)) }
    }

    func testTheSentinelsNameThePrimaryAndOneThatIsDownIsSkipped() throws {
        let (primary, _, sentinel) = try deploy(withReplica: false)
        let down = RedisSentinelOptions.Address(host: "127.0.0.1", port: freeLoopbackPort())
        let redis = try connection([down, sentinel.address])
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["SET", "k", "through the sentinel"]).value(), .status("OK"))
        XCTAssertEqual(try primary.cli(["GET", "k"]), "through the sentinel\n")
        XCTAssertEqual(serverPort(redis), primary.port, "connected to the primary the sentinel named")
        XCTAssertEqual(redis.stats.connectFailures, 0, "a sentinel that is down costs a refused connect, not an attempt")
    }

    func testSentinelsOverTLSNameAPrimaryReachedOverTLS() throws {
        let primary = try RedisServer.start(.tls)
        servers.append(primary)
        let sentinel = try RedisSentinelServer.start(watching: primary)
        sentinels.append(sentinel)
        let redis = try connection([sentinel.address], url: "rediss://mymaster/0", tls: primary.tls, sentinelsOverTLS: true)
        defer { redis.close() }
        XCTAssertEqual(callUntilSuccess(redis, ["SET", "k", "tls all the way"]), .status("OK"))
        XCTAssertEqual(try primary.cli(["GET", "k"]), "tls all the way\n")
    }

    func testTheSentinelsOwnPasswordIsUsedAndAWrongOneIsNamedWithoutIt() throws {
        let primary = try RedisServer.start()
        servers.append(primary)
        let sentinel = try RedisSentinelServer.start(watching: primary, password: "sentinel-pw")
        sentinels.append(sentinel)
        let redis = try connection([sentinel.address], password: "sentinel-pw")
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["PING"]).value(), .status("PONG"))

        let wrong = try connection([sentinel.address], password: "Wr0ng-SENTINEL-pw")
        defer { wrong.close() }
        guard case .failure(.connectFailed(let why)) = call(wrong, ["PING"]) else {
            return XCTFail("a sentinel refusing the password fails the attempt")
        }
        XCTAssertTrue(why.contains("AUTH") && why.contains("WRONGPASS"), why)
        XCTAssertFalse(why.contains("Wr0ng-SENTINEL-pw"), "the password never appears: \(why)")
    }

    func testNoSentinelReachableFailsLikeARedisThatIsDownNamingEach() throws {
        let a = RedisSentinelOptions.Address(host: "127.0.0.1", port: freeLoopbackPort())
        let b = RedisSentinelOptions.Address(host: "127.0.0.1", port: freeLoopbackPort())
        var events: [RedisConnection.Event] = []
        let redis = try connection([a, b]) { events.append($0) }
        defer { redis.close() }
        guard case .failure(.connectFailed(let why)) = call(redis, ["PING"]) else {
            return XCTFail("a command waiting for a connection no sentinel can name fails .connectFailed")
        }
        XCTAssertTrue(why.contains("no sentinel named the primary of 'mymaster'"), why)
        XCTAssertTrue(why.contains("sentinel \(a): ") && why.contains("sentinel \(b): "), "each sentinel's reason: \(why)")
        XCTAssertTrue(why.lowercased().contains("refused"), why)
        XCTAssertEqual(redis.lastProblem, why)
        XCTAssertTrue(events.contains(.connectFailed(why)))
        pause(loop, ms: 300)
        XCTAssertGreaterThan(redis.stats.connectFailures, 1, "and it keeps trying with backoff")
    }

    func testAForcedFailoverIsAnnouncedAndFollowedAtOnce() throws {
        let (primary, replica, sentinel) = try deploy(withReplica: true)
        var lost: [String] = []
        let redis = try connection([sentinel.address]) { if case .lost(let why) = $0 { lost.append(why) } }
        defer { redis.close() }
        XCTAssertEqual(serverPort(redis), primary.port)
        // The watch subscribes right after its connect; an announcement made before would be
        // missed (production then meets READONLY): wait for the subscription.
        XCTAssertTrue(wait("the watch to subscribe") { (try? sentinel.cli(["CLIENT", "LIST"]))?.contains(" sub=1 ") == true })
        // A sentinel refuses (NOGOODSLAVE) until it has the replica's own INFO: ask until it accepts.
        XCTAssertTrue(wait("the sentinel to accept SENTINEL FAILOVER") {
            (try? sentinel.cli(["SENTINEL", "FAILOVER", sentinel.master])) == "OK\n"
        })
        // No command is sent meanwhile. The old primary closes its clients too, but only when
        // the sentinels make it a replica, after the announcement: the reason says which came.
        XCTAssertTrue(wait("+switch-master to move the connection") { !lost.isEmpty })
        XCTAssertTrue(lost.first?.contains("the sentinels announced a new primary") == true, "\(lost)")
        XCTAssertEqual(serverPort(redis), replica?.port, "now on the promoted replica")
        XCTAssertEqual(callUntilSuccess(redis, ["SET", "after", "failover"]), .status("OK"), "and it takes writes")
    }

    func testAKilledPrimaryIsReplacedAndTheConnectionCarriesOn() throws {
        let (primary, replica, sentinel) = try deploy(withReplica: true)
        let redis = try connection([sentinel.address])
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["SET", "before", "1"]).value(), .status("OK"))
        primary.kill9()
        // Writes fail (the primary is gone) until the sentinel promotes the replica; then they
        // succeed on it, on the same RedisConnection.
        XCTAssertTrue(wait("a write to succeed after the failover") {
            if case .success = call(redis, ["INCR", "after"]) { return true }
            return false
        })
        XCTAssertEqual(sentinel.primaryPort(), replica?.port)
        XCTAssertEqual(serverPort(redis), replica?.port)
        XCTAssertGreaterThanOrEqual(redis.stats.ready, 2, "a new connection, made by itself")
    }
}
