import EventLoop
import XCTest
@testable import CallStorage
@testable import RedisClient

/// The pieces of the cluster client that decide without I/O: key slots (the cluster
/// specification's test vectors), reading `CLUSTER SHARDS`/`CLUSTER SLOTS` answers as Redis 7
/// sends them over RESP2, redirects, and the course of one command through them.
final class ClusterProtocolTests: XCTestCase {
    // MARK: Hash slots

    func testCRC16IsTheSpecificationsXModem() {
        let crc = Array("123456789".utf8).withUnsafeBytes { HashSlot.crc16($0) }
        XCTAssertEqual(crc, 0x31C3, "the cluster specification's test vector")
    }

    /// Each key against the slot `CLUSTER KEYSLOT` gives for it (redis-server 7.0.15 with
    /// `cluster-enabled yes`), so a broken tag rule changes a number and fails here.
    func testHashTagRules() {
        let keyslot: [(key: String, slot: Int, rule: String)] = [
            ("foo", 12182, "no tag: the whole key"),
            ("bar", 5061, "no tag: the whole key"),
            ("", 0, "the empty key"),
            ("user1000", 3443, "no tag: the whole key"),
            ("{user1000}.following", 3443, "the tag alone is hashed"),
            ("{user1000}.followers", 3443, "the tag alone is hashed"),
            ("foo{}{bar}", 8363, "an empty first tag: the whole key is hashed, not `bar`"),
            ("{}", 15257, "an empty tag: the whole key is hashed"),
            ("foo{{bar}}zap", 4015, "the tag runs from the first { to the first } after it: `{bar`"),
            ("{bar", 4015, "no }: the whole key"),
            ("foo{bar}{zap}", 5061, "only the first tag counts: `bar`"),
            ("no-close{tag", 2638, "no }: the whole key"),
            ("com.example.voip", 2506, "an app id"),
            ("pushgw:{com.example.voip}:calls", 2506, "an app's key: the slot of its id"),
        ]
        for (key, slot, rule) in keyslot {
            XCTAssertEqual(HashSlot(key: key).value, slot, "CLUSTER KEYSLOT \(key): \(rule)")
        }
        XCTAssertNotEqual(HashSlot(key: "foo{}{bar}"), HashSlot(key: "bar"), "an empty tag does not fall through to the next one")
    }

    func testEveryKeyOfAnAppSharesTheSlotOfItsId() {
        let app = AppKeys(prefix: "pushgw", app: "com.example.voip")
        let slot = HashSlot(key: "com.example.voip")
        for key in [app.calls, app.results, app.dead, app.feedback, app.result("1-0"), app.cancelled("x"),
                    app.retrySchedule, app.retryData, app.retryByCall, app.invalidPrefix(.voip) + "ab"] {
            XCTAssertEqual(HashSlot(key: key), slot, key)
        }
    }

    func testSlotBounds() {
        XCTAssertNil(HashSlot(-1))
        XCTAssertNil(HashSlot(16_384))
        XCTAssertEqual(HashSlot(16_383)?.value, 16_383)
    }

    // MARK: Slot maps

    private static func node(_ fields: [(String, RedisReply)]) -> RedisReply {
        .array(fields.flatMap { [RedisReply.bulk(Array($0.0.utf8)), $0.1] })
    }

    private static func text(_ s: String) -> RedisReply { .bulk(Array(s.utf8)) }

    /// A `CLUSTER SHARDS` answer as redis-server 7.0 sends it to a RESP2 client.
    private static func shards(_ list: [(slots: [Int], nodes: [(port: Int, tlsPort: Int?, ip: String, role: String, health: String)])]) -> RedisReply {
        .array(list.map { shard in
            node([("slots", .array(shard.slots.map { .integer(Int64($0)) })),
                  ("nodes", .array(shard.nodes.map { n in
                      var fields: [(String, RedisReply)] = [("id", text("0cf8e32b25d9")), ("port", .integer(Int64(n.port)))]
                      if let tls = n.tlsPort { fields.append(("tls-port", .integer(Int64(tls)))) }
                      fields += [("ip", text(n.ip)), ("endpoint", text(n.ip)), ("role", text(n.role)),
                                 ("replication-offset", .integer(0)), ("health", text(n.health))]
                      return node(fields)
                  }))])
        })
    }

