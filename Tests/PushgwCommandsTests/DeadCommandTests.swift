import DeadLetters
import Foundation
import GatewayTestSupport
import RedisClient
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw dead` without Redis: help texts, usage errors (one line, exit 2, before the config
/// is read), the time arguments.
final class DeadCommandTests: XCTestCase {
    private func run(_ args: [String], terminal: Terminal = .none) -> (Int32, [String], [String]) {
        var out: [String] = [], err: [String] = []
        let context = CommandContext(output: CommandOutput(out: { out.append($0) }, err: { err.append($0) }),
                                     environment: [:], workingDirectory: TestScratch.root, terminal: terminal)
        return (pushgwMain(args, context: context), out, err)
    }

    func testEachVerbExplainsItselfUnderHelp() {
        let expectations: [String: [String]] = [
            "list": ["--app", "--reason", "--call", "--since", "--limit", "--json", "--config", "newest first"],
            "show": ["--app", "--json", "every", "attempt", "token's last 8 characters", "pretty-printed"],
            "replay": ["--all", "--rate", "--dry-run", "--yes", "--reason", "--since", "audit", "deadline", "replays"],
            "purge": ["--all", "--older-than", "--yes", "--dry-run", "confirmation", "audit"],
            "stats": ["--json", "reason", "oldest", "retention"],
        ]
        for (verb, words) in expectations {
            for form in [["dead", verb, "--help"], ["dead", verb, "-h"]] {
                let (status, out, err) = run(form)
                XCTAssertEqual(status, 0, "\(form)")
                XCTAssertEqual(err, [])
                let text = out.joined(separator: "\n")
                XCTAssertTrue(text.hasPrefix("usage: pushgw dead \(verb)"), text)
                for word in words { XCTAssertTrue(text.contains(word), "\(verb) --help mentions \(word)") }
            }
        }
        let (status, out, _) = run(["dead", "--help"])
        XCTAssertEqual(status, 0)
        for verb in ["list", "show", "replay", "purge", "stats"] {
            XCTAssertTrue(out.joined().contains("  \(verb) "), "pushgw dead --help lists \(verb)")
        }
        XCTAssertEqual(run(["help", "dead"]).1, out, "pushgw help dead is the same text")
        let overview = run(["--help"]).1.joined(separator: "\n").split(separator: "\n")
        let line = overview.first { $0.hasPrefix("  dead ") } ?? ""
        XCTAssertTrue(line.contains("list, show, replay, purge") && !line.contains("not implemented"), "dead is implemented: \(line)")
    }

    /// `dead show` of one device's dead letter of a call with devices names the device; a
    /// whole event's has no such line.
    func testShowNamesTheDeviceOfADevicesDeadLetter() {
        let event = #"{"v":1,"id":"c-7","type":"incoming_call","devices":[{"id":"bob-pixel","fcm_token":"dgvzda:apa91bh-pixel"}]}"#
        var fields = ["event": event, "reason": "fcm_credentials: credentials.firebase: refused", "attempts": "{}", "app": "acme"]
        let whole = DeadShowCommand.render(DeadLetterRecord(entry: StreamEntry(id: "20-0", fields: fields), app: "acme", ledger: nil),
                                           ringTimeoutMs: 30_000, nowMs: 30)
        XCTAssertFalse(whole.contains { $0.hasPrefix("  device:") }, whole.joined(separator: "\n"))
        fields["device"] = "bob-pixel"
        let lines = DeadShowCommand.render(DeadLetterRecord(entry: StreamEntry(id: "20-0", fields: fields), app: "acme", ledger: nil),
                                           ringTimeoutMs: 30_000, nowMs: 30)
        XCTAssertTrue(lines.contains("  device:        bob-pixel (this device's ring alone: the call has its own result)"),
                      lines.joined(separator: "\n"))
    }

    func testBadArgumentsGiveOneLineAndExitTwo() {
        let cases: [(args: [String], verb: String, mentions: String)] = [
            (["dead"], "dead", "dead needs a verb"),
            (["dead", "lsit"], "dead", "did you mean \"list\"?"),
            (["dead", "list", "--bogus"], "dead list", "unknown option --bogus"),
            (["dead", "list", "--limit", "0"], "dead list", "--limit must be a whole number from 1 to 10000"),
            (["dead", "list", "--limit", "ten"], "dead list", "--limit must be"),
            (["dead", "list", "--since", "yesterday"], "dead list", "--since must be a duration"),
            (["dead", "list", "--since", "2026-13-01"], "dead list", "--since must be"),
            (["dead", "list", "--app", "a,,b"], "dead list", "--app needs app ids"),
            (["dead", "list", "--reason", ""], "dead list", "--reason needs a value"),
            (["dead", "list", "stray"], "dead list", "unexpected argument \"stray\""),
            (["dead", "show"], "dead show", "name the dead letter"),
            (["dead", "show", "abc"], "dead show", "\"abc\" is not a dead-letter id"),
            (["dead", "show", "1-0", "2-0"], "dead show", "unexpected argument \"2-0\""),
            (["dead", "show", "1-0", "--app", "a,b"], "dead show", "one app"),
            (["dead", "replay"], "dead replay", "name the dead letters to replay"),
            (["dead", "replay", "1-0", "--all"], "dead replay", "not both"),
            (["dead", "replay", "1-0", "--reason", "x"], "dead replay", "--reason selects dead letters for --all"),
            (["dead", "replay", "--all", "--rate", "fast"], "dead replay", "--rate must be"),
            (["dead", "replay", "--all", "--rate", "0/s"], "dead replay", "--rate must be"),
            (["dead", "replay", "--all", "--older-than", "1d"], "dead replay", "unknown option --older-than"),
            (["dead", "replay", "--all"], "dead replay", "needs confirmation and stdin is not a terminal: add --yes"),
            (["dead", "purge"], "dead purge", "name the dead letters to purge"),
            (["dead", "purge", "--all", "--older-than", "-3d"], "dead purge", "--older-than must be"),
            (["dead", "purge", "1-0", "--older-than", "3d", "--yes"], "dead purge", "--older-than selects dead letters for --all"),
            (["dead", "purge", "--all"], "dead purge", "needs confirmation and stdin is not a terminal: add --yes"),
            (["dead", "stats", "extra"], "dead stats", "unexpected argument"),
            (["dead", "stats", "--json=yes"], "dead stats", "--json takes no value"),
        ]
        for c in cases {
            let (status, out, err) = run(c.args)
            XCTAssertEqual(status, 2, "bad usage exits 2: \(c.args)")
            XCTAssertEqual(out, [], "nothing on stdout: \(c.args)")
            XCTAssertEqual(err.count, 1, "one line: \(c.args) -> \(err)")
            let line = err.first ?? ""
            XCTAssertTrue(line.hasPrefix("pushgw: ") && line.contains(c.mentions), "\(c.args) -> \(line)")
            XCTAssertTrue(line.hasSuffix("(see pushgw \(c.verb) --help)"), "\(c.args) -> \(line)")
        }
    }

    /// Every number an operator types is parsed into its bounds before anything uses it: each
    /// rate that crashed `pushgw dead replay` or the gateway (1e300, 1e-300 and the others of
    /// the hostile-input study), the non-numbers, 400 digits, and durations past 100 years
    /// exit 2 with one line that names the bounds, before the config is read.
    func testHostileNumbersExitTwoNamingTheBounds() {
        let rates = ["1e300", "1e-300", "1e19", "9.3e18/s", "5e-324/h", "1e-13", "inf", "nan", "-1", "0",
                     String(repeating: "9", count: 400), "10001/s", "0.5/h"]
        var cases: [(args: [String], verb: String, mentions: String)] = rates.flatMap { rate in
            [(["dead", "replay", "--all", "--dry-run", "--rate", rate], "dead replay", "from 1/h to 10000/s"),
             (["dead", "replay", "1-0", "--rate", rate], "dead replay", "from 1/h to 10000/s"),
             (["dead", "replay", "--all", "--yes", "--rate=" + rate], "dead replay", "from 1/h to 10000/s")]
        }
        for time in [String(repeating: "999999999w", count: 16), "36526d", String(repeating: "9", count: 400) + "s", "1e300s", "nan"] {
            cases.append((["dead", "list", "--since", time], "dead list", "at most 100 years"))
            cases.append((["dead", "purge", "--all", "--yes", "--older-than", time], "dead purge", "at most 100 years"))
        }
        for limit in ["1e300", String(repeating: "9", count: 400), "-1", "nan", "10001"] {
            cases.append((["dead", "list", "--limit", limit], "dead list", "from 1 to 10000"))
        }
        for drain in ["9223372036854775807", "3600001", "-1", "1e300", String(repeating: "9", count: 400)] {
            cases.append((["run", "--drain-ms", drain], "run", "from 0 to 3600000"))
        }
        for c in cases {
            let (status, out, err) = run(c.args)
            XCTAssertEqual(status, 2, "\(c.args.map { $0.prefix(30) })")
            XCTAssertEqual(out, [])
            XCTAssertEqual(err.count, 1, "one line: \(err)")
            let line = err.first ?? ""
            XCTAssertTrue(line.contains(c.mentions) && line.hasSuffix("(see pushgw \(c.verb) --help)"), line)
            XCTAssertLessThan(line.count, 400, "a 400-digit number is quoted by its start: \(line.count) characters")
        }
    }

    func testAnUnusableConfigOrUnknownAppExitsTwo() throws {
        let fixture = try ConfigFixture()
        defer { fixture.cleanUp() }
        try fixture.makeSecrets()
        let path = try fixture.writeConfig(ConfigFixture.example)
        var (status, _, err) = run(["dead", "list", "--config", fixture.directory + "/nope.json"])
        XCTAssertEqual(status, 2)
        XCTAssertEqual(err.count, 1)
        XCTAssertTrue(err[0].hasPrefix("pushgw dead list: ") && err[0].contains("cannot read the config file"), err[0])
        (status, _, err) = run(["dead", "stats", "--config", path, "--app", "acme,gamma"])
        XCTAssertEqual(status, 2)
        XCTAssertEqual(err.count, 1)
        XCTAssertTrue(err[0].contains("no app \"gamma\""), err[0])
    }

    func testRedisUnreachableIsTheVerbsFailure() throws {
        let fixture = try ConfigFixture()
        defer { fixture.cleanUp() }
        try fixture.makeSecrets()
        let path = try fixture.writeConfig(setting(ConfigFixture.example, "redis.url", "redis://127.0.0.1:\(freePort())/0"))
        let (status, _, err) = run(["dead", "list", "--config", path])
        XCTAssertEqual(status, 1)
        XCTAssertEqual(err.count, 1)
        XCTAssertTrue(err[0].hasPrefix("pushgw dead list: redis: cannot connect"), err[0])
    }

    private func freePort() -> Int {
        // Bound and released at once: nothing listens there.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                _ = bind(fd, sa, len)
                _ = getsockname(fd, sa, &len)
            }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    func testTimesAreDurationsOrISODates() {
        let now: Int64 = 1_800_000_000_000
        XCTAssertEqual(TimeArgument.durationMs("90s"), 90_000)
        XCTAssertEqual(TimeArgument.durationMs("15m"), 900_000)
        XCTAssertEqual(TimeArgument.durationMs("2h"), 7_200_000)
        XCTAssertEqual(TimeArgument.durationMs("3d"), 259_200_000)
        XCTAssertEqual(TimeArgument.durationMs("1w"), 604_800_000)
        XCTAssertEqual(TimeArgument.durationMs("1h30m"), 5_400_000)
        for bad in ["", "0s", "5", "h", "5x", "-3d", "3d5", "1.5h"] {
            XCTAssertNil(TimeArgument.durationMs(bad), bad)
        }
        XCTAssertEqual(TimeArgument.instant("2h", nowMs: now), now - 7_200_000)
        XCTAssertEqual(TimeArgument.isoDateMs("1970-01-02"), 86_400_000)
        XCTAssertEqual(TimeArgument.isoDateMs("2026-11-29T10:11:12Z"), 1_795_947_072_000)
        XCTAssertEqual(TimeArgument.isoDateMs("2026-11-29T10:11:12.5Z"), 1_795_947_072_500)
        XCTAssertEqual(TimeArgument.isoDateMs("2026-11-29T12:11:12+02:00"), 1_795_947_072_000)
        XCTAssertEqual(TimeArgument.isoDateMs("2026-11-29T05:11:12-0500"), 1_795_947_072_000)
        XCTAssertEqual(TimeArgument.isoDateMs("2026-11-29 10:11"), 1_795_947_060_000, "no zone is UTC")
        XCTAssertEqual(TimeArgument.isoDateMs("2024-02-29"), 1_709_164_800_000, "a leap day")
        for bad in ["2026-02-29", "2026-11-31", "2026-11-29T24:00", "2026-11-29T10", "2026-11-29Z1", "29-11-2026", "2026-1-2"] {
            XCTAssertNil(TimeArgument.isoDateMs(bad), bad)
        }
        XCTAssertEqual(DeadLetterReference("acme/1-2"), DeadLetterReference("acme/1-2"))
        XCTAssertEqual(DeadLetterReference("acme/1-2")?.app, "acme")
        XCTAssertNil(DeadLetterReference("/1-2"))
        XCTAssertNil(DeadLetterReference("acme/x"))
    }
}
