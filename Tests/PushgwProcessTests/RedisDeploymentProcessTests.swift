import Foundation
import GatewayTestSupport
import Glibc
import TestSupport
import XCTest

/// `pushgw run` as an operator deploys it on a production Redis: the retry and dead-letter
/// roles over TLS and through Sentinel, and a TLS server it must not trust refused with the
/// cause in the log and in `/readyz`.
final class RedisDeploymentProcessTests: XCTestCase {
    /// A running `pushgw run`, its admin port and its log.
    private struct Gateway {
        let process: ChildProcess
        let adminPort: Int
        let log: String
        var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    }

    /// Writes a config for app `acme` (dead letters kept one day) with `redis` as its redis
    /// section and starts `pushgw run --role ROLES` on it, logging to a file.
    /// The admin token of every gateway here: `/readyz` gives its problems' details to it.
    private static let adminToken = "deploy-test-admin-\(UUID().uuidString)"

    private func startGateway(redis: [String: Any], roles: String, in dir: String) throws -> Gateway {
        let pki = try TestPKI.shared()
        let adminPort = freeLoopbackPort()
        try (RedisDeploymentProcessTests.adminToken + "\n").write(toFile: dir + "/admin-token", atomically: true, encoding: .utf8)
        chmod(dir + "/admin-token", 0o600)
        let config: [String: Any] = [
            "redis": redis,
            "admin": ["listen": "127.0.0.1:\(adminPort)", "token_file": dir + "/admin-token"],
            "apns": ["production": ["endpoint": "127.0.0.1:1"], "sandbox": ["endpoint": "127.0.0.1:1"], "ca_file": pki.caCert],
            "credentials": ["k": ["team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": pki.jwtKey]],
            "apps": ["acme": ["bundle_id": "com.example.app", "credential": "k", "environment": "production",
                              "dead_letters": ["max_age_days": 1]]],
        ]
        let file = dir + "/gw.json"
        try JSONSerialization.data(withJSONObject: config, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: file))
        let log = dir + "/gw.log"
        let pushgw = try builtPushgw()
        let process = try ChildProcess("/bin/sh", ["-c", "exec '\(pushgw)' run --config '\(file)' --role \(roles) --consumer deploy-test > '\(log)' 2>&1"],
                                       captureOutput: false)
        try waitForPort(adminPort)
        return Gateway(process: process, adminPort: adminPort, log: log)
    }

    /// Polls `condition` every 100 ms for up to `seconds`; fails naming `what` when it never holds.
    @discardableResult
    private func wait(_ what: String, seconds: Double = 20, file: StaticString = #filePath, line: UInt = #line,
                      _ condition: () throws -> Bool) rethrows -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if try condition() { return true }
            usleep(100_000)
        }
        XCTFail("gave up waiting \(seconds) s for \(what)", file: file, line: line)
        return false
    }

    // MARK: The retry and dead-letter roles

    func testTheRetryAndDeadLetterRolesWorkOverTLS() throws {
        try rolesWork(.tls)
    }

    func testTheRetryAndDeadLetterRolesWorkThroughSentinel() throws {
        try rolesWork(.sentinel)
    }

    /// A retry due now is moved back to the calls stream and a dead letter older than the app's
    /// retention is trimmed, by `pushgw run --role retry,deadletters` reaching Redis as
    /// `deployment` says; `/readyz` is 200 and SIGTERM exits 0.
    private func rolesWork(_ deployment: RedisDeployment) throws {
        let redis = try GatewayRedis(deployment)
        defer { redis.stop() }
        let dir = makeTemporaryDirectory("pushgw-deploy")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let now = String(Int64(Date().timeIntervalSince1970 * 1000))
        let event = #"{"v":1,"id":"retry-1","type":"incoming_call","voip_token":"a0a0"}"#
        _ = try redis.server.cli(["HSET", "pushgw:{acme}:retry:data", "r1:state", #"{"v":1}"#, "r1:event", event, "r1:call", "retry-1"])
        _ = try redis.server.cli(["ZADD", "pushgw:{acme}:retry", now, "r1"])
        _ = try redis.server.cli(["ZADD", "pushgw:retry-due", now, "acme"])
        _ = try redis.server.cli(["XADD", "pushgw:{acme}:dead", "1000-0", "event", "{}", "reason", "invalid_event: id: missing"])

        let gw = try startGateway(redis: redis.json, roles: "retry,deadletters", in: dir)
        defer { gw.process.stop(signal: SIGKILL) }
        wait("the retry to be moved to the calls stream") {
            (try? redis.server.cli(["XRANGE", "pushgw:{acme}:calls", "-", "+"]))?.contains("retry-1") == true
        }
        wait("the old dead letter to be trimmed") { (try? redis.server.cli(["XLEN", "pushgw:{acme}:dead"])) == "0\n" }
        wait("/readyz to answer 200") { (try? LoopbackHTTP.blockingRequest("/readyz", port: gw.adminPort))?.status == 200 }
        gw.process.stop(signal: SIGTERM)
        XCTAssertEqual(gw.process.process.terminationStatus, 0, gw.logText)
        XCTAssertTrue(gw.logText.contains(#""msg":"redis connection ready""#), gw.logText)
        XCTAssertFalse(gw.logText.contains("redis connection failed"), gw.logText)
    }

    // MARK: TLS refusals

    func testAServerCertificateFromAnotherCAIsRefusedSayingSo() throws {
        try refused(certificate: .valid, trusting: { $0.otherCACert }, cause: "not signed by a trusted CA")
    }

    func testAnExpiredServerCertificateIsRefusedSayingSo() throws {
        try refused(certificate: .expired, trusting: { $0.caCert }, cause: "certificate has expired")
    }

    func testAServerCertificateForAnotherHostIsRefusedSayingSo() throws {
        try refused(certificate: .otherHost, host: "localhost", trusting: { $0.caCert }, cause: "not for localhost")
    }

    /// A TLS redis-server presenting `certificate`, reached as `host` by a gateway trusting the
    /// CA `trusting` picks: the gateway is not ready, and both `/readyz` and the log give `cause`.
    private func refused(certificate: RedisServer.ServerCertificate, host: String = "127.0.0.1",
                         trusting ca: (TestPKI) -> String, cause: String) throws {
        let server = try RedisServer.start(.tls, certificate: certificate)
        defer { server.stop() }
        let pki = try XCTUnwrap(server.pki)
        let dir = makeTemporaryDirectory("pushgw-deploy")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gw = try startGateway(redis: ["url": "rediss://\(host):\(server.port)/0", "tls": ["ca_file": ca(pki)]],
                                  roles: "deadletters", in: dir)
        defer { gw.process.stop(signal: SIGKILL) }
        let bearer = ["Authorization": "Bearer " + RedisDeploymentProcessTests.adminToken]
        var readyz = try LoopbackHTTP.blockingRequest("/readyz", port: gw.adminPort, headers: bearer)
        try wait("/readyz to give the cause") {
            readyz = try LoopbackHTTP.blockingRequest("/readyz", port: gw.adminPort, headers: bearer)
            return readyz.body.contains(cause)
        }
        XCTAssertEqual(readyz.status, 503, readyz.body)
        XCTAssertTrue(readyz.body.contains(#""check":"redis""#) && readyz.body.contains("certificate verify failed"), readyz.body)
        gw.process.stop(signal: SIGTERM)
        let failures = gw.logText.split(separator: "\n").filter { $0.contains("redis connection failed") }
        XCTAssertFalse(failures.isEmpty, gw.logText)
        XCTAssertTrue(failures.allSatisfy { $0.contains(cause) && $0.contains(#""level":"warn""#) }, "\(failures)")
        XCTAssertFalse(gw.logText.contains("redis connection ready"), "never connected: \(gw.logText)")
    }
}
