import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient
import TestSupport
import XCTest
@testable import OperatorsConsole

/// A replay's controls in the console against a real redis-server, in process: the Cancel
/// button of a running replay (admin only, CSRF-checked, audited), and the warning before
/// replaying dead letters of an app whose credential APNs refused (docs/operations.md,
/// "Console").
final class ConsoleReplayControlTests: ConsoleTestCase {
    override func setUpWithError() throws {
        try startConsole(policies: ["acme": .default, "beta": .default], readOnlyAvailable: true)
    }

    @discardableResult
    private func dead(_ app: String, callID: String, reason: String, deadMs: Int64) -> String {
        let attempts = #"{"outcome":"dead_lettered","entry":"\#(deadMs)-0","attempts":[]}"#
        let event = #"{"v":1,"id":"\#(callID)","type":"incoming_call","voip_token":"00aa11bb","alert_token":"22cc33dd"}"#
        return redis(["XADD", "pushgw:{\(app)}:dead", "\(deadMs)-0", "event", event, "reason", reason, "attempts", attempts,
                      "first_failure_ms", String(deadMs), "last_failure_ms", String(deadMs), "replays", "0", "app", app])?.string ?? ""
    }

    private func auditVerbs() -> [String] {
        guard case let .array(entries)? = redis(["XRANGE", "pushgw:audit", "-", "+"]) else { return [] }
        return entries.map { "\($0)" }
    }

    // MARK: Cancel

