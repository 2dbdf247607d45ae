import DeadLetters
import Foundation
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw apikey new APP`: a new random key each time, and its SHA-256 for the config.
final class ApiKeyCommandTests: XCTestCase {
    private func run(_ args: [String]) -> (Int32, CapturedOutput) {
        let console = CapturedOutput()
        return (pushgwMain(args, context: console.context()), console)
    }

    private func value(_ label: String, in lines: [String]) -> String? {
        lines.first { $0.hasPrefix(label + ":") }.map { String($0.dropFirst(label.count + 1)).trimmingCharacters(in: .whitespaces) }
    }

    func testANewKeyAndItsHash() throws {
        let (status, console) = run(["apikey", "new", "acme"])
        XCTAssertEqual(status, 0, console.err.joined(separator: "\n"))
        let key = try XCTUnwrap(value("key", in: console.out))
        let hash = try XCTUnwrap(value("sha256", in: console.out))
        XCTAssertTrue(key.hasPrefix("pgw_") && key.count == 68, key)
        XCTAssertEqual(hash, EventDigest.of(key), "the printed hash is the key's SHA-256")
        XCTAssertTrue(value("config", in: console.out)?.contains("\"acme\": { \"api_keys\": [\"\(hash)\"] }") == true, "\(console.out)")
        let (_, second) = run(["apikey", "new", "acme"])
        XCTAssertNotEqual(value("key", in: second.out), key, "a new key each time")
    }

    func testBadUsage() {
        for (args, mention) in [(["apikey"], "missing \"new APP\""), (["apikey", "old", "acme"], "unknown apikey command"),
                                (["apikey", "new"], "missing the app id"), (["apikey", "new", "a{b}"], "must be"),
                                (["apikey", "new", "a", "b"], "unexpected argument")] {
            let (status, console) = run(args)
            XCTAssertEqual(status, 2, "\(args)")
            XCTAssertTrue(console.err.joined().contains(mention), "\(args): \(console.err)")
            XCTAssertTrue(console.out.isEmpty, "no key printed for \(args)")
        }
    }
}