    func testShardsGiveEachSlotItsOnlinePrimary() throws {
        let reply = Self.shards([
            (slots: [10923, 16383], nodes: [(7003, nil, "10.0.0.3", "master", "online"), (7006, nil, "10.0.0.6", "replica", "online")]),
            (slots: [0, 5460, 6000, 6000], nodes: [(7001, nil, "10.0.0.1", "master", "online")]),
            (slots: [5461, 5999, 6001, 10922], nodes: [(7002, nil, "10.0.0.2", "master", "failed"), (7005, nil, "10.0.0.5", "master", "online")]),
        ])
        let map = try ClusterSlotMap(shards: reply, tls: false, askedHost: "seed")
        XCTAssertEqual(map.owner(of: HashSlot(0)!), Endpoint(host: "10.0.0.1", port: 7001))
        XCTAssertEqual(map.owner(of: HashSlot(6000)!), Endpoint(host: "10.0.0.1", port: 7001))
        XCTAssertEqual(map.owner(of: HashSlot(6001)!), Endpoint(host: "10.0.0.5", port: 7005), "the promoted replica, not the failed primary")
        XCTAssertEqual(map.owner(of: HashSlot(16383)!), Endpoint(host: "10.0.0.3", port: 7003), "never a replica")
        XCTAssertEqual(map.coveredSlots, 16_384)
        XCTAssertEqual(Set(map.primaries), [Endpoint(host: "10.0.0.1", port: 7001), Endpoint(host: "10.0.0.5", port: 7005),
                                            Endpoint(host: "10.0.0.3", port: 7003)])
        XCTAssertEqual(map.announced, Set([7001, 7002, 7003, 7005, 7006].map { Endpoint(host: "10.0.0.\($0 - 7000)", port: $0) }),
                       "every node the cluster names, replicas and failed ones too")
    }

    func testShardsWithoutAnOnlinePrimaryLeaveTheirSlotsUnowned() throws {
        let reply = Self.shards([
            (slots: [0, 8191], nodes: [(7001, nil, "10.0.0.1", "master", "failed"), (7004, nil, "10.0.0.4", "replica", "online")]),
            (slots: [8192, 16383], nodes: [(7002, 7102, "10.0.0.2", "master", "online")]),
        ])
        let map = try ClusterSlotMap(shards: reply, tls: true, askedHost: "seed")
        XCTAssertNil(map.owner(of: HashSlot(0)!))
        XCTAssertEqual(map.owner(of: HashSlot(8192)!), Endpoint(host: "10.0.0.2", port: 7102), "TLS picks the tls-port")
        XCTAssertEqual(map.coveredSlots, 8192)
    }

    func testShardsRefuseBadShapes() {
        XCTAssertThrowsError(try ClusterSlotMap(shards: .integer(1), tls: false, askedHost: "h"))
        XCTAssertThrowsError(try ClusterSlotMap(shards: .array([Self.node([("slots", .array([.integer(5)]))])]), tls: false, askedHost: "h"))
        XCTAssertThrowsError(try ClusterSlotMap(shards: Self.shards([(slots: [9, 20000], nodes: [(1, nil, "h", "master", "online")])]),
                                                tls: false, askedHost: "h"), "a slot beyond 16383")
        for port in [0, 65_536] {
            XCTAssertThrowsError(try ClusterSlotMap(shards: Self.shards([(slots: [0, 9], nodes: [(port, nil, "h", "master", "online")])]),
                                                    tls: false, askedHost: "h"), "port \(port)")
        }
        XCTAssertThrowsError(try ClusterSlotMap(shards: Self.shards([(slots: [0, 9], nodes: [(7000, nil, "a b", "master", "online")])]),
                                                tls: false, askedHost: "h"), "a host that is no host name")
    }

