import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient
import TestSupport
import XCTest
@testable import OperatorsConsole

/// The console's replay and purge previews and confirmations against a real redis-server, in
/// process (`OperatorsConsole.handle`, as the admin endpoint calls it): numbers from the form
/// are parsed into their bounds before anything uses them, a preview says for each dead
/// letter whether its replay rings or sends the missed-call alert only, and a preview of
/// "all matching" pages through the stream a bounded step at a time, answering with what it
/// found so far and where to go on.
final class ConsolePreviewTests: ConsoleTestCase {
    override func setUpWithError() throws {
        try startConsole(policies: ["acme": .default, "beta": .default])
    }

    /// A dead letter as the router writes one, its record naming calls entry `entryMs`.
    @discardableResult
    private func dead(_ app: String, id: String = "*", event: String, entryMs: Int64, reason: String = "retries_exhausted: voip",
                      extra: [String] = []) -> String {
        let attempts = #"{"outcome":"dead_lettered","entry":"\#(entryMs)-0","attempts":[]}"#
        return redis(["XADD", "pushgw:{\(app)}:dead", id, "event", event, "reason", reason, "attempts", attempts,
                      "first_failure_ms", String(entryMs + 5), "last_failure_ms", String(entryMs + 5), "replays", "0", "app", app] + extra)?
            .string ?? ""
    }

