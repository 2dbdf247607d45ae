import APNs
import EventLoop
import Foundation
import GatewayTestSupport
import TestSupport
import XCTest
@testable import GatewayConfiguration

/// `config check` loads what a push would load and refuses what a push would refuse, each
/// named at its JSON path with its fix: a `.p12` without or with a wrong password, a key that
/// is not the certificate's, a CA file that is a private key, an expired certificate; and warns
/// about what would go wrong later: a certificate near its end, an absurd ring timeout, an
/// environment on the other environment's host. A trailing comma is refused, as its message says.
final class ConfigCredentialTests: XCTestCase {
    var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
        try fixture.write("secrets/voip.password", "right-password\n")
        try fixture.openssl(["pkcs12", "-export", "-in", "secrets/beta-voip.pem", "-inkey", "secrets/beta-voip.key",
                             "-passout", "pass:right-password", "-out", "secrets/voip.p12"])
        try fixture.chmod("secrets/voip.p12", 0o600)
    }

    /// The example with app beta on credential `name` = `credential`.
    private func with(_ name: String, _ credential: [String: Any]) -> [String: Any] {
        var json = setting(ConfigFixture.example, "credentials.\(name)", credential)
        json = setting(json, "apps.beta.credential", name)
        return json
    }

    /// A self-signed RSA certificate like Apple's push certificates, `days` long (a negative
    /// count ends it before it starts: expired), with Apple's environment `extensions` (OIDs).
    private func certificate(_ name: String, days: Int, extensions: [String] = []) throws {
        try fixture.openssl(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "secrets/\(name).key", "-out", "secrets/\(name).csr",
                             "-subj", "/UID=com.beta.talk/CN=Apple Push Services: com.beta.talk"])
        try fixture.write("secrets/\(name).ext", extensions.map { "\($0)=ASN1:NULL\n" }.joined() + "basicConstraints=CA:FALSE\n")
        try fixture.openssl(["x509", "-req", "-in", "secrets/\(name).csr", "-signkey", "secrets/\(name).key", "-days", String(days),
                             "-extfile", "secrets/\(name).ext", "-out", "secrets/\(name).pem"])
        try fixture.chmod("secrets/\(name).key", 0o600)
    }

    private static let development = "1.2.840.113635.100.6.3.1"
    private static let production = "1.2.840.113635.100.6.3.2"

    func testAPKCS12WithoutItsPasswordFileIsAnError() throws {
        let report = try fixture.check(with("p12", ["p12_file": "secrets/voip.p12"]))
        let p = try XCTUnwrap(problem(at: "credentials.p12.p12_file", in: report, severity: .error))
        XCTAssertTrue(p.problem.contains("does not open without a password"), p.description)
        XCTAssertTrue(p.fix.contains("password_file"), p.description)
        XCTAssertNil(report.config)
    }

    func testAPKCS12WithAWrongPasswordIsAnError() throws {
        try fixture.write("secrets/wrong.password", "not-it\n")
        let report = try fixture.check(with("p12", ["p12_file": "secrets/voip.p12", "password_file": "secrets/wrong.password"]))
        let p = try XCTUnwrap(problem(at: "credentials.p12.password_file", in: report, severity: .error))
        XCTAssertTrue(p.problem.contains("does not open"), p.description)
        XCTAssertFalse(p.description.contains("not-it"), "the password is never printed")
        XCTAssertNotNil(try fixture.check(with("p12", ["p12_file": "secrets/voip.p12", "password_file": "secrets/voip.password"])).config,
                        "the right password loads")
    }

    func testACertificateWithAnotherCertificatesKeyIsAnError() throws {
        try certificate("other", days: 365)
        let report = try fixture.check(with("mixed", ["cert_file": "secrets/beta-voip.pem", "key_file": "secrets/other.key"]))
        let p = try XCTUnwrap(problem(at: "credentials.mixed.key_file", in: report, severity: .error))
        XCTAssertTrue(p.problem.contains("is not the key of the certificate"), p.description)
        XCTAssertTrue(p.fix.contains("openssl x509 -noout -pubkey"), p.description)
    }

    func testACAFileThatIsAPrivateKeyIsAnError() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apns.ca_file", "secrets/beta-voip.key"))
        let p = try XCTUnwrap(problem(at: "apns.ca_file", in: report, severity: .error))
        XCTAssertTrue(p.problem.contains("holds no PEM certificate (it holds a private key)"), p.description)
        XCTAssertTrue(p.fix.contains("ca-certificates.crt"), p.description)
        XCTAssertNil(try fixture.check(setting(ConfigFixture.example, "apns.ca_file", "secrets/beta-voip.pem")).problems.first,
                     "a PEM certificate is a CA file")
    }

    func testAnExpiredCertificateIsAnErrorAndOneNearItsEndAWarning() throws {
        try certificate("expired", days: -1)
        let expired = try fixture.check(with("old", ["cert_file": "secrets/expired.pem", "key_file": "secrets/expired.key"]))
        let p = try XCTUnwrap(problem(at: "credentials.old.cert_file", in: expired, severity: .error))
        XCTAssertTrue(p.problem.contains("expired on "), p.description)
        XCTAssertTrue(p.fix.contains("renew the certificate"), p.description)

        try certificate("soon", days: 10)
        let soon = try fixture.check(with("soon", ["cert_file": "secrets/soon.pem", "key_file": "secrets/soon.key"]))
        XCTAssertNotNil(soon.config, "usable until then")
        let w = try XCTUnwrap(problem(at: "credentials.soon.cert_file", in: soon, severity: .warning))
        XCTAssertTrue(w.problem.contains("expires on ") && (w.problem.contains("in 9 days") || w.problem.contains("in 10 days")),
                      w.description)

        let ca = try fixture.check(setting(ConfigFixture.example, "apns.ca_file", "secrets/soon.pem"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "apns.ca_file", in: ca, severity: .warning)).problem.contains("expires on "),
                      "the CA file too")
    }

    func testACertificateForOneEnvironmentOnly() throws {
        // Apple's extension for the development environment only.
        try certificate("dev", days: 365, extensions: [Self.development])
        var json = with("dev", ["cert_file": "secrets/dev.pem", "key_file": "secrets/dev.key"])
        let sandbox = try fixture.check(json)
        let w = try XCTUnwrap(problem(at: "credentials.dev", in: sandbox, severity: .warning))
        XCTAssertTrue(w.problem.contains("for sandbox only") && w.problem.contains("cannot be tried in production"), w.description)
        json = setting(json, "apps.beta.environment", "production")
        let production = try fixture.check(json)
        let e = try XCTUnwrap(problem(at: "apps.beta.environment", in: production, severity: .error))
        XCTAssertTrue(e.problem.contains("BadCertificateEnvironment"), e.description)

        try certificate("universal", days: 365, extensions: [Self.development, Self.production])
        let both = try fixture.check(with("universal", ["cert_file": "secrets/universal.pem", "key_file": "secrets/universal.key"]))
        XCTAssertEqual(both.problems.filter { $0.path != "credentials.beta-cert" }.map(\.description), [],
                       "a universal certificate serves both (beta-cert is unused here)")
        let config = try XCTUnwrap(both.config)
        XCTAssertTrue(config.credentials["universal"]!.reachesBothEnvironments)
        XCTAssertTrue(config.credentials["acme-key"]!.reachesBothEnvironments, "a token key reaches both")
        let dev = try XCTUnwrap(try fixture.check(with("dev", ["cert_file": "secrets/dev.pem", "key_file": "secrets/dev.key"])).config)
        XCTAssertFalse(dev.credentials["dev"]!.reachesBothEnvironments)
    }

    func testAnAbsurdRingTimeoutIsAWarning() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.ring_timeout_s", 30_000))
        let w = try XCTUnwrap(problem(at: "apps.acme.ring_timeout_s", in: report, severity: .warning))
        XCTAssertTrue(w.problem.contains("rings for 30000 s (8 h 20 min)"), w.description)
        XCTAssertTrue(w.fix.contains("such as 30"), w.description)
        XCTAssertEqual(try fixture.check(setting(ConfigFixture.example, "apps.acme.ring_timeout_s", 60)).problems.count, 0)
    }

    func testAnEnvironmentOnTheOtherEnvironmentsHostIsAWarning() throws {
        // beta is a sandbox app.
        let sandbox = try fixture.check(setting(ConfigFixture.example, "apns.sandbox.endpoint", "api.push.apple.com:443"))
        let w = try XCTUnwrap(problem(at: "apns.sandbox.endpoint", in: sandbox, severity: .warning))
        XCTAssertTrue(w.problem.contains("Apple's production host api.push.apple.com") && w.problem.contains("app \"beta\""), w.description)
        XCTAssertEqual(w.fix, "set it to api.sandbox.push.apple.com:443")
        let production = try fixture.check(setting(ConfigFixture.example, "apns.production.endpoint", "api.sandbox.push.apple.com:443"))
        let p = try XCTUnwrap(problem(at: "apns.production.endpoint", in: production, severity: .warning))
        XCTAssertTrue(p.problem.contains("app \"acme\""), p.description)
        XCTAssertEqual(p.fix, "set it to api.push.apple.com:443")
    }

    func testATrailingCommaIsRefusedAsTheMessageSays() throws {
        let path = try fixture.writeConfig(ConfigFixture.example)
        var text = try String(contentsOfFile: path, encoding: .utf8)
        let close = try XCTUnwrap(text.range(of: "}", options: .backwards))
        text.replaceSubrange(close, with: ",\n}")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let report = GatewayConfig.load(file: path, workingDirectory: fixture.directory)
        XCTAssertNil(report.config)
        let p = try XCTUnwrap(report.errors.first)
        XCTAssertTrue(p.problem.contains("a trailing comma before '}' at line"), p.description)
        XCTAssertTrue(p.fix.contains("no trailing commas"), p.description)
    }

    func testExpiryTimesForTheMetric() throws {
        try certificate("soon", days: 10)
        var json = with("soon", ["cert_file": "secrets/soon.pem", "key_file": "secrets/soon.key"])
        json = setting(json, "apns.ca_file", "secrets/beta-voip.pem")
        let config = try XCTUnwrap(try fixture.check(json).config)
        let now = Int64(Date().timeIntervalSince1970)
        let expiries = config.certificateExpiries(nowS: now)
        XCTAssertEqual(expiries.map(\.name), ["beta-cert", "soon", "apns.ca_file"])
        XCTAssertEqual(expiries.map(\.kind), ["credential", "credential", "ca"])
        let soon = try XCTUnwrap(expiries.first { $0.name == "soon" })
        XCTAssertLessThanOrEqual(abs(soon.notAfterS - (now + 10 * 86_400)), 120, "openssl's end date, read back")
    }
}
