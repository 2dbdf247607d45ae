import Foundation
import TestSupport
import XCTest

/// What a running gateway says about itself, read from outside as an operator and Prometheus
/// read it: `pushgw --version`, the version in the start line and `/status`,
/// `pushgw_build_info`, the `process_*` figures of `/proc/self`, and the per-app counters
/// present at 0 before the first call; the whole scrape passes `promtool check metrics`.
final class VersionAndProcessMetricsTests: XCTestCase {
    func testARunningGatewayShowsItsVersionProcessFiguresAndZeroCounters() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let (status, out, err) = try runCommand(world.pushgw, ["--version"])
        XCTAssertEqual(status, 0, err)
        let words = out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        // pushgw 0.1.0 (commit 1a2b3c4d5e6f)
        XCTAssertEqual(words.count, 4, out)
        XCTAssertEqual(words.first, "pushgw", out)
        let version = String(words[1])
        let commit = String(words[3].dropLast())
        let versionFile = try String(contentsOfFile: packageRoot + "/VERSION", encoding: .utf8)
        XCTAssertEqual(version, versionFile.split(separator: "\n").first.map(String.init), "the version is VERSION's")
        // A commit of this checkout's history (the binary may predate the latest commit: built, then committed).
        let hex = commit.hasSuffix("-dirty") ? String(commit.dropLast(6)) : commit
        XCTAssertEqual(hex.count, 12, commit)
        XCTAssertTrue(hex.allSatisfy(\.isHexDigit), commit)
        let (gitStatus, _, _) = try runCommand("/usr/bin/git", ["-C", packageRoot, "rev-parse", "--git-dir"])
        if gitStatus == 0 {
            let (known, _, err) = try runCommand("/usr/bin/git", ["-C", packageRoot, "merge-base", "--is-ancestor", hex, "HEAD"])
            XCTAssertEqual(known, 0, "built from this checkout's history: \(commit) \(err)")
        }

        let token = "version-test-\(UUID().uuidString)"
        let tokenFile = world.directory + "/admin-token"
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        chmod(tokenFile, 0o600)
        let port = freeLoopbackPort()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(), "beta": ProcessWorld.app()],
                                           admin: #""listen": "127.0.0.1:\#(port)", "token_file": "admin-token""#)
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "version-test", log: log)
        try waitForPort(port)
        try waitUntil("/readyz to answer 200") { try LoopbackHTTP.blockingRequest("/readyz", port: port).status == 200 }

        let starting = try XCTUnwrap(ProcessWorld.logLines(log, message: "pushgw starting").first, textSoFar(log))
        XCTAssertEqual(starting["version"] as? String, version)
        XCTAssertEqual(starting["commit"] as? String, commit)
        let statusReply = try LoopbackHTTP.blockingRequest("/status", port: port, headers: ["Authorization": "Bearer " + token])
        let statusObject = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(statusReply.body.utf8)) as? [String: Any])
        XCTAssertEqual(statusObject["version"] as? String, version, statusReply.body)
        XCTAssertEqual(statusObject["commit"] as? String, commit, statusReply.body)

        let before = try LoopbackHTTP.blockingRequest("/metrics", port: port).body
        let lines = Set(before.split(separator: "\n").map(String.init))
        XCTAssertTrue(lines.contains(#"pushgw_build_info{version="\#(version)",commit="\#(commit)"} 1"#), before)
        for app in ["acme", "beta"] {
            for line in [#"pushgw_events_finished_total{app="\#(app)",outcome="delivered_voip"} 0"#,
                         #"pushgw_events_finished_total{app="\#(app)",outcome="dead_lettered"} 0"#,
                         #"pushgw_dead_letters_total{app="\#(app)",reason="apns_credentials"} 0"#,
                         #"pushgw_fallbacks_total{app="\#(app)",cause="voip_token_invalid"} 0"#,
                         #"pushgw_token_feedback_total{app="\#(app)",channel="voip",reason="Unregistered"} 0"#,
                         #"pushgw_tokens_invalidated_total{app="\#(app)",channel="voip",reason="BadDeviceToken"} 0"#,
                         #"pushgw_deadline_misses_total{app="\#(app)"} 0"#] {
                XCTAssertTrue(lines.contains(line), "present at 0 before any call: \(line)")
            }
        }
        func value(_ name: String, in text: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        let resident = try XCTUnwrap(value("process_resident_memory_bytes", in: before), before)
        XCTAssertGreaterThan(resident, 1_000_000, "a gateway holds more than a megabyte")
        XCTAssertGreaterThan(try XCTUnwrap(value("process_virtual_memory_bytes", in: before)), resident)
        let open = try XCTUnwrap(value("process_open_fds", in: before))
        XCTAssertGreaterThan(open, 3, "stdio, the loop, Redis, the admin socket")
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(value("process_max_fds", in: before)), open)
        let started = try XCTUnwrap(value("process_start_time_seconds", in: before))
        let now = Date().timeIntervalSince1970
        XCTAssertLessThanOrEqual(started, now + 1, "started before now")
        XCTAssertGreaterThan(started, now - 3_600, "and after this test began, give or take the clock's ticks")
        XCTAssertNotNil(value("process_cpu_seconds_total", in: before))

        // promtool reads the scrape as Prometheus does and lints it.
        let promtool = packageRoot + "/.build/tools/promtool"
        guard FileManager.default.isExecutableFile(atPath: promtool) else {
            throw XCTSkip("\(promtool) missing: make test takes it out of Debian's prometheus package (scripts/install-deps.sh deploy-tools)")
        }
        let (checkStatus, checkOut, checkErr) = try runCommand(promtool, ["check", "metrics"], stdin: before)
        XCTAssertEqual(checkStatus, 0, "promtool check metrics: \(checkOut)\(checkErr)")
        XCTAssertEqual((checkOut + checkErr).trimmingCharacters(in: .whitespacesAndNewlines), "", "no lint problem")

        // A call moves its counters from 0, so rate() sees the first one.
        _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event",
                                 #"{"v":1,"id":"first","type":"incoming_call","voip_token":"a0a0"}"#])
        try waitUntil("the call's outcome in /metrics") {
            try LoopbackHTTP.blockingRequest("/metrics", port: port).body.split(separator: "\n")
                .contains(#"pushgw_events_finished_total{app="acme",outcome="delivered_voip"} 1"#)
        }
        XCTAssertEqual(gw.stop(signal: SIGTERM), 0)
    }
}
