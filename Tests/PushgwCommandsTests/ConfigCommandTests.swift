import Foundation
import GatewayTestSupport
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw config check` never prints a secret: not a key file's content, the Redis or
/// sentinel password, nor the admin token, in its text or its JSON (config/README.md).
final class ConfigCommandTests: XCTestCase {
    var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    func testNoMessageEverContainsASecretFileOrTheRedisPassword() throws {
        let secretText = "TOPSECRET-9a8b7c-do-not-print"
        try fixture.write("secrets/fake.p8", secretText + "\n" + secretText + "\n", mode: 0o644)
        try fixture.write("secrets/fake.key", "-----BEGIN NOT A KEY-----\n" + secretText + "\n", mode: 0o644)
        try fixture.write("secrets/pw", secretText, mode: 0o666)
        try fixture.write("secrets/enc.p8", "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + secretText + "\n", mode: 0o644)
        try fixture.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "secrets/rsa.p8"])
        try fixture.chmod("secrets/admin-token", 0o644)
        var json = setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets/fake.p8")
        json = setting(json, "credentials.beta-cert.key_file", "secrets/fake.key")
        json = setting(json, "credentials.p12", ["p12_file": "secrets/pw", "password_file": "secrets/pw"])
        json = setting(json, "credentials.enc", ["team_id": "ABCDE12345", "key_id": "KEY1234567", "key_file": "secrets/enc.p8"])
        json = setting(json, "credentials.rsa", ["team_id": "ABCDE12345", "key_id": "KEY1234567", "key_file": "secrets/rsa.p8"])
        json = setting(json, "redis.url", "redis//:\(secretText)@host:6379/0")
        let report = try fixture.check(json)
        XCTAssertGreaterThanOrEqual(report.problems.count, 6, report.problems.map(\.description).joined(separator: "\n"))
        let rsaBody = try fixture.contents("secrets/rsa.p8").split(separator: "\n")[1]
        let token = try fixture.contents("secrets/admin-token").trimmingCharacters(in: .whitespacesAndNewlines)
        let output = CapturedOutput()
        _ = pushgwMain(["config", "check", fixture.directory + "/pushgw.json"], context: output.context())
        _ = pushgwMain(["config", "check", "--json", fixture.directory + "/pushgw.json"], context: output.context())
        let everything = (report.problems.map(\.description) + output.out + output.err).joined(separator: "\n")
        XCTAssertFalse(everything.contains("TOPSECRET"), "a secret file's contents or the Redis password leaked:\n\(everything)")
        XCTAssertFalse(everything.contains(String(rsaBody.prefix(16))), "key material leaked")
        XCTAssertFalse(everything.contains(token), "the admin token leaked")
    }

    func testNoMessageContainsTheSentinelPassword() throws {
        let output = CapturedOutput()
        try fixture.writeConfig(setting(ConfigFixture.example, "redis", [
            "url": "redis://m/0",
            "sentinel": ["master": "m", "addresses": ["bad address"], "password": "SENTINEL-SECRET"],
        ]))
        _ = pushgwMain(["config", "check", fixture.directory + "/pushgw.json"], context: output.context())
        XCTAssertFalse((output.out + output.err).joined().contains("SENTINEL-SECRET"), "\(output.out)")
        XCTAssertTrue(output.out.joined().contains("redis.sentinel.addresses.0"), "\(output.out)")
    }
}

/// `pushgw config check` refuses, with exit status 1, the configs a push would refuse, naming
/// each at its path with the fix (GatewayConfigurationTests' ConfigCredentialTests check each
/// problem; this checks the command's output and status).
final class ConfigCheckLoadsCredentialsTests: XCTestCase {
    func testAWrongPKCS12PasswordAndAnExpiredCertificateFailTheCheck() throws {
        let fixture = try ConfigFixture.make(removedAfter: self)
        try fixture.write("secrets/wrong.password", "not-it\n")
        try fixture.openssl(["pkcs12", "-export", "-in", "secrets/beta-voip.pem", "-inkey", "secrets/beta-voip.key",
                             "-passout", "pass:right", "-out", "secrets/voip.p12"])
        try fixture.chmod("secrets/voip.p12", 0o600)
        try fixture.openssl(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "secrets/old.key", "-out", "secrets/old.csr",
                             "-subj", "/CN=old"])
        try fixture.openssl(["x509", "-req", "-in", "secrets/old.csr", "-signkey", "secrets/old.key", "-days", "-1", "-out", "secrets/old.pem"])
        try fixture.chmod("secrets/old.key", 0o600)
        var json = setting(ConfigFixture.example, "credentials.p12", ["p12_file": "secrets/voip.p12", "password_file": "secrets/wrong.password"])
        json = setting(json, "credentials.beta-cert", ["cert_file": "secrets/old.pem", "key_file": "secrets/old.key"])
        json = setting(json, "apps.gamma", ["bundle_id": "io.gamma.app", "credential": "p12", "environment": "production"])
        try fixture.writeConfig(json)
        let output = CapturedOutput()
        let status = pushgwMain(["config", "check", fixture.directory + "/pushgw.json"], context: output.context())
        XCTAssertEqual(status, 1, output.out.joined(separator: "\n"))
        let text = output.out.joined(separator: "\n")
        XCTAssertTrue(text.contains("credentials.p12.password_file: the password in ") && text.contains("; put the password"), text)
        XCTAssertTrue(text.contains("credentials.beta-cert.cert_file: the certificate \"/CN=old\" expired on ") && text.contains("; renew"), text)
        XCTAssertTrue(output.out.last?.contains("not usable: 2 errors") ?? false, text)
    }
}

/// `pushgw config check --rate N/s` prints the Redis memory each app's retention windows hold
/// at that rate, by kind of key, from the measured bytes per key (docs/operations.md).
final class ConfigCheckRedisMemoryTests: XCTestCase {
    func testTheRateGivesEachAppsMemoryByKindAtItsOwnWindows() throws {
        let fixture = try ConfigFixture.make(removedAfter: self)
        try fixture.writeConfig(setting(ConfigFixture.example, "apps.acme.retention", ["result_window_s": 3_600, "result_detail_s": 900]))
        let output = CapturedOutput()
        XCTAssertEqual(pushgwMain(["config", "check", "--rate", "1000/s", fixture.directory + "/pushgw.json"],
                                  context: output.context()), 0, "\(output.out) \(output.err)")
        let lines = output.out
        func row(_ app: String, _ key: String) -> String? {
            lines.first { $0.split(separator: " ", omittingEmptySubsequences: true).prefix(2) == [Substring(app), Substring(key)] }
        }
        // acme keeps the compact record (result_detail_s written): the result's detail, 550 B ×
        // 1,000/s × 900 s = 495 MB, and its compact record, 108 B × 1,000/s × (the window + a
        // quarter: 3,600 + 900 s) = 486 MB. beta has the default: the whole result for 24 h,
        // 550 B × 1,000/s × 86,400 s = 47.5 GB, and no compact record.
        XCTAssertTrue(row("acme", "result:ID")?.hasSuffix("495 MB") == true, "the detail:\n\(lines.joined(separator: "\n"))")
        XCTAssertTrue(row("acme", "outcomes:BUCKET")?.hasSuffix("486 MB") == true, "acme's own window:\n\(lines.joined(separator: "\n"))")
        XCTAssertTrue(row("beta", "result:ID")?.hasSuffix("47.5 GB") == true, "\(lines.joined(separator: "\n"))")
        XCTAssertNil(row("beta", "outcomes:BUCKET"), "no compact record by default:\n\(lines.joined(separator: "\n"))")
        // 205 B × 1 % × 1,000/s × 30 days = 5.31 GB; 200 B × 1,000/s × 24 h = 17.3 GB.
        XCTAssertTrue(row("beta", "invalid:voip|alert|fcm:TOKEN")?.hasSuffix("5.31 GB") == true, lines.joined(separator: "\n"))
        XCTAssertTrue(row("beta", "cancelled:ID")?.hasSuffix("17.3 GB") == true, lines.joined(separator: "\n"))
        XCTAssertTrue(row("beta", "total")?.hasSuffix("70.1 GB") == true, lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains { $0.contains("estimates") }, "says the figures are estimates: \(lines)")

        let json = CapturedOutput()
        _ = pushgwMain(["config", "check", "--json", "--rate=100", fixture.directory + "/pushgw.json"], context: json.context())
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.out.joined().utf8)) as? [String: Any])
        let memory = try XCTUnwrap(object["redis_memory"] as? [String: Any], "\(object)")
        let apps = try XCTUnwrap(memory["apps"] as? [String: Any])
        let beta = try XCTUnwrap((apps["beta"] as? [String: Any])?["keys"] as? [[String: Any]])
        XCTAssertEqual(beta.first?["key"] as? String, "result:ID")
        XCTAssertEqual(beta.first?["bytes"] as? Int, 550 * 100 * 86_400, "550 B a call for 24 h at 100 calls/s")
        XCTAssertEqual(beta.dropFirst().first?["key"] as? String, "cancelled:ID")
        let acme = try XCTUnwrap((apps["acme"] as? [String: Any])?["keys"] as? [[String: Any]])
        XCTAssertEqual(acme.dropFirst().first?["key"] as? String, "outcomes:BUCKET")
        XCTAssertEqual(acme.dropFirst().first?["bytes"] as? Int, 108 * 100 * 4_500, "108 B a call for the hour and a quarter")
    }

    func testABadRateIsBadUsageAndAnUnusableConfigIsNotEstimated() throws {
        let fixture = try ConfigFixture.make(removedAfter: self)
        try fixture.writeConfig(ConfigFixture.example)
        for bad in ["fast", "0/s", "-5", "1000/min", "1e9"] {
            let output = CapturedOutput()
            XCTAssertEqual(pushgwMain(["config", "check", "--rate", bad, fixture.directory + "/pushgw.json"], context: output.context()),
                           2, "--rate \(bad) is refused")
            XCTAssertTrue(output.err.joined().contains("--rate"), "\(output.err)")
        }
        try fixture.writeConfig(setting(ConfigFixture.example, "apps.acme.retention.result_window_s", "24h"))
        let output = CapturedOutput()
        XCTAssertEqual(pushgwMain(["config", "check", "--rate", "1000/s", fixture.directory + "/pushgw.json"], context: output.context()), 1)
        XCTAssertTrue(output.out.contains { $0.contains("apps.acme.retention.result_window_s") && $0.contains("write 86400") },
                      "\(output.out)")
        XCTAssertTrue(output.out.contains("Redis memory not estimated: the config is not usable"), "\(output.out)")
    }
}
