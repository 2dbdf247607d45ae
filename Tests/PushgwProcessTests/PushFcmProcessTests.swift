import Foundation
import TestSupport
import XCTest

/// `pushgw push --fcm-token` as an operator runs it: the built binary exchanges the service
/// account's JWT at `pushgw simulator`'s token endpoint and sends one high-priority data
/// message, printing FCM's answer; the simulator's request log shows the message once per token.
final class PushFcmProcessTests: XCTestCase {
    func testOneMessageByHandAcceptedAndRefused() throws {
        let pki = try TestPKI.shared()
        let world = try ProcessWorld(simulator: #""fcm_service_accounts": { "\#(pki.fcmClientEmail)": "\#(pki.fcmPublicKey)" }, "fcm_scenarios": { "gone:APA91b": "unregistered" }"#)
        defer { world.stop() }
        let account = try pki.writeServiceAccount(to: world.directory + "/firebase.json",
                                                  tokenURI: "https://127.0.0.1:\(world.simulatorPort)/token")
        let config = world.directory + "/fcm-gateway.json"
        try """
            { "redis": { "url": "\(world.redis.url)" },
              "admin": { "listen": "127.0.0.1:\(freeLoopbackPort())" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(world.simulatorPort)" }, "ca_file": "\(pki.caCert)" },
              "fcm": { "endpoint": "127.0.0.1:\(world.simulatorPort)", "ca_file": "\(pki.caCert)" },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" },
                               "f": { "service_account_file": "\(account)" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production",
                                  "fcm_credential": "f" } } }
            """.write(toFile: config, atomically: true, encoding: .utf8)

        var (status, out, err) = try runCommand(world.pushgw, ["push", "--config", config, "--app", "acme", "--fcm-token", "pixel:APA91b",
                                                               "--payload", #"{"id":"call-1"}"#, "--json"])
        XCTAssertEqual(status, 0, out + err)
        let accepted = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], out)
        XCTAssertEqual(accepted["status"] as? Int, 200)
        XCTAssertEqual((accepted["name"] as? String)?.hasPrefix("projects/\(pki.fcmProjectID)/messages/"), true, out)

        (status, out, err) = try runCommand(world.pushgw, ["push", "--config", config, "--app", "acme", "--fcm-token", "gone:APA91b"])
        XCTAssertEqual(status, 1, out + err)
        XCTAssertTrue(out.hasPrefix("refused: 404 UNREGISTERED (tokenInvalid)"), out)

        let requests = try world.stopSimulator()
        let messages = requests.filter { ($0["path"] as? String) == "/v1/projects/\(pki.fcmProjectID)/messages:send" }
        XCTAssertEqual(messages.compactMap { $0["token"] as? String }.sorted(), ["gone:APA91b", "pixel:APA91b"], "one message per token")
        XCTAssertEqual(requests.filter { ($0["path"] as? String) == "/token" && ($0["status"] as? Int) == 200 }.count, 2,
                       "each run exchanged its JWT once")
        XCTAssertFalse(try String(contentsOfFile: world.simulatorLog, encoding: .utf8).contains("PRIVATE KEY"))
    }
}