    private func call(_ id: String, voip: Bool = true, alert: Bool = true, deadline: Int64? = nil) -> String {
        var fields = [#""v":1"#, #""id":"\#(id)""#, #""type":"incoming_call""#]
        if voip { fields.append(#""voip_token":"00aa11bb""#) }
        if alert { fields.append(#""alert_token":"22cc33dd""#) }
        if let deadline { fields.append(#""deadline":\#(deadline)"#) }
        return "{" + fields.joined(separator: ",") + "}"
    }

    // MARK: Numbers

    /// What crashed the gateway from one GET of a read-only user or one admin POST (a rate
    /// converted past Int.max, a rate that underflowed to 0, a due time past Int64), what never
    /// ended, and the other numbers a person types: each a 400 naming the bounds, nothing
    /// replayed.
    func testHostileNumbersAreRefusedWithTheirBoundsAndChangeNothing() throws {
        let now = Clock.unixMs()
        let id = dead("acme", event: call("n-1"), entryMs: now - 1_000)
        let rates = ["1e300", "1e19", "9.3e18/s", "5e-324/h", "1e-300", "1e-13", "inf", "nan", "-1", "0",
                     String(repeating: "9", count: 400)]
        for rate in rates {
            for query in [[("action", "replay-all"), ("rate", rate)], [("action", "replay"), ("ids", "acme/" + id), ("rate", rate)]] {
                let preview = request("GET", "/console/dead/preview", query: query)
                XCTAssertEqual(preview.status, 400, "preview \(query)")
                XCTAssertTrue(body(preview).contains("from 1/h to 10000/s"), "the bounds are named: \(rate)")
            }
            let posted = request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "acme/" + id), ("rate", rate)])
            XCTAssertEqual(posted.status, 400, "replay POST at \(rate)")
            XCTAssertTrue(body(posted).contains("from 1/h to 10000/s"), body(posted))
        }
        for (field, value) in [("since", String(repeating: "999999999w", count: 16)), ("older", "36526d"),
                               ("since", String(repeating: "9", count: 400) + "s"), ("older", "1e300s")] {
            let preview = request("GET", "/console/dead/preview", query: [("action", "purge-all"), (field, value)])
            XCTAssertEqual(preview.status, 400, "\(field)=\(value.prefix(20))")
            XCTAssertTrue(body(preview).contains("at most 100 years"), body(preview))
            XCTAssertEqual(request("GET", "/console/dead", query: [(field, value)]).status, 400, "the list too")
        }
        let cursor = request("GET", "/console/dead/preview", query: [("action", "replay-all"), ("from", "1e300")])
        XCTAssertEqual(cursor.status, 400, "a cursor is APP/ID")
        XCTAssertEqual(request("GET", "/console/jobs/" + String(repeating: "9", count: 400)).status, 404)
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:calls"])?.integer, 0, "nothing was replayed")
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:dead"])?.integer, 1, "nothing was purged")

        // The bounds themselves are rates, and a confirmation at the slowest is a job, not a crash.
        for rate in ["1/h", "10000/s", "600000/m"] {
            XCTAssertEqual(request("GET", "/console/dead/preview", query: [("action", "replay-all"), ("rate", rate)]).status, 200, rate)
        }
        let slow = request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "acme/" + id), ("rate", "1/h")])
        XCTAssertEqual(slow.status, 303)
        let job = body(request("GET", try XCTUnwrap(slow.header("Location"))))
        XCTAssertTrue(job.contains("at 1/h"), job)
    }

    // MARK: Ring or alert

    /// The call's deadline is the original one: the event's, or its first calls entry's time plus
    /// the ring timeout. The preview says per dead letter what a replay will do.
    func testThePreviewSaysWhichReplaysRingAndWhichSendTheMissedCallAlertOnly() throws {
        let now = Clock.unixMs()
        let old = dead("acme", event: call("old-no-deadline"), entryMs: now - 10 * 60_000)
        let fresh = dead("acme", event: call("fresh-no-deadline"), entryMs: now - 2_000)
        let ahead = dead("acme", event: call("deadline-ahead", deadline: now + 60_000), entryMs: now - 10 * 60_000)
        let passed = dead("acme", event: call("deadline-passed", deadline: now - 5_000), entryMs: now - 10_000)
        let alertOnly = dead("acme", event: call("alert-token-only", voip: false), entryMs: now - 1_000)
        let noAlert = dead("acme", event: call("no-alert-token", alert: false), entryMs: now - 10 * 60_000)
        let cut = dead("acme", event: String(call("too-big").dropLast()), entryMs: now - 1_000, reason: "invalid_event: event: 70000 bytes",
                       extra: ["event_bytes", "70000", "event_sha256", String(repeating: "a", count: 64)])
        let page = body(request("GET", "/console/dead/preview", query: [("action", "replay-all"), ("rate", "20/s")]))
        func forecast(_ id: String) -> String? {
            match(#"<tr data-forecast="([a-z-]+)"><td><a href="/console/dead/acme/\#(id)">"#, page).first
        }
        XCTAssertEqual(forecast(old), "alert-only", "no deadline, first entry 10 minutes ago: past its 30 s ring")
        XCTAssertEqual(forecast(fresh), "rings")
        XCTAssertEqual(forecast(ahead), "rings")
        XCTAssertEqual(forecast(passed), "alert-only")
        XCTAssertEqual(forecast(alertOnly), "alert")
        XCTAssertEqual(forecast(noAlert), "nothing-sent")
        XCTAssertEqual(forecast(cut), "not-replayable")
        XCTAssertTrue(page.contains("missed-call alert only: the call&#39;s deadline passed 9m ago, no VoIP push")
                      || page.contains("missed-call alert only: the call's deadline passed 9m ago, no VoIP push")
                      || page.contains("deadline passed 10m ago"), page)
        XCTAssertTrue(page.contains(#"<p id="forecast">2 will ring (VoIP push); 2 get the missed-call alert only"#), page)

        // The dead letter's own page says the same of its deadline.
        let shown = body(request("GET", "/console/dead/acme/" + old))
        XCTAssertTrue(shown.contains("the call&#39;s first entry + the app&#39;s 30 s ring timeout")
                      || shown.contains("the call's first entry + the app's 30 s ring timeout"), shown)
        XCTAssertTrue(shown.contains("a replay now: missed-call alert only"), shown)
        XCTAssertTrue(body(request("GET", "/console/dead/acme/" + cut)).contains(#"id="event-cut""#))

        // Confirmed: each replay carries the original deadline; the part-kept one is skipped.
        let posted = request("POST", "/console/dead/replay", form: [("csrf", csrf), ("ids", "acme/" + old), ("ids", "acme/" + cut),
                                                                   ("rate", "10000/s")])
        XCTAssertEqual(posted.status, 303)
        let jobPath = try XCTUnwrap(posted.header("Location"))
        var job = ""
        loop.run(waitingFor: "the replay job to end") {
            job = body(request("GET", jobPath))
            return job.contains(#"data-state="done""#) || job.contains(#"data-state="stopped""#)
        }
        XCTAssertTrue(job.contains("skipped acme/\(cut): cannot replay: only the first"), job)
        let calls = try StreamReplies.range(try XCTUnwrap(redis(["XRANGE", "pushgw:{acme}:calls", "-", "+"])))
        XCTAssertEqual(calls.count, 1, "only the whole event went back")
        XCTAssertEqual(calls.first?.fields["call_deadline"], String(now - 10 * 60_000 + 30_000), "the original call's deadline")
    }

    // MARK: Bounded and incremental

    /// 2,500 dead letters in one app and 30 in another: a preview of all lists the console's
    /// 1,000, says more may match and links to the next ones; following the links visits every
    /// one exactly once, oldest first, app after app. On a slow build (AddressSanitizer) a
    /// preview may stop at its 2 s deadline first: it then links on from where it stopped, and
    /// the pages still visit every one exactly once.
    func testAPreviewOfAllPagesThroughTheStreamAndGoesOnFromItsCursor() throws {
        let script = """
            for i = 1, tonumber(ARGV[2]) do
              redis.call('XADD', KEYS[1], (1000000 + i) .. '-0', 'event', '{"id":"c-' .. i .. '","type":"incoming_call","voip_token":"aa"}',
                'reason', 'apns_credentials: BadTopic', 'app', ARGV[1])
            end
            return 1
            """
        _ = redis(["EVAL", script, "1", "pushgw:{acme}:dead", "acme", "2500"])
        _ = redis(["EVAL", script, "1", "pushgw:{beta}:dead", "beta", "30"])
        var seen: [String] = []
        var query = [("action", "purge-all")]
        var previews = 0
        var stoppedByTime = false
        while previews < 40 {
            previews += 1
            let page = body(request("GET", "/console/dead/preview", query: query))
            let rows = match(#"<tr data-forecast="[a-z-]+"><td><a href="/console/dead/([a-z]+/[0-9-]+)">"#, page)
            XCTAssertLessThanOrEqual(rows.count, OperatorsConsole.maxTargets)
            let hidden = match(#"<input type="hidden" name="ids" value="([^"]+)">"#, page)
            XCTAssertEqual(hidden, rows.map { $0.replacingOccurrences(of: "%2F", with: "/") }, "the form confirms exactly what is listed")
            seen += hidden
            guard let next = match(#"<a href="([^"]+)" id="next-preview">"#, page).first else {
                XCTAssertFalse(page.contains(#"id="more""#), "no more at the end")
                break
            }
            if page.contains("a preview scans for at most 2 s") {
                stoppedByTime = true
            } else {
                XCTAssertTrue(page.contains("the console lists at most 1000 at once"), page)
            }
            let url = try XCTUnwrap(URLComponents(string: next.replacingOccurrences(of: "&amp;", with: "&")))
            query = (url.queryItems ?? []).map { ($0.name, $0.value ?? "") }
        }
        if !stoppedByTime { XCTAssertEqual(previews, 3, "1,000 + 1,000 + 530") }
        XCTAssertEqual(seen.count, 2_530)
        XCTAssertEqual(Set(seen).count, 2_530, "each exactly once")
        XCTAssertEqual(seen.first, "acme/1000001-0")
        XCTAssertEqual(seen[2_499], "acme/1002500-0")
        XCTAssertEqual(seen.last, "beta/1000030-0")
    }
}
