import DeadLetters
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import GatewayTestSupport
import CallStorage
import Routing
import TestSupport
import XCTest
@testable import PushgwCommands

/// Every `pushgw dead` verb on real dead letters: a router with a wrong key for app `broken`
/// makes them (`apns_credentials: InvalidProviderToken`), the CLI reads and changes them in the
/// same redis-server, and a router with the fixed key routes what was replayed. On TCP here;
/// over TLS, as the least-privileged ACL user and through a sentinel in the subclasses at the
/// end of this file.
class DeadLettersCLITests: DeadLetterHarnessTestCase {
    /// Two credential dead letters of `broken`, one invalid event of `acme`, one delivered call.
    private func makeDeadLetters() throws {
        let before = (h.deadIDs("broken").count, h.deadIDs("acme").count)
        try h.startRouter(fixed: false)
        h.call("broken", "b-1", voip: "00000000aaaa1111", alert: "ffffffffbbbb2222")
        h.call("broken", "b-2", voip: "00000000aaaa3333")
        h.xaddRaw("acme", #"{"v":1,"id":"bad-1","type":"incoming_call","voip_token":"not hex"}"#)
        h.call("acme", "ok-1", voip: "00000000cccc4444")
        h.waitForRecords(4)
        XCTAssertEqual(h.outcomes("ok-1"), [.deliveredVoip])
        XCTAssertEqual(h.deadIDs("broken").count, before.0 + 2)
        XCTAssertEqual(h.deadIDs("acme").count, before.1 + 1)
    }

    private func json(_ line: String, file: StaticString = #filePath, line l: UInt = #line) -> [String: Any] {
        do {
            if let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return object }
            XCTFail("not a JSON object: \(line)", file: file, line: l)
        } catch {
            XCTFail("not JSON (\(error)): \(line)", file: file, line: l)
        }
        return [:]
    }

    private func auditEntries() -> [[String: String]] {
        h.entries(GatewayKeys().audit).map(\.fields)
    }

    // MARK: list, show, stats

    func testListShowsEveryDeadLetterNewestFirstWithFilters() throws {
        try makeDeadLetters()
        let table = h.dead(["list"])
        XCTAssertEqual(table.status, 0, table.err.joined())
        XCTAssertEqual(table.out.count, 4, "a header and one row per dead letter: \(table.text)")
        XCTAssertEqual(table.out[0].split(separator: " ", omittingEmptySubsequences: true),
                       ["ID", "APP", "AGE", "REASON", "CALL", "ATTEMPTS", "REPLAYS"])
        var written: [(app: String, id: String)] = []
        for app in ["acme", "broken"] { written += h.deadIDs(app).map { (app: app, id: $0) } }
        let newestFirst = written.sorted { a, b in
            let (ta, tb) = (DeadLetterRecord.timeMs(ofID: a.id)!, DeadLetterRecord.timeMs(ofID: b.id)!)
            // As DeadLetterOperations.newerFirst: by time, then app, then id, all descending
            // (two apps' dead letters may be written in the same millisecond).
            if ta != tb { return ta > tb }
            return a.app != b.app ? a.app > b.app : a.id > b.id
        }
        for (row, (app, id)) in zip(table.out.dropFirst(), newestFirst) {
            XCTAssertTrue(row.hasPrefix(id + "  " + app), "newest first: \(row) is \(app)/\(id)")
            let reason = app == "acme" ? "invalid_event: voip_token" : "apns_credentials: InvalidProviderToken"
            XCTAssertTrue(row.contains(reason), row)
        }

        let lines = h.dead(["list", "--json"]).out.map { json($0) }
        XCTAssertEqual(lines.compactMap { $0["id"] as? String }, newestFirst.map { $0.id })
        XCTAssertEqual(Set(lines.compactMap { $0["call_id"] as? String }), ["bad-1", "b-2", "b-1"])
        let b1 = try XCTUnwrap(lines.first { $0["call_id"] as? String == "b-1" })
        XCTAssertEqual(b1["app"] as? String, "broken")
        XCTAssertEqual(b1["reason"] as? String, "apns_credentials: InvalidProviderToken")
        XCTAssertEqual(b1["attempts"] as? Int, 1, "one VoIP push, refused")
        XCTAssertEqual(b1["replays"] as? Int, 0)
        XCTAssertNotNil(b1["first_failure_ms"] as? Int)

        XCTAssertEqual(h.dead(["list", "--json", "--reason", "apns_credentials"]).out.count, 2, "reason prefix")
        XCTAssertEqual(h.dead(["list", "--json", "--app", "acme"]).out.count, 1)
        XCTAssertEqual(h.dead(["list", "--json", "--app", "acme,broken", "--call", "b-2"]).out.count, 1)
        XCTAssertEqual(h.dead(["list", "--json", "--since", "10m"]).out.count, 3)
        let future = h.dead(["list", "--since", "2999-01-01"])
        XCTAssertEqual(future.status, 0)
        XCTAssertEqual(future.out, ["no dead letters match in apps acme, broken"])
        let limited = h.dead(["list", "--limit", "1"])
        XCTAssertEqual(limited.out.count, 3, "header, one row, and a note that more match")
        XCTAssertTrue(limited.out[2].contains("more match"), limited.text)
    }

