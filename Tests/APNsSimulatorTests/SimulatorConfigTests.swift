@testable import APNsSimulator
import Foundation
import XCTest

/// The config file, scenario spellings and the CLI verb's argument checks: no sockets.
final class SimulatorConfigTests: XCTestCase {
    private func parse(_ json: String) throws -> SimulatorConfig {
        try SimulatorConfig.parse(json: Data(json.utf8), baseDirectory: "/etc/sim")
    }

    func testFullConfigIsReadWithRelativePathsResolved() throws {
        let config = try parse("""
            { "port": 2197, "cert_file": "server.pem", "key_file": "/abs/server.key", "client_ca_file": "ca.pem",
              "token_keys": { "KEY1234567": "keys/AuthKey.pub.pem" }, "team_id": "TEAM123456",
              "bundle_ids": ["com.acme.phone"], "default_scenario": "flaky:2",
              "scenarios": { "ABCD": "unregistered", "00ff": "slow:250" },
              "goaway_every": 100, "initial_max_streams": 1, "raised_max_streams": 500,
              "log_file": "requests.jsonl", "sandbox": true, "max_token_age_s": 60, "record_limit": 10,
              "token_environments": { "5A0D": "sandbox", "b0b0": "production" } }
            """)
        XCTAssertEqual(config.port, 2197)
        XCTAssertEqual(config.certFile, "/etc/sim/server.pem", "relative paths are relative to the config file")
        XCTAssertEqual(config.keyFile, "/abs/server.key")
        XCTAssertEqual(config.clientCAFile, "/etc/sim/ca.pem")
        XCTAssertEqual(config.tokenKeys, ["KEY1234567": "/etc/sim/keys/AuthKey.pub.pem"])
        XCTAssertEqual(config.teamId, "TEAM123456")
        XCTAssertEqual(config.bundleIDs, ["com.acme.phone"])
        XCTAssertEqual(config.defaultScenario, .flaky(2))
        XCTAssertEqual(config.scenarios, ["abcd": .unregistered, "00ff": .slow(250)], "tokens are kept lower case")
        XCTAssertEqual(config.goawayEvery, 100)
        XCTAssertEqual(config.raisedMaxStreams, 500)
        XCTAssertEqual(config.logFile, "/etc/sim/requests.jsonl")
        XCTAssertTrue(config.sandbox)
        XCTAssertEqual(config.maxTokenAgeSeconds, 60)
        XCTAssertEqual(config.recordLimit, 10)
        XCTAssertEqual(config.tokenEnvironments, ["5a0d": .sandbox, "b0b0": .production])
    }

