import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient
import TestSupport
import XCTest
@testable import OperatorsConsole

/// Every console page rendered with hostile values in every field a producer, Redis, APNs, the
/// config or a form can fill (call ids, event types, tokens, reasons, attempts, app names,
/// the operator's name, filters, cursors, rates, paths), against a real redis-server, in
/// process (`OperatorsConsole.handle`, as the admin endpoint calls it). The browser test
/// (Tests/Browser/console_browser.py) shows that such values do not run in Chromium; this one
/// reads the HTML itself: no `<`, `>`, `"`, `'` or `&` of a value reaches a page unescaped,
/// and no control or bidi character reaches it raw.
final class ConsoleHostileTests: ConsoleTestCase {
    /// Each character that could end or open markup sits between two `zq`, and the value
    /// starts and ends with `-`: so `zq<`, `<zq`, `"zq`, … appear on a page only if a
    /// character of a value was written as it is (the console's own markup never touches `zq`).
    static let evil = "-zq<zq>zq\"zq'zq&zq</textarea>zq<script>zq</pre>zq\u{1}zq\u{1B}[31mzq\u{202E}zq-"
    /// Shorter, for the values the console cuts (tokens show their last 8 characters).
    static let evilTail = "-zq\"zq<zq'zq-"
    static let app = "ev<zq\"zq'zq&zq-"
    static let unescaped = ["zq<", "<zq", "zq>", ">zq", "zq\"", "\"zq", "zq'", "'zq", "&zq", "\u{1}", "\u{1B}", "\u{202E}"]

    override func setUpWithError() throws {
        let app = ConsoleHostileTests.app
        let evil = ConsoleHostileTests.evil
        var rated = ConsoleFigures.App(id: app, bundleID: "com.example", environment: "production")
        rated.limits = .init(maxInFlight: 200, maxInFlightSet: true, eventsPerSecond: 20, burst: 40, inFlight: 7, throttledSeconds: 12.5)
        let figures = ConsoleFigures(apps: [
            ConsoleFigures.App(id: "acme", bundleID: evil, environment: evil, refusal: evil, backlog: 3, pending: 1,
                               environmentMismatches: .init(count: 2, acceptedIn: evil, lastAtMs: 1_764_584_040_000)),
            rated,
        ], redisReachable: true, callsInFlight: 1, readinessProblems: [evil])
        try startConsole(policies: ["acme": .default, app: .default], readOnlyAvailable: true, name: "-zq<zq\"zq'zq&zq\u{202E}-",
                         figures: { figures })
        console.recordOutcome(app: "acme", outcome: evil, cause: evil, latencyMs: 12)
        console.recordOutcome(app: "acme", outcome: "delivered_alert", cause: evil, latencyMs: 40)
    }

    private func json(_ object: Any) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    /// A dead letter as the router writes one, every text field hostile.
    @discardableResult
    private func dead(_ app: String, event: [UInt8], entryMs: Int64, device: String? = nil) -> String {
        let evil = ConsoleHostileTests.evil
        let attempt: [String: Any] = ["t": entryMs + 3, "channel": evil, "token": evil, "status": 410, "reason": evil, "error": evil,
                                      "apns_id": evil]
        let attempts = json(["outcome": "dead_lettered", "entry": "\(entryMs)-0", "attempts": [attempt, ["t": entryMs + 4]]])
        var args = ["XADD", "pushgw:{\(app)}:dead", "*", "event"]
        args.append(String(decoding: event, as: UTF8.self))
        args += ["reason", evil, "attempts", attempts, "first_failure_ms", String(entryMs + 5), "last_failure_ms", String(entryMs + 5),
                 "replays", "0", "app", app]
        if let device { args += ["device", device] }
        return redis(args)?.string ?? ""
    }

