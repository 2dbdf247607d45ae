import Foundation
import TestSupport
import XCTest
@testable import GatewayRoles

/// docs/protocol.md shows excerpts of the runnable producers of `examples/producers/`, which
/// `ProducerExampleTests` runs: each excerpt must still be lines of its file, so the doc never
/// shows code that was not run.
final class ProtocolDocTests: XCTestCase {
    func testTheProducerExamplesAreExcerptsOfTheTestedFiles() throws {
        let doc = try String(contentsOfFile: packageRoot + "/docs/protocol.md", encoding: .utf8)
        let lines = doc.components(separatedBy: "\n")
        var checked: [String] = []
        for (i, line) in lines.enumerated() where line.hasPrefix("<!-- excerpt: ") {
            let path = line.dropFirst("<!-- excerpt: ".count).replacingOccurrences(of: " -->", with: "")
            let source = try String(contentsOfFile: packageRoot + "/" + path, encoding: .utf8)
            let sourceLines = Set(source.components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
            XCTAssertTrue(lines[i + 1].hasPrefix("```"), "a code block follows the excerpt marker of \(path)")
            var j = i + 2
            while j < lines.count, !lines[j].hasPrefix("```") {
                let code = lines[j].trimmingCharacters(in: .whitespaces)
                if !code.isEmpty {
                    XCTAssertTrue(sourceLines.contains(code), "docs/protocol.md shows a line that \(path) does not have: \(code)")
                }
                j += 1
            }
            checked.append(path)
        }
        XCTAssertEqual(checked.count, 6, "an excerpt per producer language: \(checked)")
        for path in checked {
            XCTAssertTrue(FileManager.default.fileExists(atPath: packageRoot + "/" + path), path)
            let readme = (path as NSString).deletingLastPathComponent + "/README.md"
            let text = (try? String(contentsOfFile: packageRoot + "/" + readme, encoding: .utf8)) ?? ""
            XCTAssertTrue(text.contains("examples/producers/"), "\(readme) has a run command")
        }
    }
}
