import CallStorage
import DeadLetters
import Foundation
import Glibc
import GatewayTestSupport
import Routing
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw calls show`, `pushgw audit`, `dead list --older-than` and the audit's user without
/// `$USER`, on what a real router wrote into a real redis-server (`DeadLetterHarness`): a call
/// whose VoIP token is gone (alert delivered, token marked invalid), one dead-lettered by a
/// wrong key, and changes made with `tokens forget` and `dead purge`. On TCP here, and as the
/// least-privileged ACL user (docs/operations.md) in the subclass below.
class CallsAndAuditCLITests: DeadLetterHarnessTestCase {
    private func object(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], text, file: file, line: line)
    }

    func testShowTellsTheResultEveryAttemptAndTheTokensState() throws {
        h.sim.simulator.setScenario(.unregistered, for: "dead0001")
        try h.startRouter(fixed: false)
        h.call("acme", "gone-1", voip: "dead0001", alert: "a1e70001")
        h.waitForRecords(1)
        XCTAssertEqual(h.outcomes("gone-1"), [.deliveredAlert])

        let show = h.cli(["calls", "show", "acme/gone-1", "--token", "DEAD0001,a1e70001"])
        XCTAssertEqual(show.status, 0, show.err.joined(separator: "\n"))
        XCTAssertEqual(show.out.first, "call gone-1 of app acme", show.text)
        XCTAssertTrue(show.text.contains("result:       delivered_alert (cause voip_token_invalid), by alert apns-id "), show.text)
        XCTAssertTrue(show.text.contains("calls entry:  "), show.text)
        XCTAssertTrue(show.text.contains("attempts (2):"), show.text)
        let rows = show.out.filter { $0.hasPrefix("    2") }
        guard rows.count == 2 else { return XCTFail("one row per attempt: \(show.text)") }
        XCTAssertTrue(rows[0].contains("voip") && rows[0].contains("410") && rows[0].contains("Unregistered"), rows[0])
        XCTAssertTrue(rows[1].contains("alert") && rows[1].contains("200"), rows[1])
        XCTAssertTrue(show.text.contains("dead letter:  none"), show.text)
        XCTAssertTrue(show.text.contains("voip …dead0001 (from the --token): known invalid since "), show.text)
        XCTAssertTrue(show.text.contains("alert …dead0001 (from the --token): not known to be invalid"), show.text)
        XCTAssertTrue(show.text.contains("alert …a1e70001 (from the --token): not known to be invalid"), show.text)

        let json = try object(h.cli(["calls", "show", "acme/gone-1", "--json", "--token", "dead0001"]).text)
        XCTAssertEqual(json["state"] as? String, "finished")
        XCTAssertEqual((json["result"] as? [String: Any])?["outcome"] as? String, "delivered_alert", "the stored result, as JSON")
        let attempts = try XCTUnwrap(json["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.map { $0["status"] as? Int }, [410, 200])
        XCTAssertEqual(attempts.first?["reason"] as? String, "Unregistered")
        let tokens = try XCTUnwrap(json["tokens"] as? [[String: Any]])
        XCTAssertEqual(tokens.count, 2, "both channels of a token given with --token")
        XCTAssertNotNil(tokens.first { $0["channel"] as? String == "voip" }?["known_invalid_since_ms"] as? Int)
        XCTAssertTrue(tokens.first { $0["channel"] as? String == "alert" }?["known_invalid_since_ms"] is NSNull)
        XCTAssertEqual((json["dead_letters"] as? [Any])?.count, 0)
    }

    func testShowFindsTheDeadLetterAndTheTokensOfItsEvent() throws {
        try h.startRouter(fixed: false)
        h.call("broken", "b-1", voip: "00000000aaaa1111", alert: "ffffffffbbbb2222")
        h.waitForRecords(1)
        let dead = try XCTUnwrap(h.deadIDs("broken").first)

        let show = h.cli(["calls", "show", "broken/b-1"])
        XCTAssertEqual(show.status, 0, show.err.joined(separator: "\n"))
        XCTAssertTrue(show.text.contains("result:       dead_lettered: apns_credentials: InvalidProviderToken"), show.text)
        XCTAssertTrue(show.text.contains("dead letter:  broken/\(dead) "), show.text)
        XCTAssertTrue(show.text.contains("(pushgw dead show broken/\(dead))"), show.text)
        XCTAssertTrue(show.text.contains("403") && show.text.contains("InvalidProviderToken"), "the refused attempt: \(show.text)")
        XCTAssertTrue(show.text.contains("voip …aaaa1111 (from the dead letter \(dead)): not known to be invalid"), show.text)
        XCTAssertTrue(show.text.contains("alert …bbbb2222 (from the dead letter \(dead)): not known to be invalid"), show.text)

        let json = try object(h.cli(["calls", "show", "broken/b-1", "--json"]).text)
        XCTAssertEqual(json["state"] as? String, "dead_lettered")
        XCTAssertEqual((json["dead_letters"] as? [[String: Any]])?.first?["id"] as? String, dead)
        XCTAssertEqual((json["tokens"] as? [[String: Any]])?.compactMap { $0["token"] as? String },
                       ["00000000aaaa1111", "ffffffffbbbb2222"], "whole tokens for scripts (tokens forget takes them)")
    }

    func testAnUnknownCallExitsOneAndBadUsageExitsTwo() {
        let unknown = h.cli(["calls", "show", "acme/never-seen"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.text.contains("result:       none under its result key"), unknown.text)
        XCTAssertTrue(unknown.err.first?.contains("nothing known about call never-seen of app acme") ?? false, "\(unknown.err)")
        XCTAssertEqual(h.cli(["calls", "show", "acme"]).status, 2, "not APP/ID")
        XCTAssertEqual(h.cli(["calls", "show", "/x"]).status, 2)
        XCTAssertEqual(h.cli(["calls", "show", "acme/"]).status, 2)
        XCTAssertEqual(h.cli(["calls", "show", "nope/x"]).status, 2, "an app not in the config")
        XCTAssertEqual(h.cli(["calls", "show", "acme/x", "--token", "xyz"]).status, 2)
        XCTAssertEqual(h.cli(["calls", "list"]).status, 2)
        XCTAssertEqual(h.cli(["calls", "show", "acme/x"], config: "/nonexistent.json").status, 2)
        let help = h.cli(["calls", "--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.text.contains("Exit status: 0 the call is known, 1 nothing is known"), help.text)
    }

    func testAuditListsChangesNewestFirstAndNamesTheUserWithoutUSER() throws {
        h.sim.simulator.setScenario(.unregistered, for: "dead0002")
        try h.startRouter(fixed: false)
        h.call("acme", "gone-2", voip: "dead0002", alert: "a1e70002")
        h.call("broken", "b-2", voip: "00000000aaaa3333")
        h.waitForRecords(2)
        XCTAssertEqual(h.cli(["tokens", "forget", "dead0002", "--app", "acme"], user: "alice").status, 0)
        // No $USER (nor $LOGNAME): the uid's name from the passwd database.
        let purge = h.cli(["dead", "purge", "--all", "--app", "broken", "--yes"], user: "")
        XCTAssertEqual(purge.status, 0, purge.err.joined(separator: "\n"))
        let expected = DeadSession.userName(uid: getuid()) ?? "uid:\(getuid())"
        XCTAssertEqual(h.entries(GatewayKeys().audit).last?.fields["user"], expected)
        XCTAssertNotEqual(expected, "unknown")

        let table = h.cli(["audit"])
        XCTAssertEqual(table.status, 0, table.err.joined(separator: "\n"))
        XCTAssertEqual(table.out.first?.split(separator: " ", omittingEmptySubsequences: true),
                       ["ID", "TIME", "AGE", "VERB", "USER", "DONE", "WHAT"])
        XCTAssertEqual(table.out.count, 3, table.text)
        XCTAssertTrue(table.out[1].contains("purge") && table.out[1].contains(expected) && table.out[1].contains("1/1"), "newest first: \(table.text)")
        XCTAssertTrue(table.out[2].contains("tokens forget") && table.out[2].contains("alice")
                      && table.out[2].contains("acme/voip/dead0002"), table.out[2])

        let lines = try h.cli(["audit", "--json"]).out.map { try object($0) }
        XCTAssertEqual(lines.map { $0["verb"] as? String }, ["purge", "tokens forget"])
        XCTAssertEqual(lines[1]["ids"] as? [String], ["acme/voip/dead0002"])
        XCTAssertEqual((lines[0]["filters"] as? [String: Any])?["app"] as? [String], ["broken"], "the filters as JSON")

        let first = h.cli(["audit", "--limit", "1"])
        XCTAssertEqual(first.out.count, 3, "header, one row, the way to the next page: \(first.text)")
        let id = try XCTUnwrap(lines[0]["id"] as? String)
        XCTAssertTrue(first.out[2].contains("pushgw audit --before \(id)"), first.text)
        let next = h.cli(["audit", "--before", id, "--json"])
        XCTAssertEqual(try next.out.map { try object($0)["verb"] as? String }, ["tokens forget"])
        XCTAssertEqual(h.cli(["audit", "--before", "yesterday"]).status, 2)
        XCTAssertEqual(h.cli(["audit", "--limit", "0"]).status, 2)
    }

    func testListOlderThanShowsOnlyThoseDeadBeforeIt() throws {
        try h.startRouter(fixed: false)
        h.call("broken", "old-1", voip: "00000000aaaa5555")
        h.waitForRecords(1)
        let all = h.dead(["list", "--json", "--older-than", "2999-01-01"])
        XCTAssertEqual(all.status, 0, all.err.joined(separator: "\n"))
        XCTAssertEqual(all.out.count, 1, "dead before 2999: \(all.text)")
        let none = h.dead(["list", "--older-than", "1h"])
        XCTAssertEqual(none.status, 0)
        XCTAssertEqual(none.out, ["no dead letters match in apps acme, broken"])
        XCTAssertEqual(h.dead(["list", "--older-than", "soon"]).status, 2)
    }
}

/// `CallsAndAuditCLITests` as the least-privileged ACL user: `ACL LOG` stays empty (the harness checks).
final class CallsAndAuditCLIAsLeastPrivilegedUserTests: CallsAndAuditCLITests {
    override class var redisDeployment: RedisDeployment { .leastPrivilege }

    override func testShowTellsTheResultEveryAttemptAndTheTokensState() throws { try super.testShowTellsTheResultEveryAttemptAndTheTokensState() }
    override func testShowFindsTheDeadLetterAndTheTokensOfItsEvent() throws { try super.testShowFindsTheDeadLetterAndTheTokensOfItsEvent() }
    override func testAnUnknownCallExitsOneAndBadUsageExitsTwo() { super.testAnUnknownCallExitsOneAndBadUsageExitsTwo() }
    override func testAuditListsChangesNewestFirstAndNamesTheUserWithoutUSER() throws {
        try super.testAuditListsChangesNewestFirstAndNamesTheUserWithoutUSER()
    }
    override func testListOlderThanShowsOnlyThoseDeadBeforeIt() throws { try super.testListOlderThanShowsOnlyThoseDeadBeforeIt() }
}

/// What `pushgw run --help` and `pushgw --version` print, without Redis.
final class RunHelpAndVersionTests: XCTestCase {
    private func run(_ args: [String], environment: [String: String] = [:]) -> (status: Int32, out: [String], err: [String]) {
        var out: [String] = [], err: [String] = []
        let context = CommandContext(output: CommandOutput(out: { out.append($0) }, err: { err.append($0) }),
                                     environment: environment, workingDirectory: TestScratch.root, terminal: .none)
        return (pushgwMain(args, context: context), out, err)
    }

    func testRunHelpListsEveryOptionAndTheExitStatus() {
        let help = run(["run", "--help"])
        XCTAssertEqual(help.status, 0)
        let text = help.out.joined(separator: "\n")
        for option in ["--config FILE", "--log-level L", "--consumer NAME", "--role ROLES", "--drain-ms MS"] {
            XCTAssertTrue(text.contains("  " + option), "run --help explains \(option): \(text)")
        }
        XCTAssertTrue(text.contains("Exit status: 0 stopped by SIGTERM or SIGINT"), text)
    }

    func testVersionPrintsTheBuildsVersionAndCommit() {
        let version = run(["--version"])
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(version.out.count, 1)
        XCTAssertTrue(version.out.first?.hasPrefix("pushgw ") ?? false, "\(version.out)")
        XCTAssertTrue(version.out.first?.contains(" (commit ") ?? false, "\(version.out)")
        XCTAssertEqual(run(["--version", "extra"]).status, 2)
        XCTAssertTrue(run(["--help"]).out.joined().contains("pushgw --version"), "the overview says where the version is")
    }

    func testTheAuditUserFallsBackToTheUidsNameThenTheUid() {
        let context = CommandContext(output: CommandOutput(out: { _ in }, err: { _ in }), environment: [:],
                                     workingDirectory: TestScratch.root, terminal: .none)
        XCTAssertEqual(DeadSession.actor(context).user, DeadSession.userName(uid: getuid()) ?? "uid:\(getuid())")
        XCTAssertEqual(DeadSession.actor(context, uid: 0).user, "root", "uid 0 is root in every passwd database")
        XCTAssertEqual(DeadSession.actor(context, uid: 3_999_999_999).user, "uid:3999999999", "no such user")
        var withUser = context
        withUser.environment = ["USER": "", "LOGNAME": "bob", "SUDO_USER": "carol"]
        XCTAssertEqual(DeadSession.actor(withUser).user, "bob")
        XCTAssertEqual(DeadSession.actor(withUser).sudoUser, "carol")
    }
}