    /// Fails when `page` shows a hostile value's markup character or a control character as it
    /// is, or shows no hostile value at all (then the check would prove nothing).
    private func assertEscaped(_ response: HTTPResponse, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let page = body(response)
        XCTAssertTrue(page.contains("zq"), "\(what): the page shows the hostile values (status \(response.status))", file: file, line: line)
        for bad in ConsoleHostileTests.unescaped {
            guard let range = page.range(of: bad) else { continue }
            let start = page.index(range.lowerBound, offsetBy: -60, limitedBy: page.startIndex) ?? page.startIndex
            let around = String(page[start..<range.upperBound])
            XCTFail("\(what): \(bad.debugDescription) of a value reached the page unescaped: …\(around)", file: file, line: line)
        }
        for header in response.headers {
            XCTAssertFalse(header.value.contains("\n") || header.value.contains("\r"), "\(what): header \(header.name) carries no line break",
                           file: file, line: line)
        }
    }

    /// The search box's pages (docs/operations.md, "Search"): a call whose id, result, attempts, dead letter and
    /// in-flight gateway are hostile, a token whose feedback is, the not-found page of a
    /// hostile text, in the hostile app and as `APP/ID`.
    private func searchesEscapeHostileCallsAndTokens(file: StaticString = #filePath, line: UInt = #line) throws {
        let evil = ConsoleHostileTests.evil
        let app = ConsoleHostileTests.app
        let token = "00aa" + String(repeating: "0", count: 56) + "ffff"
        let attempt: [String: Any] = ["t": 1_764_584_040_000, "channel": evil, "status": 410, "reason": evil, "error": evil, "apns_id": evil]
        let result = json(["outcome": evil, "cause": evil, "reason": evil, "channel": evil, "apns_id": evil, "entry": evil,
                           "environment_mismatch": evil, "latency_ms": 5, "attempts": [attempt, ["t": evil]]])
        for a in ["acme", app] {
            let keys = AppKeys(prefix: "pushgw", app: a)
            _ = redis(["SET", keys.result(evil), result])
            _ = redis(["SET", keys.cancelResult(evil), json(["outcome": "cancelled", "cancelled_after": evil])])
            _ = redis(["SET", keys.result("in-flight"), "in_flight:" + evil])
            _ = redis(["SET", keys.invalidPrefix(.alert) + token, "1764584040000"])
            _ = redis(["XADD", keys.feedback, "*", "token", token, "channel", evil, "reason", evil, "timestamp", evil, "environment", evil])
            _ = redis(["XADD", keys.feedback, "*", "token", token, "channel", "alert", "reason", evil, "timestamp", "1764584040000"])
        }
        let found = request("GET", "/console/search", query: [("q", evil)], file: file, line: line)
        XCTAssertEqual(found.status, 200, "the hostile call id is found", file: file, line: line)
        XCTAssertTrue(body(found).contains(ConsoleEscaping.html(evil)), "its call id shows, escaped", file: file, line: line)
        assertEscaped(found, "the search of a hostile call", file: file, line: line)
        assertEscaped(request("GET", "/console/search", query: [("q", app + "/" + evil)], file: file, line: line),
                      "the search of APP/ID in the hostile app", file: file, line: line)
        assertEscaped(request("GET", "/console/search", query: [("q", "in-flight")], file: file, line: line),
                      "a call a hostile gateway routes", file: file, line: line)
        let tokenPage = request("GET", "/console/search", query: [("q", token)], file: file, line: line)
        XCTAssertEqual(tokenPage.status, 200, file: file, line: line)
        assertEscaped(tokenPage, "the search of a token with hostile feedback", file: file, line: line)
        let unknown = request("GET", "/console/search", query: [("q", "x" + evil)], file: file, line: line)
        XCTAssertEqual(unknown.status, 404, file: file, line: line)
        assertEscaped(unknown, "the not-found page of a hostile text", file: file, line: line)
        // A dead letter's call id, searched: the call page links it and lists its tokens.
        assertEscaped(request("GET", "/console/search", query: [("q", "acme/" + evil)], file: file, line: line),
                      "the search of a hostile dead letter's call", file: file, line: line)
    }