    func testSlotsAnswerOfOlderServers() throws {
        let reply = RedisReply.array([
            .array([.integer(0), .integer(5460), .array([Self.text("127.0.0.1"), .integer(17001), Self.text("id1")]),
                    .array([Self.text("127.0.0.1"), .integer(17004), Self.text("id4")])]),
            .array([.integer(5461), .integer(16383), .array([Self.text(""), .integer(17002), Self.text("id2")])]),
        ])
        let map = try ClusterSlotMap(slots: reply, askedHost: "10.1.1.1")
        XCTAssertEqual(map.owner(of: HashSlot(5460)!), Endpoint(host: "127.0.0.1", port: 17001))
        XCTAssertEqual(map.owner(of: HashSlot(5461)!), Endpoint(host: "10.1.1.1", port: 17002), "no host: the node asked")
        XCTAssertEqual(map.announced, [Endpoint(host: "127.0.0.1", port: 17001), Endpoint(host: "127.0.0.1", port: 17004),
                                       Endpoint(host: "10.1.1.1", port: 17002)], "the replicas listed after each primary too")
        XCTAssertThrowsError(try ClusterSlotMap(slots: .array([.array([.integer(3), .integer(1)])]), askedHost: "h"))
        for (host, port) in [("h", 0), ("h", 65_536), (String(repeating: "h", count: 254), 7000)] {
            XCTAssertThrowsError(try ClusterSlotMap(slots: .array([.array([.integer(0), .integer(9),
                                                                           .array([Self.text(host), .integer(Int64(port))])])]),
                                                    askedHost: "h"), "\(host.prefix(8)):\(port)")
        }
    }

    func testMovedSlotsChangeHandsAndPrimariesWithoutSlotsLeave() {
        var map = ClusterSlotMap()
        let a = Endpoint(host: "a", port: 1), b = Endpoint(host: "b", port: 2)
        map.assign(0...9, to: a)
        map.assign(10...16383, to: b)
        map.assign(5...5, to: b)
        XCTAssertEqual(map.owner(of: HashSlot(5)!), b)
        XCTAssertEqual(map.slots(of: a).map(\.value), [0, 1, 2, 3, 4, 6, 7, 8, 9])
        map.assign(0...9, to: b)
        XCTAssertEqual(map.primaries, [b], "a owns nothing any more")
        XCTAssertEqual(map.owner(of: HashSlot(16383)!), b)
    }

    // MARK: Redirects

    func testRedirectsAreRead() {
        XCTAssertEqual(ClusterRedirect(errorMessage: "MOVED 3999 127.0.0.1:6381", currentHost: "x"),
                       .moved(HashSlot(3999)!, Endpoint(host: "127.0.0.1", port: 6381)))
        XCTAssertEqual(ClusterRedirect(errorMessage: "ASK 3999 10.0.0.2:7002", currentHost: "x"),
                       .ask(HashSlot(3999)!, Endpoint(host: "10.0.0.2", port: 7002)))
        XCTAssertEqual(ClusterRedirect(errorMessage: "MOVED 1 :7000", currentHost: "10.9.9.9"),
                       .moved(HashSlot(1)!, Endpoint(host: "10.9.9.9", port: 7000)), "no endpoint: the node that answered")
        XCTAssertEqual(ClusterRedirect(errorMessage: "MOVED 1 [::1]:7000", currentHost: "x"), .moved(HashSlot(1)!, Endpoint(host: "::1", port: 7000)))
        XCTAssertEqual(ClusterRedirect(errorMessage: "TRYAGAIN Multiple keys request during rehashing of slot", currentHost: "x"), .tryAgain)
        XCTAssertEqual(ClusterRedirect(errorMessage: "CLUSTERDOWN The cluster is down", currentHost: "x"), .clusterDown)
        XCTAssertNil(ClusterRedirect(errorMessage: "CROSSSLOT Keys in request don't hash to the same slot", currentHost: "x"))
        XCTAssertNil(ClusterRedirect(errorMessage: "MOVED 16384 h:1", currentHost: "x"))
        XCTAssertNil(ClusterRedirect(errorMessage: "MOVED 12 h:port", currentHost: "x"))
        XCTAssertNil(ClusterRedirect(errorMessage: "MOVED 12 h:0", currentHost: "x"))
        XCTAssertNil(ClusterRedirect(errorMessage: "ASK 12 h:65536", currentHost: "x"))
        XCTAssertNil(ClusterRedirect(errorMessage: "ERR MOVED 1 h:2", currentHost: "x"))
    }

