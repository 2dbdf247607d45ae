import Foundation
import Glibc
import TestSupport
import XCTest

/// The release as a person without a Swift toolchain installs it (deploy/README.md, "From the
/// release"): `make test` packages the static binary with `scripts/make-dist.sh` and makes a
/// clean Debian root holding only the runtime packages (`scripts/make-clean-root.sh`); here the
/// `.deb` is installed into that root with `dpkg -i`, and the installed binary, run in the root
/// (`chroot`), delivers a call through the simulator. `make test` sets
/// `PUSHGW_DIST_REQUIRED=1`, so a missing package or root fails there; run alone without them,
/// the test is skipped saying how to make them.
final class DistInstallTests: XCTestCase {
    func testTheDebInstallsIntoACleanDebianRootAndItsBinaryDeliversACall() throws {
        let dist = packageRoot + "/.build/dist"
        let root = packageRoot + "/.build/clean-root"
        let debs = ((try? FileManager.default.contentsOfDirectory(atPath: dist)) ?? []).filter { $0.hasSuffix(".deb") }.sorted()
        let required = ProcessInfo.processInfo.environment["PUSHGW_DIST_REQUIRED"] == "1"
        guard let deb = debs.last, FileManager.default.fileExists(atPath: root + "/usr/bin/dpkg"), getuid() == 0 else {
            let why = "needs root (chroot), .build/dist/*.deb (scripts/make-dist.sh) and .build/clean-root (scripts/make-clean-root.sh)"
            if required { XCTFail("make test made no package or clean root: " + why); return }
            throw XCTSkip(why)
        }
        try FileManager.default.createDirectory(atPath: root + "/tmp", withIntermediateDirectories: true)
        _ = try? FileManager.default.removeItem(atPath: root + "/tmp/pushgw.deb")
        try FileManager.default.copyItem(atPath: dist + "/" + deb, toPath: root + "/tmp/pushgw.deb")
        // A running Debian has /proc (Swift reads its arguments from /proc/self/cmdline).
        try FileManager.default.createDirectory(atPath: root + "/proc", withIntermediateDirectories: true)
        let mounted = try runCommand("/bin/mount", ["-t", "proc", "proc", root + "/proc"])
        XCTAssertEqual(mounted.0, 0, "mount /proc in the root: \(mounted.2)")
        defer { _ = try? runCommand("/bin/umount", ["-l", root + "/proc"]) }
        let installed = try runCommand("/usr/sbin/chroot", [root, "dpkg", "-i", "/tmp/pushgw.deb"])
        XCTAssertEqual(installed.0, 0, "dpkg -i in the clean root: \(installed.1)\(installed.2)")

        let ldd = try runCommand("/usr/sbin/chroot", [root, "ldd", "/usr/bin/pushgw"])
        XCTAssertEqual(ldd.0, 0, ldd.2)
        XCTAssertFalse(ldd.1.contains("not found"), "every library it links is in the root: \(ldd.1)")
        for toolchain in ["libswift", "libFoundation", "libdispatch", "libBlocksRuntime", "lib_Foundation"] {
            XCTAssertFalse(ldd.1.contains(toolchain), "no Swift toolchain library (\(toolchain)): \(ldd.1)")
        }
        let version = try runCommand("/usr/sbin/chroot", [root, "/usr/bin/pushgw", "--version"])
        XCTAssertEqual(version.0, 0, version.2)
        let expected = try String(contentsOfFile: packageRoot + "/VERSION", encoding: .utf8).split(separator: "\n").first.map(String.init) ?? "?"
        XCTAssertTrue(version.1.contains(expected), "the installed binary is this version (\(expected)): \(version.1)")
        XCTAssertEqual(try runCommand("/usr/sbin/chroot", [root, "getent", "passwd", "pushgw"]).0, 0, "the package made its system user")
        let unit = try String(contentsOfFile: root + "/lib/systemd/system/pushgw.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("ExecStart=/usr/bin/pushgw run --config /etc/pushgw/pushgw.json"), unit)
        XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/etc/pushgw/pushgw.json"), "the example config is installed")
        var secrets = stat()
        XCTAssertEqual(stat(root + "/etc/pushgw/secrets", &secrets), 0)
        XCTAssertEqual(secrets.st_mode & 0o777, 0o700, "the secrets directory is the service's alone")

        // The installed binary routes a call: its config and the test PKI copied into the root
        // at the same paths; Redis and the simulator listen on loopback, shared with the root.
        let world = try ProcessWorld()
        defer { world.stop() }
        let pki = try TestPKI.shared()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()])
        for directory in Set([world.directory, (pki.caCert as NSString).deletingLastPathComponent,
                              (pki.jwtKey as NSString).deletingLastPathComponent]) {
            try FileManager.default.createDirectory(atPath: root + directory, withIntermediateDirectories: true)
            let copy = try runCommand("/bin/cp", ["-a", directory + "/.", root + directory])
            XCTAssertEqual(copy.0, 0, copy.2)
        }
        let log = world.directory + "/chroot-gateway.log"
        let gateway = try ChildProcess("/bin/sh", ["-c", "exec /usr/sbin/chroot '\(root)' /usr/bin/pushgw run --config '\(config)' --consumer dist > '\(log)' 2>&1"],
                                       captureOutput: false)
        defer { _ = gateway.stop(signal: SIGKILL) }
        let token = "d15d" + String(repeating: "0", count: 60)
        _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                 #"{"v":1,"id":"dist-call","type":"incoming_call","voip_token":"\#(token)"}"#])
        try waitUntil("the installed gateway to record the call's result") { world.results() == 1 }
        let result = try world.redis.cli(["GET", "pushgw:{acme}:result:dist-call"])
        XCTAssertTrue(result.contains(#""outcome":"delivered_voip""#), "\(result)\n\(textSoFar(log))")
        XCTAssertEqual(gateway.stop(signal: SIGTERM), 0, textSoFar(log))
        let pushes = try world.stopSimulator().filter { ($0["token"] as? String) == token }
        XCTAssertEqual(pushes.count, 1, "the call rang once, through the installed binary")
    }
}
