import Foundation
import TestSupport
import XCTest

/// scripts/build-version.sh, which the BuildVersion plugin runs before every build: where the
/// commit comes from when the tree has git, when it has none (a container's build context, a
/// tarball), and that an unchanged value leaves the generated file alone (nothing rebuilds).
final class BuildVersionScriptTests: XCTestCase {
    private let script = packageRoot + "/scripts/build-version.sh"

    private func generate(_ root: String, environment: [String: String] = [:]) throws -> (version: String, commit: String, file: String) {
        let out = root + "/out"
        // git looks no higher than the directory itself (a TMPDIR inside a checkout stays out).
        var env = ["PATH": "/usr/bin:/bin", "GIT_CEILING_DIRECTORIES": (root as NSString).deletingLastPathComponent]
        env.merge(environment) { $1 }
        let (status, _, err) = try runCommand("/bin/sh", [script, root, out], environment: env)
        XCTAssertEqual(status, 0, err)
        let file = out + "/BuildVersionValues.swift"
        let text = try String(contentsOfFile: file, encoding: .utf8)
        func value(_ name: String) -> String {
            text.split(separator: "\n").first { $0.hasPrefix("let \(name) = ") }
                .map { String($0.split(separator: "\"")[1]) } ?? "<none>"
        }
        return (value("builtVersion"), value("builtCommit"), file)
    }

    func testWithoutGitTheCommitComesFromTheBuildOrFromGitArchive() throws {
        let root = makeTemporaryDirectory("pushgw-build-version")
        defer { try? FileManager.default.removeItem(atPath: root) }
        try "2.3.4\n".write(toFile: root + "/VERSION", atomically: true, encoding: .utf8)
        try "$Format:%H$\n".write(toFile: root + "/BUILD-COMMIT", atomically: true, encoding: .utf8)
        var got = try generate(root)
        XCTAssertEqual(got.version, "2.3.4")
        XCTAssertEqual(got.commit, "unknown", "no git, no archive, nothing given")
        got = try generate(root, environment: ["PUSHGW_BUILD_COMMIT": "0123456789ab"])
        XCTAssertEqual(got.commit, "0123456789ab", "the build's environment names it")
        got = try generate(root, environment: ["PUSHGW_BUILD_COMMIT": "evil\"; exit(1) //"])
        XCTAssertEqual(got.commit, "evilexit1", "only name characters reach the Swift file")
        try "fedcba9876543210fedcba9876543210fedcba98\n".write(toFile: root + "/BUILD-COMMIT", atomically: true, encoding: .utf8)
        got = try generate(root)
        XCTAssertEqual(got.commit, "fedcba987654", "git archive's substitution, shortened")

        let before = try FileManager.default.attributesOfItem(atPath: got.file)[.modificationDate] as? Date
        usleep(20_000)
        _ = try generate(root)
        let after = try FileManager.default.attributesOfItem(atPath: got.file)[.modificationDate] as? Date
        XCTAssertEqual(before, after, "the same values leave the file as it was, so nothing is rebuilt")
    }

    func testAGitArchiveOfThisRepositoryKnowsItsCommit() throws {
        let (headStatus, head, _) = try runCommand("/usr/bin/git", ["-C", packageRoot, "rev-parse", "HEAD"])
        guard headStatus == 0 else { throw XCTSkip("not a git checkout") }
        let (attrStatus, attr, _) = try runCommand("/usr/bin/git", ["-C", packageRoot, "check-attr", "export-subst", "BUILD-COMMIT"])
        guard attrStatus == 0, attr.contains("set"), try runCommand("/usr/bin/git", ["-C", packageRoot, "cat-file", "-e",
                                                                                   "HEAD:.gitattributes"]).0 == 0 else {
            throw XCTSkip("HEAD predates .gitattributes")
        }
        let root = makeTemporaryDirectory("pushgw-archive")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (status, _, err) = try runCommand("/bin/sh", ["-c", "git -C '\(packageRoot)' archive HEAD VERSION BUILD-COMMIT | tar -x -C '\(root)'"])
        XCTAssertEqual(status, 0, err)
        let got = try generate(root)
        XCTAssertEqual(got.commit, String(head.trimmingCharacters(in: .whitespacesAndNewlines).prefix(12)))
    }
}
