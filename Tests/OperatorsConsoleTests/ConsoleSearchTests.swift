import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient
import TestSupport
import XCTest
@testable import OperatorsConsole

/// The search box of every page (`GET /console/search?q=…`, docs/operations.md) against a real
/// redis-server holding what the router writes (a result key, a dead letter, known-invalid
/// marks, feedback entries): a call id shows the call as `pushgw calls show` reads it, a token
/// the token as `pushgw tokens show` reads it (both through `CallLookup`), anything else a
/// not-found page. The browser test searches a live gateway's calls.
final class ConsoleSearchTests: ConsoleTestCase {
    let keys = AppKeys(prefix: "pushgw", app: "acme")
    static let voip = "5a0d" + String(repeating: "0", count: 52) + "aaaa1111"
    static let alert = "a1e7" + String(repeating: "0", count: 52) + "bbbb2222"

    override func setUpWithError() throws {
        try startConsole(policies: ["acme": .default, "beta": .default], readOnlyAvailable: true)
    }

    private func json(_ object: Any) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    /// A delivered_alert result of call `id` as the router records it: the VoIP push refused
    /// (410 Unregistered), the alert accepted.
    private func recordResult(_ id: String, nowMs: Int64) {
        let result = json(["outcome": "delivered_alert", "cause": "voip_token_invalid", "channel": "alert", "apns_id": "A1B2-C3D4",
                           "entry": "\(nowMs - 900)-0", "latency_ms": 37, "id": id,
                           "attempts": [["t": nowMs - 880, "channel": "voip", "status": 410, "reason": "Unregistered", "apns_id": "V-1"],
                                        ["t": nowMs - 870, "channel": "alert", "status": 200, "apns_id": "A1B2-C3D4"]]])
        XCTAssertNotNil(redis(["SET", keys.result(id), result, "EX", "86400"]))
    }

    /// A dead letter of call `id` whose event names both tokens.
    private func deadLetter(_ id: String, nowMs: Int64) -> String {
        let event = json(["v": 1, "id": id, "type": "incoming_call", "voip_token": Self.voip, "alert_token": Self.alert])
        let attempts = json(["outcome": "dead_lettered", "entry": "\(nowMs)-0",
                             "attempts": [["t": nowMs + 3, "channel": "voip", "status": 403, "reason": "InvalidProviderToken"]]])
        return redis(["XADD", keys.dead, "*", "event", event, "reason", "apns_credentials: InvalidProviderToken", "attempts", attempts,
                      "first_failure_ms", String(nowMs + 3), "last_failure_ms", String(nowMs + 3), "replays", "0", "app", "acme"])?.string ?? ""
    }

    /// APNs declared the VoIP token unregistered: its mark and its feedback entry.
    private func markVoipTokenInvalid(sinceMs: Int64) {
        XCTAssertNotNil(redis(["SET", keys.invalidPrefix(.voip) + Self.voip, String(sinceMs), "PX", "2592000000"]))
        XCTAssertNotNil(redis(["XADD", keys.feedback, "*", "token", Self.voip, "channel", "voip", "reason", "Unregistered",
                               "timestamp", String(sinceMs)]))
    }

