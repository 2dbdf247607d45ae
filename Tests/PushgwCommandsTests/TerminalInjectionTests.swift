import APNs
import DeadLetters
import Foundation
import GatewayRoles
import GatewayTestSupport
import RedisClient
import TestSupport
import VisibleText
import XCTest
@testable import PushgwCommands

/// Text that came from producers, Redis or APNs reaches people's terminals through every
/// `pushgw dead` verb, the logs and `pushgw push`: no control or bidi character may arrive
/// raw (ESC recolours or clears the screen, OSC 52 writes the clipboard, a right-to-left
/// override shows one call id as another, a line feed makes a fake table row).
final class TerminalInjectionTests: XCTestCase {
    /// Escape, OSC 52, BEL, CSI in C1 form, NEL, DEL, and the bidi controls.
    private static let hostile = "\u{1B}[2J\u{1B}]52;c;ZXZpbA==\u{07}\u{9B}31m\u{85}\u{7F}\u{202E}\u{2066}\u{200F}\u{061C}"

    private func assertNoControl(_ lines: [String], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        for l in lines where l.unicodeScalars.contains(where: TerminalText.isControl) {
            XCTFail("\(what): a control or bidi character reached the output: \(l.debugDescription)", file: file, line: line)
        }
    }

    // MARK: The escaping