    /// Two dead letters of acme replayed at 1/h: the first goes at once, the second waits an
    /// hour. The job's page and number.
    private func startSlowReplay(file: StaticString = #filePath, line: UInt = #line) throws -> (String, String) {
        let now = Clock.unixMs()
        let first = dead("acme", callID: "c-1", reason: "retries_exhausted: voip", deadMs: now - 2_000)
        let second = dead("acme", callID: "c-2", reason: "retries_exhausted: voip", deadMs: now - 1_000)
        let started = request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "acme/" + first), ("ids", "acme/" + second),
                                                                    ("rate", "1/h")])
        XCTAssertEqual(started.status, 303, body(started), file: file, line: line)
        let jobPath = try XCTUnwrap(started.header("Location"), file: file, line: line)
        return (jobPath, String(jobPath.dropFirst("/console/jobs/".count)))
    }

    /// At 1/h the first of two replays goes at once and the second waits an hour: Cancel
    /// stops the job there, its page says one was replayed before the cancel, the second
    /// stays a dead letter, and both the cancel and the replay are on record.
    func testCancelStopsARunningReplayAfterTheEntryInProgressAndSaysHowManyWent() throws {
        let (jobPath, number) = try startSlowReplay()
        loop.run(waitingFor: "the first replay") { self.redis(["XLEN", "pushgw:{acme}:calls"])?.integer == 1 }
        let running = body(request("GET", jobPath))
        XCTAssertTrue(running.contains(#"data-state="running""#), running)
        XCTAssertTrue(running.contains(#"action="/console/jobs/cancel""#), "a running replay has its Cancel button")

        XCTAssertEqual(request("POST", "/console/jobs/cancel", form: [("job", number)]).status, 403, "no CSRF token: refused")
        let cancelled = request("POST", "/console/jobs/cancel", form: [("csrf", csrf), ("job", number)])
        XCTAssertEqual(cancelled.status, 303, body(cancelled))
        loop.run(waitingFor: "the job to stop") { self.body(self.request("GET", jobPath)).contains(#"data-state="cancelled""#) }
        let page = body(request("GET", jobPath))
        XCTAssertTrue(page.contains("replayed 1 of 2 dead letters at 1/h; cancelled by ann: 1 replayed before the cancel"), page)
        XCTAssertFalse(page.contains(#"action="/console/jobs/cancel""#), "no Cancel button once stopped")
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:calls"])?.integer, 1, "the second was not replayed")
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:dead"])?.integer, 1, "it is still a dead letter")
        loop.run(waitingFor: "both audit records") { self.auditVerbs().count == 2 }
        let audit = auditVerbs().joined(separator: "\n")
        XCTAssertTrue(audit.contains("replay cancel"), audit)
        XCTAssertTrue(audit.contains("cancelled_by"), audit)

        let again = request("POST", "/console/jobs/cancel", form: [("csrf", csrf), ("job", number)])
        XCTAssertEqual(again.status, 409, "a stopped job cannot be cancelled again")
        XCTAssertEqual(request("POST", "/console/jobs/cancel", form: [("csrf", csrf), ("job", "999")]).status, 404)
    }

    /// A read-only session sees no Cancel button and its cancel POST is a 403 that stops nothing.
    func testAReadOnlySessionCannotCancelAReplay() throws {
        let (jobPath, number) = try startSlowReplay()
        let signIn = request("POST", "/console/signin", form: [("token", "readonly-token"), ("name", "rita")])
        cookie = try XCTUnwrap(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let page = body(request("GET", jobPath))
        XCTAssertTrue(page.contains(#"data-state="running""#), page)
        XCTAssertFalse(page.contains(#"action="/console/jobs/cancel""#), "no Cancel button for a read-only session")
        let readOnlyCSRF = try XCTUnwrap(match(#"name="csrf" value="([0-9a-f]+)""#, page).first)
        XCTAssertEqual(request("POST", "/console/jobs/cancel", form: [("csrf", readOnlyCSRF), ("job", number)]).status, 403)
        XCTAssertTrue(body(request("GET", jobPath)).contains(#"data-state="running""#), "still running")
        XCTAssertFalse(auditVerbs().joined().contains("replay cancel"), "nothing audited")
    }
}

extension ConsoleReplayControlTests {
    // MARK: The warning

    /// acme's newest dead letter says APNs refused its credential 7 minutes ago, and no call of
    /// it was delivered since: the replay's preview warns and its confirmation needs the
    /// "replay anyway" box; without it the POST replays nothing. beta's credential dead
    /// letter is older than a call delivered since: no warning.
    func testAReplayOfAnAppWhoseCredentialAPNsRefusedWarnsAndNeedsAnExplicitConfirm() throws {
        let now = Clock.unixMs()
        let refused = dead("acme", callID: "c-1", reason: "apns_credentials: InvalidProviderToken", deadMs: now - 7 * 60_000 - 5_000)
        let query = [("action", "replay"), ("ids", "acme/" + refused)]
        let preview = body(request("GET", "/console/dead/preview", query: query))
        XCTAssertTrue(preview.contains("APNs refused acme&#39;s credential 7 minutes ago (apns_credentials: InvalidProviderToken): "
                                       + "the replayed calls will likely die again."), preview)
        XCTAssertTrue(preview.contains(#"name="despite_refusal""#) && preview.contains("required"), "the confirm needs the box")

        let refusedPost = request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "acme/" + refused)])
        XCTAssertEqual(refusedPost.status, 409, body(refusedPost))
        XCTAssertTrue(body(refusedPost).contains("Nothing was replayed"), body(refusedPost))
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:calls"])?.integer, 0, "nothing replayed without the explicit confirm")
        XCTAssertEqual(redis(["EXISTS", "pushgw:audit"])?.integer, 0, "nothing audited")

        let anyway = request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "acme/" + refused), ("despite_refusal", "yes")])
        XCTAssertEqual(anyway.status, 303, body(anyway))
        loop.run(waitingFor: "the replay anyway") { self.redis(["XLEN", "pushgw:{acme}:calls"])?.integer == 1 }

        // A call delivered after beta's refusal: its credential works again, no warning.
        let older = dead("beta", callID: "c-2", reason: "apns_credentials: ExpiredProviderToken", deadMs: now - 3 * 60_000)
        console.recordOutcome(app: "beta", outcome: "delivered_voip", cause: nil, latencyMs: 20)
        let healthy = body(request("GET", "/console/dead/preview", query: [("action", "replay"), ("ids", "beta/" + older)]))
        XCTAssertTrue(healthy.contains("Dry run: 1 dead letter would be replayed"), healthy)
        XCTAssertFalse(healthy.contains("credential-refused") || healthy.contains("despite_refusal"), healthy)
        XCTAssertEqual(request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "beta/" + older)]).status, 303)
    }

    /// No credential dead letter, but this gateway's router withholds the app's pushes now:
    /// the preview warns too.
    func testTheRoutersLiveRefusalWarnsWithoutADeadLetterOfIt() throws {
        console.close()
        console = OperatorsConsole(loop: loop, operations: operations, readOnlyAvailable: false,
                                   signIn: { token, _ in token == "admin-token" ? .signedIn(.admin) : .wrong },
                                   figures: { ConsoleFigures(apps: [.init(id: "acme", bundleID: "com.acme", environment: "production",
                                                                          refusal: "apns_credentials: InvalidProviderToken")]) })
        let signIn = request("POST", "/console/signin", form: [("token", "admin-token"), ("name", "ann")])
        cookie = try XCTUnwrap(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let id = dead("acme", callID: "c-1", reason: "retries_exhausted: voip", deadMs: Clock.unixMs() - 1_000)
        let preview = body(request("GET", "/console/dead/preview", query: [("action", "replay"), ("ids", "acme/" + id)]))
        XCTAssertTrue(preview.contains("credential now (this gateway&#39;s router withholds its pushes)"), preview)
        XCTAssertTrue(preview.contains(#"name="despite_refusal""#), preview)
    }
}
