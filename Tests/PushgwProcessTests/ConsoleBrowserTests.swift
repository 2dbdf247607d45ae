import Foundation
import Glibc
import TestSupport
import XCTest

/// The operators' console in headless Chromium (Tests/Browser/console_browser.py, Selenium
/// from Debian's python3-selenium): a live `pushgw run` with two apps — `acme`, and `beta`
/// whose key the simulator refuses until the config is fixed and reloaded — its Redis and the
/// APNs simulator. One browser session runs every check: sign-in, overview, list and filters,
/// attempts, replay after the fix, purge, audit, CSRF and other origins, the read-only token
/// and hostile content. With PUSHGW_SCREENSHOTS=DIR it also saves the README's screenshots.
final class ConsoleBrowserTests: XCTestCase {
    func testTheConsoleWorksAndIsSafeInARealBrowser() throws {
        guard ProcessWorld.browserInstalled() else { return }
        let unregistered = String(repeating: "dead", count: 16)
        let world = try ProcessWorld(simulator: #""scenarios": { "\#(unregistered)": "unregistered" }"#)
        defer { world.stop() }
        let dir = world.directory
        try "admin-token-for-the-console-test\n".write(toFile: dir + "/admin-token", atomically: true, encoding: .utf8)
        try "readonly-token-for-the-console-test\n".write(toFile: dir + "/readonly-token", atomically: true, encoding: .utf8)
        for file in ["/admin-token", "/readonly-token"] { chmod(dir + file, 0o600) }
        let adminPort = freeLoopbackPort()
        func config(fixed: Bool) -> String {
            """
            { "redis": { "url": "\(world.redis.url)" },
              "admin": { "listen": "127.0.0.1:\(adminPort)", "token_file": "\(dir)/admin-token",
                         "readonly_token_file": "\(dir)/readonly-token" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(world.simulatorPort)" },
                        "sandbox": { "endpoint": "127.0.0.1:\(world.simulatorPort)" }, "ca_file": "\(world.pki.caCert)" },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(world.pki.jwtKey)" },
                               "wrong": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(world.pki.otherJWTKey)" } },
              "apps": { "acme": \(ProcessWorld.app()),
                        "beta": { "bundle_id": "com.example.app", "credential": "\(fixed ? "k" : "wrong")", "environment": "production" } } }
            """
        }
        let configFile = dir + "/gateway.json"
        try config(fixed: false).write(toFile: configFile, atomically: true, encoding: .utf8)
        try config(fixed: true).write(toFile: dir + "/gateway-fixed.json", atomically: true, encoding: .utf8)
        let log = dir + "/gateway.log"
        let gateway = try world.gateway(config: configFile, consumer: "console", arguments: ["--log-level", "info"], log: log)
        try waitForPort(adminPort)

        let settings: [String: Any] = [
            "console": "http://127.0.0.1:\(adminPort)", "admin_token": "admin-token-for-the-console-test",
            "readonly_token": "readonly-token-for-the-console-test", "redis_port": world.redis.port,
            "gateway_pid": Int(gateway.pid), "config": configFile, "fixed_config": dir + "/gateway-fixed.json", "gateway_log": log,
            "unregistered_token": unregistered, "profile": dir + "/chromium-profile",
            "screenshots": ProcessInfo.processInfo.environment["PUSHGW_SCREENSHOTS"] ?? "",
        ]
        try JSONSerialization.data(withJSONObject: settings).write(to: URL(fileURLWithPath: dir + "/browser.json"))
        let started = Date()
        let (status, out, err) = try runCommand("/usr/bin/python3", [packageRoot + "/Tests/Browser/console_browser.py", dir + "/browser.json"],
                                                 timeoutMs: 240_000)
        print("console browser test: \(String(format: "%.1f", Date().timeIntervalSince(started))) s; \(out)")
        XCTAssertEqual(status, 0, "the browser checks: \(err)\ngateway log ends:\n\(String(textSoFar(log).suffix(3_000)))")
        XCTAssertTrue(gateway.isRunning, "the gateway survived the console's hostile content")
        let lines = ProcessWorld.logLines(log, message: "console sign-in refused: wrong token")
        XCTAssertEqual(lines.count, 1, "the wrong token was logged once")
        XCTAssertFalse(textSoFar(log).contains("not-the-token") || textSoFar(log).contains("admin-token-for"),
                       "no token reaches the log")
    }
}