    func testACommandFollowsRedirectsWithinItsLimits() {
        var course = ClusterCommandCourse()
        course.maxRedirects = 2
        XCTAssertEqual(course.onAnswer(error: nil, answeredBy: Self.at("a"), trust: Self.anyNode, random: 0), .complete)
        XCTAssertEqual(course.onAnswer(error: .server("MOVED 7 b:2"), answeredBy: Self.at("a"), trust: Self.anyNode, random: 0),
                       .resendAfterMove(HashSlot(7)!, Endpoint(host: "b", port: 2)))
        XCTAssertEqual(course.onAnswer(error: .server("ASK 7 c:3"), answeredBy: Self.at("b"), trust: Self.anyNode, random: 0), .resendAsking(Endpoint(host: "c", port: 3)))
        XCTAssertEqual(course.onAnswer(error: .server("MOVED 7 b:2"), answeredBy: Self.at("c"), trust: Self.anyNode, random: 0), .complete,
                       "past the limit the redirect goes to the caller as an error")
        XCTAssertEqual(course.redirects, 2)
        XCTAssertEqual(course.onAnswer(error: .server("NOSCRIPT no"), answeredBy: Self.at("a"), trust: Self.anyNode, random: 0), .complete)
        XCTAssertEqual(course.onAnswer(error: .disconnected, answeredBy: Self.at("a"), trust: Self.anyNode, random: 0), .complete)
    }

    /// A trust that allows the hosts of the test's made-up nodes.
    private static let anyNode = RedisNodeTrust(configured: [], allowedHosts: ["a", "b", "c"].map { HostPattern(exactly: $0) },
                                                learnsFromSeeds: false)
    private static func at(_ host: String) -> Endpoint { Endpoint(host: host, port: 1) }

    func testARedirectToAnUntrustedNodeIsRefusedHereAndNotCounted() {
        let trust = RedisNodeTrust(configured: [Endpoint(host: "10.0.0.1", port: 7000)], allowedHosts: nil, learnsFromSeeds: true)
        let seed = Endpoint(host: "10.0.0.1", port: 7000)
        var course = ClusterCommandCourse()
        XCTAssertEqual(course.onAnswer(error: .server("MOVED 7 10.0.0.1:7001"), answeredBy: seed, trust: trust, random: 0),
                       .resendAfterMove(HashSlot(7)!, Endpoint(host: "10.0.0.1", port: 7001)), "a seed's host, any port")
        XCTAssertEqual(course.onAnswer(error: .server("MOVED 7 10.6.6.6:7000"), answeredBy: seed, trust: trust, random: 0),
                       .refuse(RedisNodeRefusal(kind: .moved, node: Endpoint(host: "10.6.6.6", port: 7000), namedBy: seed)))
        XCTAssertEqual(course.onAnswer(error: .server("ASK 7 evil.example:6379"), answeredBy: seed, trust: trust, random: 0),
                       .refuse(RedisNodeRefusal(kind: .ask, node: Endpoint(host: "evil.example", port: 6379), namedBy: seed)))
        XCTAssertEqual(course.onAnswer(error: .server("ASK 7 :7002"), answeredBy: seed, trust: trust, random: 0),
                       .resendAsking(Endpoint(host: "10.0.0.1", port: 7002)), "an empty host is the node that answered")
        XCTAssertEqual(course.redirects, 2, "refusals are not redirects followed")
    }

