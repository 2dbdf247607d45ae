import Foundation
import TestSupport
import XCTest

/// What ships for deployment, checked without a container engine or a systemd host
/// (`scripts/check-deploy.sh` does each check; docker/README.md and deploy/README.md say what
/// they cover). `make test` builds the image's binary with the image's own build step first.
final class DeploymentTests: XCTestCase {
    private let imageBinary = packageRoot + "/.build/image/pushgw"

    private func check(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let (status, out, err) = try runCommand(packageRoot + "/scripts/check-deploy.sh", arguments)
        if status == 77 { throw XCTSkip(err) }
        XCTAssertEqual(status, 0, "scripts/check-deploy.sh \(arguments.joined(separator: " ")): \(err)\(out)",
                       file: file, line: line)
    }

    func testTheImagesBuildStepMakesABinaryThatNeedsOnlyTheRuntimePackages() throws {
        try check(["image", imageBinary])
    }

    func testTheComposeFilesParseAndMountAConfigThatExists() throws {
        try check(["compose"])
    }

    func testTheImagesUserReadsSecretsSetUpTheDocumentedWay() throws {
        try check(["secrets", imageBinary])
    }

    func testTheSystemdUnitVerifiesAndKeepsItsHardening() throws {
        try check(["systemd"])
    }

    func testTheAlertRulesLoadAndPassTheirUnitTests() throws {
        try check(["prometheus"])
    }

    func testTheBuildContextLeavesOutGitBuildOutputAndSecrets() throws {
        try check(["dockerignore"])
    }
}
