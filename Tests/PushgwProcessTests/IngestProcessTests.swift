import Foundation
import TestSupport
import XCTest

/// `pushgw run` with the HTTP API (`ingest`) as an operator sets it up: a key from
/// `pushgw apikey new`, its hash in the config, TLS with a certificate from the config; a
/// producer with curl sends a call and gets its result, on a port that is not the admin one.
final class IngestProcessTests: XCTestCase {
    /// SHA-256 hex, by the openssl command (not pushgw's code).
    private enum APIKeyHash {
        static func of(_ key: String) -> String {
            let out = (try? runCommand("/usr/bin/openssl", ["dgst", "-sha256", "-r"], stdin: key).1) ?? ""
            return String(out.prefix(64))
        }
    }

    func testPushgwRunServesTheHTTPAPIOverTLS() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let (status, out, err) = try runCommand(world.pushgw, ["apikey", "new", "acme"])
        XCTAssertEqual(status, 0, err)
        func value(_ label: String) -> String? {
            out.split(separator: "\n").first { $0.hasPrefix(label + ":") }.map { $0.dropFirst(label.count + 1).trimmingCharacters(in: .whitespaces) }
        }
        let key = try XCTUnwrap(value("key")), hash = try XCTUnwrap(value("sha256"))
        let adminPort = freeLoopbackPort(), apiPort = freeLoopbackPort()
        let path = try world.writeConfig(apps: ["acme": ProcessWorld.app()], admin: #""listen": "127.0.0.1:\#(adminPort)""#)
        var config = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        config["ingest"] = ["listen": "127.0.0.1:\(apiPort)", "tls_cert_file": world.pki.serverCert, "tls_key_file": world.pki.serverKey,
                            "apps": ["acme": ["api_keys": [hash]]]] as [String: Any]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: path))
        let check = try runCommand(world.pushgw, ["config", "check", path])
        XCTAssertEqual(check.0, 0, "config check passes: \(check.1)\(check.2)")

        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: path, consumer: "ingest-test", log: log)
        try waitForPort(apiPort)
        let curl = try runCommand("/usr/bin/curl", ["-sS", "--cacert", world.pki.caCert, "-w", "\n%{http_code}",
                                                    "-H", "Authorization: Bearer \(key)", "-H", "Content-Type: application/json",
                                                    "--data-binary", #"{"v":1,"id":"c-process","type":"incoming_call","voip_token":"a0a0a0a0"}"#,
                                                    "https://localhost:\(apiPort)/v1/apps/acme/calls?wait=10s"])
        XCTAssertEqual(curl.0, 0, curl.2)
        XCTAssertTrue(curl.1.hasSuffix("\n200"), curl.1)
        XCTAssertTrue(curl.1.contains(#""outcome":"delivered_voip""#), curl.1)
        let wrong = try runCommand("/usr/bin/curl", ["-sS", "--cacert", world.pki.caCert, "-o", "/dev/null", "-w", "%{http_code}",
                                                     "-H", "Authorization: Bearer pgw_wrong", "https://localhost:\(apiPort)/v1/apps/acme/calls/c-process"])
        XCTAssertEqual(wrong.1, "401")

        // The key rotated with a reload: only the new key's hash in the config, SIGHUP.
        let second = try runCommand(world.pushgw, ["apikey", "new", "acme"]).1
        let newKey = try XCTUnwrap(second.split(separator: "\n").first { $0.hasPrefix("key:") }?.dropFirst(4).trimmingCharacters(in: .whitespaces))
        config["ingest"] = ["listen": "127.0.0.1:\(apiPort)", "tls_cert_file": world.pki.serverCert, "tls_key_file": world.pki.serverKey,
                            "apps": ["acme": ["api_keys": [APIKeyHash.of(newKey)]]]] as [String: Any]
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: path))
        kill(gw.pid, SIGHUP)
        waitUntil("the log line of the reload") { !ProcessWorld.logLines(log, message: "config reloaded").isEmpty }
        func answer(_ key: String) throws -> String {
            try runCommand("/usr/bin/curl", ["-sS", "--cacert", world.pki.caCert, "-o", "/dev/null", "-w", "%{http_code}",
                                             "-H", "Authorization: Bearer \(key)", "https://localhost:\(apiPort)/v1/apps/acme/calls/c-process"]).1
        }
        XCTAssertEqual(try answer(key), "401", "the old key is refused after the reload")
        XCTAssertEqual(try answer(newKey), "200", "the new key reads the call's result")
        XCTAssertEqual(gw.stop(signal: SIGTERM), 0, "SIGTERM drains and exits 0 with the API open")
        let logText = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(logText.contains(#""msg":"HTTP API""#), logText)
        XCTAssertFalse(logText.contains(key) || logText.contains(newKey), "a key never reaches the log")
    }
}