    func testTrustLearnsWhatSeedsAnnounceUnlessHostsAreListed() {
        let seed = Endpoint(host: "redis-seed.internal", port: 7000)
        let announced = Endpoint(host: "10.0.0.7", port: 7000)
        var learning = RedisNodeTrust(configured: [seed], allowedHosts: nil, learnsFromSeeds: true)
        XCTAssertTrue(learning.allows(Endpoint(host: "REDIS-SEED.internal.", port: 9)), "names compare without case or trailing dot")
        XCTAssertFalse(learning.allows(announced))
        learning.learn([announced])
        XCTAssertTrue(learning.allows(announced))
        XCTAssertFalse(learning.allows(Endpoint(host: "10.0.0.7", port: 7001)), "announced nodes are trusted by host and port")

        var listed = RedisNodeTrust(configured: [seed], allowedHosts: [HostPattern(parsing: "10.0.0.0/24")!], learnsFromSeeds: true)
        listed.learn([Endpoint(host: "192.168.1.1", port: 7000)])
        XCTAssertFalse(listed.allows(Endpoint(host: "192.168.1.1", port: 7000)), "a list replaces what seeds announce")
        XCTAssertTrue(listed.allows(Endpoint(host: "10.0.0.200", port: 7000)))
        XCTAssertFalse(listed.allows(Endpoint(host: "10.0.1.1", port: 7000)))
        XCTAssertTrue(listed.allows(seed), "the seeds stay trusted")

        let sentinels = RedisSentinelOptions(master: "m", addresses: [Endpoint(host: "10.1.0.1", port: 26379)],
                                             allowedHosts: [HostPattern(parsing: "fd00::/8")!]).trust
        XCTAssertTrue(sentinels.allows(Endpoint(host: "10.1.0.1", port: 6379)), "a sentinel's host")
        XCTAssertTrue(sentinels.allows(Endpoint(host: "fd12::1", port: 6379)))
        XCTAssertFalse(sentinels.allows(Endpoint(host: "10.1.0.2", port: 6379)))
        XCTAssertFalse(sentinels.allows(Endpoint(host: "::1", port: 6379)))
    }

    func testHostPatternsParseNamesAddressesAndNetworks() {
        XCTAssertEqual(HostPattern(parsing: "10.0.0.0/8")?.description, "10.0.0.0/8")
        XCTAssertEqual(HostPattern(parsing: "10.9.9.9/8")?.description, "10.0.0.0/8", "host bits are cleared")
        XCTAssertEqual(HostPattern(parsing: "10.0.0.5")?.description, "10.0.0.5")
        XCTAssertEqual(HostPattern(parsing: "FD00::1/16")?.description, "fd00::/16")
        XCTAssertEqual(HostPattern(parsing: "Redis-1.Internal")?.description, "redis-1.internal")
        XCTAssertTrue(HostPattern(parsing: "0.0.0.0/0")!.matches("203.0.113.9"))
        XCTAssertFalse(HostPattern(parsing: "0.0.0.0/0")!.matches("::1"), "an IPv4 network matches no IPv6 address")
        XCTAssertTrue(HostPattern(parsing: "192.168.0.0/23")!.matches("192.168.1.255"))
        XCTAssertFalse(HostPattern(parsing: "192.168.0.0/23")!.matches("192.168.2.0"))
        XCTAssertFalse(HostPattern(parsing: "10.0.0.5")!.matches("10.0.0.5.evil.example"))
        for bad in ["", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "a b", "evil/8", "host:6379", "10.0.0.0/8x"] {
            XCTAssertNil(HostPattern(parsing: bad), bad)
        }
    }

    func testTryAgainAndClusterDownBackOffThenGiveUp() {
        var course = ClusterCommandCourse()
        course.maxRetries = 3
        var delays: [Int64] = []
        for _ in 0..<3 {
            guard case .retryLater(let ms) = course.onAnswer(error: .server("CLUSTERDOWN The cluster is down"), answeredBy: Self.at("a"), trust: Self.anyNode, random: 1)
            else { return XCTFail("expected a retry") }
            delays.append(ms)
        }
        XCTAssertEqual(delays, [20, 40, 80], "doubling from 20 ms (the top of each jitter range)")
        XCTAssertEqual(course.onAnswer(error: .server("TRYAGAIN"), answeredBy: Self.at("a"), trust: Self.anyNode, random: 0), .complete)
    }
}
