import Foundation
import Glibc
import TestSupport
import XCTest

/// The container image as docker/README.md runs it: its run stage (docker/Dockerfile) built by
/// `scripts/check-image.sh` on a Debian base made from Debian's own packages, with make test's
/// binary from the image's own build step; run read-only, every capability dropped and
/// `no-new-privileges`, on the host's network (Redis and the simulator listen on loopback).
/// It delivers a call (counted at the simulator), reloads on SIGHUP, passes its own health
/// check and drains on `docker stop`. Where no container engine answers the test is skipped,
/// saying so.
final class ContainerImageTests: XCTestCase {
    func testTheImageRunsReadOnlyWithoutCapabilitiesDeliversReloadsAndDrains() throws {
        let binary = packageRoot + "/.build/image/pushgw"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw XCTSkip("no .build/image/pushgw (make test builds it with docker/build-pushgw.sh)")
        }
        let built = try runCommand(packageRoot + "/scripts/check-image.sh", [binary], timeoutMs: 600_000)
        if built.0 == 77 { throw XCTSkip("the image is not built or run here: " + built.2.trimmingCharacters(in: .whitespacesAndNewlines)) }
        XCTAssertEqual(built.0, 0, "scripts/check-image.sh: \(built.2)")
        let image = built.1.trimmingCharacters(in: .whitespacesAndNewlines)
        guard built.0 == 0, !image.isEmpty else { return }

        let world = try ProcessWorld()
        defer { world.stop() }
        let pki = try TestPKI.shared()
        let adminPort = freeLoopbackPort()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()],
                                           admin: #""listen": "127.0.0.1:\#(adminPort)""#)
        // The image's user (uid 10001) reads copies of the config and the PKI, mounted
        // read-only at the paths the config names.
        var mounts: [String] = []
        for directory in Set([world.directory, (pki.caCert as NSString).deletingLastPathComponent,
                              (pki.jwtKey as NSString).deletingLastPathComponent]) {
            let copy = TestScratch.file("image-mount")
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            XCTAssertEqual(try runCommand("/bin/cp", ["-a", directory + "/.", copy]).0, 0)
            XCTAssertEqual(try runCommand("/bin/chmod", ["-R", "a+rX", copy]).0, 0)
            mounts += ["-v", "\(copy):\(directory):ro"]
        }
        let name = "pushgw-image-test-\(getpid())"
        _ = try? runCommand("/usr/bin/env", ["docker", "rm", "-f", name])
        let started = try runCommand("/usr/bin/env", ["docker", "run", "-d", "--name", name, "--network", "host",
                                                      "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                                                      "-e", "PUSHGW_ADMIN_LISTEN=127.0.0.1:\(adminPort)"] + mounts
                                     + [image, "run", "--config", config, "--consumer", "image"])
        XCTAssertEqual(started.0, 0, "docker run: \(started.2)")
        defer { _ = try? runCommand("/usr/bin/env", ["docker", "rm", "-f", name]) }
        func logs() -> String { ((try? runCommand("/usr/bin/env", ["docker", "logs", name])).map { $0.1 + $0.2 }) ?? "" }

        let token = "1a6e" + String(repeating: "0", count: 60)
        _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                 #"{"v":1,"id":"image-call","type":"incoming_call","voip_token":"\#(token)"}"#])
        try waitUntil("the container to record the call's result\n\(logs())", timeoutMs: 60_000) { world.results() == 1 }
        let result = try world.redis.cli(["GET", "pushgw:{acme}:result:image-call"])
        XCTAssertTrue(result.contains(#""outcome":"delivered_voip""#), "\(result)\n\(logs())")

        XCTAssertEqual(try runCommand("/usr/bin/env", ["docker", "kill", "-s", "HUP", name]).0, 0)
        try waitUntil("the container to log its reload\n\(logs())", timeoutMs: 30_000) { logs().contains(#""msg":"config reloaded""#) }
        let health = { (try? runCommand("/usr/bin/env", ["docker", "inspect", "-f", "{{.State.Health.Status}}", name]))?.1
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "" }
        try waitUntil("the image's health check (/healthz) to pass: \(health())", timeoutMs: 90_000, pollMs: 500) { health() == "healthy" }

        let stopped = try runCommand("/usr/bin/env", ["docker", "stop", "-t", "30", name], timeoutMs: 60_000)
        XCTAssertEqual(stopped.0, 0, stopped.2)
        let exit = try runCommand("/usr/bin/env", ["docker", "inspect", "-f", "{{.State.ExitCode}}", name])
        XCTAssertEqual(exit.1.trimmingCharacters(in: .whitespacesAndNewlines), "0", "SIGTERM drains and exits 0\n\(logs())")
        XCTAssertTrue(logs().contains(#""msg":"draining""#), "the stop was a drain: \(logs())")
        let pushes = try world.stopSimulator().filter { ($0["token"] as? String) == token }
        XCTAssertEqual(pushes.count, 1, "the call rang once, through the container")
    }
}