    func testShowGivesTheWholeHistoryReadably() throws {
        // The same id in two apps' streams (two streams may well write in the same millisecond).
        for app in ["acme", "broken"] {
            h.send(["XADD", h.keys(app).dead, "1000-0", "event", "{}", "reason", "invalid_event: id: missing"])
        }
        try makeDeadLetters()
        let b1 = try XCTUnwrap(h.entries(h.keys("broken").dead).first { $0.fields["event"]?.contains("\"b-1\"") == true })
        let shown = h.dead(["show", "broken/" + b1.id])
        XCTAssertEqual(shown.status, 0, shown.err.joined())
        let text = shown.text
        XCTAssertEqual(shown.out.first, "dead letter \(b1.id) of app broken")
        XCTAssertTrue(text.contains("reason:        apns_credentials: InvalidProviderToken"), text)
        XCTAssertTrue(text.contains("call:          b-1 (incoming_call)"), text)
        XCTAssertTrue(text.contains("replays:       0"), text)
        let attempt = try XCTUnwrap(shown.out.first { $0.contains(" voip ") }, text)
        XCTAssertTrue(attempt.contains("aaaa1111") && attempt.contains("403") && attempt.contains("InvalidProviderToken"),
                      "one line per attempt with the token's last 8 characters, status and reason: \(attempt)")
        XCTAssertFalse(attempt.contains("00000000aaaa1111"), "an attempt shows the token's end, not the whole token")
        XCTAssertTrue(shown.out.contains("      \"id\": \"b-1\","), "the event pretty-printed: \(text)")

        let detail = json(h.dead(["show", "broken/\(b1.id)", "--json"]).out.joined())
        XCTAssertEqual(detail["id"] as? String, b1.id)
        let attempts = try XCTUnwrap(detail["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.count, 1)
        XCTAssertEqual(attempts[0]["token"] as? String, "aaaa1111")
        XCTAssertEqual(attempts[0]["channel"] as? String, "voip")
        XCTAssertEqual(attempts[0]["status"] as? Int, 403)
        XCTAssertEqual((detail["event"] as? [String: Any])?["id"] as? String, "b-1", "the event as JSON")

        let invalid = try XCTUnwrap(h.deadIDs("acme").last)
        let bad = h.dead(["show", invalid, "--app", "acme"])
        XCTAssertTrue(bad.text.contains("attempts: none (nothing was sent)"), bad.text)
        XCTAssertTrue(bad.text.contains("invalid_event: voip_token"), bad.text)

        let ambiguous = h.dead(["show", "1000-0"])
        XCTAssertEqual(ambiguous.status, 1)
        XCTAssertTrue(ambiguous.err.first?.contains("exists in apps acme, broken; name one with --app or APP/ID") == true,
                      "\(ambiguous.err)")
        XCTAssertEqual(h.dead(["show", "acme/1000-0"]).status, 0)

        let missing = h.dead(["show", "1-1"])
        XCTAssertEqual(missing.status, 1, "no such dead letter is the verb's failure")
        XCTAssertEqual(missing.err.count, 1)
        XCTAssertTrue(missing.err[0].contains("no dead letter 1-1 in any app"), missing.err[0])
    }

    func testStatsCountPerAppAndReasonWithTheOldestEntry() throws {
        try makeDeadLetters()
        let oldest = try XCTUnwrap(h.deadIDs("broken").first)
        let stats = json(h.dead(["stats", "--json"]).out.joined())
        XCTAssertEqual(stats["total"] as? Int, 3)
        let apps = try XCTUnwrap(stats["apps"] as? [[String: Any]])
        XCTAssertEqual(apps.map { $0["app"] as? String }, ["acme", "broken"])
        let broken = apps[1]
        XCTAssertEqual(broken["count"] as? Int, 2)
        XCTAssertEqual(broken["reasons"] as? [String: Int], ["apns_credentials: InvalidProviderToken": 2])
        XCTAssertEqual((broken["oldest"] as? [String: Any])?["id"] as? String, oldest)
        XCTAssertEqual(broken["retention"] as? [String: Int], ["max_entries": 10_000, "max_age_days": 14, "max_megabytes": 64])
        XCTAssertEqual(broken["trim_now"] as? Int, 0)
        XCTAssertEqual((apps[0]["reasons"] as? [String: Int])?.values.reduce(0, +), 1)

        let table = h.dead(["stats"])
        XCTAssertEqual(table.status, 0)
        XCTAssertTrue(table.text.contains("total: 3 dead letters in 2 apps"), table.text)
        XCTAssertTrue(table.out.contains { $0.hasPrefix("broken") && $0.contains("2") && $0.contains("apns_credentials: InvalidProviderToken") },
                      table.text)
        XCTAssertEqual(json(h.dead(["stats", "--json", "--app", "broken"]).out.joined())["total"] as? Int, 2)
    }

    // MARK: replay

    func testReplayAfterTheKeyIsFixedEndsDeliveredVoip() throws {
        try h.startRouter(fixed: false)
        h.call("broken", "fix-1", voip: "00000000dddd5555")
        h.waitForRecords(1)
        XCTAssertEqual(h.outcomes("fix-1"), [.deadLettered])
        let id = try XCTUnwrap(h.deadIDs("broken").first)
        h.stopRouter()

        let dry = h.dead(["replay", id, "--dry-run"])
        XCTAssertEqual(dry.status, 0, dry.err.joined())
        XCTAssertTrue(dry.out[0].hasPrefix("would replay broken/\(id)  call fix-1"), dry.text)
        XCTAssertTrue(dry.err.contains { $0.hasPrefix("pushgw dead replay: warning: APNs refused broken's credential less than a minute ago (apns_credentials")
                          && $0.hasSuffix("): the replayed calls will likely die again.") }, "the replay warns of the refusal: \(dry.err)")
        XCTAssertEqual(h.deadIDs("broken"), [id], "a dry run changes nothing")
        XCTAssertEqual(h.entries(h.keys("broken").calls).count, 0)
        XCTAssertEqual(auditEntries().count, 0, "a dry run is not audited: it changed nothing")

        // The operator fixes the key, then replays.
        try h.writeConfigFile(fixed: true)
        let replay = h.dead(["replay", id], user: "alice")
        XCTAssertEqual(replay.status, 0, replay.err.joined())
        XCTAssertTrue(replay.out[0].hasPrefix("replayed broken/\(id) -> calls entry "), replay.text)
        XCTAssertEqual(h.deadIDs("broken"), [], "the dead letter leaves with its replay")
        let calls = h.entries(h.keys("broken").calls)
        XCTAssertEqual(calls.count, 1)
        XCTAssertEqual(calls[0].fields["replay"], id, "marked as a replay of that dead letter")
        XCTAssertEqual(calls[0].fields["replays"], "1")
        XCTAssertTrue(calls[0].fields["event"]?.contains("\"fix-1\"") == true, "the original event")

        let audit = auditEntries()
        XCTAssertEqual(audit.count, 1)
        XCTAssertEqual(audit[0]["verb"], "replay")
        XCTAssertEqual(audit[0]["user"], "alice")
        XCTAssertEqual(audit[0]["done"], "1")
        XCTAssertEqual(audit[0]["ids"], "[\"broken/\(id)\"]")
        let logged = try XCTUnwrap(replay.err.first { $0.contains("\"msg\":\"dead letters replay\"") }, "an audit line in the log")
        XCTAssertEqual(json(logged)["user"] as? String, "alice")

        try h.startRouter(fixed: true)
        h.waitForRecords(2)
        XCTAssertEqual(h.outcomes("fix-1"), [.deadLettered, .deliveredVoip], "routed again with the fixed key")
        XCTAssertEqual(h.sim.simulator.recorded.filter { $0.token == "00000000dddd5555" }.count, 2,
                       "one push refused with the wrong key, one accepted with the right one")
    }

    /// A dead letter without a `deadline`, replayed after its app's ring timeout, is the
    /// original call: its replay gets the missed-call alert, never a VoIP push (counted at the
    /// simulator per token), and the dry run says so before.
    func testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly() throws {
        h.brokenRingTimeoutSeconds = 1
        try h.writeConfigFile()
        try h.startRouter(fixed: false)
        let voip = "00000000abab0001", alert = "ffffffffcdcd0002"
        h.xaddRaw("broken", h.event("old-call", voip: voip, alert: alert, deadlineInMs: nil))
        h.waitForRecords(1)
        XCTAssertEqual(h.outcomes("old-call"), [.deadLettered])
        let id = try XCTUnwrap(h.deadIDs("broken").first)
        h.stopRouter()
        let rings = { (token: String) in self.h.sim.simulator.recorded.filter { $0.token == token }.count }
        XCTAssertEqual(rings(voip), 1, "the refused VoIP push")
        // The call rang for its 1 s and ended; the operator fixes the key after that.
        let ended = Clock.monotonicMs() + 1_500
        h.loop.run(waitingFor: "the call's ring timeout to pass") { Clock.monotonicMs() >= ended }
        try h.writeConfigFile(fixed: true)

        let entry = try XCTUnwrap(json(h.dead(["show", id, "--json"]).out.joined())["calls_entry"] as? String)
        let dry = h.dead(["replay", id, "--dry-run"])
        XCTAssertEqual(dry.status, 0, dry.err.joined())
        XCTAssertTrue(dry.out[0].contains("missed-call alert only: the call's deadline passed"), dry.text)
        let shown = h.dead(["show", id]).text
        XCTAssertTrue(shown.contains("the call's first entry + the app's 1 s ring timeout); a replay now: missed-call alert only"), shown)
        let replay = h.dead(["replay", id])
        XCTAssertEqual(replay.status, 0, replay.err.joined())
        XCTAssertTrue(replay.out[0].contains("missed-call alert only"), replay.text)
        let calls = h.entries(h.keys("broken").calls)
        XCTAssertEqual(calls.count, 1)
        let entryMs = try XCTUnwrap(entry.split(separator: "-").first.flatMap { Int64($0) })
        XCTAssertEqual(calls.first?.fields["call_deadline"], String(entryMs + 1_000),
                       "the original call's deadline (its first entry + 1 s), not one from the replay")

        try h.startRouter(fixed: true)
        h.waitForRecords(2)
        XCTAssertEqual(h.outcomes("old-call"), [.deadLettered, .deliveredAlert], "the missed-call alert")
        XCTAssertEqual(rings(voip), 1, "no VoIP push for the replay of a call past its deadline")
        XCTAssertEqual(rings(alert), 1, "one alert")
        XCTAssertEqual(h.recorded.last?.record.cause, .deadline)
    }

    /// The rates that crashed `pushgw dead replay` (a rate shown past Int.max, a due time past
    /// Int64): with dead letters to replay, each exits 2 naming the bounds and changes nothing.
    func testHostileRatesExitTwoWithDeadLettersThere() throws {
        try makeDeadLetters()
        h.stopRouter()
        let before = h.deadIDs("broken")
        for rate in ["1e300", "1e-300", "1e19", "9.3e18/s", "5e-324/h", "1e-13", "inf", "nan", "-1", "0", String(repeating: "9", count: 400)] {
            for args in [["replay", "--all", "--dry-run", "--rate", rate], ["replay", "--all", "--yes", "--rate", rate],
                         ["replay", before[0], "--rate", rate]] {
                let run = h.dead(args)
                XCTAssertEqual(run.status, 2, "\(args.map { $0.prefix(20) }): \(run.err)")
                XCTAssertTrue(run.err.joined().contains("from 1/h to 10000/s"), run.err.joined())
            }
        }
        XCTAssertEqual(h.deadIDs("broken"), before, "nothing replayed")
        XCTAssertEqual(h.entries(h.keys("broken").calls).count, 0)
        let slowest = h.dead(["replay", "--all", "--app", "broken", "--dry-run", "--rate", "1/h"])
        XCTAssertEqual(slowest.status, 0, slowest.err.joined())
        XCTAssertTrue(slowest.out.last?.hasSuffix("would be replayed at 1/h; nothing changed") == true, slowest.text)
    }

    func testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() throws {
        try h.startRouter(fixed: false)
        h.call("broken", "again-1", voip: "00000000eeee6666")
        h.waitForRecords(1)
        let first = try XCTUnwrap(h.deadIDs("broken").first)
        let firstFailure = json(h.dead(["show", first, "--json"]).out.joined())["first_failure_ms"] as? Int

        XCTAssertEqual(h.dead(["replay", first]).status, 0)
        h.waitForRecords(2)
        let second = try XCTUnwrap(h.deadIDs("broken").first)
        XCTAssertNotEqual(second, first, "it died again: a new dead letter")
        var detail = json(h.dead(["show", second, "--json"]).out.joined())
        XCTAssertEqual(detail["replays"] as? Int, 1)
        XCTAssertEqual((detail["rounds"] as? [[String: Any]])?.compactMap { $0["dead_id"] as? String }, [first, second])
        XCTAssertEqual((detail["attempts"] as? [[String: Any]])?.compactMap { $0["round"] as? Int }, [1, 2],
                       "the earlier attempt is kept")
        XCTAssertEqual(detail["first_failure_ms"] as? Int, firstFailure, "the first failure stays the first")
        let shown = h.dead(["show", second]).text
        XCTAssertTrue(shown.contains("replays:       1") && shown.contains("\(first) (replayed)"), shown)

        XCTAssertEqual(h.dead(["replay", "--all", "--app", "broken", "--yes"]).status, 0)
        h.waitForRecords(3)
        let third = try XCTUnwrap(h.deadIDs("broken").first)
        detail = json(h.dead(["show", third, "--json"]).out.joined())
        XCTAssertEqual(detail["replays"] as? Int, 2, "replays 1 → 2")
        XCTAssertEqual((detail["attempts"] as? [[String: Any]])?.count, 3)
        XCTAssertEqual((detail["rounds"] as? [[String: Any]])?.compactMap { $0["dead_id"] as? String }, [first, second, third])
        let row = try XCTUnwrap(h.dead(["list"]).out.last)
        XCTAssertTrue(row.hasSuffix("3         2"), "list shows 3 attempts and 2 replays: \(row)")
        XCTAssertEqual(h.outcomes("again-1"), [.deadLettered, .deadLettered, .deadLettered])
    }

    func testBulkReplayHonoursFiltersAndTheRate() throws {
        try makeDeadLetters()
        h.stopRouter()
        let start = Clock.monotonicMs()
        let replay = h.dead(["replay", "--all", "--reason", "apns_credentials", "--rate", "5/s", "--yes"])
        let elapsed = Clock.monotonicMs() - start
        XCTAssertEqual(replay.status, 0, replay.err.joined())
        XCTAssertEqual(h.entries(h.keys("broken").calls).count, 2)
        XCTAssertEqual(h.deadIDs("broken"), [])
        XCTAssertEqual(h.deadIDs("acme").count, 1, "the filter kept the invalid event out")
        XCTAssertGreaterThanOrEqual(elapsed, 190, "two replays at 5/s are 200 ms apart")
        let audit = try XCTUnwrap(auditEntries().last)
        XCTAssertEqual(audit["filters"], #"{"reason":"apns_credentials"}"#)
        XCTAssertEqual(audit["options"], #"{"rate":"5/s"}"#)
        XCTAssertEqual(audit["requested"], "2")

        let refused = h.dead(["replay", "--all"])
        XCTAssertEqual(refused.status, 2, "bulk replay without a terminal and without --yes is refused")
        XCTAssertEqual(h.deadIDs("acme").count, 1)
        let declined = h.dead(["replay", "--all"], answer: "no")
        XCTAssertEqual(declined.status, 1)
        XCTAssertEqual(declined.prompts.count, 1)
        XCTAssertTrue(declined.prompts[0].hasPrefix("Replay 1 dead letter of app acme"), declined.prompts[0])
        XCTAssertEqual(h.deadIDs("acme").count, 1, "not confirmed: nothing replayed")
    }

    // MARK: purge

    func testPurgeHonoursFiltersAndAsksForConfirmation() throws {
        // An invalid event of acme dead ten days ago, with the fields the router writes.
        let old = String(Clock.unixMs() - 10 * 86_400_000) + "-0"
        h.send(["XADD", h.keys("acme").dead, old, "event", "{", "reason", "invalid_event: event: not JSON",
                "attempts", #"{"outcome":"dead_lettered","app":"acme","attempts":[]}"#, "first_failure_ms", "1",
                "last_failure_ms", "1", "replays", "0", "app", "acme"])
        try makeDeadLetters()
        h.stopRouter()
        let acme = h.deadIDs("acme")
        guard acme.count == 2 else { return XCTFail("two acme dead letters: \(acme)") }
        XCTAssertEqual(acme.first, old)

        let refused = h.dead(["purge", "--all", "--app", "acme"])
        XCTAssertEqual(refused.status, 2, "no terminal and no --yes: refused")
        XCTAssertEqual(refused.err.count, 1)
        XCTAssertTrue(refused.err[0].contains("needs confirmation"), refused.err[0])
        let declined = h.dead(["purge", "--all", "--app", "acme"], answer: "n")
        XCTAssertEqual(declined.status, 1)
        XCTAssertTrue(declined.prompts.first?.hasPrefix("Delete 2 dead letters of app acme") == true, "\(declined.prompts)")
        let dry = h.dead(["purge", "--all", "--app", "acme", "--older-than", "5d", "--dry-run"])
        XCTAssertEqual(dry.status, 0)
        XCTAssertEqual(dry.out.filter { $0.hasPrefix("would purge") }.count, 1, dry.text)
        XCTAssertEqual(h.deadIDs("acme").count, 2, "refused, declined and dry runs change nothing")

        let aged = h.dead(["purge", "--all", "--app", "acme", "--older-than", "5d"], answer: "yes", user: "bob")
        XCTAssertEqual(aged.status, 0, aged.err.joined())
        XCTAssertEqual(h.deadIDs("acme"), [acme[1]], "only the one older than 5 days")

        let byReason = h.dead(["purge", "--all", "--reason", "invalid_event", "--yes"])
        XCTAssertEqual(byReason.status, 0)
        XCTAssertEqual(h.deadIDs("acme"), [])
        XCTAssertEqual(h.deadIDs("broken").count, 2, "other reasons are kept")

        let broken = h.deadIDs("broken")
        guard broken.count == 2 else { return XCTFail("two broken dead letters: \(broken)") }
        XCTAssertEqual(h.dead(["purge", broken[0], "9-9", "--yes"]).status, 1, "an unknown id: nothing done")
        XCTAssertEqual(h.deadIDs("broken").count, 2)
        XCTAssertEqual(h.dead(["purge", "broken/\(broken[0])", "--yes"]).status, 0)
        XCTAssertEqual(h.deadIDs("broken"), [broken[1]])

        let audit = auditEntries()
        XCTAssertEqual(audit.map { $0["verb"] }, ["purge", "purge", "purge"])
        guard audit.count == 3 else { return }
        XCTAssertEqual(audit[0]["user"], "bob")
        XCTAssertEqual(audit[0]["done"], "1")
        XCTAssertEqual(audit[0]["ids"], "[\"acme/\(old)\"]")
        XCTAssertTrue(audit[0]["filters"]?.contains("\"before_ms\"") == true, audit[0]["filters"] ?? "")
        XCTAssertEqual(audit[1]["filters"], #"{"reason":"invalid_event"}"#)
        XCTAssertEqual(audit[2]["filters"], "null", "ids named, no filter")
    }

    func testPurgeWithoutATerminalIsRefusedByTheRealBinary() throws {
        try makeDeadLetters()
        h.stopRouter()
        let (status, out, err) = try runCommand(try builtPushgw(), ["dead", "purge", "--all", "--config", h.directory + "/pushgw.json"],
                                                stdin: "yes\n")
        XCTAssertEqual(status, 2, "stdin is a pipe, not a terminal: \(err)")
        XCTAssertEqual(out, "")
        XCTAssertTrue(err.contains("add --yes"), err)
        XCTAssertEqual(h.deadIDs("broken").count, 2)
    }

    // MARK: Retention through the role

    func testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() throws {
        try makeDeadLetters()
        h.stopRouter()
        let path = try h.writeConfigFile(retention: ["max_entries": 1, "max_age_days": 14])
        let stats = json(h.dead(["stats", "--json", "--app", "broken"]).out.joined())
        let broken = try XCTUnwrap((stats["apps"] as? [[String: Any]])?.first)
        XCTAssertEqual(broken["trim_now"] as? Int, 1, "what retention will remove shows before it happens")

        let config = try XCTUnwrap(GatewayConfig.load(file: path, environment: [:]).config)
        var logged: [String] = []
        let role = DeadLettersRole(loop: h.loop, config: config, redis: try h.access.config.connection(),
                                   log: Log(minimum: .info) { logged.append($0) }, intervalMs: 50)
        role.start()
        let newest = try XCTUnwrap(h.deadIDs("broken").last)
        h.loop.run(waitingFor: "the retention run to trim broken's oldest dead letter") {
            role.retention.stats["broken"]?.trimmedByCount == 1
        }
        role.close()
        XCTAssertEqual(h.deadIDs("broken"), [newest], "the oldest beyond max_entries went")
        XCTAssertEqual(h.deadIDs("acme").count, 1, "acme keeps the defaults")
        XCTAssertTrue(logged.contains { $0.contains("dead letters removed by retention") && $0.contains("\"by_count\":1") },
                      "a trim is never silent: \(logged)")
    }
}

/// `DeadLettersCLITests` over TLS (`rediss://`).
final class DeadLettersCLIOverTLSTests: DeadLettersCLITests {
    override class var redisDeployment: RedisDeployment { .tls }

    override func testListShowsEveryDeadLetterNewestFirstWithFilters() throws { try super.testListShowsEveryDeadLetterNewestFirstWithFilters() }
    override func testShowGivesTheWholeHistoryReadably() throws { try super.testShowGivesTheWholeHistoryReadably() }
    override func testStatsCountPerAppAndReasonWithTheOldestEntry() throws { try super.testStatsCountPerAppAndReasonWithTheOldestEntry() }
    override func testReplayAfterTheKeyIsFixedEndsDeliveredVoip() throws { try super.testReplayAfterTheKeyIsFixedEndsDeliveredVoip() }
    override func testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() throws { try super.testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() }
    override func testBulkReplayHonoursFiltersAndTheRate() throws { try super.testBulkReplayHonoursFiltersAndTheRate() }
    override func testPurgeHonoursFiltersAndAsksForConfirmation() throws { try super.testPurgeHonoursFiltersAndAsksForConfirmation() }
    override func testPurgeWithoutATerminalIsRefusedByTheRealBinary() throws { try super.testPurgeWithoutATerminalIsRefusedByTheRealBinary() }
    override func testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() throws { try super.testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() }
    override func testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly() throws {
        try super.testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly()
    }
    override func testHostileRatesExitTwoWithDeadLettersThere() throws { try super.testHostileRatesExitTwoWithDeadLettersThere() }
}

/// `DeadLettersCLITests` as the least-privileged ACL user.
final class DeadLettersCLIAsLeastPrivilegedUserTests: DeadLettersCLITests {
    override class var redisDeployment: RedisDeployment { .leastPrivilege }

    override func testListShowsEveryDeadLetterNewestFirstWithFilters() throws { try super.testListShowsEveryDeadLetterNewestFirstWithFilters() }
    override func testShowGivesTheWholeHistoryReadably() throws { try super.testShowGivesTheWholeHistoryReadably() }
    override func testStatsCountPerAppAndReasonWithTheOldestEntry() throws { try super.testStatsCountPerAppAndReasonWithTheOldestEntry() }
    override func testReplayAfterTheKeyIsFixedEndsDeliveredVoip() throws { try super.testReplayAfterTheKeyIsFixedEndsDeliveredVoip() }
    override func testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() throws { try super.testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() }
    override func testBulkReplayHonoursFiltersAndTheRate() throws { try super.testBulkReplayHonoursFiltersAndTheRate() }
    override func testPurgeHonoursFiltersAndAsksForConfirmation() throws { try super.testPurgeHonoursFiltersAndAsksForConfirmation() }
    override func testPurgeWithoutATerminalIsRefusedByTheRealBinary() throws { try super.testPurgeWithoutATerminalIsRefusedByTheRealBinary() }
    override func testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() throws { try super.testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() }
    override func testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly() throws {
        try super.testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly()
    }
    override func testHostileRatesExitTwoWithDeadLettersThere() throws { try super.testHostileRatesExitTwoWithDeadLettersThere() }
}

/// `DeadLettersCLITests` through a sentinel that names the primary.
final class DeadLettersCLIThroughSentinelTests: DeadLettersCLITests {
    override class var redisDeployment: RedisDeployment { .sentinel }

    override func testListShowsEveryDeadLetterNewestFirstWithFilters() throws { try super.testListShowsEveryDeadLetterNewestFirstWithFilters() }
    override func testShowGivesTheWholeHistoryReadably() throws { try super.testShowGivesTheWholeHistoryReadably() }
    override func testStatsCountPerAppAndReasonWithTheOldestEntry() throws { try super.testStatsCountPerAppAndReasonWithTheOldestEntry() }
    override func testReplayAfterTheKeyIsFixedEndsDeliveredVoip() throws { try super.testReplayAfterTheKeyIsFixedEndsDeliveredVoip() }
    override func testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() throws { try super.testAReplayThatDiesAgainKeepsItsHistoryAndItsCountGrows() }
    override func testBulkReplayHonoursFiltersAndTheRate() throws { try super.testBulkReplayHonoursFiltersAndTheRate() }
    override func testPurgeHonoursFiltersAndAsksForConfirmation() throws { try super.testPurgeHonoursFiltersAndAsksForConfirmation() }
    override func testPurgeWithoutATerminalIsRefusedByTheRealBinary() throws { try super.testPurgeWithoutATerminalIsRefusedByTheRealBinary() }
    override func testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() throws { try super.testTheDeadLettersRoleTrimsByTheAppsRetentionAndStatsShowItFirst() }
    override func testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly() throws {
        try super.testANoDeadlineDeadLetterReplayedAfterItsRingTimeoutGetsTheAlertOnly()
    }
    override func testHostileRatesExitTwoWithDeadLettersThere() throws { try super.testHostileRatesExitTwoWithDeadLettersThere() }
}
