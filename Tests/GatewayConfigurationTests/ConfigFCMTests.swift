import EventLoop
import Foundation
import GatewayTestSupport
import TestSupport
import XCTest
@testable import GatewayConfiguration

/// An FCM credential is a Google service-account key file named under `credentials`
/// (`service_account_file`) and by an app's `fcm_credential`; `config check` loads it as the FCM
/// pool will and names each mistake (a missing field, a key that is not RSA, a file that is not
/// JSON or cannot be read, a credential of the wrong kind) at its JSON path with a fix, never
/// printing the key. Off unless an app names one.
final class ConfigFCMTests: XCTestCase {
    var fixture: ConfigFixture!
    var pki: TestPKI!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
        pki = try TestPKI.shared()
    }

    private let path = "credentials.acme-firebase.service_account_file"

    /// The example with app acme ringing Android devices with `acme-firebase`, whose file is
    /// the test service account with `changes`.
    private func example(changes: [String: Any] = [:], mode: Int = 0o600) throws -> [String: Any] {
        let text = try pki.serviceAccountJSON(tokenURI: "https://oauth2.googleapis.com/token", changes: changes)
        try fixture.write("secrets/acme-firebase.json", text, mode: mode)
        var json = setting(ConfigFixture.example, "credentials.acme-firebase", ["service_account_file": "secrets/acme-firebase.json"])
        json = setting(json, "apps.acme.fcm_credential", "acme-firebase")
        return json
    }

    func testAnAppNamesAServiceAccountAndTheFcmSection() throws {
        var json = try example()
        json = setting(json, "fcm", ["endpoint": "127.0.0.1:8443", "ca_file": "secrets/beta-voip.pem", "connections": 3])
        let report = try fixture.check(json)
        XCTAssertEqual(report.problems.map(\.description), [])
        let config = try XCTUnwrap(report.config)
        XCTAssertEqual(config.fcmCredentials["acme-firebase"],
                       FcmCredential(serviceAccountFile: fixture.directory + "/secrets/acme-firebase.json"))
        XCTAssertNil(config.credentials["acme-firebase"], "an FCM credential is not an APNs one")
        XCTAssertEqual(config.apps["acme"]?.fcmCredential, "acme-firebase")
        XCTAssertNil(config.apps["beta"]?.fcmCredential, "off unless the app names one")
        XCTAssertEqual(config.fcm.endpoint, Endpoint(host: "127.0.0.1", port: 8443))
        XCTAssertEqual(config.fcm.connections, 3)
        let account = try XCTUnwrap(try? config.fcmCredentials["acme-firebase"]!.load().get())
        XCTAssertEqual(account.projectID, pki.fcmProjectID)
        XCTAssertEqual(account.tokenEndpoint.host, "oauth2.googleapis.com")
        XCTAssertEqual(account.tokenEndpoint.path, "/token")
    }

    func testWithoutFcmNothingChanges() throws {
        let config = try XCTUnwrap(try fixture.check(ConfigFixture.example).config)
        XCTAssertEqual(config.fcmCredentials, [:])
        XCTAssertEqual(config.fcm, FcmConfig())
        XCTAssertTrue(config.apps.values.allSatisfy { $0.fcmCredential == nil })
    }

    func testEachMissingFieldIsNamedWithTheFix() throws {
        for field in ["project_id", "client_email", "private_key_id", "private_key", "token_uri"] {
            let report = try fixture.check(try example(changes: [field: NSNull()]))
            let p = try XCTUnwrap(problem(at: path, in: report, severity: .error))
            XCTAssertTrue(p.problem.contains("acme-firebase.json has no \(field)"), p.description)
            XCTAssertTrue(p.fix.contains("Generate new private key"), p.description)
            XCTAssertNil(report.config)
        }
    }

    func testAKeyThatIsNotRSAIsAnError() throws {
        let ecKey = try fixture.contents("secrets/AuthKey_KEY1234567.p8")
        let report = try fixture.check(try example(changes: ["private_key": ecKey]))
        let p = try XCTUnwrap(problem(at: path, in: report, severity: .error))
        XCTAssertTrue(p.problem.contains("private_key of type EC"), p.description)
        XCTAssertTrue(p.problem.contains("RS256"), p.description)
        XCTAssertTrue(p.fix.contains("Generate new private key"), p.description)
        XCTAssertFalse(p.description.contains("PRIVATE KEY-----"), "the key is never printed")
    }

    func testADamagedKeyIsAnErrorThatDoesNotQuoteIt() throws {
        let key = try String(contentsOfFile: pki.fcmKey, encoding: .utf8)
        let damaged = key.replacingOccurrences(of: "\n", with: " ")
        let report = try fixture.check(try example(changes: ["private_key": damaged]))
        let p = try XCTUnwrap(problem(at: path, in: report, severity: .error))
        XCTAssertTrue(p.problem.contains("does not load"), p.description)
        let body = key.split(separator: "\n")[1]
        XCTAssertFalse(p.description.contains(body), "no part of the key is printed")
    }

    func testAFileThatIsNotJSONOrNotAServiceAccount() throws {
        var json = try example()
        try fixture.write("secrets/acme-firebase.json", "-----BEGIN PRIVATE KEY-----\nnot json\n")
        var p = try XCTUnwrap(problem(at: path, in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("is not a JSON object"), p.description)
        json = try example(changes: ["type": "authorized_user"])
        p = try XCTUnwrap(problem(at: path, in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("\"authorized_user\" credential, not a service account"), p.description)
        XCTAssertTrue(p.fix.contains("application-default"), p.description)
        json = try example(changes: ["token_uri": "http://oauth2.googleapis.com/token"])
        p = try XCTUnwrap(problem(at: path, in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("not an https:// URL"), p.description)
    }

    func testAnUnreadableFileIsNamed() throws {
        var json = try example()
        json = setting(json, "credentials.acme-firebase.service_account_file", "secrets/missing.json")
        let p = try XCTUnwrap(problem(at: path, in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("cannot read") && p.problem.contains("missing.json"), p.description)
    }

    func testALooseModeIsWarnedAbout() throws {
        let report = try fixture.check(try example(mode: 0o644))
        let p = try XCTUnwrap(problem(at: path, in: report, severity: .warning))
        XCTAssertTrue(p.fix.contains("chmod 600"), p.description)
        XCTAssertNotNil(report.config)
    }

    func testCredentialsOfTheWrongKind() throws {
        var json = try example()
        json = setting(json, "apps.acme.fcm_credential", "acme-key")
        var p = try XCTUnwrap(problem(at: "apps.acme.fcm_credential", in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("is an APNs credential"), p.description)
        json = setting(try example(), "apps.acme.credential", "acme-firebase")
        p = try XCTUnwrap(problem(at: "apps.acme.credential", in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("is an FCM service account"), p.description)
        XCTAssertTrue(p.fix.contains("fcm_credential"), p.description)
        json = setting(try example(), "apps.acme.fcm_credential", "nobody")
        p = try XCTUnwrap(problem(at: "apps.acme.fcm_credential", in: try fixture.check(json), severity: .error))
        XCTAssertTrue(p.problem.contains("no FCM credential named \"nobody\" (declared: acme-firebase)"), p.description)
    }
}
