import Foundation
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import GatewayConfiguration

/// `apps.APP.webhooks` (config/README.md, docs/webhooks.md): off without it; each problem names
/// its key and says how to fix it; the secret is checked like the admin token and never quoted.
final class ConfigWebhooksTests: XCTestCase {
    var fixture: ConfigFixture!
    private let secret = "wh-SECRET-4f1c9a7e2b6d8053c1e9a4f7b2d6c80e"

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
        try fixture.write("secrets/webhook-secret", secret + "\n")
    }

    private func hooks(_ section: Any) -> [String: Any] {
        setting(ConfigFixture.example, "apps.acme.webhooks", section)
    }

    func testWithoutTheSectionWebhooksAreOff() throws {
        let config = try XCTUnwrap(try fixture.check(ConfigFixture.example).config)
        XCTAssertNil(config.apps["acme"]?.webhooks)
    }

    func testAFullSectionIsReadWithItsDefaults() throws {
        let report = try fixture.check(hooks(["url": "https://hooks.acme.example/pushgw", "secret_file": "secrets/webhook-secret",
                                              "events": ["delivered_alert", "dead_lettered"]]))
        XCTAssertEqual(report.problems.map(\.description), [])
        let hooks = try XCTUnwrap(report.config?.apps["acme"]?.webhooks)
        XCTAssertEqual(hooks, WebhookConfig(url: "https://hooks.acme.example/pushgw", secretFile: fixture.directory + "/secrets/webhook-secret",
                                            events: [.deliveredAlert, .deadLettered]))
        XCTAssertEqual(hooks.timeoutMs, 10_000)
        XCTAssertEqual(hooks.retryForSeconds, 86_400)
        XCTAssertFalse(hooks.allowPrivateTargets)
        XCTAssertTrue(hooks.sends(outcome: "dead_lettered"))
        XCTAssertFalse(hooks.sends(outcome: "delivered_voip"))
    }

    func testEachBadKeyIsNamedWithAFix() throws {
        let cases: [([String: Any], String, String)] = [
            (["url": "ftp://x.example/", "secret_file": "secrets/webhook-secret"], "apps.acme.webhooks.url", "https://"),
            (["url": "https://u:p@x.example/", "secret_file": "secrets/webhook-secret"], "apps.acme.webhooks.url", "https://"),
            (["secret_file": "secrets/webhook-secret"], "apps.acme.webhooks.url", "\"url\""),
            (["url": "https://x.example/"], "apps.acme.webhooks.secret_file", "secret_file"),
            (["url": "https://x.example/", "secret_file": "secrets/missing"], "apps.acme.webhooks.secret_file", "correct the path"),
            (["url": "https://x.example/", "secret_file": "secrets/webhook-secret", "events": ["rang"]], "apps.acme.webhooks.events",
             "\"delivered_voip\""),
            (["url": "https://x.example/", "secret_file": "secrets/webhook-secret", "timeout_ms": 0], "apps.acme.webhooks.timeout_ms", ""),
            (["url": "https://x.example/", "secret_file": "secrets/webhook-secret", "retry_for_seconds": 10_000_000],
             "apps.acme.webhooks.retry_for_seconds", ""),
            (["url": "https://x.example/", "secret_file": "secrets/webhook-secret", "allow_private_targets": "yes"],
             "apps.acme.webhooks.allow_private_targets", "true or false"),
        ]
        for (section, path, fix) in cases {
            let report = try fixture.check(hooks(section))
            XCTAssertNil(report.config, "\(section) is refused")
            guard let p = problem(at: path, in: report, severity: .error) else { continue }
            XCTAssertTrue(fix.isEmpty || p.fix.contains(fix) || p.problem.contains(fix), "\(path): \(p.description)")
        }
    }

    func testAWeakSecretIsRefusedWithoutQuotingItAndALooseModeWarned() throws {
        try fixture.write("secrets/webhook-secret", "short-secret\n")
        let weak = try fixture.check(hooks(["url": "https://x.example/", "secret_file": "secrets/webhook-secret"]))
        let p = try XCTUnwrap(problem(at: "apps.acme.webhooks.secret_file", in: weak, severity: .error))
        XCTAssertTrue(p.fix.contains("openssl rand -hex 32"), p.description)
        XCTAssertFalse(weak.problems.map(\.description).joined().contains("short-secret"), "the secret is never quoted")
        try fixture.write("secrets/webhook-secret", secret + "\n", mode: 0o644)
        let loose = try fixture.check(hooks(["url": "https://x.example/", "secret_file": "secrets/webhook-secret"]))
        XCTAssertNotNil(problem(at: "apps.acme.webhooks.secret_file", in: loose, severity: .warning))
        XCTAssertNotNil(loose.config, "a loose mode is a warning")
        XCTAssertFalse(loose.problems.map(\.description).joined().contains(secret), "the secret is never quoted")
    }

    func testAnUnknownKeyIsWarnedAbout() throws {
        let report = try fixture.check(hooks(["url": "https://x.example/", "secret_file": "secrets/webhook-secret", "retries": 3]))
        let p = try XCTUnwrap(problem(at: "apps.acme.webhooks.retries", in: report, severity: .warning))
        XCTAssertTrue(p.fix.contains("retry_for_seconds"), p.description)
    }

    func testPlainHTTPBeyondLoopbackIsWarnedAbout() throws {
        let report = try fixture.check(hooks(["url": "http://hooks.acme.example/", "secret_file": "secrets/webhook-secret"]))
        let p = try XCTUnwrap(problem(at: "apps.acme.webhooks.url", in: report, severity: .warning))
        XCTAssertTrue(p.fix.contains("https://"), p.description)
        XCTAssertNotNil(report.config)
        let local = try fixture.check(hooks(["url": "http://127.0.0.1:8080/", "secret_file": "secrets/webhook-secret"]))
        XCTAssertEqual(local.problems.map(\.description), [])
    }
}
