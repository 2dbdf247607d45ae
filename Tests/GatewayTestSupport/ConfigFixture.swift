import Foundation
import GatewayConfiguration
import TestSupport
import XCTest

/// A temporary directory holding a config and its key files, removed by `cleanUp()`.
package final class ConfigFixture {
    package let directory: String

    package init() throws {
        directory = makeTemporaryDirectory("pushgw-gateway-tests")
        try FileManager.default.createDirectory(atPath: directory + "/secrets", withIntermediateDirectories: true)
    }

    package func cleanUp() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A fixture for one test, removed when `test` ends; with the example's key material
    /// (`makeSecrets`) unless `secrets` is false.
    package static func make(removedAfter test: XCTestCase, secrets: Bool = true) throws -> ConfigFixture {
        let fixture = try ConfigFixture()
        test.addTeardownBlock { fixture.cleanUp() }
        if secrets { try fixture.makeSecrets() }
        return fixture
    }

    /// Writes `text` to `name` (relative to the directory) with `mode`; returns the full path.
    @discardableResult
    package func write(_ name: String, _ text: String, mode: Int = 0o600) throws -> String {
        let path = directory + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    /// Runs `openssl` with `arguments` in the directory, failing the test on a non-zero exit.
    package func openssl(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let (status, _, err) = try runCommand("openssl", arguments, currentDirectory: directory)
        XCTAssertEqual(status, 0, "openssl \(arguments.joined(separator: " ")) failed: \(err)", file: file, line: line)
    }

    package func chmod(_ name: String, _ mode: Int) throws {
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: directory + "/" + name)
    }

    package func contents(_ name: String) throws -> String {
        try String(contentsOfFile: directory + "/" + name, encoding: .utf8)
    }

    /// The key material of the example config: an APNs-style .p8 (EC P-256, PKCS#8), a
    /// self-signed certificate with its key, and the admin token, all mode 600.
    package func makeSecrets() throws {
        try openssl(["ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", "secrets/sec1.pem"])
        try openssl(["pkcs8", "-topk8", "-nocrypt", "-in", "secrets/sec1.pem", "-out", "secrets/AuthKey_KEY1234567.p8"])
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "secrets/beta-voip.key", "-out", "secrets/beta-voip.pem", "-subj", "/CN=beta", "-days", "365"])
        try write("secrets/admin-token", "admin-token-SECRET-7d1f3a9c0b5e48e2a6c4f0d9b1e7a3c5\n")
        for name in ["secrets/sec1.pem", "secrets/AuthKey_KEY1234567.p8", "secrets/beta-voip.key"] {
            try chmod(name, 0o600)
        }
    }

    /// The config of config/README.md with paths relative to the directory.
    package static var example: [String: Any] {
        [
            "redis": ["url": "redis://127.0.0.1:6379/0", "prefix": "pushgw"],
            "admin": ["listen": "127.0.0.1:9464", "token_file": "secrets/admin-token"],
            "apns": [
                "production": ["endpoint": "api.push.apple.com:443"],
                "sandbox": ["endpoint": "api.sandbox.push.apple.com:443"],
                "ca_file": NSNull(), "connections": 2, "request_timeout_ms": 10000,
            ] as [String: Any],
            "credentials": [
                "acme-key": ["team_id": "ABCDE12345", "key_id": "KEY1234567", "key_file": "secrets/AuthKey_KEY1234567.p8"],
                "beta-cert": ["cert_file": "secrets/beta-voip.pem", "key_file": "secrets/beta-voip.key"],
            ],
            "apps": [
                "acme": [
                    "bundle_id": "com.acme.phone", "credential": "acme-key", "environment": "production",
                    "ring_timeout_s": 30,
                    "retry": ["voip": ["max_attempts": 4, "base_ms": 100, "cap_ms": 2000],
                              "alert": ["max_attempts": 8, "base_ms": 500, "cap_ms": 60000, "ttl_s": 86400]],
                    "fallback_alert": ["title": "Missed call", "body": "{callerName} tried to call you", "sound": "default"],
                ] as [String: Any],
                "beta": ["bundle_id": "com.beta.talk", "credential": "beta-cert", "environment": "sandbox"],
            ],
        ]
    }

    /// Writes `json` as `pushgw.json` and returns its path.
    @discardableResult
    package func writeConfig(_ json: [String: Any]) throws -> String {
        let data = try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])
        return try write("pushgw.json", String(decoding: data, as: UTF8.self), mode: 0o644)
    }

    /// Checks `json` written as the config, with `environment` as the process environment.
    package func check(_ json: [String: Any], environment: [String: String] = [:]) throws -> ConfigReport {
        let path = try writeConfig(json)
        return GatewayConfig.load(file: path, environment: environment, workingDirectory: directory)
    }
}

/// `dict` with the value at `path` replaced (nil removes it), creating objects on the way.
package func setting(_ dict: [String: Any], _ path: String, _ value: Any?) -> [String: Any] {
    var copy = dict
    let keys = path.split(separator: ".").map(String.init)
    if keys.count == 1 {
        copy[keys[0]] = value
    } else {
        let inner = copy[keys[0]] as? [String: Any] ?? [:]
        copy[keys[0]] = setting(inner, keys.dropFirst().joined(separator: "."), value)
    }
    return copy
}

/// The one problem at `path`, failing the test unless there is exactly one.
package func problem(at path: String, in report: ConfigReport, severity: ConfigError.Severity? = nil,
             file: StaticString = #filePath, line: UInt = #line) -> ConfigError? {
    let found = report.problems.filter { $0.path == path && (severity == nil || $0.severity == severity) }
    XCTAssertEqual(found.count, 1, "expected one problem at \(path), got: \(report.problems.map(\.description))",
                   file: file, line: line)
    return found.first
}
