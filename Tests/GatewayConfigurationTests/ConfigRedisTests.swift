import EventLoop
import Foundation
import GatewayTestSupport
import RedisClient
import TestSupport
import XCTest
@testable import GatewayConfiguration

/// `redis.url` with `rediss://`, `redis.tls` and `redis.sentinel`: read into the config, and
/// every problem named with its JSON path and fix, the files checked as OpenSSL will use them.
final class ConfigRedisTests: XCTestCase {
    var fixture: ConfigFixture!
    var pki: TestPKI!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
        pki = try TestPKI.shared()
    }

    private func with(_ redis: [String: Any]) -> [String: Any] {
        setting(ConfigFixture.example, "redis", redis)
    }

    func testTLSAndSentinelKeysAreRead() throws {
        let report = try fixture.check(with([
            "url": "rediss://pushgw:data-pw@ignored/2", "prefix": "pg",
            "tls": ["ca_file": pki.caCert, "cert_file": pki.redisClientCert, "key_file": pki.redisClientKey,
                    "server_name": "redis.internal"],
            "sentinel": ["master": "mymaster", "addresses": ["10.0.0.1:26379", "[::1]:26380"], "username": "watcher",
                         "password": "sentinel-SECRET-pw", "tls": true],
        ]))
        XCTAssertEqual(report.problems.map(\.description), [])
        let redis = try XCTUnwrap(report.config?.redis)
        XCTAssertEqual(redis.tls, RedisTLSOptions(caFile: pki.caCert, certFile: pki.redisClientCert, keyFile: pki.redisClientKey,
                                                  serverName: "redis.internal"))
        XCTAssertEqual(redis.sentinel, RedisSentinelOptions(master: "mymaster",
                                                            addresses: [.init(host: "10.0.0.1", port: 26379), .init(host: "::1", port: 26380)],
                                                            username: "watcher", password: "sentinel-SECRET-pw", tls: true))
        let connection = try redis.connection(clientName: "x")
        XCTAssertTrue(connection.url.usesTLS)
        XCTAssertEqual(connection.url.db, 2)
        XCTAssertEqual(connection.sentinel?.master, "mymaster")
        for text in [redis.redactedURL, connection.redactedTarget] {
            XCTAssertFalse(text.contains("SECRET") || text.contains("data-pw"), "no password in \(text)")
            XCTAssertTrue(text.contains("mymaster"), text)
        }
    }

    func testTheDefaultsAreOneRedisWithoutTLS() throws {
        let redis = try XCTUnwrap(try fixture.check(ConfigFixture.example).config?.redis)
        XCTAssertEqual(redis.tls, RedisTLSOptions())
        XCTAssertNil(redis.sentinel)
        XCTAssertFalse(try redis.connection().url.usesTLS)
    }

    func testTLSFileProblemsNameTheirPathAndTheFix() throws {
        var report = try fixture.check(with(["url": "rediss://h:6380/0", "tls": ["ca_file": "secrets/missing.pem"]]))
        XCTAssertTrue(problem(at: "redis.tls.ca_file", in: report)?.problem.contains("missing.pem") == true)

        report = try fixture.check(with(["url": "rediss://h:6380/0", "tls": ["ca_file": "secrets/admin-token"]]))
        let notCA = try XCTUnwrap(problem(at: "redis.tls.ca_file", in: report))
        XCTAssertTrue(notCA.problem.contains("is not a usable CA bundle"), notCA.description)
        XCTAssertTrue(notCA.fix.contains("CA that signed"), notCA.fix)
        XCTAssertNil(report.config)

        report = try fixture.check(with(["url": "rediss://h:6380/0", "tls": ["cert_file": pki.redisClientCert]]))
        XCTAssertEqual(problem(at: "redis.tls.key_file", in: report)?.problem, "missing required key \"key_file\"",
                       "a client certificate needs its key")

        report = try fixture.check(with(["url": "rediss://h:6380/0",
                                         "tls": ["cert_file": pki.redisClientCert, "key_file": pki.redisKey]]))
        let mismatch = try XCTUnwrap(problem(at: "redis.tls.key_file", in: report))
        XCTAssertTrue(mismatch.problem.contains("cannot be used with \(pki.redisClientCert)"), mismatch.description)
        XCTAssertTrue(mismatch.problem.contains("mismatch"), mismatch.description)

        report = try fixture.check(with(["url": "rediss://h:6380/0",
                                         "tls": ["cert_file": pki.redisClientKey, "key_file": pki.redisClientCert]]))
        XCTAssertTrue(problem(at: "redis.tls.cert_file", in: report)?.fix.contains("swap") == true,
                      "swapped files are named as such: \(report.problems)")

        report = try fixture.check(with(["url": "rediss://h:6380/0", "tls": ["server_name": "a b"]]))
        XCTAssertTrue(problem(at: "redis.tls.server_name", in: report)?.problem.contains("not a host name") == true)
    }

    func testTLSKeysWithoutTLSAreAWarning() throws {
        let report = try fixture.check(with(["url": "redis://h:6379/0", "tls": ["ca_file": pki.caCert]]))
        let warning = try XCTUnwrap(problem(at: "redis.tls", in: report, severity: .warning))
        XCTAssertTrue(warning.fix.contains("rediss://"), warning.fix)
        XCTAssertNotNil(report.config, "a warning does not make the config unusable")
    }

    func testSentinelProblemsNameTheirPath() throws {
        var report = try fixture.check(with(["url": "redis://m/0", "sentinel": ["addresses": ["10.0.0.1:26379"]]]))
        XCTAssertEqual(problem(at: "redis.sentinel.master", in: report)?.problem, "missing required key \"master\"")

        report = try fixture.check(with(["url": "redis://m/0", "sentinel": ["master": "m", "addresses": []]]))
        XCTAssertTrue(problem(at: "redis.sentinel.addresses", in: report)?.problem.contains("non-empty array") == true)

        report = try fixture.check(with(["url": "redis://m/0", "sentinel": ["master": "m", "addresses": ["10.0.0.1:26379", "nowhere"]]]))
        XCTAssertTrue(problem(at: "redis.sentinel.addresses.1", in: report)?.problem.contains("not host:port") == true)

        report = try fixture.check(with(["url": "redis://m/0", "sentinel": ["master": "m", "addresses": ["h:1"], "tls": "yes"]]))
        XCTAssertEqual(problem(at: "redis.sentinel.tls", in: report)?.fix, "write true or false without quotes")

        report = try fixture.check(with(["url": "unix:///run/redis.sock", "sentinel": ["master": "m", "addresses": ["h:1"]]]))
        XCTAssertTrue(problem(at: "redis.url", in: report)?.problem.contains("unix socket cannot be combined") == true)
    }

    func testClusterSeedsAreReadAndTheirProblemsNameTheirPathAndFix() throws {
        let report = try fixture.check(with(["url": "rediss://pushgw:pw@cluster/0",
                                             "cluster": ["seeds": ["10.0.0.1:7000", "[::1]:7001"]]]))
        let redis = try XCTUnwrap(report.config?.redis)
        XCTAssertEqual(redis.clusterSeeds, [Endpoint(host: "10.0.0.1", port: 7000), Endpoint(host: "::1", port: 7001)])
        let cluster = try XCTUnwrap(try redis.cluster(clientName: "pushgw-write"))
        XCTAssertEqual(cluster.seeds.count, 2)
        XCTAssertTrue(cluster.connection.url.usesTLS, "the URL's scheme, user and password serve every node")
        XCTAssertEqual(cluster.connection.url.user, "pushgw")
        XCTAssertFalse(redis.redactedURL.contains("pw@"), redis.redactedURL)
        XCTAssertNil(try fixture.check(ConfigFixture.example).config?.redis.clusterSeeds, "single Redis stays the default")

        var bad = try fixture.check(with(["url": "redis://c/0", "cluster": [:] as [String: Any]]))
        XCTAssertEqual(problem(at: "redis.cluster.seeds", in: bad)?.problem, "missing required key \"seeds\"")
        bad = try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["10.0.0.1:7000", "nowhere"]]]))
        XCTAssertEqual(problem(at: "redis.cluster.seeds.1", in: bad)?.fix, "write a cluster node's address, such as \"10.0.0.1:7000\"")
        bad = try fixture.check(with(["url": "redis://c/3", "cluster": ["seeds": ["h:1"]]]))
        XCTAssertEqual(problem(at: "redis.url", in: bad)?.fix, "end redis.url with /0")
        bad = try fixture.check(with(["url": "unix:///run/redis.sock", "cluster": ["seeds": ["h:1"]]]))
        XCTAssertTrue(problem(at: "redis.url", in: bad)?.problem.contains("unix socket cannot be combined with redis.cluster") == true)
        bad = try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["h:1"]], "sentinel": ["master": "m", "addresses": ["h:2"]]]))
        XCTAssertTrue(problem(at: "redis.cluster", in: bad)?.problem.contains("cannot be combined with redis.sentinel") == true)
        bad = try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["h:1"], "nodes": 3]]))
        XCTAssertNotNil(problem(at: "redis.cluster.nodes", in: bad), "an unknown key is named")
    }

    func testAllowedHostsAreReadAndTheirProblemsNameTheirPathAndFix() throws {
        let report = try fixture.check(with(["url": "rediss://pushgw:pw@cluster/0",
                                             "cluster": ["seeds": ["10.0.0.1:7000"], "allowed_hosts": ["10.0.0.0/24", "Redis-1.internal"]]]))
        XCTAssertEqual(report.problems.map(\.description), [])
        let cluster = try XCTUnwrap(try report.config?.redis.cluster(clientName: "pushgw-write"))
        XCTAssertEqual(cluster.allowedHosts, [HostPattern(parsing: "10.0.0.0/24")!, .name("redis-1.internal")])
        XCTAssertNil(try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["h:1"]]])).config?.redis.clusterAllowedHosts,
                     "absent: what the seeds announce is trusted")
        XCTAssertEqual(try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["h:1"], "allowed_hosts": [] as [Any]]]))
                        .config?.redis.clusterAllowedHosts, [], "empty: the seeds' hosts only")

        let sentinel = try fixture.check(with(["url": "redis://m/0", "sentinel": ["master": "m", "addresses": ["10.0.0.1:26379"],
                                                                                 "allowed_hosts": ["fd00::/8"]]]))
        XCTAssertEqual(sentinel.config?.redis.sentinel?.allowedHosts, [HostPattern(parsing: "fd00::/8")!])

        var bad = try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["h:1"], "allowed_hosts": "10.0.0.0/8"]]))
        XCTAssertTrue(problem(at: "redis.cluster.allowed_hosts", in: bad)?.problem.contains("expected an array") == true)
        bad = try fixture.check(with(["url": "redis://c/0", "cluster": ["seeds": ["h:1"], "allowed_hosts": ["10.0.0.0/8", "10.0.0.0/40"]]]))
        XCTAssertEqual(problem(at: "redis.cluster.allowed_hosts.1", in: bad)?.problem, "10.0.0.0/40 is not a host name, an IP address or a network")
        XCTAssertNil(bad.config)
        bad = try fixture.check(with(["url": "redis://m/0", "sentinel": ["master": "m", "addresses": ["h:1"], "allowed_hosts": [7]]]))
        XCTAssertNotNil(problem(at: "redis.sentinel.allowed_hosts.0", in: bad))
    }
}
