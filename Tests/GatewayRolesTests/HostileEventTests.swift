import APNs
import DeadLetters
import EventLoop
import Foundation
import GatewayTestSupport
import CallStorage
import Retry
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// Events a hostile or broken producer can write, routed by the real router (in this test
/// process: a trap would end the whole test run). Each is dead-lettered with a reason naming
/// its field; the valid events read with it are delivered.
final class HostileEventTests: XCTestCase {
    private var h: RouterHarness!

    override func tearDown() {
        h?.close()
        h = nil
    }

    /// The internal `retry` field as the router writes it for call `id` at time `t`, with `changes`
    /// applied to its JSON text (each `(from, to)` must occur once).
    private func forgedRetry(_ id: String, at t: Int64, _ changes: [(String, String)]) -> String {
        var text = WaitingCall(callID: id, stage: .voip(attemptsMade: 1), dueAtMs: t, deadlineMs: t + 30_000,
                               entryTimeMs: t - 1_000, alertUsable: false,
                               attempts: [AttemptRecord(sentAtMs: t - 900, channel: .voip, status: 503,
                                                        reason: "ServiceUnavailable", error: nil, apnsID: nil)],
                               lastAnswerAtMs: t - 800, firstFailureAtMs: t - 800).json()
        for (from, to) in changes {
            XCTAssertEqual(text.components(separatedBy: from).count, 2, "\(from) occurs once in \(text)")
            text = text.replacingOccurrences(of: from, with: to)
        }
        return text
    }

