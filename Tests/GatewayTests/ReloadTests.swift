import Foundation
import TestSupport
import XCTest

/// SIGHUP: a running `pushgw run` takes a new config without dropping the connections of apps
/// that did not change, and refuses a bad one while the running config stays.
final class ReloadTests: XCTestCase {
    func testSighupReloadsGoodConfigsAndRefusesBadOnes() throws {
        let redis = try RedisServer.start()
        defer { redis.stop() }
        let pki = try SimTestServer.sharedPKI()
        let dir = makeTemporaryDirectory("pushgw-reload")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pushgw = packageRoot + "/.build/debug/pushgw"
        let simPort = freeLoopbackPort()
        try """
            { "cert_file": "\(pki.serverCert)", "key_file": "\(pki.serverKey)", "token_keys": { "KEY1234567": "\(pki.jwtPublicKey)" },
              "team_id": "TEAM123456" }
            """.write(toFile: dir + "/sim.json", atomically: true, encoding: .utf8)
        let sim = try ChildProcess(pushgw, ["simulator", "--config", dir + "/sim.json", "--port", String(simPort)], captureOutput: false)
        defer { sim.stop() }
        try waitForPort(simPort)
        let admin = freeLoopbackPort()
        func config(apps: String) -> String {
            """
            { "redis": { "url": "\(redis.url)" }, "admin": { "listen": "127.0.0.1:\(admin)" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simPort)" }, "sandbox": { "endpoint": "127.0.0.1:\(simPort)" },
                        "ca_file": "\(pki.caCert)", "connections": 1 },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" } },
              "apps": { \(apps) } }
            """
        }
        let acme = #""acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production" }"#
        let beta = #""beta": { "bundle_id": "com.example.app", "credential": "k", "environment": "production" }"#
        let file = dir + "/gw.json"
        try config(apps: acme).write(toFile: file, atomically: true, encoding: .utf8)
        let log = dir + "/gw.log"
        let gw = try ChildProcess("/bin/sh", ["-c", "exec '\(pushgw)' run --config '\(file)' > '\(log)' 2>&1"], captureOutput: false)
        defer { gw.stop(signal: SIGKILL) }
        try waitForPort(admin)

        func call(_ app: String, _ id: String) throws -> String {
            _ = try redis.cli(["XADD", "pushgw:{\(app)}:calls", "*", "event",
                               #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"a0a0"}"#])
            let end = Date().addingTimeInterval(10)
            while Date() < end {
                let results = try redis.cli(["XRANGE", "pushgw:{\(app)}:results", "-", "+"])
                if let line = results.split(separator: "\n").first(where: { $0.contains("\"id\":\"\(id)\"") }) {
                    return String(line)
                }
                usleep(20_000)
            }
            return ""
        }
        func connectionsOpened() throws -> String {
            let body = try LoopbackHTTP.blockingRequest("/metrics", port: admin).body
            return body.split(separator: "\n").first { $0.hasPrefix("pushgw_apns_connections_opened_total{credential=\"k\"") }
                .map(String.init) ?? "missing"
        }
        func logLines(_ msg: String) -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                .filter { $0.contains("\"msg\":\"\(msg)\"") }
        }

        XCTAssertTrue(try call("acme", "before").contains("delivered_voip"))
        let opened = try connectionsOpened()

        // A good new config: beta is added, acme and the credential unchanged.
        try config(apps: acme + ", " + beta).write(toFile: file, atomically: true, encoding: .utf8)
        kill(gw.pid, SIGHUP)
        let end = Date().addingTimeInterval(5)
        while logLines("config reloaded").isEmpty && Date() < end { usleep(20_000) }
        XCTAssertTrue(logLines("config reloaded").first?.contains("\"apps_added\":[\"beta\"]") == true, "\(logLines("config reloaded"))")
        XCTAssertTrue(try call("beta", "added").contains("delivered_voip"), "the new app is routed without a restart")
        XCTAssertTrue(try call("acme", "kept").contains("delivered_voip"))
        XCTAssertEqual(try connectionsOpened(), opened, "the unchanged credential kept its connections")

        // A bad new config: refused with its reason, the running one stays.
        try config(apps: #""gamma": { "bundle_id": "not a bundle", "credential": "nope", "environment": "production" }"#)
            .write(toFile: file, atomically: true, encoding: .utf8)
        kill(gw.pid, SIGHUP)
        let end2 = Date().addingTimeInterval(5)
        while logLines("config reload refused; the running config stays").isEmpty && Date() < end2 { usleep(20_000) }
        let refused = logLines("config reload refused; the running config stays")
        XCTAssertEqual(refused.count, 1)
        XCTAssertTrue(refused.first?.contains("apps.gamma.credential") == true, "the reason names the key: \(refused)")
        XCTAssertTrue(try call("beta", "still").contains("delivered_voip"), "the running config still routes")

        gw.stop(signal: SIGTERM)
        XCTAssertEqual(gw.process.terminationStatus, 0)
    }
}
