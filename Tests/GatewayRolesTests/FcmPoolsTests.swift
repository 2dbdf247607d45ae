import APNs
import EventLoop
import FCM
import GatewayConfiguration
import TestSupport
import XCTest
@testable import GatewayRoles

/// One FCM client per service account, made at its first message against the simulator, and
/// what a config reload does to them; a service account that does not load names its file.
final class FcmPoolsTests: XCTestCase {
    func testOneClientPerCredentialAndWhatAReloadDoes() throws {
        let sim = try SimTestServer()
        defer { sim.close() }
        let directory = makeTemporaryDirectory("pushgw-fcm-pools")
        let file = try sim.pki.writeServiceAccount(to: directory + "/firebase.json", tokenURI: sim.fcmTokenURI)
        var config = GatewayConfig(redis: RedisConfig(url: "redis://127.0.0.1:1/0"), credentials: [:], apps: [:])
        config.fcm = FcmConfig(endpoint: Endpoint(host: "127.0.0.1", port: sim.port), caFile: sim.pki.caCert)
        config.fcmCredentials = ["f": FcmCredential(serviceAccountFile: file),
                                 "g": FcmCredential(serviceAccountFile: directory + "/missing.json")]
        let pools = FcmPools(loop: sim.loop, config: config)
        defer { pools.close() }
        XCTAssertTrue(pools.all.isEmpty, "nothing is made before a message")
        let f = try pools.client(credential: "f")
        XCTAssertTrue(f === (try pools.client(credential: "f")), "one client per credential")
        var answer: Result<FcmResponse, FcmClientError>?
        let token = "fcm-pools-token"
        let body = #"{"message":{"token":"\#(token)","data":{"type":"incoming_call"},"android":{"priority":"HIGH","ttl":"20s"}}}"#
        f.send(try XCTUnwrap(FcmMessage(token: token, body: Array(body.utf8)))) { answer = $0 }
        sim.loop.run(waitingFor: "the message's answer") { answer != nil }
        XCTAssertEqual(try answer?.get().status, 200)
        XCTAssertEqual(sim.simulator.requestCount(for: token), 1)

        XCTAssertThrowsError(try pools.client(credential: "g")) { error in
            guard case let .serviceAccount(name, path, .unreadable) = error as? FcmPoolError else { return XCTFail("\(error)") }
            XCTAssertEqual(name, "g")
            XCTAssertEqual(path, directory + "/missing.json")
        }
        XCTAssertThrowsError(try pools.client(credential: "nobody"))

        config.fcmCredentials["g"] = FcmCredential(serviceAccountFile: file)
        XCTAssertEqual(pools.apply(config).reopened, [], "only made clients close; f's credential did not change")
        XCTAssertTrue(f === (try pools.client(credential: "f")), "f keeps its connections and token")
        config.fcm.connections = 3
        XCTAssertEqual(pools.apply(config).reopened, ["f"], "a changed fcm section reopens every client")
        XCTAssertFalse(f === (try pools.client(credential: "f")))
        config.fcmCredentials["f"] = nil
        XCTAssertEqual(pools.apply(config).closed, ["f"], "a removed credential's client closes for good")
    }
}