    func testEventsThatAreNotUTF8AreRefusedAndKeptByteForByte() throws {
        h = try RouterHarness()
        var rng = SystemRandomNumberGenerator()
        let random = (0..<100_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let events: [(name: String, bytes: [UInt8], reason: String)] = [
            // Read lossily, the key became "voip_\u{FFFD}token" and the call went out as an alert only.
            ("a bad byte inside the key voip_token",
             Array(#"{"v":1,"id":"u-1","type":"incoming_call","voip_"#.utf8) + [0xFF]
                + Array(#"token":"ab12","alert_token":"cd34"}"#.utf8),
             "invalid_event: event: not valid UTF-8 at byte 47"),
            // Read lossily, both ids became "dup-\u{FFFD}": the second was taken for a duplicate.
            ("an id with byte FF", Array(#"{"v":1,"id":"dup-"#.utf8) + [0xFF] + Array(#"","type":"incoming_call","voip_token":"ab12"}"#.utf8),
             "invalid_event: event: not valid UTF-8 at byte 17"),
            ("an id with byte FE", Array(#"{"v":1,"id":"dup-"#.utf8) + [0xFE] + Array(#"","type":"incoming_call","voip_token":"ab12"}"#.utf8),
             "invalid_event: event: not valid UTF-8 at byte 17"),
            ("100 KB of random bytes", random, "invalid_event: event: 100000 bytes, over the 65536-byte limit"),
            ("1 KB of random bytes", Array(random.prefix(1_000)) + [0xFF], "invalid_event: event: "),
        ]
        let entryIDs = events.map { h.xaddRaw("acme", bytes: $0.bytes) }
        h.call("neighbour", voip: "a0a1")
        XCTAssertTrue(h.waitForRecords(events.count + 1), "one outcome per entry: \(h.recorded.map(\.record.id))")
        XCTAssertEqual(h.record("neighbour")?.outcome, .deliveredVoip)
        XCTAssertTrue(h.requests("cd34").isEmpty, "no alert was sent for the event with a bad byte in voip_token")
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, events.count, "each is a dead letter of its own: \(dead.map { $0.fields["reason"] ?? "" })")
        for (entry, e) in zip(dead, events) {
            if e.bytes.count > CallEvent.maxEventBytes {
                // Refused for its size: its start, its length and its digest, not megabytes.
                XCTAssertTrue(entry.values["event"] == Array(e.bytes.prefix(DeadLetterEntry.keptPrefixBytes)),
                              "\(e.name): the dead letter keeps the first \(DeadLetterEntry.keptPrefixBytes) bytes exactly")
                XCTAssertEqual(entry.fields["event_bytes"], String(e.bytes.count))
                XCTAssertEqual(entry.fields["event_sha256"], EventDigest.of(e.bytes))
            } else {
                XCTAssertEqual(entry.values["event"], e.bytes, "\(e.name): the dead letter keeps the entry's bytes exactly")
                XCTAssertNil(entry.values["event_bytes"])
            }
            let reason = entry.fields["reason"] ?? ""
            XCTAssertTrue(reason.hasPrefix(e.reason), "\(e.name): \(reason)")
        }
        let results = h.results()
        for (entryID, e) in zip(entryIDs, events) {
            let result = results.first { $0["entry"] as? String == entryID }
            XCTAssertEqual(result?["outcome"] as? String, "dead_lettered", "\(e.name): its result names its calls entry \(entryID)")
        }
    }

    func testHostileEntriesReadInOneBatchWithValidCallsLeaveThemDelivered() throws {
        h = try RouterHarness(startRouter: false)
        let acme = h.keys("acme")
        let t = Clock.unixMs()
        let event = { (id: String) in #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"ab12"}"# }
        h.call("valid-1", voip: "a0a1")
        let hostile: [(id: String, fields: [String], reason: String)] = [
            ("forged-deadline", ["event", event("forged-deadline"), "retry",
                                 forgedRetry("forged-deadline", at: t, [("\"deadline\":\(t + 30_000)", "\"deadline\":\(Int64.max)"),
                                                                 ("\"entry_time\":\(t - 1_000)", "\"entry_time\":-1000")])],
             "invalid_event: retry: deadline: 9223372036854775807 is not a unix time"),
            ("forged-entry", ["event", event("forged-entry"), "retry",
                              forgedRetry("forged-entry", at: t, [("\"entry_time\":\(t - 1_000)", "\"entry_time\":\(Int64.min)")])],
             "invalid_event: retry: entry_time: expected an integer (unix ms), got -9.2"),
            ("forged-made", ["event", event("forged-made"), "retry",
                             forgedRetry("forged-made", at: t, [("\"made\":1", "\"made\":\(Int64.max)")])],
             "invalid_event: retry: made: 9223372036854775807 attempts, over the 100"),
            ("long-voip", ["event", #"{"v":1,"id":"long-voip","type":"incoming_call","voip_token":"\#(String(repeating: "ab", count: 8_024))"}"#],
             "invalid_event: voip_token: 16048 hex digits, over the 400-digit limit"),
            ("long-alert", ["event", #"{"v":1,"id":"long-alert","type":"incoming_call","alert_token":"\#(String(repeating: "cd", count: 8_020))"}"#],
             "invalid_event: alert_token: 16040 hex digits, over the 400-digit limit"),
        ]
        for (i, entry) in hostile.enumerated() {
            XCTAssertNotNil(h.command(["XADD", acme.calls, "*"] + entry.fields))
            h.call("valid-\(i + 2)", voip: String(format: "a0b%d", i))
        }
        let total = 1 + 2 * hostile.count
        XCTAssertEqual(h.command("XLEN", acme.calls)?.integer, Int64(total))
        h.runner.start()
        XCTAssertTrue(h.waitForRecords(total), "one outcome per entry: \(h.recorded.map(\.record.id))")

        XCTAssertEqual(h.runner.stats.read, total, "every entry read by the one router (in one batch: readBatch is 100)")
        for i in 1...(hostile.count + 1) {
            XCTAssertEqual(h.record("valid-\(i)")?.outcome, .deliveredVoip, "valid-\(i), read beside hostile entries, is delivered")
        }
        let dead = h.entries(acme.dead)
        XCTAssertEqual(dead.count, hostile.count, "only the hostile entries are dead-lettered")
        for entry in hostile {
            XCTAssertEqual(h.record(entry.id)?.outcome, .deadLettered, entry.id)
            let reason = dead.first { $0.fields["event"]?.contains("\"\(entry.id)\"") == true }?.fields["reason"] ?? ""
            XCTAssertTrue(reason.hasPrefix(entry.reason), "\(entry.id): reason \(reason) starts with \(entry.reason)")
        }
        XCTAssertEqual(h.runner.stats.claimed, 0, "nothing was redelivered: no entry stayed pending")
        XCTAssertEqual(h.runner.stats.poison, 0)
        XCTAssertEqual(h.command("XLEN", acme.calls)?.integer, 0, "every entry acknowledged")
    }
}