    func testTheFcmKeys() throws {
        let config = try parse("""
            { "cert_file": "s.pem", "key_file": "s.key",
              "fcm_service_accounts": { "pushgw@acme.iam.gserviceaccount.com": "keys/fcm.pub.pem" },
              "fcm_token_path": "/oauth/token", "fcm_access_token_life_s": 120, "fcm_retry_after_s": 3,
              "fcm_projects": ["acme-phone"], "fcm_scenarios": { "dXyZ:APA91b": "unregistered" } }
            """)
        XCTAssertEqual(config.fcmServiceAccounts, ["pushgw@acme.iam.gserviceaccount.com": "/etc/sim/keys/fcm.pub.pem"])
        XCTAssertEqual(config.fcmTokenPath, "/oauth/token")
        XCTAssertEqual(config.fcmAccessTokenLifeSeconds, 120)
        XCTAssertEqual(config.fcmRetryAfterSeconds, 3)
        XCTAssertEqual(config.fcmProjects, ["acme-phone"])
        XCTAssertEqual(config.scenarios, ["dxyz:apa91b": .unregistered], "one table, matched in any case")
        XCTAssertThrowsError(try parse(#"{ "cert_file": "s", "key_file": "k", "fcm_token_path": "token", "fcm_retry_after_s": -1 }"#)) { error in
            XCTAssertEqual(Set((error as? SimulatorConfigError)?.problems.map(\.path) ?? []), ["$.fcm_token_path", "$.fcm_retry_after_s"])
        }
    }

    func testMinimalConfigTakesAPNsDefaults() throws {
        let config = try parse(#"{ "cert_file": "s.pem", "key_file": "s.key" }"#)
        XCTAssertEqual(config.host, "127.0.0.1")
        XCTAssertEqual(config.port, 0)
        XCTAssertEqual(config.initialMaxStreams, 1, "APNs starts a connection at one stream")
        XCTAssertEqual(config.raisedMaxStreams, 1000)
        XCTAssertEqual(config.maxTokenAgeSeconds, 3600, "Apple: a token is valid for an hour")
        XCTAssertEqual(config.defaultScenario, .ok)
        XCTAssertNil(config.goawayEvery)
    }

    func testEveryProblemIsReportedWithItsJSONPath() {
        XCTAssertThrowsError(try parse("""
            { "key_file": "k", "port": 70000, "sandbox": "yes", "colour": 1,
              "scenarios": { "abcd": "sometimes", "xyz": "ok" }, "default_scenario": "slow",
              "token_environments": { "ab": "testflight" } }
            """)) { error in
            let paths = (error as? SimulatorConfigError)?.problems.map(\.path) ?? []
            XCTAssertEqual(Set(paths), ["$.cert_file", "$.port", "$.sandbox", "$.colour", "$.scenarios.abcd",
                                        "$.scenarios.xyz", "$.default_scenario", "$.token_environments.ab"],
                           "each problem names where it is: \(error)")
        }
        XCTAssertThrowsError(try parse("[1, 2")) { error in
            XCTAssertEqual((error as? SimulatorConfigError)?.problems.first?.path, "$")
        }
    }

    func testRingReceiptsNameTheRedisAndTheStreamPerBundleID() throws {
        let config = try parse("""
            { "cert_file": "s.pem", "key_file": "s.key",
              "ring_receipts": { "redis_url": "redis://127.0.0.1:6379/0", "streams": { "com.acme.phone": "pushgw:{acme}:calls" } } }
            """)
        XCTAssertEqual(config.ringReceipts, .init(redisURL: "redis://127.0.0.1:6379/0", streams: ["com.acme.phone": "pushgw:{acme}:calls"]))
        XCTAssertNil(try parse(#"{ "cert_file": "s.pem", "key_file": "s.key" }"#).ringReceipts, "off by default")
        XCTAssertThrowsError(try parse("""
            { "cert_file": "s.pem", "key_file": "s.key",
              "ring_receipts": { "redis_url": "http://x", "streams": {}, "delay": 1 } }
            """)) { error in
            let paths = (error as? SimulatorConfigError)?.problems.map(\.path) ?? []
            XCTAssertEqual(Set(paths), ["$.ring_receipts.redis_url", "$.ring_receipts.delay"], "\(error)")
        }
    }

    func testScenarioSpellingsRoundTrip() throws {
        let all: [Scenario] = [.ok, .unregistered, .expiredToken, .badToken, .notForTopic, .tooMany, .error500,
                               .unavailable, .flaky(3), .slow(250), .blackhole, .payloadTooLarge, .invalidProviderToken, .expiredProviderToken(2),
                               .refusedStream(1), .dropConnection]
        for scenario in all {
            XCTAssertEqual(try Scenario(parsing: scenario.description), scenario)
        }
        for bad in ["", "OK", "flaky", "flaky:-1", "flaky:x", "ok:1", "slow:", "teapot", "refused_stream", "drop_connection:1"] {
            XCTAssertThrowsError(try Scenario(parsing: bad), "\"\(bad)\" is not a scenario")
        }
    }

    func testCommandRejectsBadUsageWithExitCode2() {
        XCTAssertEqual(runSimulatorCommand(arguments: []), 2, "--config is required")
        XCTAssertEqual(runSimulatorCommand(arguments: ["--config"]), 2, "--config needs a value")
        XCTAssertEqual(runSimulatorCommand(arguments: ["--config", "x.json", "--port", "high"]), 2, "--port needs a number")
        XCTAssertEqual(runSimulatorCommand(arguments: ["--verbose"]), 2, "unknown flags are refused")
        XCTAssertEqual(runSimulatorCommand(arguments: ["--config", "/nonexistent/sim.json"]), 2, "an unreadable config is a config error")
    }

    func testCommandOptionsApplyThePort() throws {
        let options = try SimulatorCommandOptions(parsing: ["--port", "2197", "--config", "sim.json"])
        XCTAssertEqual(options.configFile, "sim.json")
        XCTAssertEqual(options.port, 2197)
    }

    func testScenarioBookCountsFlakyAnswersPerToken() {
        var book = ScenarioBook(defaultScenario: .ok, scenarios: ["AA": .flaky(1)])
        XCTAssertEqual(book.outcome(for: "aa"), .answer(.serviceUnavailable))
        XCTAssertEqual(book.outcome(for: "aa"), .answer(nil), "flaky:1 fails once")
        XCTAssertEqual(book.outcome(for: "bb"), .answer(nil), "other tokens take the default")
        book.set(.flaky(1), for: "AA")
        XCTAssertEqual(book.outcome(for: "aa"), .answer(.serviceUnavailable), "setting a scenario again restarts its count")
    }

    func testATokenOfTheOtherEnvironmentIsABadDeviceToken() {
        var production = ScenarioBook(defaultScenario: .ok, scenarios: [:], tokenEnvironments: ["5A0D": .sandbox], environment: .production)
        var sandbox = ScenarioBook(defaultScenario: .ok, scenarios: [:], tokenEnvironments: ["5A0D": .sandbox], environment: .sandbox)
        XCTAssertEqual(production.outcome(for: "5a0d"), .answer(.badDeviceToken), "a sandbox token sent to production")
        XCTAssertEqual(sandbox.outcome(for: "5a0d"), .answer(nil), "accepted where it belongs")
        XCTAssertEqual(production.outcome(for: "bb"), .answer(nil), "unlisted tokens belong to both")
    }
}
