import APNs
import DeadLetters
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayTestSupport
import JSONOutput
import TestSupport
import XCTest
@testable import PushgwCommands

final class CommandLineTests: XCTestCase {
    var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self, secrets: false)
    }

    /// Runs `pushgwMain` with captured output.
    private func run(_ args: [String], environment: [String: String] = [:]) -> (Int32, CapturedOutput) {
        let output = CapturedOutput()
        let status = pushgwMain(args, context: output.context(environment: environment, workingDirectory: fixture.directory))
        return (status, output)
    }

    // MARK: Usage errors

    func testBadUsageExitsTwoWithOneLineOnStderr() {
        let cases: [(args: [String], verb: String?, mentions: String)] = [
            ([], nil, "no verb"),
            (["frob"], nil, "unknown verb \"frob\""),
            (["pusj"], nil, "did you mean \"push\"?"),
            (["push"], "push", "--app is required"),
            (["push", "--app"], "push", "--app needs a value"),
            (["push", "--app", "a", "--app", "b"], "push", "--app given twice"),
            (["push", "--app", "a", "--token", "ab", "--bogus"], "push", "unknown option --bogus"),
            (["push", "--app", "a", "--token", "ab", "--sandbox=yes"], "push", "--sandbox takes no value"),
            (["push", "--app", "a", "--token", "ab", "extra"], "push", "unexpected argument \"extra\""),
            (["push", "--app", "a", "--token", "ab", "--type", "voop"], "push", "unknown push type \"voop\""),
            (["push", "--app", "a", "--token", "ab", "--payload", "[1]"], "push", "--payload is not a JSON object"),
            (["push", "--app", "a", "--token", "ab", "--priority", "7"], "push", "--priority must be 10, 5 or 1"),
            (["push", "--app", "a", "--token", "ab", "--expiration", "-1"], "push", "--expiration must be unix seconds"),
            (["push", "--app", "a", "--token", "ab", "--type", "widgets"], "push", "needs --payload"),
            (["config"], "config", "needs a subcommand"),
            (["config", "chek"], "config", "unknown config subcommand"),
            (["config", "check", "a.json", "b.json"], "config", "unexpected argument \"b.json\""),
            (["config", "check", "--config", "a.json", "b.json"], "config", "not both"),
            (["help", "frob"], "help", "no verb named \"frob\""),
            (["run", "--role", "router,mover"], "run", "unknown role in \"router,mover\" (available: router, retry, deadletters, webhooks)"),
            (["run", "--role", "router,"], "run", "unknown role"),
        ]
        for c in cases {
            let (status, output) = run(c.args)
            XCTAssertEqual(status, 2, "bad usage exits 2: \(c.args)")
            XCTAssertEqual(output.out, [], "nothing on stdout for bad usage: \(c.args)")
            XCTAssertEqual(output.err.count, 1, "exactly one line on stderr: \(c.args) -> \(output.err)")
            let line = output.err.first ?? ""
            XCTAssertTrue(line.hasPrefix("pushgw: ") && line.contains(c.mentions), "\(c.args) -> \(line)")
            XCTAssertTrue(line.hasSuffix("(see pushgw \(c.verb.map { "\($0) " } ?? "")--help)"), "\(c.args) -> \(line)")
        }
    }

    func testArgumentsAreCheckedBeforeTheConfigIsRead() {
        let (status, output) = run(["push", "--config", "missing.json", "--app", "a", "--token", "ab", "--type", "nope"])
        XCTAssertEqual(status, 2)
        XCTAssertTrue(output.err.first?.contains("unknown push type") == true,
                      "a bad argument is reported before the missing config: \(output.err)")
    }

    func testVerbsWithoutTheirInputsExitTwo() {
        let (runStatus, runConsole) = run(["run"])
        XCTAssertEqual(runStatus, 2, "run without a readable config is a config error")
        XCTAssertTrue(runConsole.err.first?.contains("cannot read the config file") == true, "\(runConsole.err)")
        let (demoStatus, demoConsole) = run(["demo", "extra"])
        XCTAssertEqual(demoStatus, 2, "demo takes no arguments")
        XCTAssertEqual(demoConsole.err.count, 1)
        XCTAssertEqual(run(["simulator", "--port", "1"]).0, 2, "the simulator needs --config")
    }

    func testHelpIsPrintedOnStdoutWithStatusZero() {
        for args in [["--help"], ["-h"], ["help"], ["help", "push"], ["push", "--help"], ["config", "--help"],
                     ["config", "check", "--help"], ["run", "--help"], ["simulator", "--help"],
                     ["push", "--app", "a", "--help"]] {
            let (status, output) = run(args)
            XCTAssertEqual(status, 0, "\(args)")
            XCTAssertEqual(output.err, [], "\(args)")
            XCTAssertTrue(output.out.first?.hasPrefix("usage: pushgw") == true, "\(args): \(output.out)")
        }
        let (_, top) = run(["--help"])
        for verb in ["run", "push", "dead", "config", "simulator", "demo"] {
            XCTAssertTrue(top.out[0].contains("\n  \(verb) "), "the overview lists \(verb)")
        }
    }

    // MARK: config check

    func testConfigCheckExitsZeroWhenUsableAndOneWithErrors() throws {
        try fixture.makeSecrets()
        try fixture.writeConfig(setting(ConfigFixture.example, "apps.acme.retyr", 1))
        let (ok, good) = run(["config", "check", "pushgw.json"])
        XCTAssertEqual(ok, 0, "warnings alone do not fail the check: \(good.out)")
        XCTAssertEqual(good.out.count, 2, "one line per problem plus the summary: \(good.out)")
        XCTAssertEqual(good.out.last, "pushgw.json: usable: 2 apps, 2 credentials, 1 warning")

        try fixture.writeConfig(setting(setting(ConfigFixture.example, "apps.acme.credential", "x"), "apns.connections", 0))
        let (failed, bad) = run(["config", "check", "--config", "pushgw.json"])
        XCTAssertEqual(failed, 1)
        XCTAssertEqual(bad.out.count, 3, "\(bad.out)")
        XCTAssertTrue(bad.out[0].hasPrefix("pushgw.json: apns.connections: "), "paths are printed as given: \(bad.out)")
        XCTAssertEqual(bad.out.last, "pushgw.json: not usable: 2 errors, 0 warnings")
        XCTAssertEqual(bad.err, [])

        let (missing, none) = run(["config", "check"])
        XCTAssertEqual(missing, 1, "the default config/pushgw.json does not exist in the fixture")
        XCTAssertTrue(none.out[0].hasPrefix("config/pushgw.json: cannot read the config file"), "\(none.out)")
    }

    func testConfigCheckRefusesAHugeBundleIdWithItsPathAndAShortQuote() throws {
        try fixture.makeSecrets()
        try fixture.writeConfig(setting(ConfigFixture.example, "apps.acme.bundle_id", "com." + String(repeating: "a", count: 20_000)))
        let (status, output) = run(["config", "check", "pushgw.json"])
        XCTAssertEqual(status, 1, "\(output.out) \(output.err)")
        let line = (output.out + output.err).first { $0.contains("apps.acme.bundle_id") } ?? ""
        XCTAssertTrue(line.contains("is 20004 characters, over the 255-character limit"), line)
        XCTAssertLessThan(line.utf8.count, 400, "the message quotes a short prefix of the value")
    }

    func testConfigCheckNamesANullTitleInsteadOfDroppingTheApp() throws {
        try fixture.makeSecrets()
        try fixture.writeConfig(setting(ConfigFixture.example, "apps.acme.fallback_alert.title", NSNull()))
        let (status, output) = run(["config", "check", "pushgw.json"])
        XCTAssertEqual(status, 1, "\(output.out)")
        XCTAssertEqual(output.out.first, "pushgw.json: apps.acme.fallback_alert.title: expected a string, found null; "
                       + "write a string in quotes, such as \"Missed call\", or leave \"title\" out for its default (null is not the default)")
        XCTAssertEqual(output.out.last, "pushgw.json: not usable: 1 error, 0 warnings")
    }

    func testConfigCheckRefusesAOneCharacterAdminToken() throws {
        try fixture.makeSecrets()
        try fixture.write("secrets/admin-token", "x\n")
        try fixture.writeConfig(ConfigFixture.example)
        let (status, output) = run(["config", "check", "pushgw.json"])
        XCTAssertEqual(status, 1, "\(output.out)")
        let line = output.out.first { $0.contains("admin.token_file") } ?? ""
        XCTAssertTrue(line.contains("holds a token shorter than 32 characters; write a random token: openssl rand -hex 32 > "), line)
        XCTAssertEqual(output.out.last, "pushgw.json: not usable: 1 error, 0 warnings")
    }

    func testConfigCheckJSONIsOneParsableLine() throws {
        try fixture.makeSecrets()
        try fixture.writeConfig(setting(ConfigFixture.example, "apps.acme.bundle_id", "nope"))
        let (status, output) = run(["config", "check", "--json", "pushgw.json"])
        XCTAssertEqual(status, 1)
        XCTAssertEqual(output.out.count, 1)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.out[0].utf8)) as? [String: Any])
        XCTAssertEqual(object["ok"] as? Bool, false)
        XCTAssertEqual(object["errors"] as? Int, 1)
        let problems = try XCTUnwrap(object["problems"] as? [[String: Any]])
        XCTAssertEqual(problems.first?["path"] as? String, "apps.acme.bundle_id")
        XCTAssertEqual(problems.first?["severity"] as? String, "error")
        XCTAssertNotNil(problems.first?["fix"] as? String)
    }

    // MARK: push

    func testPushPlanUsesTheAppsCredentialAndSandboxWhenAsked() throws {
        try fixture.makeSecrets()
        try fixture.writeConfig(ConfigFixture.example)
        let output = CapturedOutput()
        let context = output.context(workingDirectory: fixture.directory)
        let token = String(repeating: "ab", count: 32)
        let (plan, json) = try XCTUnwrap(try PushCommand.makePlan(["--config", "pushgw.json", "--app", "acme", "--token", token],
                                                                 context: context))
        XCTAssertFalse(json)
        XCTAssertEqual(plan.notification.pushType, .voip, "the type defaults to voip")
        XCTAssertEqual(plan.notification.topic, "com.acme.phone.voip")
        XCTAssertEqual(plan.notification.payload, Array("{}".utf8))
        XCTAssertEqual(plan.environment, .production)
        XCTAssertEqual(plan.endpoint, Endpoint(host: "api.push.apple.com", port: 443))
        XCTAssertEqual(plan.credentialName, "acme-key")
        XCTAssertTrue(plan.credential.isToken)

        let (sandbox, sandboxJSON) = try XCTUnwrap(try PushCommand.makePlan(
            ["--config", "pushgw.json", "--app", "acme", "--token", token, "--sandbox", "--type", "alert", "--json",
             "--priority", "5", "--expiration", "0", "--collapse-id", "c1", "--apns-id", "0A1B2C3D-0000-4000-8000-00000000000F"],
            context: context))
        XCTAssertTrue(sandboxJSON)
        XCTAssertEqual(sandbox.environment, .sandbox, "--sandbox forces the sandbox")
        XCTAssertEqual(sandbox.endpoint.host, "api.sandbox.push.apple.com")
        XCTAssertEqual(sandbox.notification.topic, "com.acme.phone")
        XCTAssertEqual(String(decoding: sandbox.notification.payload, as: UTF8.self), #"{"aps":{"alert":"pushgw test"}}"#)
        XCTAssertEqual(sandbox.notification.priority, .conserve)
        XCTAssertEqual(sandbox.notification.expiration, 0)
        XCTAssertEqual(sandbox.notification.apnsID, "0a1b2c3d-0000-4000-8000-00000000000f")
    }

    func testPushReportsConfigAndAppProblemsInOneLine() throws {
        try fixture.makeSecrets()
        try fixture.writeConfig(setting(setting(ConfigFixture.example, "apps.acme.credential", "x"), "apns.connections", 0))
        let (status, output) = run(["push", "--config", "pushgw.json", "--app", "acme", "--token", "abcd"])
        XCTAssertEqual(status, 2)
        XCTAssertEqual(output.err.count, 1, "\(output.err)")
        XCTAssertTrue(output.err[0].contains("(and 1 more errors); run pushgw config check pushgw.json"), output.err[0])

        try fixture.writeConfig(ConfigFixture.example)
        let (noApp, app) = run(["push", "--config", "pushgw.json", "--app", "nope", "--token", "abcd"])
        XCTAssertEqual(noApp, 2)
        XCTAssertTrue(app.err[0].contains("no app \"nope\" in pushgw.json (declared: acme, beta)"), app.err[0])

        let (badToken, token) = run(["push", "--config", "pushgw.json", "--app", "acme", "--token", "xyz"])
        XCTAssertEqual(badToken, 2)
        XCTAssertTrue(token.err[0].contains("device token is not an even-length hex string"), token.err[0])

        let (longToken, long) = run(["push", "--config", "pushgw.json", "--app", "acme", "--token",
                                     String(repeating: "ab", count: 30_000)])
        XCTAssertEqual(longToken, 2, "a 60,000-digit token is bad usage, refused before anything is sent")
        XCTAssertEqual(long.err, ["pushgw: device token is 60000 hex digits, over the 400-digit limit (see pushgw push --help)"])

        let (certOnly, cert) = run(["push", "--config", "pushgw.json", "--app", "beta", "--token", "abcd",
                                    "--type", "liveactivity", "--payload", "{}"])
        XCTAssertEqual(certOnly, 2)
        XCTAssertTrue(cert.err[0].contains("need token auth"), cert.err[0])

        // Nothing listens on the port: the push gets no answer (exit 1), and only loopback is tried.
        let port = String(freeLoopbackPort())
        let (noAnswer, send) = run(["push", "--config", "pushgw.json", "--app", "acme", "--token", "abcd"],
                                   environment: ["PUSHGW_APNS_PRODUCTION_ENDPOINT": "127.0.0.1:" + port,
                                                 "PUSHGW_APNS_SANDBOX_ENDPOINT": "127.0.0.1:" + port])
        XCTAssertEqual(noAnswer, 1, "no answer from APNs is exit 1: \(send.err)")
        XCTAssertTrue(send.err.first?.contains("no answer from APNs") == true, "\(send.err)")
    }

    func testPushAnswerIsOneJSONLineAndTheExitStatusFollowsAcceptance() {
        func answer(_ result: Result<PushNotificationResponse, ApnsClientError>, json: Bool) -> (Int32, CapturedOutput) {
            let output = CapturedOutput()
            let status = printPushAnswer(result, json: json, output: output.context().output)
            return (status, output)
        }
        let id = "0a1b2c3d-0000-4000-8000-00000000000f"
        let (ok, accepted) = answer(.success(PushNotificationResponse(status: 200, reason: nil, apnsID: id)), json: true)
        XCTAssertEqual(ok, 0)
        XCTAssertEqual(accepted.out, [#"{"status":200,"apns_id":"0a1b2c3d-0000-4000-8000-00000000000f","reason":null,"timestamp":null}"#])

        let gone = PushNotificationResponse(status: 410, reason: .unregistered, apnsID: id, invalidationTimestampMs: 1764412345000)
        let (rejected, rejection) = answer(.success(gone), json: true)
        XCTAssertEqual(rejected, 1, "a rejection exits 1")
        XCTAssertEqual(rejection.out, [#"{"status":410,"apns_id":"0a1b2c3d-0000-4000-8000-00000000000f","reason":"Unregistered","timestamp":1764412345000}"#])
        let (_, human) = answer(.success(gone), json: false)
        XCTAssertTrue(human.out[0].hasPrefix("rejected: 410 Unregistered (tokenInvalid), token invalid since 2025-11-29"), human.out[0])

        let (lost, transport) = answer(.failure(.timeout), json: true)
        XCTAssertEqual(lost, 1, "no answer exits 1")
        XCTAssertEqual(transport.out, [#"{"status":null,"apns_id":null,"reason":null,"timestamp":null,"error":"timed out waiting for APNs"}"#])
        let (_, humanLost) = answer(.failure(.connectionFailed("refused \"x\"")), json: false)
        XCTAssertEqual(humanLost.err, [#"pushgw push: no answer from APNs: cannot connect to APNs: refused "x""#])
    }

    func testJSONStringsAreEscaped() {
        XCTAssertEqual(OrderedJSON.string("a\"b\\c\n\u{1}é").text, #""a\"b\\c\n\u0001é""#)
        XCTAssertEqual(OrderedJSON.string(nil as String?).text, "null")
    }
}
