import Foundation
import HTTPMessages
import XCTest
@testable import OperatorsConsole

/// An app's Pause and Resume buttons on the overview (docs/operations.md, "Pausing an app"):
/// an admin pauses an app (with a reason) and resumes it, through the console's HTTP, each with
/// the audit record `pushgw apps pause` / `resume` writes, and the card says who paused it, when
/// and why, escaped; a read-only session sees no button and its POST is refused, as is one
/// without the CSRF token. In process, over a real redis-server.
final class ConsolePauseTests: ConsoleTestCase {
    static let hostile = "<script>alert(1)</script>\"'&"

    override func setUpWithError() throws {
        let apps = ["acme", "beta"].map { ConsoleFigures.App(id: $0, bundleID: "com.example.\($0)", environment: "production") }
        try startConsole(policies: ["acme": .default, "beta": .default], readOnlyAvailable: true,
                         figures: { ConsoleFigures(apps: apps, redisReachable: true) })
    }

    /// The card of `app` on the overview.
    private func card(_ page: String, _ app: String) -> String {
        guard let start = page.range(of: "data-app=\"\(app)\"") else { return "" }
        return page[start.upperBound...].components(separatedBy: "</section>").first ?? ""
    }

    /// The newest audit record's fields.
    private func lastAudit() throws -> [String: String] {
        let audit = try XCTUnwrap(redis(["XREVRANGE", "pushgw:audit", "+", "-", "COUNT", "1"])?.array?.first?.array?.last?.array)
        return Dictionary(uniqueKeysWithValues: stride(from: 0, to: audit.count - 1, by: 2).compactMap { i in
            audit[i].string.flatMap { k in audit[i + 1].string.map { (k, $0) } }
        })
    }

    func testAnAdminPausesAndResumesAnAppWithAuditRecordsAndTheCardSaysWhy() throws {
        var page = body(request("GET", "/console/overview"))
        XCTAssertTrue(card(page, "acme").contains(#"action="/console/apps/pause""#), "a running app has a Pause button")
        XCTAssertFalse(card(page, "acme").contains("/console/apps/resume"))

        let pause = request("POST", "/console/apps/pause", form: [("csrf", csrf), ("app", "acme"), ("reason", ConsolePauseTests.hostile)])
        XCTAssertEqual(pause.status, 200, body(pause))
        XCTAssertTrue(body(pause).contains("Paused acme"), body(pause))
        XCTAssertEqual(redis(["HGET", "pushgw:{acme}:paused", "user"])?.string, "ann")
        XCTAssertEqual(redis(["HGET", "pushgw:{acme}:paused", "reason"])?.string, ConsolePauseTests.hostile)
        XCTAssertEqual(redis(["EXISTS", "pushgw:{beta}:paused"])?.integer, 0, "another app is not paused")
        var audit = try lastAudit()
        XCTAssertEqual(audit["verb"], "apps pause")
        XCTAssertEqual(audit["user"], "ann")
        XCTAssertEqual(audit["ids"], #"["acme"]"#)
        XCTAssertEqual(audit["done"], "1")
        XCTAssertTrue(audit["options"]?.contains(#""via":"console""#) ?? false, "\(audit)")

        page = body(request("GET", "/console/overview"))
        let acme = card(page, "acme")
        XCTAssertTrue(acme.contains(#"<span class="pill bad paused">paused</span>"#), acme)
        XCTAssertTrue(acme.contains("Paused since ") && acme.contains(" by ann: "), acme)
        XCTAssertTrue(acme.contains(#"action="/console/apps/resume""#), "a paused app has a Resume button")
        XCTAssertFalse(acme.contains(#"action="/console/apps/pause""#))
        XCTAssertFalse(page.contains("<script>alert"), "the reason is escaped")
        XCTAssertTrue(acme.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), acme)
        XCTAssertTrue(card(page, "beta").contains(#"action="/console/apps/pause""#), "beta still runs")

        let again = request("POST", "/console/apps/pause", form: [("csrf", csrf), ("app", "acme")])
        XCTAssertTrue(body(again).contains("acme was paused already by ann"), body(again))
        XCTAssertEqual(try lastAudit()["done"], "0", "audited, changing nothing")

        let resume = request("POST", "/console/apps/resume", form: [("csrf", csrf), ("app", "acme")])
        XCTAssertEqual(resume.status, 200)
        XCTAssertTrue(body(resume).contains("Resumed acme"), body(resume))
        XCTAssertEqual(redis(["EXISTS", "pushgw:{acme}:paused"])?.integer, 0)
        audit = try lastAudit()
        XCTAssertEqual(audit["verb"], "apps resume")
        XCTAssertEqual(audit["done"], "1")
        XCTAssertTrue(card(body(request("GET", "/console/overview")), "acme").contains(#"action="/console/apps/pause""#))
    }

    func testAReadOnlySessionSeesNoButtonAndItsPostIsRefused() throws {
        _ = redis(["HSET", "pushgw:{beta}:paused", "since_ms", "1764584043120", "user", "ann", "reason", "maintenance"])
        let signIn = request("POST", "/console/signin", form: [("token", "readonly-token"), ("name", "rita")])
        XCTAssertEqual(signIn.status, 303)
        cookie = try XCTUnwrap(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let page = body(request("GET", "/console/overview"))
        XCTAssertFalse(page.contains("/console/apps/pause") || page.contains("/console/apps/resume"), "no button for a read-only session")
        XCTAssertTrue(card(page, "beta").contains("Paused since 2025-12-01T10:14:03.120Z by ann: maintenance"), "but it sees the pause")
        let readOnlyCSRF = try XCTUnwrap(match(#"name="csrf" value="([0-9a-f]+)""#, page).first)
        let pause = request("POST", "/console/apps/pause", form: [("csrf", readOnlyCSRF), ("app", "acme")])
        XCTAssertEqual(pause.status, 403)
        let resume = request("POST", "/console/apps/resume", form: [("csrf", readOnlyCSRF), ("app", "beta")])
        XCTAssertEqual(resume.status, 403)
        XCTAssertEqual(redis(["EXISTS", "pushgw:{acme}:paused"])?.integer, 0, "nothing paused")
        XCTAssertEqual(redis(["EXISTS", "pushgw:{beta}:paused"])?.integer, 1, "nothing resumed")
        XCTAssertEqual(redis(["EXISTS", "pushgw:audit"])?.integer, 0, "nothing audited")
    }

    func testAPauseWithoutItsCSRFTokenOrOfAnUnknownAppChangesNothing() {
        XCTAssertEqual(request("POST", "/console/apps/pause", form: [("app", "acme")]).status, 403)
        XCTAssertEqual(request("POST", "/console/apps/pause", form: [("csrf", (csrf.hasPrefix("0") ? "1" : "0") + csrf.dropFirst()), ("app", "acme")]).status, 403)
        XCTAssertEqual(request("POST", "/console/apps/pause", form: [("csrf", csrf), ("app", "nope")]).status, 400)
        XCTAssertEqual(request("POST", "/console/apps/pause",
                               form: [("csrf", csrf), ("app", "acme"), ("reason", String(repeating: "x", count: 201))]).status, 400)
        XCTAssertEqual(redis(["EXISTS", "pushgw:{acme}:paused"])?.integer, 0)
        XCTAssertEqual(redis(["EXISTS", "pushgw:audit"])?.integer, 0)
    }
}
