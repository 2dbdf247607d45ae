import APNs
import EventLoop
import GatewayConfiguration
import TestSupport
import XCTest
@testable import GatewayRoles

/// Pools per credential and environment, and what a config reload does to them.
final class ApnsPoolsTests: XCTestCase {
    func testReloadKeepsUnchangedPoolsAndReopensChangedOnes() throws {
        let sim = try SimTestServer()
        defer { sim.close() }
        let endpoint = Endpoint(host: "127.0.0.1", port: sim.port)
        var config = GatewayConfig(
            redis: RedisConfig(url: "redis://127.0.0.1:1/0"),
            apns: ApnsConfig(productionEndpoint: endpoint, sandboxEndpoint: endpoint, caFile: sim.pki.caCert),
            credentials: ["a": .token(teamId: sim.teamID, keyId: sim.keyID, keyFile: sim.pki.jwtKey),
                          "b": .certificate(certFile: sim.pki.clientCert, keyFile: sim.pki.clientKey)],
            apps: [:])
        let pools = ApnsPools(loop: sim.loop, config: config)
        defer { pools.close() }
        let a = try pools.client(credential: "a", environment: .production)
        let b = try pools.client(credential: "b", environment: .production)
        XCTAssertTrue(a === (try pools.client(credential: "a", environment: .production)), "one pool per credential")
        XCTAssertFalse(a === (try pools.client(credential: "a", environment: .sandbox)), "and per environment")
        var answer: Result<PushNotificationResponse, ApnsClientError>?
        a.send(try PushNotification(deviceToken: "abcd", bundleID: sim.bundleID, pushType: .voip, payload: Array("{}".utf8))) {
            answer = $0
        }
        sim.loop.run(waitingFor: "the push's completion") { answer != nil }
        XCTAssertEqual(try answer?.get().status, 200)

        let opened = a.stats.connectionsOpened
        config.credentials["b"] = .certificate(certFile: sim.pki.clientCert, keyFile: sim.pki.clientKey + ".new")
        let applied = pools.apply(config)
        XCTAssertEqual(applied.reopened, ["b"], "only the changed credential's pool closes, to reopen")
        XCTAssertEqual(applied.closed, [], "no credential was removed")
        XCTAssertTrue(a === (try pools.client(credential: "a", environment: .production)), "a keeps its connections")
        XCTAssertEqual(a.stats.connectionsOpened, opened, "and they stay open")
        XCTAssertGreaterThan(a.activeConnections, 0)
        XCTAssertThrowsError(try pools.client(credential: "b", environment: .production),
                             "b reopens with the new settings (here a missing key file)")
        _ = b
        config.credentials["a"] = nil
        let removed = pools.apply(config)
        XCTAssertEqual(removed.closed, ["a"], "a removed credential's pools close for good: the reload says closed")
        XCTAssertEqual(removed.reopened, [], "not reopened")
    }
}