    func testControlAndBidiCharactersAreWrittenVisiblyAsJSONEscapes() {
        XCTAssertEqual(TerminalText.field("a\u{1B}[31mb\u{07}\u{9B}\u{7F}\u{202E}c\nd\te"),
                       #"a\u001b[31mb\u0007\u009b\u007f\u202ec\u000ad\u0009e"#)
        XCTAssertEqual(TerminalText.line("a\nb\tc\u{1B}"), "a\nb\tc\\u001b", "a line keeps line feeds and tabs")
        XCTAssertEqual(TerminalText.field("Zoë 📞 \u{2028} \\u001b"), "Zoë 📞 \u{2028} \\u001b", "other text is left alone")
        XCTAssertEqual(TerminalText.field(bytes: [0x61, 0xFF, 0xC3, 0x1B, 0xE2, 0x80, 0xAE, 0x62]), #"a\xff\xc3\u001b\u202eb"#,
                       "invalid UTF-8 bytes are shown as \\xNN")
        for scalar in (0...0x10FFFF).compactMap(Unicode.Scalar.init) where TerminalText.isControl(scalar) {
            XCTAssertFalse(TerminalText.field(String(scalar)).unicodeScalars.contains(where: TerminalText.isControl))
        }
    }

    func testAJSONLineStaysTheSameJSON() throws {
        let value = ["id": "c-1" + Self.hostile, "reason": "x\u{202E}y"]
        let line = String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
        let escaped = TerminalText.line(line)
        XCTAssertFalse(escaped.unicodeScalars.contains(where: TerminalText.isControl), escaped)
        XCTAssertEqual(try JSONSerialization.jsonObject(with: Data(escaped.utf8)) as? [String: String], value)
    }

    // MARK: Where it is printed

    func testLogLinesEscapeControlAndBidiCharacters() throws {
        var lines: [String] = []
        let log = Log(minimum: .info) { lines.append($0) }
        log.warn("invalid call event dead-lettered", ["event": "c\u{202E}1", "reason": "type: unknown event type \"" + Self.hostile + "\""])
        assertNoControl(lines, "log")
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        XCTAssertEqual(object["event"] as? String, "c\u{202E}1", "the log line is still exact JSON")
    }

    func testPushAnswerTextFromAPNsIsEscaped() {
        let output = CapturedOutput()
        let response = PushNotificationResponse(status: 400, reason: .unknown("Bad\u{1B}[2J\u{202E}", status: 400),
                                                apnsID: "id\u{9B}1")
        _ = printPushAnswer(.success(response), json: false, output: output.context().output)
        _ = printPushAnswer(.success(response), json: true, output: output.context().output)
        assertNoControl(output.out + output.err, "push")
        XCTAssertTrue(output.out[0].contains(#"Bad\u001b[2J\u202e"#), output.out[0])
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(output.out[1].utf8)), "--json stays JSON: \(output.out[1])")
    }

    func testConfigCheckQuotesAHostilePrefixOnOneLine() throws {
        let fixture = try ConfigFixture()
        defer { fixture.cleanUp() }
        try fixture.makeSecrets()
        try fixture.writeConfig(setting(ConfigFixture.example, "redis.prefix", "p\u{1B}]52;c;eA==\u{07}\nFAKE: all good"))
        let output = CapturedOutput()
        let status = pushgwMain(["config", "check", "pushgw.json"], context: output.context(workingDirectory: fixture.directory))
        XCTAssertEqual(status, 1)
        assertNoControl(output.out + output.err, "config check")
        let lines = (output.out + output.err).flatMap { $0.split(separator: "\n") }
        XCTAssertFalse(lines.contains { $0.hasPrefix("FAKE") }, "a line feed in the value cannot start a line: \(lines)")
    }

    // MARK: Every dead verb

    func testAnEventThatIsNotUTF8IsShownWithItsBadBytesEscapedAndReplayedExactly() throws {
        let h = try DeadLetterHarness()
        defer { h.close() }
        try h.writeConfigFile()
        try h.startRouter(fixed: false)
        let event = Array(#"{"v":1,"id":"bad-"#.utf8) + [0xFF, 0x1B] + Array("\"}\n\u{202E}".utf8) + [0xC3]
        var callsEntry: String?
        h.producer.send(command: RedisCommand([Array("XADD".utf8), Array(h.keys("acme").calls.utf8), Array("*".utf8), Array("event".utf8), event]), blockMs: 0) {
            callsEntry = (try? $0.get().string) ?? ""
        }
        h.loop.run(waitingFor: "the XADD's reply") { callsEntry != nil }
        h.waitForRecords(1)
        let id = try XCTUnwrap(h.deadIDs("acme").first)

        let shown = h.dead(["show", "acme/" + id])
        XCTAssertEqual(shown.status, 0, shown.err.joined())
        assertNoControl(shown.out, "dead show")
        XCTAssertTrue(shown.text.contains("invalid_event: event: not valid UTF-8 at byte 17"), shown.text)
        XCTAssertTrue(shown.text.contains("(not UTF-8; each invalid byte is shown as \\xNN)"), shown.text)
        XCTAssertTrue(shown.out.contains(#"    {"v":1,"id":"bad-\xff\u001b"}"#), shown.text)
        XCTAssertTrue(shown.out.contains(#"    \u202e\xc3"#), "each line of the event, its bad bytes as \\xNN: \(shown.text)")
        XCTAssertTrue(shown.out.contains("  calls entry:   \(callsEntry ?? "?")"), "the entry the producer's XADD made: \(shown.text)")

        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(h.dead(["show", "acme/" + id, "--json"]).out.joined().utf8))
                                 as? [String: Any])
        XCTAssertEqual((json["event_base64"] as? String).flatMap { Data(base64Encoded: $0) }.map(Array.init), event,
                       "--json carries the exact bytes")
        XCTAssertEqual(json["calls_entry"] as? String, callsEntry)

        XCTAssertEqual(h.dead(["replay", "acme/" + id]).status, 0)
        XCTAssertEqual(h.entries(h.keys("acme").calls).last?.values["event"], event, "a replay puts the same bytes back")
    }

    /// The dead stream is read as untrusted input: a hand-edited record's calls entry cannot
    /// colour the terminal or fake a line.
    func testAForgedCallsEntryIsShownEscaped() throws {
        let h = try DeadLetterHarness()
        defer { h.close() }
        try h.writeConfigFile()
        let forged = "1-0\u{1B}[2J\n  reason:        all fine\u{202E}"
        let record = String(decoding: try JSONSerialization.data(withJSONObject: ["outcome": "dead_lettered", "app": "acme",
                                                                                  "entry": forged, "attempts": [Any]()]),
                            as: UTF8.self)
        _ = h.send(["XADD", h.keys("acme").dead, "*", "event", "{}", "reason", "invalid_event: id: required", "attempts", record,
                    "first_failure_ms", "1", "last_failure_ms", "1", "replays", "0", "app", "acme"])
        let id = try XCTUnwrap(h.deadIDs("acme").first)
        let shown = h.dead(["show", "acme/" + id])
        XCTAssertEqual(shown.status, 0, shown.err.joined())
        assertNoControl(shown.out + shown.err, "dead show")
        XCTAssertTrue(shown.out.contains(#"  calls entry:   1-0\u001b[2J\u000a  reason:        all fine\u202e"#), shown.text)
        XCTAssertEqual(shown.out.filter { $0.hasPrefix("  reason:") }.count, 1, "no fake line: \(shown.text)")
        for args in [["list", "--json"], ["show", "acme/" + id, "--json"]] {
            let json = h.dead(args)
            assertNoControl(json.out + json.err, "dead \(args.joined(separator: " "))")
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.out.joined().utf8)) as? [String: Any])
            XCTAssertEqual(object["calls_entry"] as? String, forged, "--json is exact JSON: the text comes back unchanged")
        }
    }

    func testEveryDeadVerbShowsHostileIdsTypesReasonsAndTextEscaped() throws {
        let h = try DeadLetterHarness()
        defer { h.close() }
        try h.writeConfigFile()
        try h.startRouter(fixed: false)
        let ids = ["evil-1\u{1B}]52;c;ZXZpbA==\u{07}", "evil-2\u{202E}gpj.exe\nFAKE  acme  0s  apns_credentials: all fine",
                   "evil-3\u{85}\u{7F}\u{2066}"]
        func quoted(_ s: String) -> String {
            String(decoding: try! JSONSerialization.data(withJSONObject: [s], options: [.withoutEscapingSlashes]), as: UTF8.self)
                .dropFirst().dropLast().description
        }
        h.xaddRaw("acme", #"{"v":1,"id":\#(quoted(ids[0])),"type":"ring\u001b[2J\u009b31m","voip_token":"ab"}"#)
        h.xaddRaw("acme", #"{"v":1,"id":\#(quoted(ids[1])),"type":"incoming_call","voip_token":"xyz"}"#)
        h.xaddRaw("acme", "{\"v\":1,\"id\":\(quoted(ids[2])),\"type\":\"incoming_call\",\"voip_token\":\"ab\",\"deadline\":\"x\",\"voip\":{\"callerName\":\"\(Self.hostile.unicodeScalars.filter { $0.value >= 0x7F }.map(String.init).joined())\"}}")
        h.call("broken", "b-\u{202E}1", voip: "00000000aaaa1111")
        h.waitForRecords(4)
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, 3, "the hostile events are dead letters")

        let list = h.dead(["list"])
        assertNoControl(list.out + list.err, "dead list")
        XCTAssertEqual(list.out.count, 1 + 4, "a header and one row per dead letter, no fake row: \(list.text)")
        XCTAssertTrue(list.text.contains(#"evil-1\u001b]52;c;ZXZpbA==\u0007"#), list.text)
        XCTAssertTrue(list.text.contains(#"evil-2\u202egpj.exe\u000aFAKE"#), list.text)
        XCTAssertTrue(list.text.contains(#"unknown event type "ring\u001b[2J\u009b31m""#), list.text)

        let json = h.dead(["list", "--json"])
        assertNoControl(json.out, "dead list --json")
        let callIDs = json.out.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["call_id"] as? String
        }
        XCTAssertEqual(Set(callIDs), Set(ids + ["b-\u{202E}1"]), "--json is exact JSON: the ids come back unchanged")

        for entry in dead {
            for args in [["show", "acme/" + entry.id], ["show", "acme/" + entry.id, "--json"]] {
                let shown = h.dead(args)
                XCTAssertEqual(shown.status, 0, shown.err.joined())
                assertNoControl(shown.out + shown.err, "dead \(args.joined(separator: " "))")
            }
        }
        let stats = h.dead(["stats"])
        assertNoControl(stats.out + stats.err, "dead stats")
        XCTAssertTrue(stats.text.contains(#"\u001b[2J"#), stats.text)
        assertNoControl(h.dead(["stats", "--json"]).out, "dead stats --json")

        for verb in ["replay", "purge"] {
            let dry = h.dead([verb, "--all", "--app", "acme", "--dry-run"])
            XCTAssertEqual(dry.status, 0, dry.err.joined())
            assertNoControl(dry.out + dry.err, "dead \(verb) --dry-run")
            XCTAssertEqual(dry.out.count, 4, "three dead letters and the summary, no fake line: \(dry.text)")
        }
        let purged = h.dead(["purge", "--all", "--app", "acme", "--yes"])
        assertNoControl(purged.out + purged.err, "dead purge")
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 0)
    }
}
