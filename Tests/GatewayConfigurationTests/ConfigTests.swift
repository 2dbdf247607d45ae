import APNs
import EventLoop
import Foundation
import GatewayTestSupport
import Retry
import Routing
import TestSupport
import XCTest
@testable import GatewayConfiguration

final class ConfigTests: XCTestCase {
    var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    // MARK: A good config

    func testExampleConfigParsesWithTheExpectedValues() throws {
        let report = try fixture.check(ConfigFixture.example)
        XCTAssertEqual(report.problems.map(\.description), [], "the example config has no problems")
        let config = try XCTUnwrap(report.config)
        let dir = fixture.directory
        XCTAssertEqual(config.redis, RedisConfig(url: "redis://127.0.0.1:6379/0", prefix: "pushgw"))
        XCTAssertEqual(config.admin, AdminConfig(listen: "127.0.0.1:9464", tokenFile: dir + "/secrets/admin-token"))
        XCTAssertEqual(config.apns, ApnsConfig(), "the example spells out the defaults")
        XCTAssertEqual(config.apns.productionEndpoint, Endpoint(host: "api.push.apple.com", port: 443))
        XCTAssertEqual(config.apns.sandboxEndpoint.description, "api.sandbox.push.apple.com:443")
        XCTAssertEqual(config.credentials["acme-key"],
                       .token(teamId: "ABCDE12345", keyId: "KEY1234567", keyFile: dir + "/secrets/AuthKey_KEY1234567.p8"))
        XCTAssertEqual(config.credentials["beta-cert"],
                       .certificate(certFile: dir + "/secrets/beta-voip.pem", keyFile: dir + "/secrets/beta-voip.key"))
        XCTAssertEqual(config.apps["acme"], AppConfig(
            bundleId: "com.acme.phone", credential: "acme-key", environment: .production, ringTimeoutSeconds: 30,
            retry: RetryPolicies(voip: RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2000),
                                 alert: RetryPolicy(maxAttempts: 8, baseMs: 500, capMs: 60000), alertTTLSeconds: 86400),
            fallbackAlert: FallbackTemplate(title: "Missed call", body: "{callerName} tried to call you", sound: "default")))
        XCTAssertEqual(config.apps["beta"], AppConfig(bundleId: "com.beta.talk", credential: "beta-cert", environment: .sandbox),
                       "omitted app keys take their defaults")
    }

    func testNonDefaultValuesAndPKCS12AreRead() throws {
        try fixture.write("secrets/voip.password", "pw\n")
        try fixture.openssl(["pkcs12", "-export", "-in", "secrets/beta-voip.pem", "-inkey", "secrets/beta-voip.key",
                             "-passout", "pass:pw", "-out", "secrets/voip.p12"])
        try fixture.chmod("secrets/voip.p12", 0o600)
        var json = setting(ConfigFixture.example, "apns.max_queued", 50)
        json = setting(json, "apns.connections", 4)
        json = setting(json, "apns.sandbox.endpoint", "[::1]:8443")
        json = setting(json, "credentials.p12", ["p12_file": "secrets/voip.p12", "password_file": "secrets/voip.password"])
        json = setting(json, "apps.gamma", ["bundle_id": "io.gamma.app", "credential": "p12", "environment": "production",
                                            "fallback_alert": ["sound": NSNull()]] as [String: Any])
        let config = try XCTUnwrap(try fixture.check(json).config)
        XCTAssertEqual(config.apns.maxQueued, 50)
        XCTAssertEqual(config.apns.connections, 4)
        XCTAssertEqual(config.apns.sandboxEndpoint, Endpoint(host: "::1", port: 8443))
        XCTAssertEqual(config.credentials["p12"], .pkcs12(file: fixture.directory + "/secrets/voip.p12",
                                                          passwordFile: fixture.directory + "/secrets/voip.password"))
        XCTAssertNil(config.apps["gamma"]?.fallbackAlert.sound, "sound null means a silent alert")
    }

    // MARK: One test per kind of error

    func testUnknownCredentialNamesTheDeclaredOnesAndTheFix() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.credential", "acme-kye"))
        XCTAssertNil(report.config)
        let p = try XCTUnwrap(problem(at: "apps.acme.credential", in: report))
        XCTAssertEqual(p.severity, .error)
        XCTAssertTrue(p.description.hasPrefix(fixture.directory + "/pushgw.json: apps.acme.credential: "), p.description)
        XCTAssertTrue(p.description.contains(#"no credential named "acme-kye" (declared: acme-key, beta-cert)"#), p.description)
        XCTAssertTrue(p.description.hasSuffix("; fix the name or declare it under credentials"), p.description)
    }

    func testMissingKeyFileIsAnErrorNamingTheResolvedPath() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets/AuthKey_NOPE.p8"))
        let p = try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report))
        XCTAssertTrue(p.problem.contains(fixture.directory + "/secrets/AuthKey_NOPE.p8"), "names the resolved path: \(p)")
        XCTAssertTrue(p.problem.contains("No such file"), p.description)
        XCTAssertTrue(p.fix.contains("correct the path"), p.description)
    }

    func testKeyFileThatIsADirectoryIsAnError() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets"))
        let p = try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report))
        XCTAssertEqual(p.problem, "cannot read \(fixture.directory)/secrets: is a directory")
        XCTAssertEqual(p.fix, "point it at a readable file")
    }

    func testSEC1ECKeyIsRejectedWithTheConversionCommand() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets/sec1.pem"))
        let p = try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report))
        XCTAssertEqual(p.severity, .error)
        XCTAssertTrue(p.problem.contains("SEC1") && p.problem.contains("secrets/sec1.pem"), p.description)
        XCTAssertTrue(p.fix.contains("openssl pkcs8 -topk8 -nocrypt"), p.description)
    }

    func testRSAKeyInPKCS8IsRejectedAsNotEC() throws {
        try fixture.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "secrets/rsa.p8"])
        try fixture.chmod("secrets/rsa.p8", 0o600)
        XCTAssertTrue(try fixture.contents("secrets/rsa.p8").hasPrefix("-----BEGIN PRIVATE KEY-----"),
                      "the RSA key has the same PEM header as a .p8: only its algorithm tells them apart")
        let report = try fixture.check(setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets/rsa.p8"))
        let p = try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report))
        XCTAssertTrue(p.problem.contains("an RSA key") && p.problem.contains("EC P-256"), p.description)
        XCTAssertTrue(p.fix.contains("download the APNs auth key (.p8)"), p.description)
    }

    func testECKeyOnAnotherCurveAndEncryptedKeyAreRejected() throws {
        try fixture.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp384r1", "-out", "secrets/p384.p8"])
        try fixture.chmod("secrets/p384.p8", 0o600)
        try fixture.write("secrets/enc.p8", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n")
        var json = setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets/p384.p8")
        json = setting(json, "credentials.other.team_id", "ABCDE12345")
        json = setting(json, "credentials.other.key_id", "KEY7654321")
        json = setting(json, "credentials.other.key_file", "secrets/enc.p8")
        let report = try fixture.check(json)
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report)).problem.contains("other than P-256"))
        let encrypted = try XCTUnwrap(problem(at: "credentials.other.key_file", in: report))
        XCTAssertTrue(encrypted.problem.contains("encrypted") && encrypted.fix.contains("-nocrypt"), encrypted.description)
    }

    func testSwappedCertificateAndKeyAreReported() throws {
        var json = setting(ConfigFixture.example, "credentials.beta-cert.cert_file", "secrets/beta-voip.key")
        json = setting(json, "credentials.beta-cert.key_file", "secrets/beta-voip.pem")
        let report = try fixture.check(json)
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.beta-cert.cert_file", in: report)).description.contains("not a certificate"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.beta-cert.key_file", in: report, severity: .error)).description.contains("not a PEM private key"))
    }

    func testBundleIDThatIsNotReverseDNSIsAnError() throws {
        for bad in ["acme", "com..acme", "com.acme_phone", "com.acme.", "com.acmé.phone", ""] {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.bundle_id", bad))
            let p = try XCTUnwrap(problem(at: "apps.acme.bundle_id", in: report), bad)
            XCTAssertEqual(p.severity, .error, "\(bad) is not a bundle id")
            XCTAssertTrue(p.problem.contains("\"\(bad)\" is not a bundle id"), p.description)
            XCTAssertTrue(p.fix.contains("reverse-DNS"), p.description)
        }
        for good in ["com.acme.phone", "io.a-b.C9", "x.y"] {
            XCTAssertTrue(GatewayConfig.isBundleID(good), good)
        }
    }

    func testMissedCallAlertDefaultsToUndeliveredAndRefusesAnythingButItsTwoModes() throws {
        XCTAssertEqual(try fixture.check(ConfigFixture.example).config?.apps["acme"]?.missedCallAlert, .undelivered,
                       "absent: today's behaviour")
        for mode in MissedCallAlert.allCases {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.missed_call_alert", mode.rawValue))
            XCTAssertEqual(report.config?.apps["acme"]?.missedCallAlert, mode, mode.rawValue)
            XCTAssertTrue(report.problems.isEmpty, "\(report.problems)")
        }
        let rows: [(Any, String)] = [("unanwsered", "is not a missed-call alert mode"), (true, "expected a string"),
                                     (NSNull(), "expected a string")]
        for (value, fragment) in rows {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.missed_call_alert", value))
            XCTAssertNil(report.config, "\(value) is refused")
            let p = try XCTUnwrap(problem(at: "apps.acme.missed_call_alert", in: report, severity: .error), "\(value)")
            XCTAssertTrue(p.problem.contains(fragment), p.description)
            XCTAssertTrue(p.description.hasPrefix(p.file + ": apps.acme.missed_call_alert: "), "names the file and key: \(p.description)")
            XCTAssertTrue(p.fix.contains("undelivered") || p.fix.contains("string"), "says what to write: \(p.description)")
        }
    }

    func testRingReceiptTimeoutIsOffByDefaultAndBoundedFrom500To30000Ms() throws {
        XCTAssertNil(try fixture.check(ConfigFixture.example).config?.apps["acme"]?.ringReceiptTimeoutMs, "absent: off")
        for ms in [500, 4_000, 30_000] {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.ring_receipt_timeout_ms", ms))
            XCTAssertEqual(report.config?.apps["acme"]?.ringReceiptTimeoutMs, ms)
            XCTAssertTrue(report.problems.isEmpty, "\(report.problems)")
        }
        let rows: [(Any, String, String)] = [(499, "under the least of 500 ms", "from 500 to 30000"),
                                             (30_001, "over the limit of 30000", "from 1 to 30000"),
                                             (0, "not a positive whole number", "at least 1"),
                                             ("4000", "expected a number, found a string", "without quotes"),
                                             (NSNull(), "expected a positive whole number", "leave")]
        for (value, fragment, fix) in rows {
            let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.ring_receipt_timeout_ms", value))
            XCTAssertNil(report.config, "\(value) is refused")
            let p = try XCTUnwrap(problem(at: "apps.acme.ring_receipt_timeout_ms", in: report, severity: .error), "\(value)")
            XCTAssertTrue(p.problem.contains(fragment), p.description)
            XCTAssertTrue(p.description.hasPrefix(p.file + ": apps.acme.ring_receipt_timeout_ms: "), "names the file and key: \(p.description)")
            XCTAssertTrue(p.fix.contains(fix), "says what to write: \(p.description)")
        }
    }

    func testVoipSuspectedAfterSilentRingsDefaultsTo3IsBoundedAndWarnsWithReceiptsOff() throws {
        let key = "apps.acme.voip_suspected_after_silent_rings"
        let on = setting(ConfigFixture.example, "apps.acme.ring_receipt_timeout_ms", 4_000)
        XCTAssertEqual(try fixture.check(on).config?.apps["acme"]?.voipSuspectedAfterSilentRings, 3, "absent: 3")
        for n in [2, 5, 20] {
            let report = try fixture.check(setting(on, key, n))
            XCTAssertEqual(report.config?.apps["acme"]?.voipSuspectedAfterSilentRings, n)
            XCTAssertTrue(report.problems.isEmpty, "\(report.problems)")
        }
        let off = try fixture.check(setting(ConfigFixture.example, key, 4))
        XCTAssertNotNil(off.config, "a warning, not an error")
        let warning = try XCTUnwrap(problem(at: key, in: off, severity: .warning))
        XCTAssertTrue(warning.problem.contains("ring receipts are off"), warning.description)
        XCTAssertTrue(warning.fix.contains("ring_receipt_timeout_ms"), warning.description)
        let rows: [(Any, String, String)] = [(1, "at its first lost push", "from 2 to 20"),
                                             (21, "over the limit of 20", "from 1 to 20"),
                                             (0, "not a positive whole number", "at least 1"),
                                             ("3", "expected a number, found a string", "without quotes")]
        for (value, fragment, fix) in rows {
            let report = try fixture.check(setting(on, key, value))
            XCTAssertNil(report.config, "\(value) is refused")
            let p = try XCTUnwrap(problem(at: key, in: report, severity: .error), "\(value)")
            XCTAssertTrue(p.problem.contains(fragment), p.description)
            XCTAssertTrue(p.description.hasPrefix(p.file + ": " + key + ": "), "names the file and key: \(p.description)")
            XCTAssertTrue(p.fix.contains(fix), "says what to write: \(p.description)")
        }
    }

    func testValuesThatReachKeysHeadersAndArithmeticAreBounded() throws {
        let rows: [(String, Any, String)] = [
            ("apps.acme.bundle_id", "com." + String(repeating: "a", count: 252), "over the 255-character limit"),
            ("apps.acme.ring_timeout_s", 86_401, "over the limit of 86400"),
            ("apps.acme.retry.voip.max_attempts", 101, "over the limit of 100"),
            ("apps.acme.retry.alert.cap_ms", 3_600_001, "over the limit of 3600000"),
            ("apps.acme.retry.alert.ttl_s", 2_592_001, "over the limit of 2592000"),
            ("apns.connections", 65, "over the limit of 64"),
            ("apns.request_timeout_ms", 600_001, "over the limit of 600000"),
            ("apns.max_queued", 1_000_001, "over the limit of 1000000"),
            ("apns.production.endpoint", String(repeating: "h", count: 254) + ":443", "is not host:port"),
            ("apns.sandbox.endpoint", "host\u{1B}]52;c;x\u{07}:443", "is not host:port"),
        ]
        for (path, value, fragment) in rows {
            let report = try fixture.check(setting(ConfigFixture.example, path, value))
            XCTAssertNil(report.config, path)
            let p = try XCTUnwrap(problem(at: path, in: report), path)
            XCTAssertTrue(p.problem.contains(fragment), "\(path): \(p.problem)")
            XCTAssertLessThan(p.description.utf8.count, fixture.directory.utf8.count + 400, "\(path): a short quote at most")
        }
        XCTAssertNotNil(try fixture.check(setting(ConfigFixture.example, "apps.acme.bundle_id",
                                                  "com." + String(repeating: "a", count: 251))).config, "255 characters is a bundle id")
    }

    func testFilesThatAreNotRegularFilesAreRefusedWithoutBlocking() throws {
        for name in ["fifo-config", "secrets/fifo-key", "secrets/fifo-token", "fifo-ca"] {
            XCTAssertEqual(mkfifo(fixture.directory + "/" + name, 0o600), 0, "mkfifo \(name)")
        }
        // Each of these would block forever in open(2) or a read: no writer ever comes.
        let config = GatewayConfig.load(file: "fifo-config", environment: [:], workingDirectory: fixture.directory)
        XCTAssertEqual(config.problems.map(\.problem), ["cannot read the config file: is a FIFO, not a regular file"])
        var json = setting(ConfigFixture.example, "credentials.acme-key.key_file", "secrets/fifo-key")
        json = setting(json, "admin.token_file", "secrets/fifo-token")
        json = setting(json, "apns.ca_file", "fifo-ca")
        let report = try fixture.check(json)
        for path in ["credentials.acme-key.key_file", "admin.token_file", "apns.ca_file"] {
            let p = try XCTUnwrap(problem(at: path, in: report, severity: .error), path)
            XCTAssertTrue(p.problem.hasSuffix(": is a FIFO, not a regular file"), p.description)
        }
        XCTAssertEqual(try XCTUnwrap(problem(at: "apns.ca_file", in: report)).problem,
                       "cannot read \(fixture.directory)/fifo-ca: is a FIFO, not a regular file")
    }

    func testAKeyDefinedTwiceIsAWarningAtItsPath() throws {
        let text = """
            { "redis": { "url": "redis://127.0.0.1:6379/0", "url": "redis://127.0.0.1:6380/0" },
              "credentials": { "acme-key": { "team_id": "ABCDE12345", "key_id": "KEY1234567", "key_file": "secrets/AuthKey_KEY1234567.p8" } },
              "apps": {
                "acme": { "bundle_id": "com.acme.phone", "credential": "acme-key", "environment": "production" },
                "acme": { "bundle_id": "com.acme.other", "credential": "acme-key", "environment": "sandbox" } } }
            """
        try fixture.write("twice.json", text)
        let report = GatewayConfig.load(file: "twice.json", environment: [:], workingDirectory: fixture.directory)
        XCTAssertNotNil(report.config, "a warning, not an error: \(report.problems.map(\.description))")
        let app = try XCTUnwrap(problem(at: "apps.acme", in: report, severity: .warning))
        XCTAssertTrue(app.problem.contains("defined more than once") && app.problem.contains("only the last one is used"), app.problem)
        XCTAssertNotNil(problem(at: "redis.url", in: report, severity: .warning))
        XCTAssertEqual(report.config?.apps["acme"]?.bundleId, "com.acme.other", "the last definition, as the warning says")
    }

    func testAnAdminEndpointBeyondLoopbackIsAWarningInConfigCheck() throws {
        let open = try fixture.check(setting(setting(ConfigFixture.example, "admin.listen", "0.0.0.0:9464"), "admin.token_file", nil))
        let p = try XCTUnwrap(problem(at: "admin.listen", in: open, severity: .warning))
        XCTAssertTrue(p.problem.contains("listens beyond loopback") && p.problem.contains("without admin.token_file"), p.problem)
        XCTAssertTrue(p.fix.contains("127.0.0.1") && p.fix.contains("admin.token_file"), p.fix)
        let withToken = try fixture.check(setting(ConfigFixture.example, "admin.listen", "10.0.0.5:9464"))
        XCTAssertFalse(try XCTUnwrap(problem(at: "admin.listen", in: withToken, severity: .warning)).problem.contains("token_file"))
        XCTAssertTrue(try fixture.check(ConfigFixture.example).problems.filter { $0.path == "admin.listen" }.isEmpty,
                      "loopback needs no warning")
    }

    func testRedisPrefixIsAPlainName() throws {
        for bad in ["pushgw\r", "push\u{0}gw", "push*", "push\u{1B}[2J", "push{gw}", "{", "}", "push gw", "push\tgw", "a:b",
                    String(repeating: "p", count: 10_000), ""] {
            let report = try fixture.check(setting(ConfigFixture.example, "redis.prefix", bad))
            let p = try XCTUnwrap(problem(at: "redis.prefix", in: report), bad.debugDescription)
            XCTAssertEqual(p.severity, .error)
            XCTAssertTrue(p.problem.contains(#"must be 1-64 letters, digits, ".", "_" or "-""#), p.problem)
            XCTAssertLessThan(p.description.utf8.count, fixture.directory.utf8.count + 300, "a short quote: \(p.description.prefix(200))")
            XCTAssertFalse(p.description.unicodeScalars.contains { $0.value < 0x20 }, "no raw control character: \(p.description.debugDescription)")
        }
        for good in ["pushgw", "pgw.prod-2", "A_b", String(repeating: "p", count: 64)] {
            XCTAssertEqual(try fixture.check(setting(ConfigFixture.example, "redis.prefix", good)).config?.redis.prefix, good)
        }
    }

    func testLongValuesAreQuotedShortInEveryMessage() throws {
        let long = String(repeating: "k", count: 10_000)
        var json = setting(ConfigFixture.example, "apps.acme." + long, 1)
        json = setting(json, "credentials.acme-key.key_file", "secrets/" + long)
        json = setting(json, "apps.acme.fallback_alert.body", String(repeating: "b", count: 1_025))
        json = setting(json, "apps.acme.fallback_alert.sound", String(repeating: "s", count: 257))
        let report = try fixture.check(json)
        // 500: the quotes are cut at 64 characters; the rest is the message and, for an unknown
        // key of an app, the list of the app's known keys (about 200 bytes, growing by a key).
        for p in report.problems {
            XCTAssertLessThan(p.description.utf8.count, fixture.directory.utf8.count + 500, String(p.description.prefix(300)))
        }
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report)).problem.contains("over the 1024-byte limit"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "apps.acme.fallback_alert.body", in: report)).problem.contains("over the 1024-byte limit"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "apps.acme.fallback_alert.sound", in: report)).problem.contains("over the 256-byte limit"))
        XCTAssertEqual(report.problems.filter { $0.problem.hasPrefix("unknown key") }.count, 1)
    }

    func testCredentialNamesAreNamesForKeysLogsAndMetrics() throws {
        var json = ConfigFixture.example
        var credentials = json["credentials"] as! [String: Any]
        credentials["acme key\u{1B}[2J"] = credentials.removeValue(forKey: "acme-key")
        json["credentials"] = credentials
        json = setting(json, "apps.acme.credential", "acme key\u{1B}[2J")
        let report = try fixture.check(json)
        let p = try XCTUnwrap(problem(at: "credentials.\"acme key\\u001b[2J\"", in: report))
        XCTAssertTrue(p.problem.contains("must be 1-64 letters, digits"), p.problem)
    }

    func testBundleIDWithTheVoipSuffixIsAWarning() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.bundle_id", "com.acme.phone.voip"))
        let p = try XCTUnwrap(problem(at: "apps.acme.bundle_id", in: report))
        XCTAssertEqual(p.severity, .warning)
        XCTAssertTrue(p.fix.contains("\"com.acme.phone\""), p.description)
    }

    func testBadEndpointIsAnError() throws {
        for bad in ["https://api.push.apple.com", "api.push.apple.com", "host:0", "host:65536", ":443", "a b:443", "::1:443"] {
            let report = try fixture.check(setting(ConfigFixture.example, "apns.production.endpoint", bad))
            let p = try XCTUnwrap(problem(at: "apns.production.endpoint", in: report), bad)
            XCTAssertEqual(p.severity, .error)
            XCTAssertTrue(p.problem.contains("is not host:port"), p.description)
            XCTAssertTrue(p.fix.contains("api.push.apple.com:443"), "the fix shows the right form: \(p)")
        }
        let listen = try fixture.check(setting(ConfigFixture.example, "admin.listen", "9464"))
        XCTAssertNotNil(problem(at: "admin.listen", in: listen))
    }

    func testWrongTypeIsAnErrorNamingWhatWasExpected() throws {
        var json = setting(ConfigFixture.example, "apns.connections", "2")
        json = setting(json, "apps.acme.ring_timeout_s", true)
        json = setting(json, "apps.acme.retry.voip.base_ms", 1.5)
        json = setting(json, "admin", ["127.0.0.1:9464"])
        let report = try fixture.check(json)
        XCTAssertNil(report.config)
        let connections = try XCTUnwrap(problem(at: "apns.connections", in: report))
        XCTAssertEqual(connections.problem, "expected a number, found a string")
        XCTAssertEqual(connections.fix, "write 2 without quotes")
        XCTAssertTrue(try XCTUnwrap(problem(at: "apps.acme.ring_timeout_s", in: report)).problem.contains("found true/false"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "apps.acme.retry.voip.base_ms", in: report)).problem.contains("fractional"))
        XCTAssertEqual(try XCTUnwrap(problem(at: "admin", in: report)).problem, "expected an object, found an array")
    }

    /// A null is a wrong type, not an absent key: before, `title: null` dropped the app with
    /// no problem at all, and a null sentinel password or token file meant none.
    func testANullWhereAValueIsNeededIsAnErrorNamingItsPath() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.acme.fallback_alert.title", NSNull()))
        XCTAssertNil(report.config, "the config is refused, not run without the app")
        let title = try XCTUnwrap(problem(at: "apps.acme.fallback_alert.title", in: report))
        XCTAssertEqual(title.problem, "expected a string, found null")
        XCTAssertTrue(title.fix.contains("leave \"title\" out for its default"), title.fix)
        XCTAssertEqual(report.problems.count, 1, report.problems.map(\.description).joined(separator: "\n"))

        var json = setting(ConfigFixture.example, "apps.acme.fallback_alert.body", NSNull())
        json = setting(json, "apps.acme.ring_timeout_s", NSNull())
        json = setting(json, "apps.beta.bundle_id", NSNull())
        json = setting(json, "admin.token_file", NSNull())
        json = setting(json, "apps.acme.retry", NSNull())
        json = setting(json, "redis.sentinel", ["master": "m", "addresses": ["10.0.0.1:26379"], "password": NSNull()])
        let nulls = try fixture.check(json)
        XCTAssertNil(nulls.config)
        for path in ["apps.acme.fallback_alert.body", "apps.acme.ring_timeout_s", "apps.beta.bundle_id", "admin.token_file",
                     "apps.acme.retry", "redis.sentinel.password"] {
            let p = try XCTUnwrap(problem(at: path, in: nulls))
            XCTAssertTrue(p.problem.hasSuffix("found null"), p.description)
        }
        XCTAssertFalse(try XCTUnwrap(problem(at: "apps.beta.bundle_id", in: nulls)).fix.contains("default"),
                       "a required key has no default to offer")

        let documented = try fixture.check(setting(setting(ConfigFixture.example, "apns.ca_file", NSNull()),
                                                   "apps.acme.fallback_alert.sound", NSNull()))
        XCTAssertEqual(documented.problems.map(\.description), [], "the two documented nulls keep their meaning")
        XCTAssertNil(try XCTUnwrap(documented.config).apps["acme"]?.fallbackAlert.sound)
    }

    func testNonPositiveIntegersAndInvertedRetryBoundsAreErrors() throws {
        var json = setting(ConfigFixture.example, "apns.request_timeout_ms", 0)
        json = setting(json, "apps.acme.retry.alert.max_attempts", -1)
        json = setting(json, "apps.acme.retry.voip.cap_ms", 50)
        let report = try fixture.check(json)
        XCTAssertTrue(try XCTUnwrap(problem(at: "apns.request_timeout_ms", in: report)).problem.contains("0 is not a positive"))
        XCTAssertNotNil(problem(at: "apps.acme.retry.alert.max_attempts", in: report))
        XCTAssertTrue(try XCTUnwrap(problem(at: "apps.acme.retry.voip.cap_ms", in: report)).problem.contains("below base_ms 100"))
    }

    func testMissingRequiredKeyIsAnError() throws {
        var json = setting(ConfigFixture.example, "apps.acme.environment", nil)
        json = setting(json, "redis.url", nil)
        json = setting(json, "credentials.acme-key.key_id", nil)
        let report = try fixture.check(json)
        let environment = try XCTUnwrap(problem(at: "apps.acme.environment", in: report))
        XCTAssertEqual(environment.problem, "missing required key \"environment\"")
        XCTAssertEqual(environment.fix, "add \"environment\": \"production\" under apps.acme")
        let url = try XCTUnwrap(problem(at: "redis.url", in: report))
        XCTAssertTrue(url.fix.hasSuffix("under redis or set PUSHGW_REDIS_URL"), url.description)
        XCTAssertNotNil(problem(at: "credentials.acme-key.key_id", in: report))
    }

    func testEnvironmentMustBeProductionOrSandbox() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.beta.environment", "development"))
        let p = try XCTUnwrap(problem(at: "apps.beta.environment", in: report))
        XCTAssertTrue(p.problem.contains("\"development\" is not an APNs environment"), p.description)
        XCTAssertTrue(p.fix.contains("\"production\"") && p.fix.contains("\"sandbox\""), p.description)
    }

    func testCredentialOfNoKnownKindAndBadAppleIDsAreErrors() throws {
        var json = setting(ConfigFixture.example, "credentials.acme-key.team_id", "abcde12345")
        json = setting(json, "credentials.odd", ["key_file": "secrets/AuthKey_KEY1234567.p8"])
        json = setting(json, "credentials.mixed", ["team_id": "ABCDE12345", "cert_file": "x.pem"])
        let report = try fixture.check(json)
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.acme-key.team_id", in: report)).problem.contains("Team ID"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.odd", in: report, severity: .error)).problem.contains("cannot tell what kind"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "credentials.mixed", in: report, severity: .error)).problem.contains("mixes"))
    }

    func testBadAppIDAndEmptySectionsAreErrors() throws {
        var json = setting(ConfigFixture.example, "apps.my app", ["bundle_id": "com.x.y", "credential": "acme-key",
                                                                 "environment": "production"])
        json = setting(json, "redis.prefix", "push{gw}")
        let report = try fixture.check(json)
        XCTAssertTrue(try XCTUnwrap(problem(at: "apps.\"my app\"", in: report)).fix.contains("{APP}"))
        XCTAssertNotNil(problem(at: "redis.prefix", in: report))

        let empty = try fixture.check(["redis": ["url": "redis://localhost:6379/0"], "credentials": [:], "apps": [:]])
        XCTAssertEqual(try XCTUnwrap(problem(at: "apps", in: empty)).problem, "no apps declared")
        XCTAssertEqual(try XCTUnwrap(problem(at: "credentials", in: empty)).problem, "no credentials declared")
    }

    func testInvalidJSONAndMissingFileAreOneProblemEach() throws {
        let path = try fixture.write("broken.json", "{ \"redis\": { \"url\": \"redis://x:1/0\", } // comment\n}")
        let broken = GatewayConfig.load(file: path, environment: [:])
        XCTAssertEqual(broken.problems.count, 1)
        XCTAssertTrue(broken.problems[0].description.hasPrefix(path + ": is not valid JSON"), broken.problems[0].description)

        let missing = GatewayConfig.load(file: fixture.directory + "/nope.json", environment: [:])
        XCTAssertEqual(missing.problems.count, 1)
        XCTAssertTrue(missing.problems[0].description.contains("cannot read the config file"))
        XCTAssertNil(missing.config)

        let array = try fixture.write("array.json", "[1]")
        XCTAssertTrue(GatewayConfig.load(file: array, environment: [:]).problems[0].problem.contains("not an object"))
    }

    // MARK: Several at once

    func testEveryProblemIsReportedAtOnce() throws {
        var json = setting(ConfigFixture.example, "apps.acme.credential", "acme-kye")
        json = setting(json, "apps.beta.bundle_id", "beta")
        json = setting(json, "apns.sandbox.endpoint", "nowhere")
        json = setting(json, "apns.connections", "2")
        json = setting(json, "credentials.acme-key.key_file", "secrets/sec1.pem")
        json = setting(json, "redis.url", nil)
        json = setting(json, "apps.acme.retyr", [:])
        let report = try fixture.check(json)
        XCTAssertNil(report.config)
        XCTAssertEqual(Set(report.errors.map(\.path)),
                       ["apps.acme.credential", "apps.beta.bundle_id", "apns.sandbox.endpoint", "apns.connections",
                        "credentials.acme-key.key_file", "redis.url"],
                       "every error is named, not only the first: \(report.problems.map(\.description))")
        XCTAssertEqual(report.warnings.map(\.path), ["apps.acme.retyr"])
    }

    // MARK: Environment

    func testEnvironmentOverridesReplaceFileValues() throws {
        try fixture.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=ca", "-days", "1"])
        let environment = [
            "PUSHGW_REDIS_URL": "redis://:hunter2@10.0.0.5:6380/3",
            "PUSHGW_REDIS_PREFIX": "pgw",
            "PUSHGW_ADMIN_LISTEN": "0.0.0.0:19464",
            "PUSHGW_APNS_CA_FILE": "ca.pem",
            "PUSHGW_APNS_PRODUCTION_ENDPOINT": "127.0.0.1:18443",
            "PUSHGW_APNS_SANDBOX_ENDPOINT": "127.0.0.1:18444",
            "PUSHGW_UNRELATED": "x",
        ]
        let config = try XCTUnwrap(try fixture.check(setting(ConfigFixture.example, "redis.url", nil),
                                                     environment: environment).config)
        XCTAssertEqual(config.redis, RedisConfig(url: "redis://:hunter2@10.0.0.5:6380/3", prefix: "pgw"),
                       "PUSHGW_REDIS_URL stands in for a missing redis.url")
        XCTAssertEqual(config.redis.redactedURL, "redis://***@10.0.0.5:6380/3")
        XCTAssertEqual(config.admin.listen, "0.0.0.0:19464")
        XCTAssertEqual(config.apns.caFile, fixture.directory + "/ca.pem", "env paths resolve against the working directory")
        XCTAssertEqual(config.apns.productionEndpoint, Endpoint(host: "127.0.0.1", port: 18443))
        XCTAssertEqual(config.apns.sandboxEndpoint, Endpoint(host: "127.0.0.1", port: 18444))

        let empty = try fixture.check(ConfigFixture.example, environment: ["PUSHGW_REDIS_PREFIX": ""])
        XCTAssertEqual(empty.config?.redis.prefix, "pushgw", "an empty variable counts as unset")
    }

    func testBadOverrideNamesTheVariable() throws {
        let report = try fixture.check(ConfigFixture.example, environment: ["PUSHGW_APNS_SANDBOX_ENDPOINT": "localhost"])
        let p = try XCTUnwrap(problem(at: "apns.sandbox.endpoint (PUSHGW_APNS_SANDBOX_ENDPOINT)", in: report))
        XCTAssertTrue(p.problem.contains("\"localhost\" is not host:port"), p.description)
    }

    // MARK: Warnings

    func testGroupReadableSecretIsAWarning() throws {
        try fixture.chmod("secrets/AuthKey_KEY1234567.p8", 0o640)
        try fixture.chmod("secrets/admin-token", 0o604)
        let report = try fixture.check(ConfigFixture.example)
        XCTAssertNotNil(report.config, "loose modes are warnings, the config is still usable")
        let key = try XCTUnwrap(problem(at: "credentials.acme-key.key_file", in: report))
        XCTAssertEqual(key.severity, .warning)
        XCTAssertTrue(key.problem.contains("mode 0640"), key.description)
        XCTAssertEqual(key.fix, "chmod 600 \(fixture.directory)/secrets/AuthKey_KEY1234567.p8")
        XCTAssertEqual(try XCTUnwrap(problem(at: "admin.token_file", in: report)).severity, .warning)
        XCTAssertTrue(report.warnings.allSatisfy { !$0.path.contains("cert_file") }, "a certificate is not a secret")
    }

    func testPublicHostsAndConnectionCapsAreRead() throws {
        var json = setting(ConfigFixture.example, "admin.public_host", "PushGW.example.com, gw-1.internal")
        json = setting(json, "admin.max_connections", 200)
        json = setting(json, "admin.max_connections_per_client", 20)
        let admin = try XCTUnwrap(try fixture.check(json).config).admin
        XCTAssertEqual(admin.publicHosts, ["pushgw.example.com", "gw-1.internal"])
        XCTAssertEqual(admin.maxConnections, 200)
        XCTAssertEqual(admin.maxConnectionsPerClient, 20)
        let defaults = try XCTUnwrap(try fixture.check(ConfigFixture.example).config).admin
        XCTAssertEqual([defaults.maxConnections, defaults.maxConnectionsPerClient], [64, 32])
        let small = try XCTUnwrap(try fixture.check(setting(ConfigFixture.example, "admin.max_connections", 8)).config).admin
        XCTAssertEqual(small.maxConnectionsPerClient, 8, "the per-client default never exceeds the cap")

        var bad = setting(ConfigFixture.example, "admin.public_host", "https://pushgw.example.com:443")
        bad = setting(bad, "admin.max_connections", 16)
        bad = setting(bad, "admin.max_connections_per_client", 17)
        let report = try fixture.check(bad)
        XCTAssertTrue(try XCTUnwrap(problem(at: "admin.public_host", in: report)).problem.contains("is not a host name"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "admin.max_connections_per_client", in: report)).problem.contains("over max_connections (16)"))
        let fromEnvironment = try fixture.check(ConfigFixture.example, environment: ["PUSHGW_ADMIN_PUBLIC_HOST": "pushgw-0.pushgw"])
        XCTAssertEqual(fromEnvironment.config?.admin.publicHosts, ["pushgw-0.pushgw"])
    }

    // MARK: Tokens

    /// A token must be hard to guess: before, a 1-character admin token passed config check.
    func testWeakAdminAndReadOnlyTokensAreErrorsThatNeverQuoteThem() throws {
        let weak = ["x", "short-but-random-9f3a", "ab" + String(repeating: "ab", count: 20), String(repeating: "a", count: 40),
                    "abcdefghijklmnopqrstuvwxyz0123456789", "0123456789abcdef0123456789abcdef01", "spaces are not allowed in a token ok"]
        for token in weak {
            try fixture.write("secrets/admin-token", token + "\n")
            let report = try fixture.check(ConfigFixture.example)
            XCTAssertNil(report.config, "\"\(token)\" is refused")
            let p = try XCTUnwrap(problem(at: "admin.token_file", in: report), token)
            XCTAssertTrue(p.problem.hasPrefix(fixture.directory + "/secrets/admin-token holds "), p.problem)
            XCTAssertTrue(p.fix.contains("openssl rand -hex 32 > \(fixture.directory)/secrets/admin-token"), p.fix)
            if token.count > 8 { XCTAssertFalse(p.description.contains(token), "the token is never quoted: \(p.description)") }
        }
        try fixture.write("secrets/readonly-token", "ro\n")
        let readonly = try fixture.check(setting(ConfigFixture.example, "admin.readonly_token_file", "secrets/readonly-token"))
        XCTAssertTrue(try XCTUnwrap(problem(at: "admin.readonly_token_file", in: readonly)).problem.contains("shorter than 32 characters"))

        // What docker/README.md and deploy/ tell operators to run, 200 times over.
        for _ in 0..<200 {
            var generator = SystemRandomNumberGenerator()
            let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
            XCTAssertNil(AdminTokenFile.weakness(hex), "openssl rand -hex 32 always passes")
            XCTAssertNil(AdminTokenFile.weakness(String(hex.prefix(32))), "and so does openssl rand -hex 16")
        }
    }

    func testUnknownKeyIsAWarningWithASuggestion() throws {
        var json = setting(ConfigFixture.example, "apps.acme.retyr", ["voip": [:]])
        json = setting(json, "apns.conections", 3)
        json = setting(json, "zebra", 1)
        let report = try fixture.check(json)
        XCTAssertNotNil(report.config, "unknown keys do not make a config unusable")
        XCTAssertEqual(try XCTUnwrap(problem(at: "apps.acme.retyr", in: report)).description,
                       "\(fixture.directory)/pushgw.json: apps.acme.retyr: warning: unknown key \"retyr\" (ignored); did you mean \"retry\"?")
        XCTAssertEqual(try XCTUnwrap(problem(at: "apns.conections", in: report)).fix, "did you mean \"connections\"?")
        XCTAssertTrue(try XCTUnwrap(problem(at: "zebra", in: report)).fix.contains("keys known here: redis, admin"))
    }

    func testSameBundleIDAndEnvironmentTwiceIsAWarning() throws {
        let json = setting(ConfigFixture.example, "apps.acme2", ["bundle_id": "com.acme.phone", "credential": "acme-key",
                                                                 "environment": "production"])
        let report = try fixture.check(json)
        XCTAssertNotNil(report.config)
        let p = try XCTUnwrap(problem(at: "apps.acme2.bundle_id", in: report))
        XCTAssertEqual(p.severity, .warning)
        XCTAssertTrue(p.problem.contains("same bundle id and environment as app \"acme\""), p.description)

        let otherEnvironment = setting(json, "apps.acme2.environment", "sandbox")
        XCTAssertEqual(try fixture.check(otherEnvironment).problems.map(\.description), [],
                       "the same bundle id in the other environment is normal")
    }

    func testUnusedCredentialIsAWarning() throws {
        let report = try fixture.check(setting(ConfigFixture.example, "apps.beta", nil))
        XCTAssertEqual(try XCTUnwrap(problem(at: "credentials.beta-cert", in: report)).severity, .warning)
    }

    // MARK: Key inspection

    func testPKCS8AlgorithmIsReadFromTheAlgorithmIdentifier() {
        let p256: [UInt8] = [0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                             0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        XCTAssertEqual(KeyFileInspection.algorithm(ofPKCS8Prefix: p256), .ecP256)
        XCTAssertEqual(KeyFileInspection.algorithm(ofPKCS8Prefix: Array(p256.prefix(20))), .ecOtherCurve,
                       "a truncated curve OID is not P-256")
        let ed25519: [UInt8] = [0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70]
        XCTAssertEqual(KeyFileInspection.algorithm(ofPKCS8Prefix: ed25519), .ed25519)
        XCTAssertEqual(KeyFileInspection.algorithm(ofPKCS8Prefix: []), .unknown)
        XCTAssertEqual(KeyFileInspection.algorithm(ofPKCS8Prefix: [0x02, 0x01]), .unknown)
    }
}
