import Foundation
import Glibc
import TestSupport
import XCTest
@testable import AdminEndpoint

/// Who gets into the operators' console, over real HTTP on loopback: the gateway's admin
/// endpoint with its console open (`AdminHarness(console: true)`), the tokens in files as
/// `pushgw run` reads them (docs/operations.md, "Console", "Signing in").
final class ConsoleAccessTests: XCTestCase {
    private var h: AdminHarness!
    private var directory: String!
    private let adminToken = "console-admin-\(UUID().uuidString)"
    private let readonlyToken = "console-readonly-\(UUID().uuidString)"

    override func setUpWithError() throws {
        directory = makeTemporaryDirectory("pushgw-console-access")
        for (name, token) in [("admin-token", adminToken), ("readonly-token", readonlyToken)] {
            try (token + "\n").write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
            chmod(directory + "/" + name, 0o600)
        }
        h = try AdminHarness(tokenFile: directory + "/admin-token", readonlyTokenFile: directory + "/readonly-token", console: true)
    }

    override func tearDown() {
        h?.close()
        h = nil
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
    }

    private func form(_ items: [(String, String)]) -> String {
        items.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&")
    }

    /// POSTs the sign-in form with `token`; the reply.
    private func signIn(_ token: String, headers extra: [String: String] = [:]) throws -> HTTPReply {
        var headers = ["Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.1:\(h.port)"]
        for (name, value) in extra { headers[name] = value }
        return try h.get("/console/signin", method: "POST", headers: headers, body: form([("token", token), ("name", "test")]))
    }

    /// The session cookie (`name=value`) a successful sign-in set.
    private func cookie(_ reply: HTTPReply, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        XCTAssertEqual(reply.status, 303, reply.raw, file: file, line: line)
        return try XCTUnwrap(reply.headers["set-cookie"]?.split(separator: ";").first.map(String.init), reply.raw, file: file, line: line)
    }

    func testReadOnlySignInsNeverEndTheAdminsSession() throws {
        let admin = try cookie(try signIn(adminToken))
        XCTAssertEqual(try h.get("/console/overview", headers: ["Cookie": admin]).status, 200)
        for _ in 0..<256 { _ = try cookie(try signIn(readonlyToken)) }
        let after = try h.get("/console/overview", headers: ["Cookie": admin])
        XCTAssertEqual(after.status, 200, "256 read-only sign-ins left the admin signed in: \(after.raw.prefix(200))")
    }

