import Foundation
import TestSupport
import XCTest

/// SIGHUP: a running `pushgw run` takes a new config without dropping the connections of apps
/// that did not change, and refuses a bad one while the running config stays.
final class ReloadTests: XCTestCase {
    func testSighupReloadsGoodConfigsAndRefusesBadOnes() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let admin = freeLoopbackPort()
        let acme = ProcessWorld.app(), beta = ProcessWorld.app()
        func config(_ apps: [String: String]) throws -> String {
            try world.writeConfig(apps: apps, admin: #""listen": "127.0.0.1:\#(admin)""#, apns: #""connections": 1"#)
        }
        let file = try config(["acme": acme])
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: file, consumer: "reload", log: log)
        try waitForPort(admin)

        /// Sends a call with its own VoIP token and returns its result line ("" if none came).
        func call(_ app: String, _ id: String, token: String) throws -> String {
            _ = try world.redis.cli(["XADD", "pushgw:{\(app)}:calls", "*", "event",
                                     #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"\#(token)"}"#])
            var line = ""
            try waitUntil("the result of \(id)") {
                let results = try world.redis.cli(["XRANGE", "pushgw:{\(app)}:results", "-", "+"])
                line = results.split(separator: "\n").first { $0.contains("\"id\":\"\(id)\"") }.map(String.init) ?? ""
                return !line.isEmpty
            }
            return line
        }
        func connectionsOpened() throws -> String? {
            let body = try LoopbackHTTP.blockingRequest("/metrics", port: admin).body
            return body.split(separator: "\n").first { $0.hasPrefix("pushgw_apns_connections_opened_total{credential=\"k\"") }
                .map(String.init)
        }
        func logLines(_ message: String) -> [[String: Any]] { ProcessWorld.logLines(log, message: message) }

        XCTAssertTrue(try call("acme", "before", token: "a0a00001").contains("delivered_voip"))
        let opened = try XCTUnwrap(try connectionsOpened(), "the pool's metric is there")

        // A good new config: beta is added, acme and the credential unchanged.
        try _ = config(["acme": acme, "beta": beta])
        kill(gw.pid, SIGHUP)
        waitUntil("the log line of the reload") { !logLines("config reloaded").isEmpty }
        let reloaded = logLines("config reloaded")
        XCTAssertEqual(reloaded.first?["apps_added"] as? [String], ["beta"], "\(reloaded)")
        XCTAssertTrue(try call("beta", "added", token: "a0a00002").contains("delivered_voip"), "the new app is routed without a restart")
        XCTAssertTrue(try call("acme", "kept", token: "a0a00003").contains("delivered_voip"))
        XCTAssertEqual(try connectionsOpened(), opened, "the pool reports no new connection")

        // A bad new config: refused with its reason, the running one stays.
        try _ = config(["gamma": #"{ "bundle_id": "not a bundle", "credential": "nope", "environment": "production" }"#])
        kill(gw.pid, SIGHUP)
        waitUntil("the log line of the refusal") { !logLines("config reload refused; the running config stays").isEmpty }
        let refused = logLines("config reload refused; the running config stays")
        XCTAssertEqual(refused.count, 1)
        XCTAssertTrue("\(refused)".contains("apps.gamma.credential"), "the reason names the key: \(refused)")
        XCTAssertTrue(try call("beta", "still", token: "a0a00004").contains("delivered_voip"), "the running config still routes")

        XCTAssertEqual(gw.stop(), 0)
        // The simulator numbers its connections: a pool reopened by a reload (a new client
        // object, whose own counters start again at 1) would show up as a second connection.
        let requests = try world.stopSimulator()
        var connection: [String: Int] = [:]
        for r in requests { if let token = r["token"] as? String, let conn = r["conn"] as? Int { connection[token] = conn } }
        XCTAssertEqual(connection.count, 4, "every push was logged: \(requests)")
        XCTAssertEqual(Set(connection.values).count, 1,
                       "before and after both reloads, every push went over the one connection opened first: \(connection)")
    }
}

/// `apps.APP.retention` from the config file to the keys `pushgw run` writes: each app's own
/// result window and invalid-token TTL at start, and the new ones after a SIGHUP.
final class RetentionProcessTests: XCTestCase {
    func testTheConfiguredWindowsAreTheTTLsOfTheKeysWrittenAndAReloadChangesThem() throws {
        let world = try ProcessWorld(simulator: #""scenarios": { "dead0001": "unregistered" }"#)
        defer { world.stop() }
        let admin = freeLoopbackPort()
        func config(acmeResultSeconds: Int) throws -> String {
            try world.writeConfig(apps: [
                "acme": ProcessWorld.app(#""retention": { "result_window_s": \#(acmeResultSeconds), "invalid_token_ttl_s": 3600 }"#),
                "beta": ProcessWorld.app(),
            ], admin: #""listen": "127.0.0.1:\#(admin)""#, apns: #""connections": 1"#)
        }
        let file = try config(acmeResultSeconds: 300)
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: file, consumer: "retention", log: log)
        try waitForPort(admin)
        func call(_ app: String, _ id: String, token: String) throws {
            _ = try world.redis.cli(["XADD", "pushgw:{\(app)}:calls", "*", "event",
                                     #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"\#(token)"}"#])
            try waitUntil("the result of \(app)/\(id)") {
                try world.redis.cli(["EXISTS", "pushgw:{\(app)}:result:\(id)"]).trimmingCharacters(in: .whitespacesAndNewlines) == "1"
                    && !(try world.redis.cli(["GET", "pushgw:{\(app)}:result:\(id)"]).hasPrefix("in_flight:"))
            }
        }
        func ttl(_ key: String) throws -> Int {
            Int(try world.redis.cli(["TTL", key]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -3
        }

        try call("acme", "a1", token: "a0a00001")
        try call("beta", "b1", token: "a0a00002")
        try call("acme", "gone", token: "dead0001")
        XCTAssertTrue((1...300).contains(try ttl("pushgw:{acme}:result:a1")), "acme's result_window_s")
        XCTAssertTrue((86_000...86_400).contains(try ttl("pushgw:{beta}:result:b1")), "beta's default: the whole result for 24 h")
        let buckets = try world.redis.cli(["KEYS", "pushgw:{beta}:outcomes:*"]).split(separator: "\n").map(String.init)
            .filter { !$0.isEmpty }
        XCTAssertEqual(buckets, [], "and no compact record: off unless result_detail_s is written")
        XCTAssertTrue((3_500...3_600).contains(try ttl("pushgw:{acme}:invalid:voip:dead0001")), "acme's invalid_token_ttl_s")

        try _ = config(acmeResultSeconds: 900)
        kill(gw.pid, SIGHUP)
        waitUntil("the log line of the reload") { !ProcessWorld.logLines(log, message: "config reloaded").isEmpty }
        try call("acme", "a2", token: "a0a00003")
        XCTAssertTrue((301...900).contains(try ttl("pushgw:{acme}:result:a2")), "the reloaded window")
        XCTAssertEqual(gw.stop(), 0)
    }
}
