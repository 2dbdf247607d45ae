import Foundation
import HTTPMessages
import XCTest
@testable import OperatorsConsole

/// The console's webhook dead letters (docs/webhooks.md, "Dead letters"): listed per app with
/// what `pushgw webhooks dead` shows, escaped by the renderer; replayed by an admin onto the
/// app's deliveries with the audit record `pushgw webhooks replay` writes; listed but never
/// replayed by a read-only user. In process, over a real redis-server.
final class ConsoleWebhooksTests: ConsoleTestCase {
    static let hostile = "<script>alert(1)</script>\"'&"

    override func setUpWithError() throws {
        try startConsole(policies: ["acme": .default, "beta": .default])
    }

    /// Adds a webhook dead letter to `app` as the webhooks role writes one (with entry id `id`,
    /// else a new one); returns its entry id.
    private func addDead(_ app: String, callID: String, reason: String, id: String = "*") -> String {
        let result = #"{"outcome":"delivered_voip","id":"\#(callID.replacingOccurrences(of: "\"", with: "\\\""))","app":"\#(app)"}"#
        return redis(["XADD", "pushgw:{\(app)}:webhooks:dead", id, "result", result, "results_entry", "1700000000000-7",
                      "reason", reason, "attempts", "3", "failed_at_ms", "1764412345678"])?.string ?? ""
    }

    func testTheDeadLettersAreListedPerAppEscaped() {
        let first = addDead("acme", callID: ConsoleWebhooksTests.hostile, reason: "HTTP 400 from the receiver " + ConsoleWebhooksTests.hostile)
        _ = addDead("beta", callID: "c-2", reason: "HTTP 410")
        let page = body(request("GET", "/console/webhooks"))
        XCTAssertEqual(match(#"<tr class="webhook-dead" data-entry="([0-9-]+)""#, page).count, 2)
        XCTAssertTrue(page.contains(first))
        XCTAssertTrue(page.contains("HTTP 410"))
        XCTAssertTrue(page.contains("1700000000000-7"), "the Idempotency-Key (the results entry) is shown")
        XCTAssertFalse(page.contains("<script>alert"), "nothing from Redis reaches the page unescaped")
        XCTAssertTrue(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;") || page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        XCTAssertTrue(page.contains(#"href="/console/webhooks""#), "the navigation links the page")
    }

    func testAnAdminReplaysTheSelectedOnesOfOneAppWithAnAuditRecord() throws {
        let first = addDead("acme", callID: "c-1", reason: "HTTP 400")
        let second = addDead("acme", callID: "c-2", reason: "HTTP 400")
        // Beta's entry has the id of acme's first, as two streams give in the same millisecond
        // (a new id could also equal `second`'s, which would then rightly move): named twice, an
        // entry still moves once, and beta's stays.
        let other = addDead("beta", callID: "c-3", reason: "HTTP 400", id: first)
        XCTAssertEqual(other, first)
        let replay = request("POST", "/console/webhooks/replay", form: [("csrf", csrf), ("app", "acme"), ("ids", first), ("ids", other),
                                                                       ("ids", first)])
        XCTAssertEqual(replay.status, 200)
        XCTAssertTrue(body(replay).contains("Replayed 1 of 3"), body(replay))
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:webhooks"])?.integer, 1, "the first is back on acme's deliveries")
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:webhooks:dead"])?.integer, 1, "the second is still dead")
        XCTAssertEqual(redis(["XRANGE", "pushgw:{acme}:webhooks:dead", "-", "+"])?.array?.first?.array?.first?.string, second)
        XCTAssertEqual(redis(["XLEN", "pushgw:{beta}:webhooks:dead"])?.integer, 1, "another app's id named under acme moves nothing of beta")
        let audit = try XCTUnwrap(redis(["XREVRANGE", "pushgw:audit", "+", "-", "COUNT", "1"])?.array?.first?.array?.last?.array)
        let fields = Dictionary(uniqueKeysWithValues: stride(from: 0, to: audit.count - 1, by: 2).compactMap { i in
            audit[i].string.flatMap { k in audit[i + 1].string.map { (k, $0) } }
        })
        XCTAssertEqual(fields["verb"], "webhooks replay")
        XCTAssertEqual(fields["user"], "ann")
        XCTAssertEqual(fields["done"], "1")
        XCTAssertTrue(fields["ids"]?.contains("acme/\(first)") ?? false, "\(fields)")
    }

    func testAReadOnlyUserListsButCannotReplay() throws {
        let first = addDead("acme", callID: "c-1", reason: "HTTP 400")
        let signIn = request("POST", "/console/signin", form: [("token", "readonly-token"), ("name", "rita")])
        XCTAssertEqual(signIn.status, 303)
        cookie = try XCTUnwrap(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let page = body(request("GET", "/console/webhooks"))
        XCTAssertTrue(page.contains(first))
        XCTAssertFalse(page.contains(#"action="/console/webhooks/replay""#), "no replay form for a read-only user")
        let readOnlyCSRF = try XCTUnwrap(match(#"name="csrf" value="([0-9a-f]+)""#, page).first)
        let replay = request("POST", "/console/webhooks/replay", form: [("csrf", readOnlyCSRF), ("app", "acme"), ("ids", first)])
        XCTAssertEqual(replay.status, 403)
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:webhooks:dead"])?.integer, 1, "nothing moved")
        XCTAssertEqual(redis(["EXISTS", "pushgw:{acme}:webhooks"])?.integer, 0)
    }

    func testAReplayWithoutItsCSRFTokenOrOfAnUnknownAppChangesNothing() {
        let first = addDead("acme", callID: "c-1", reason: "HTTP 400")
        XCTAssertEqual(request("POST", "/console/webhooks/replay", form: [("app", "acme"), ("ids", first)]).status, 403)
        XCTAssertEqual(request("POST", "/console/webhooks/replay", form: [("csrf", csrf), ("app", "nope"), ("ids", first)]).status, 400)
        XCTAssertEqual(request("POST", "/console/webhooks/replay", form: [("csrf", csrf), ("app", "acme"), ("ids", "<b>")]).status, 400)
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:webhooks:dead"])?.integer, 1)
    }
}