    /// The sign-in is rate-limited per address (docs/operations.md, "Limits"): before, with 16
    /// wrong tries held open, guesses ran at 511/s and the right token still answered at once.
    func testAThousandWrongSignInsFromOneAddressAreMostlyRefusedUnchecked() throws {
        let started = Date()
        let origin = "http://127.0.0.1:\(h.port)"
        let replies = try h.whileTurning("1,000 wrong sign-ins") { port -> [(Int, Int?)] in
            (0..<1_000).map { i in
                let reply = try? LoopbackHTTP.blockingRequest("/console/signin", method: "POST", port: port,
                                                              headers: ["Content-Type": "application/x-www-form-urlencoded", "Origin": origin],
                                                              body: "token=guess-\(i)-0123456789abcdef0123456789abcdef&name=x")
                return (reply?.status ?? 0, reply?.headers["retry-after"].flatMap { Int($0) })
            }
        }
        let seconds = Date().timeIntervalSince(started)
        let checked = replies.filter { $0.0 == 401 }.count
        let refused = replies.filter { $0.0 == 429 }
        XCTAssertEqual(checked + refused.count, 1_000, "every try is answered 401 or 429: \(Set(replies.map(\.0)))")
        XCTAssertGreaterThanOrEqual(checked, 4, "three free guesses, then one")
        XCTAssertLessThanOrEqual(checked, 8, "a handful checked in \(String(format: "%.1f", seconds)) s, not 1,000")
        XCTAssertTrue(refused.allSatisfy { ($0.1 ?? 0) >= 1 }, "each 429 says when to try again")
        // Each wait is the Retry-After of the first 429 after a checked guess: they double.
        var waits: [Int] = []
        for (previous, reply) in zip(replies, replies.dropFirst()) where previous.0 == 401 && reply.0 == 429 { waits.append(reply.1 ?? 0) }
        XCTAssertEqual(waits.first, 1, "\(waits)")
        XCTAssertEqual(waits, waits.enumerated().map { 1 << $0.offset }, "each wrong token doubles the wait: \(waits)")
        print("sign-in flood: 1,000 wrong tokens from one address in \(String(format: "%.1f", seconds)) s: \(checked) checked (401), "
              + "\(refused.count) refused unchecked (429), waits \(waits) s")

        // While it waits, this address's right token is not checked either (a wait that let it
        // through would be an oracle), and the bearer API shares the count. The flood may have
        // outlasted its last wait (1,000 tries took 1.0 s on a quiet machine): wrong tokens
        // until one is checked start a fresh wait, twice the last, inside which the right one comes.
        var fresh = try signIn("fresh-wrong-0123456789abcdef0123456789abcdef")
        while fresh.status == 429 {
            usleep(50_000)
            fresh = try signIn("fresh-wrong-0123456789abcdef0123456789abcdef")
        }
        XCTAssertEqual(fresh.status, 401, fresh.raw)
        let during = try signIn(adminToken)
        XCTAssertEqual(during.status, 429, "the right token inside a wait is not checked: \(during.raw.prefix(200))")
        XCTAssertEqual(try h.get("/status", headers: ["Authorization": "Bearer " + adminToken]).status, 429)
        // Another address is not held up.
        let other = try h.get("/console/signin", method: "POST", headers: ["Content-Type": "application/x-www-form-urlencoded",
                                                                            "Origin": origin],
                              body: form([("token", adminToken)]), from: "127.0.0.2")
        XCTAssertEqual(other.status, 303, "another client signs in: \(other.raw.prefix(200))")

        // After the wait, one more wrong token is checked, and the next wait is twice the last.
        let last = try XCTUnwrap(during.headers["retry-after"].flatMap { Int($0) }, during.raw)
        XCTAssertEqual(last, (waits.last ?? 1) * 2, "the fresh wait is twice the flood's last")
        h.router.runFor(Int64(last) * 1_000 + 100)
        XCTAssertEqual(try signIn("still-wrong-0123456789abcdef0123456789abcdef").status, 401)
        XCTAssertEqual(try signIn("still-wrong-0123456789abcdef0123456789abcdef").headers["retry-after"], String(last * 2))

        let bursts = h.logLines.all.filter { $0.contains("wrong admin tokens from one address") }
        XCTAssertEqual(bursts.count, 1, "one line for the burst: \(bursts)")
        XCTAssertTrue(bursts.first?.contains(#""client":"127.0.0.1""#) == true && bursts.first?.contains(#""via":"console sign-in""#) == true,
                      bursts.first ?? "")
        XCTAssertLessThanOrEqual(h.logLines.all.count, 40, "the 1,000 tries did not write 1,000 lines")
        XCTAssertFalse(h.logLines.all.contains { $0.contains(adminToken) || $0.contains("guess-") }, "no token is logged")
    }

    /// Login CSRF: a page of another site posts the sign-in form with the attacker's token,
    /// so that the victim works in the attacker's session. Before, `Origin: null` (a sandboxed
    /// frame, a `data:` page) was let through.
    func testASignInFromOriginNullIsRefused() throws {
        let refused = try signIn(adminToken, headers: ["Origin": "null"])
        XCTAssertEqual(refused.status, 403, refused.raw)
        XCTAssertNil(refused.headers["set-cookie"], "no session")
        XCTAssertEqual(try signIn(adminToken, headers: ["Origin": "http://evil.example"]).status, 403)
        XCTAssertEqual(try cookie(try signIn(adminToken)).isEmpty, false, "the console's own form, with its origin, signs in")
        let page = try h.get("/console/signin")
        XCTAssertEqual(page.headers["referrer-policy"], "same-origin", "so that the browser sends that origin")
    }
}
