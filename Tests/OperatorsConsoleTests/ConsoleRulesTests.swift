import HTTPMessages
@testable import OperatorsConsole
import XCTest

/// The console's pure rules: escaping per context, the access gate, sessions, forms, and the
/// outcome history. No sockets.
final class ConsoleRulesTests: XCTestCase {
    // MARK: Escaping

    func testHTMLTextEscapesMarkupAndShowsControlCharacters() {
        XCTAssertEqual(ConsoleEscaping.html("<script>alert(1)</script>"), "&lt;script&gt;alert(1)&lt;/script&gt;")
        XCTAssertEqual(ConsoleEscaping.html("a&b"), "a&amp;b")
        XCTAssertEqual(ConsoleEscaping.html("\u{1B}[31mred\u{202E}"), "\\u001b[31mred\\u202e", "ESC and RLO are made visible as the CLI shows them")
        XCTAssertEqual(ConsoleEscaping.html("one\ntwo", keepingLines: true), "one\ntwo")
        XCTAssertEqual(ConsoleEscaping.html("one\ntwo"), "one\\u000atwo", "a field keeps no line break")
    }

    func testAttributesEscapeBothQuotes() {
        XCTAssertEqual(ConsoleEscaping.attribute(#""><img src=x onerror=alert(1)>"#), "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;")
        XCTAssertEqual(ConsoleEscaping.attribute("it's"), "it&#39;s")
    }

    func testTheRendererEscapesEveryTextAndAttributeValue() {
        let hostile = #"</td><script>x('1')</script>"&"#
        let page = Node.group(.raw(.doctype),
                              .element("td", [Attribute("title", hostile), .flag("hidden")], [.text(hostile), .el("input", ["value": hostile])]),
                              .el("pre", .text("a\n<b>", keepingLines: true)), .el("svg", .el("circle", ["r": "1"])))
        XCTAssertEqual(page.rendered, "<!doctype html>"
                       + #"<td title="&lt;/td&gt;&lt;script&gt;x(&#39;1&#39;)&lt;/script&gt;&quot;&amp;" hidden>"#
                       + #"&lt;/td&gt;&lt;script&gt;x(&#39;1&#39;)&lt;/script&gt;&quot;&amp;"#
                       + #"<input value="&lt;/td&gt;&lt;script&gt;x(&#39;1&#39;)&lt;/script&gt;&quot;&amp;"></td>"#
                       + "<pre>a\n&lt;b&gt;</pre><svg><circle r=\"1\"/></svg>",
                       "text and attribute values escaped, quotes included; void elements without end tag; SVG shapes self-closed")
    }

    func testJSONStringsCannotCloseTheirBlock() {
        let s = ConsoleEscaping.jsonString("</script><!--\u{2028}\"\\")
        XCTAssertFalse(s.contains("<") || s.contains(">"), s)
        XCTAssertEqual(s, #""\u003c/script\u003e\u003c!--\u2028\"\\""#)
    }

    func testQueryComponentsKeepSchemesAndSeparatorsInert() {
        XCTAssertEqual(ConsoleEscaping.queryComponent("javascript:alert(1)"), "javascript%3Aalert%281%29")
        XCTAssertEqual(ConsoleEscaping.queryComponent("a/b&c=d e"), "a%2Fb%26c%3Dd%20e")
        XCTAssertEqual(ConsoleEscaping.queryComponent("1764412345000-0"), "1764412345000-0")
    }

    func testTokensAreShortenedAsTheCommandLineShowsThem() {
        XCTAssertEqual(ConsoleEscaping.shortToken("0123456789abcdef0123"), "…cdef0123")
        XCTAssertEqual(ConsoleEscaping.shortToken(nil), "-")
    }

    // MARK: Forms and cookies

    func testFormDecodingReadsPlusEscapesAndRepeats() {
        let items = FormData.decode("ids=acme%2F1-0&ids=acme%2F2-0&name=Ann+Lee&bad=%zz")
        XCTAssertEqual(items.map(\.0), ["ids", "ids", "name", "bad"])
        XCTAssertEqual(items.map(\.1), ["acme/1-0", "acme/2-0", "Ann Lee", "%zz"])
        XCTAssertEqual(FormData.decode(FormData.encode([("a", "x y&z"), ("b", "")])).map(\.1), ["x y&z"])
    }

    func testCookiesAreFoundByExactName() {
        let r = HTTPRequest(method: "GET", path: "/console/", headers: ["cookie": "x_pushgw_console=no; pushgw_console=abc; y=1"])
        XCTAssertEqual(r.cookie("pushgw_console"), "abc")
        XCTAssertNil(r.cookie("pushgw"))
    }

    // MARK: Sessions and the gate

    private func session(_ role: ConsoleRole = .admin, sessions: inout ConsoleSessions, nowMs: Int64 = 1_000) -> ConsoleSession {
        var n = 0
        return sessions.open(role: role, name: "ann", nowMs: nowMs) {
            n += 1
            return "r\(n)-\(role.rawValue)"
        }
    }

    private func post(_ form: String, headers: HTTPHeaders = ["host": "127.0.0.1:9464", "origin": "http://127.0.0.1:9464"]) -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/console/dead/purge", headers: headers, body: Array(form.utf8))
    }

    func testAChangeNeedsTheSessionsCSRFTokenTheAdminRoleAndTheSameOrigin() {
        var sessions = ConsoleSessions()
        let admin = session(sessions: &sessions)
        let readOnly = session(.readOnly, sessions: &sessions)
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)&ids=a%2F1-0"), session: admin, changes: true), .allowed)
        XCTAssertEqual(ConsoleGate.check(post("ids=a%2F1-0"), session: admin, changes: true), .badCSRF, "no CSRF token")
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(readOnly.csrf)"), session: admin, changes: true), .badCSRF, "another session's token")
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(readOnly.csrf)"), session: readOnly, changes: true), .readOnly)
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(readOnly.csrf)"), session: readOnly, changes: false), .allowed, "read-only may sign out")
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)", headers: ["host": "127.0.0.1:9464", "origin": "http://evil.example"]),
                                         session: admin, changes: true), .crossOrigin)
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)", headers: ["host": "127.0.0.1:9464", "sec-fetch-site": "cross-site"]),
                                         session: admin, changes: true), .crossOrigin)
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)", headers: ["host": "h:1", "origin": "null", "sec-fetch-site": "same-origin"]),
                                         session: admin, changes: true), .crossOrigin, "Origin: null comes from a sandboxed or data: page")
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)", headers: ["host": "h:1", "origin": "http://h:1", "sec-fetch-site": "same-origin"]),
                                         session: admin, changes: true), .allowed, "the console's own form")
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)", headers: ["host": "h:1", "origin": "null", "sec-fetch-site": "cross-site"]),
                                         session: admin, changes: true), .crossOrigin)
        XCTAssertEqual(ConsoleGate.check(post("csrf=\(admin.csrf)"), session: nil, changes: true), .signInFirst)
        XCTAssertEqual(ConsoleGate.check(HTTPRequest(method: "GET", path: "/console/dead"), session: readOnly, changes: false), .allowed)
    }

    func testSessionsExpireWhenIdleOrOld() {
        var sessions = ConsoleSessions()
        let s = session(sessions: &sessions, nowMs: 0)
        XCTAssertNotNil(sessions.find(s.id, nowMs: ConsoleSessions.idleMs - 1))
        XCTAssertNil(sessions.find(s.id, nowMs: 2 * ConsoleSessions.idleMs), "idle past the limit")
        let t = session(sessions: &sessions, nowMs: 0)
        var now: Int64 = 0
        while now < ConsoleSessions.lifetimeMs - ConsoleSessions.idleMs / 2 {
            now += ConsoleSessions.idleMs / 2
            XCTAssertNotNil(sessions.find(t.id, nowMs: now))
        }
        XCTAssertNil(sessions.find(t.id, nowMs: ConsoleSessions.lifetimeMs), "past its lifetime, however busy")
        XCTAssertNil(sessions.find("guess", nowMs: 0))
    }

    func testEachRoleHasItsOwnSessionSlots() {
        var sessions = ConsoleSessions()
        var n = 0
        let random = { () -> String in n += 1; return "s\(n)" }
        let admin = sessions.open(role: .admin, name: "ann", nowMs: 0, random: random)
        for i in 1...300 { _ = sessions.open(role: .readOnly, name: "ro", nowMs: Int64(i), random: random) }
        XCTAssertNotNil(sessions.find(admin.id, nowMs: 400), "300 read-only sign-ins leave the admin signed in")
        XCTAssertEqual(sessions.count, 1 + ConsoleSessions.slots(for: .readOnly))
        let admins = (1...ConsoleSessions.slots(for: .admin)).map { sessions.open(role: .admin, name: "a\($0)", nowMs: 500, random: random) }
        XCTAssertNil(sessions.find(admin.id, nowMs: 501), "an admin's sign-in beyond the admin slots ends the oldest admin session")
        XCTAssertTrue(admins.allSatisfy { sessions.find($0.id, nowMs: 501) != nil })
    }

    func testTheCookieIsHttpOnlyStrictAndSecureOverTLS() {
        var sessions = ConsoleSessions()
        let s = session(sessions: &sessions)
        let plain = ConsoleSessions.cookie(s, secure: false)
        XCTAssertTrue(plain.contains("HttpOnly") && plain.contains("SameSite=Strict") && plain.contains("Max-Age=28800"), plain)
        XCTAssertFalse(plain.contains("Secure"), plain)
        XCTAssertTrue(ConsoleSessions.cookie(s, secure: true).hasSuffix("; Secure"))
    }

    // MARK: Outcome history

    func testTheHistoryCountsWindowsAndForgetsOldMinutes() {
        var h = OutcomeHistory()
        let t0: Int64 = 1_800_000_000_000
        h.record(app: "acme", outcome: "delivered_voip", cause: nil, latencyMs: 40, nowMs: t0)
        h.record(app: "acme", outcome: "delivered_alert", cause: "voip_rejected", latencyMs: 900, nowMs: t0 + 10 * 60_000)
        h.record(app: "acme", outcome: "dead_lettered", cause: nil, latencyMs: nil, nowMs: t0 + 12 * 60_000)
        let now = t0 + 13 * 60_000
        let w5 = h.window(app: "acme", minutes: 5, nowMs: now)
        XCTAssertEqual(w5.outcomes, ["delivered_alert": 1, "dead_lettered": 1])
        XCTAssertEqual(w5.causes, ["voip_rejected": 1])
        let w60 = h.window(app: "acme", minutes: 60, nowMs: now)
        XCTAssertEqual(w60.total, 3)
        XCTAssertEqual(w60.measured, 2)
        XCTAssertEqual(w60.p50Ms ?? 0, 45.25, accuracy: 0.5, "p50 is the bucket bound above 40 ms")
        XCTAssertGreaterThanOrEqual(w60.p99Ms ?? 0, 900)
        XCTAssertEqual(h.series(app: "acme", nowMs: now).count, 60)
        XCTAssertEqual(h.series(app: "acme", nowMs: now).last?.minutesAgo, 0)
        // An hour later the ring slots are reused: nothing of the old hour counts.
        h.record(app: "acme", outcome: "expired", cause: nil, latencyMs: nil, nowMs: t0 + 75 * 60_000)
        XCTAssertEqual(h.window(app: "acme", minutes: 60, nowMs: t0 + 75 * 60_000).outcomes, ["expired": 1])
        XCTAssertEqual(h.window(app: "other", minutes: 60, nowMs: now).total, 0)
    }

    func testTheHistoryKeepsXaddToRingingApartFromXaddToAnswer() {
        var h = OutcomeHistory()
        let t0: Int64 = 1_800_000_000_000
        h.record(app: "acme", outcome: "delivered_voip", cause: nil, latencyMs: 5, nowMs: t0)
        for ms: Int64 in [40, 40, 40, 900] { h.recordRing(app: "acme", latencyMs: ms, nowMs: t0) }
        let w = h.window(app: "acme", minutes: 5, nowMs: t0)
        XCTAssertEqual(w.measured, 1)
        XCTAssertEqual(w.rang, 4)
        XCTAssertEqual(w.ringP50Ms ?? 0, 45.25, accuracy: 0.5)
        XCTAssertGreaterThanOrEqual(w.ringP99Ms ?? 0, 900)
        XCTAssertLessThan(w.p99Ms ?? 100, 10, "the answers' figure is its own")
        XCTAssertNil(h.window(app: "beta", minutes: 5, nowMs: t0).ringP50Ms)
    }

    func testTheChartEscapesTheAppAndDrawsOneBarPerOutcome() {
        var h = OutcomeHistory()
        h.record(app: "a\"<b>", outcome: "delivered_voip", cause: nil, latencyMs: 30, nowMs: 60_000 * 100)
        let svg = OutcomeChart.svg(app: "a\"<b>", points: h.series(app: "a\"<b>", nowMs: 60_000 * 100)).rendered
        XCTAssertFalse(svg.contains("a\"<b>"), "the app id is escaped in the label")
        XCTAssertEqual(svg.components(separatedBy: "<rect ").count - 1, 1)
    }
}