    func testACallIdShowsItsResultEveryAttemptAndItsDeadLetterWithItsTokensState() throws {
        let now = Clock.unixMs()
        recordResult("call-1", nowMs: now)
        let dead = deadLetter("call-2", nowMs: now)
        markVoipTokenInvalid(sinceMs: now - 60_000)

        let delivered = request("GET", "/console/search", query: [("q", " call-1 ")])
        XCTAssertEqual(delivered.status, 200, body(delivered))
        let page = body(delivered)
        XCTAssertTrue(page.contains(#"<section class="card call" data-app="acme">"#), "the call is found in its app: \(page)")
        XCTAssertTrue(page.contains("delivered_alert (cause voip_token_invalid), by alert apns-id A1B2-C3D4"),
                      "the result in the words of pushgw calls show")
        XCTAssertTrue(page.contains("37 ms from the XADD to APNs"), "the latency")
        let attempts = match(#"<tr class="attempt (\w+)">"#, page)
        XCTAssertEqual(attempts, ["failed", "ok"], "every attempt, in order")
        XCTAssertTrue(page.contains(#"<td class="status">410</td><td class="reason">Unregistered</td>"#), "the refusal's status and reason")
        XCTAssertTrue(page.contains(#"id="call-no-dead-letter""#), "no dead letter")
        XCTAssertFalse(page.contains(#"data-app="beta""#), "not found in the other app")

        let deadLettered = body(request("GET", "/console/search", query: [("q", "acme/call-2")]))
        XCTAssertTrue(deadLettered.contains(#"id="call-state">dead lettered<"#), deadLettered)
        XCTAssertTrue(deadLettered.contains(#"<a href="/console/dead/acme/\#(dead)">acme/\#(dead)</a>"#), "its dead letter, linked")
        XCTAssertTrue(deadLettered.contains("apns_credentials: InvalidProviderToken"), "why it died")
        let tokens = match(#"<tr class="token (\w+)">"#, deadLettered)
        XCTAssertEqual(tokens, ["invalid", "valid"], "the event's VoIP token is known invalid, its alert token not")
        XCTAssertTrue(deadLettered.contains("known invalid since ") && deadLettered.contains("not known to be invalid"), deadLettered)
        XCTAssertTrue(deadLettered.contains("dead letter \(dead)"), "where each token was learnt")
        XCTAssertTrue(deadLettered.contains(#"href="/console/search?q=\#(Self.voip)""#), "each token links to its own search")
    }

    func testATokenShowsSinceWhenAndWhyCallsSkipItAndAPNsAnswers() {
        let now = Clock.unixMs()
        markVoipTokenInvalid(sinceMs: now - 60_000)
        let found = request("GET", "/console/search", query: [("q", Self.voip.uppercased())])
        XCTAssertEqual(found.status, 200, body(found))
        let page = body(found)
        XCTAssertTrue(page.contains(#"<h1>Device token</h1>"#), page)
        XCTAssertEqual(match(#"<section class="card token" data-app="(\w+)">"#, page), ["acme", "beta"], "every app's state, as tokens show")
        XCTAssertTrue(page.contains(#"<td class="mark invalid" data-channel="voip">known invalid since "#), page)
        XCTAssertTrue(page.contains("(Unregistered); calls skip it unless registered again after that; mark lapses in "), page)
        XCTAssertTrue(page.contains(#"<td class="mark valid" data-channel="alert">not known to be invalid"#), page)
        XCTAssertTrue(page.contains(#"<table class="list feedback">"#) && page.contains(#"<td class="reason">Unregistered</td>"#),
                      "APNs' answers about it")
        XCTAssertFalse(page.contains(#"class="card call""#), "no call has the token's text as id")
    }

    func testAnUnknownIdIsAClearNotFoundPageAndAnEmptyOneExplainsTheBox() {
        let unknown = request("GET", "/console/search", query: [("q", "never-seen")])
        XCTAssertEqual(unknown.status, 404)
        let page = body(unknown)
        XCTAssertTrue(page.contains(#"<h1>Nothing found</h1>"#), page)
        XCTAssertTrue(page.contains("No call &quot;never-seen&quot; in apps acme, beta: no result (results are kept 24 h), no dead letter"),
                      page)
        XCTAssertTrue(page.contains("Not a device token either"), page)
        XCTAssertTrue(page.contains(#"id="search" value="never-seen""#), "the box keeps what was searched")

        let hex = body(request("GET", "/console/search", query: [("q", "00ff00ff")]))
        XCTAssertTrue(hex.contains("As a device token: not known to be invalid"), "an unknown token is said to be pushed to: \(hex)")
        let oneApp = body(request("GET", "/console/search", query: [("q", "beta/never-seen")]))
        XCTAssertTrue(oneApp.contains("No call &quot;never-seen&quot; in app beta:"), oneApp)

        let empty = request("GET", "/console/search", query: [("q", "  ")])
        XCTAssertEqual(empty.status, 200)
        XCTAssertTrue(body(empty).contains(#"id="search-help""#), body(empty))
        let long = request("GET", "/console/search", query: [("q", String(repeating: "x", count: ConsoleSearch.maxCharacters + 1))])
        XCTAssertEqual(long.status, 400, "longer than any id: refused before any read")
    }

    func testEveryPageHasTheBoxAndAReadOnlySessionCanSearch() throws {
        for path in ["/console/overview", "/console/dead", "/console/audit", "/console/webhooks", "/console/search"] {
            let page = body(request("GET", path))
            XCTAssertTrue(page.contains(#"<form class="search" method="get" action="/console/search" role="search">"#),
                          "\(path) has the search box")
            XCTAssertFalse(page.contains("\\u000a"), "\(path): the page's own line feeds are not text shown as \\u000a")
        }
        recordResult("call-1", nowMs: Clock.unixMs())
        cookie = ""
        let signIn = request("POST", "/console/signin", form: [("token", "readonly-token"), ("name", "auditor")])
        XCTAssertEqual(signIn.status, 303)
        cookie = try XCTUnwrap(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        let found = request("GET", "/console/search", query: [("q", "call-1")])
        XCTAssertEqual(found.status, 200, "a read-only session searches: \(body(found))")
        XCTAssertTrue(body(found).contains("delivered_alert (cause voip_token_invalid)"))
        XCTAssertTrue(body(found).contains("role-readonly"))
        cookie = ""
        XCTAssertEqual(request("GET", "/console/search", query: [("q", "call-1")]).status, 303, "no session: the sign-in page first")
    }
}
