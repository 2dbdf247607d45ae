import Foundation

/// The tests of class `base` that a class in `variants` does not run again, read from the
/// source file `file` (relative to the package root) that declares them all. Linux's XCTest
/// runs only the `test…` methods a class declares itself, so a subclass that runs its base's
/// tests on another transport overrides each one (`override func testX() throws { try
/// super.testX() }`); this keeps the lists from drifting apart. Returns `"Variant.testX"`
/// for each one missing.
public func testsMissingFromVariants(of base: String, _ variants: [String], in file: String) throws -> [String] {
    let text = try String(contentsOfFile: packageRoot + "/" + file, encoding: .utf8)
    // Class bodies: from a top-level "class NAME" line to the next one.
    var bodies: [String: String] = [:]
    var current: String?
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        let words = line.split(separator: " ")
        if !line.hasPrefix(" "), let index = words.firstIndex(of: "class"), index + 1 < words.count {
            current = String(words[index + 1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        }
        if let current { bodies[current, default: ""] += line + "\n" }
    }
    func tests(_ body: String, overriding: Bool) -> Set<String> {
        var found = Set<String>()
        for line in body.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix(overriding ? "override func test" : "func test") else { continue }
            let name = trimmed.split(separator: " ")[overriding ? 2 : 1].prefix { $0 != "(" }
            found.insert(String(name))
        }
        return found
    }
    guard let baseBody = bodies[base] else { throw TestSupportError("no class \(base) in \(file)") }
    let expected = tests(baseBody, overriding: false)
    guard !expected.isEmpty else { throw TestSupportError("class \(base) in \(file) declares no tests") }
    var missing: [String] = []
    for variant in variants {
        guard let body = bodies[variant] else { throw TestSupportError("no class \(variant) in \(file)") }
        missing += expected.subtracting(tests(body, overriding: true)).sorted().map { "\(variant).\($0)" }
    }
    return missing
}
