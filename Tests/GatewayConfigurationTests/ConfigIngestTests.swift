import Foundation
import GatewayTestSupport
import TestSupport
import XCTest
@testable import GatewayConfiguration

/// The `ingest` section (config/README.md): the HTTP API is off without it; each problem names
/// its key and says how to fix it.
final class ConfigIngestTests: XCTestCase {
    var fixture: ConfigFixture!
    private let hash = String(repeating: "ab12", count: 16)

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    private func ingest(_ section: [String: Any]) -> [String: Any] {
        setting(ConfigFixture.example, "ingest", section)
    }

    func testWithoutTheSectionTheAPIIsOff() throws {
        let config = try XCTUnwrap(try fixture.check(ConfigFixture.example).config)
        XCTAssertNil(config.ingest)
    }

    func testALoopbackListenerWithKeysIsRead() throws {
        let report = try fixture.check(ingest(["listen": "127.0.0.1:9480",
                                               "apps": ["acme": ["api_keys": [hash.uppercased(), hash.replacingOccurrences(of: "a", with: "c")],
                                                                 "requests_per_second": 20]]]))
        XCTAssertEqual(report.problems.map(\.description), [])
        let ingest = try XCTUnwrap(report.config?.ingest)
        XCTAssertEqual(ingest.listen, "127.0.0.1:9480")
        XCTAssertNil(ingest.tlsCertFile)
        XCTAssertEqual(ingest.apps["acme"], IngestApp(keyHashes: [hash, hash.replacingOccurrences(of: "a", with: "c")],
                                                      requestsPerSecond: 20, burst: 40), "hashes in lower case, burst twice the rate")
    }

    func testPlainHTTPBeyondLoopbackIsRefused() throws {
        let report = try fixture.check(ingest(["listen": "0.0.0.0:9480", "apps": ["acme": ["api_keys": [hash]]]]))
        let p = try XCTUnwrap(problem(at: "ingest.listen", in: report))
        XCTAssertTrue(p.problem.contains("without TLS"), p.description)
        XCTAssertTrue(p.fix.contains("tls_cert_file"), p.description)
        XCTAssertNil(report.config)
    }

    func testTLSBeyondLoopbackIsRead() throws {
        let report = try fixture.check(ingest(["listen": "0.0.0.0:9480", "tls_cert_file": "secrets/beta-voip.pem",
                                               "tls_key_file": "secrets/beta-voip.key", "apps": ["acme": ["api_keys": [hash]]]]))
        XCTAssertEqual(report.problems.map(\.description), [])
        XCTAssertEqual(report.config?.ingest?.tlsCertFile, fixture.directory + "/secrets/beta-voip.pem")
    }

    func testACertificateWithoutItsKeyOrAnotherKeyIsRefused() throws {
        let alone = try fixture.check(ingest(["listen": "127.0.0.1:9480", "tls_cert_file": "secrets/beta-voip.pem",
                                              "apps": ["acme": ["api_keys": [hash]]]]))
        XCTAssertNotNil(problem(at: "ingest.tls_key_file", in: alone))
        let mismatched = try fixture.check(ingest(["listen": "127.0.0.1:9480", "tls_cert_file": "secrets/beta-voip.pem",
                                                   "tls_key_file": "secrets/sec1.pem", "apps": ["acme": ["api_keys": [hash]]]]))
        XCTAssertNil(mismatched.config, "a key that is not the certificate's: \(mismatched.problems.map(\.description))")
    }

    func testAClientCAIsReadWithTLSOnly() throws {
        try fixture.write("secrets/producers-ca.pem", try fixture.contents("secrets/beta-voip.pem"), mode: 0o644)
        let mutual = try fixture.check(ingest(["listen": "127.0.0.1:9480", "tls_cert_file": "secrets/beta-voip.pem",
                                               "tls_key_file": "secrets/beta-voip.key", "tls_client_ca_file": "secrets/producers-ca.pem",
                                               "apps": ["acme": ["api_keys": [hash]]]]))
        XCTAssertEqual(mutual.problems.map(\.description), [])
        XCTAssertEqual(mutual.config?.ingest?.tlsClientCAFile, fixture.directory + "/secrets/producers-ca.pem")
        let plain = try fixture.check(ingest(["listen": "127.0.0.1:9480", "tls_client_ca_file": "secrets/producers-ca.pem",
                                              "apps": ["acme": ["api_keys": [hash]]]]))
        XCTAssertTrue(problem(at: "ingest.tls_client_ca_file", in: plain)?.problem.contains("without TLS") == true)
    }

    func testTheAdminPortIsRefused() throws {
        let report = try fixture.check(ingest(["listen": "127.0.0.1:9464", "apps": ["acme": ["api_keys": [hash]]]]))
        let p = try XCTUnwrap(problem(at: "ingest.listen", in: report))
        XCTAssertTrue(p.problem.contains("admin endpoint"), p.description)
    }

    func testKeysMustBeHashesOfDeclaredApps() throws {
        let report = try fixture.check(ingest(["listen": "127.0.0.1:9480",
                                               "apps": ["acme": ["api_keys": ["pgw_0123456789"]], "acne": ["api_keys": [hash]],
                                                        "beta": ["api_keys": [] as [String]]]]))
        let key = try XCTUnwrap(problem(at: "ingest.apps.acme.api_keys.0", in: report))
        XCTAssertFalse(key.description.contains("pgw_0123456789"), "a key pasted where its hash belongs is never quoted")
        XCTAssertTrue(key.fix.contains("pushgw apikey new"), key.description)
        XCTAssertTrue(problem(at: "ingest.apps.acne", in: report)?.problem.contains("did you mean \"acme\"") == true)
        XCTAssertNotNil(problem(at: "ingest.apps.beta.api_keys", in: report))
        XCTAssertNil(report.config)
    }
}
