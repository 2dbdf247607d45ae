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
}