    // MARK: Every page

    func testEveryPageEscapesHostileDeadLettersFiguresAndForms() throws {
        let evil = ConsoleHostileTests.evil
        let app = ConsoleHostileTests.app
        let now = Clock.unixMs()
        let event = json(["v": 1, "id": evil, "type": evil, "voip_token": "00aa" + ConsoleHostileTests.evilTail,
                          "alert_token": "11bb" + ConsoleHostileTests.evilTail, "deadline": now + 60_000,
                          "voip": ["caller": evil, "callerName": evil], "alert": ["title": evil, "body": evil]])
        let jsonEntry = dead("acme", event: Array(event.utf8), entryMs: now - 5_000)
        // Not JSON, not UTF-8: shown as stored, line by line, each invalid byte as \xNN.
        let rawEntry = dead("acme", event: Array(("{" + evil + "\n" + evil).utf8) + [0xFF, 0x0A, 0x3C], entryMs: now - 4_000)
        // One device's dead letter of a call with devices: its device id hostile too.
        let otherEntry = dead(app, event: Array(json(["v": 1, "id": evil, "type": "incoming_call"]).utf8), entryMs: now - 3_000,
                              device: evil)
        let refs = ["acme/" + jsonEntry, "acme/" + rawEntry, app + "/" + otherEntry]

        _ = redis(["XADD", "pushgw:{\(app)}:webhooks:dead", "*", "result", json(["outcome": evil, "id": evil]), "results_entry", evil,
               "reason", evil, "attempts", evil, "failed_at_ms", evil])

        // A hand-written fleet field: an app id no config allows, an outcome no gateway counts.
        _ = redis(["HINCRBY", "pushgw:fleet:\(now / 60_000)", evil + ":" + evil, "3"])
        // Counts no gateway writes: the largest and a negative one, in two minutes (their sum
        // would overflow), and a latency bucket beyond the histogram.
        for (ago, value) in [(0, Int64.max), (1, Int64.max), (2, Int64.min)] {
            _ = redis(["HSET", "pushgw:fleet:\(now / 60_000 - Int64(ago))", "acme:delivered_voip", String(value),
                       "acme:latency:1000000", String(value)])
        }
        assertEscaped(request("GET", "/console/overview"), "the overview")
        let fleet = request("GET", "/console/fleet")
        assertEscaped(fleet, "the fleet")
        XCTAssertEqual(fleet.status, 200, "hand-written counts beyond any gateway's are read bounded, not summed into an overflow")
        _ = redis(["XADD", "pushgw:{acme}:results", "*", "result", json(["id": evil, "type": evil, "outcome": evil, "cause": evil])])
        _ = redis(["XADD", "pushgw:{acme}:feedback", "*", "token", evil, "channel", evil, "reason", evil, "environment", evil])
        let tailed = request("GET", "/console/tail", query: [("app", "acme"), ("stream", "results")])
        assertEscaped(tailed, "the live tail of results")
        XCTAssertEqual(tailed.status, 200)
        assertEscaped(request("GET", "/console/tail", query: [("app", "acme"), ("stream", "feedback")]), "the live tail of feedback")
        XCTAssertEqual(request("GET", "/console/tail", query: [("app", evil)]).status, 404, "an app not configured has no tail")
        assertEscaped(request("GET", "/console/webhooks"), "the webhook dead letters")
        assertEscaped(request("GET", "/console/dead"), "the list")
        assertEscaped(request("GET", "/console/dead", query: [("app", app)]), "the list of the hostile app")
        assertEscaped(request("GET", "/console/dead", query: [("reason", evil), ("call", evil)]), "the list filtered by hostile values")
        assertEscaped(request("GET", "/console/dead", query: [("since", evil)]), "the list refusing a hostile time")
        assertEscaped(request("GET", "/console/dead", query: [("app", evil)]), "the list refusing an unknown app")
        assertEscaped(request("GET", "/console/dead", query: [("before", "acme/" + jsonEntry), ("reason", "-")]), "an older page")
        for ref in refs {
            let (refApp, id) = (String(ref[..<ref.lastIndex(of: "/")!]), String(ref[ref.index(after: ref.lastIndex(of: "/")!)...]))
            let page = request("GET", ConsolePages.detailHref(app: refApp, id: id))
            XCTAssertEqual(page.status, 200, ref)
            XCTAssertTrue(body(page).contains(ConsoleEscaping.html(evil)), "dead letter \(ref): its call id shows, escaped")
            XCTAssertEqual(body(page).contains(#"id="device""#), ref.hasPrefix(app + "/"), "dead letter \(ref): a device's shows its device")
            assertEscaped(page, "dead letter \(ref)")
        }
        assertEscaped(request("GET", ConsolePages.detailHref(app: app, id: "1-0")), "a dead letter gone")
        try searchesEscapeHostileCallsAndTokens()
        assertEscaped(request("GET", "/console/" + evil), "not found")
        for action in ["replay", "purge"] {
            assertEscaped(request("GET", "/console/dead/preview", query: [("action", action)] + refs.map { ("ids", $0) }),
                          "the \(action) preview of named ones")
            assertEscaped(request("GET", "/console/dead/preview", query: [("action", action + "-all"), ("reason", "-z")]),
                          "the \(action) preview of all matching")
        }
        assertEscaped(request("GET", "/console/dead/preview", query: [("action", "replay-all"), ("from", evil)]), "a hostile cursor")
        assertEscaped(request("GET", "/console/dead/preview", query: [("action", "replay-all"), ("rate", evil)]), "a hostile rate")
        assertEscaped(request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", refs[0]), ("rate", evil)]),
                      "a confirmation at a hostile rate")

        // A replay of every one, then a purge of what it left, and their jobs and audit records.
        let replay = request("POST", "/console/dead/replay",
                             form: [("csrf", csrf), ("rate", "10000/s"), ("f-reason", evil), ("f-call", evil)] + refs.map { ("ids", $0) })
        XCTAssertEqual(replay.status, 303)
        let replayJob = try XCTUnwrap(replay.header("Location"))
        loop.run(waitingFor: "the replay to finish") { body(request("GET", replayJob)).contains(#"data-state="done""#) }
        assertEscaped(request("GET", replayJob), "the replay's job")
        // The replays die again: one more round each, then purged.
        dead("acme", event: Array(event.utf8), entryMs: now - 2_000)
        let purge = request("POST", "/console/dead/purge", form: [("csrf", csrf)] + refs.map { ("ids", $0) })
        XCTAssertEqual(purge.status, 303)
        let purgeJob = try XCTUnwrap(purge.header("Location"))
        loop.run(waitingFor: "the purge to finish") {
            let page = body(request("GET", purgeJob))
            return page.contains(#"data-state="done""#) || page.contains(#"data-state="stopped""#)
        }
        assertEscaped(request("GET", purgeJob), "the purge's job")
        let audit = request("GET", "/console/audit")
        XCTAssertTrue(body(audit).contains(#"data-verb="replay""#) && body(audit).contains(#"data-verb="purge""#), body(audit))
        assertEscaped(audit, "the audit trail")

        // Pages of no session: the sign-in form refusing a hostile token, and a refusal.
        let session = cookie
        cookie = ""
        let wrong = request("POST", "/console/signin", form: [("token", evil), ("name", evil)])
        XCTAssertEqual(wrong.status, 401)
        XCTAssertFalse(body(wrong).contains("zq"), "a wrong token is never shown")
        cookie = session
        let refused = request("POST", "/console/dead/purge", form: [("csrf", evil)] + refs.map { ("ids", $0) })
        XCTAssertEqual(refused.status, 403)
    }
}