/// The overview's warning about tokens of the other environment.
final class ConsoleOverviewTests: XCTestCase {
    private func page(_ app: ConsoleFigures.App, history: OutcomeHistory = OutcomeHistory(),
                      suspected: Result<(tokens: [String], more: Bool), ConsoleReadError>? = nil) -> String {
        let now: Int64 = 1_764_584_043_120
        let overview = ConsolePages.AppOverview(app: app, last5: history.window(app: app.id, minutes: 5, nowMs: now),
                                                last60: history.window(app: app.id, minutes: 60, nowMs: now),
                                                series: history.series(app: app.id, nowMs: now), dead: nil,
                                                retention: .default, suspected: suspected)
        return ConsolePages.overview(viewer: ConsolePages.Viewer(name: "ops", role: .admin, csrf: "x"),
                                     figures: ConsoleFigures(apps: [app]), apps: [overview], redisError: nil, nowMs: now).rendered
    }

    func testAnAppWithTokensOfTheOtherEnvironmentIsWarnedAbout() {
        let mixed = ConsoleFigures.App(id: "acme<b>", bundleID: "com.acme.phone", environment: "production",
                                       environmentMismatches: .init(count: 3, acceptedIn: "sandbox", lastAtMs: 1_764_584_040_000))
        let html = page(mixed)
        XCTAssertTrue(html.contains(#"<p class="warning environment-mismatch">3 tokens refused by APNs (BadDeviceToken) in production and delivered through sandbox"#),
                      html)
        XCTAssertTrue(html.contains("apps.acme&lt;b&gt;.environment"), "the app id is escaped")
        XCTAssertTrue(html.contains("2025-12-01T10:14:00"), "the last one's time")
        let clean = page(ConsoleFigures.App(id: "beta", bundleID: "com.beta", environment: "production"))
        XCTAssertFalse(clean.contains("environment-mismatch"), "no warning without mismatches")
    }

    func testAnAppWithRingReceiptsShowsXaddToRingingItsSuspectedTokensAndMissingReceipts() {
        var app = ConsoleFigures.App(id: "acme", bundleID: "com.acme.phone", environment: "production")
        app.ringReceipts = true
        var history = OutcomeHistory()
        history.recordRing(app: "acme", latencyMs: 40, nowMs: 1_764_584_043_120)
        let html = page(app, history: history, suspected: .success((["5ec0", "5ec100000000abcd"], true)))
        XCTAssertTrue(html.contains("XADD→ringing p50"), html)
        XCTAssertTrue(html.contains("XADD→ringing p99"), html)
        XCTAssertTrue(html.contains("≤ 45 ms"), "the ring's bucket bound: \(html)")
        XCTAssertTrue(html.contains("more than 2 VoIP tokens suspected of iOS&#39;s silent VoIP ban"), html)
        XCTAssertTrue(html.contains("<li><code>5ec0</code></li><li><code>…0000abcd</code></li>"), "shortened as elsewhere: \(html)")
        XCTAssertFalse(html.contains("receipts-missing"), "its receipts come")
        app.receiptsMissing = 4
        let missing = page(app, suspected: .success(([], false)))
        XCTAssertTrue(missing.contains(#"<p class="warning receipts-missing">Ring receipts missing: no device sent a receipt for the app&#39;s last 4 calls"#),
                      missing)
        XCTAssertFalse(missing.contains("voip-suspected"), "no token listed when none is suspected")
        let failed = page(app, suspected: .failure(ConsoleReadError("disconnected")))
        XCTAssertTrue(failed.contains("suspected VoIP tokens unavailable: disconnected"), failed)
        let off = page(ConsoleFigures.App(id: "beta", bundleID: "com.beta", environment: "production"))
        XCTAssertFalse(off.contains("XADD→ringing"), "receipts off: no ring rows")
    }
}
