import Foundation
import GatewayTestSupport
import Glibc
import TestSupport
import XCTest

/// Verbs run as the built `pushgw` binary (beside the test bundle), as a person runs them: the
/// exit status and output of bad usage, and a key file the running user cannot read.
final class CommandProcessTests: XCTestCase {
    var fixture: ConfigFixture!

    override func setUpWithError() throws {
        fixture = try ConfigFixture.make(removedAfter: self)
    }

    func testTheBuiltBinaryRejectsBadUsageWithStatusTwo() throws {
        let (status, out, err) = try runCommand(try builtPushgw(), ["push", "--bogus"])
        XCTAssertEqual(status, 2)
        XCTAssertEqual(out, "")
        XCTAssertEqual(err, "pushgw: unknown option --bogus (see pushgw push --help)\n")
    }

    func testUnreadableKeyFileIsAnError() throws {
        try fixture.chmod("secrets/AuthKey_KEY1234567.p8", 0o000)
        let config = try fixture.writeConfig(ConfigFixture.example)
        // Root reads a file whatever its mode, so as root the check runs as the unprivileged
        // user nobody (65534), to whom the fixture is handed: only the mode stands in its way.
        let pushgw = try builtPushgw()
        let check = ["config", "check", "--json", config]
        var (executable, arguments) = (pushgw, check)
        if getuid() == 0 {
            let (status, _, err) = try runCommand("chown", ["-R", "65534:65534", fixture.directory])
            XCTAssertEqual(status, 0, err)
            (executable, arguments) = ("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", pushgw] + check)
        }
        let (status, out, err) = try runCommand(executable, arguments)
        XCTAssertEqual(status, 1, "a config with an unreadable key is unusable: \(out) \(err)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], out)
        let problems = (report["problems"] as? [[String: String]] ?? []).filter { $0["path"] == "credentials.acme-key.key_file" }
        XCTAssertEqual(problems.count, 1, out)
        XCTAssertEqual(problems.first?["severity"], "error")
        XCTAssertTrue(problems.first?["problem"]?.contains("Permission denied") == true, out)
        XCTAssertTrue(problems.first?["fix"]?.contains("chmod 600") == true, out)
        XCTAssertEqual((report["problems"] as? [[String: String]])?.filter { $0["severity"] == "error" }.count, 1,
                       "the key file is the only problem: \(out)")
    }
}
