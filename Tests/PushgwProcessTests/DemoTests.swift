import Foundation
import TestSupport
import XCTest

/// `pushgw demo` (which runs `make demo`'s script with this build's binary): the outcomes it
/// prints must be the ones the README shows (so the README never drifts from the demo).
final class DemoTests: XCTestCase {
    func testDemoPrintsTheOutcomesTheReadmeShows() throws {
        // The demo's work directory goes in the tests' scratch space (removed even if this
        // process is killed halfway).
        let (status, out, err) = try runCommand(try builtPushgw(), ["demo"], environment: ["TMPDIR": TestScratch.root])
        XCTAssertEqual(status, 0, "the demo ran: \(err.suffix(2000))")
        func outcomes(_ text: String) -> [String] {
            text.split(separator: "\n").filter { $0.hasPrefix("  call-") }.map { line in
                line.split(separator: " ", omittingEmptySubsequences: true).filter { !$0.contains(":") || $0.hasPrefix("[") }
                    .joined(separator: " ")
            }
        }
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        let shown = outcomes(readme)
        XCTAssertEqual(shown.count, 7, "the README shows seven calls")
        XCTAssertEqual(outcomes(out), shown, "the demo's outcomes match the README:\n\(out)")
        XCTAssertTrue(out.contains("invalid_event: voip_token: not a hex string"), "the dead-letter list is printed")
    }
}
