import XCTest
import CallStorage
import RedisClient
@testable import DeadLetters

/// Reading dead letters back: the fields the router writes today, the replay ledger join,
/// and what a replay carries forward. No Redis: entries are built by hand as XRANGE returns them.
final class DeadLetterRecordTests: XCTestCase {
    static let event = #"{"v":1,"id":"c-9","type":"incoming_call","voip_token":"00112233445566778899aabb","alert_token":"ccddeeff00112233","deadline":1764412400000}"#

    /// A dead letter as `CallStore.deadLetter` writes it: `attempts` holds the whole result record.
    static func entry(_ id: String, event: String = DeadLetterRecordTests.event, replays: String = "0",
                      attempts: String? = nil) -> StreamEntry {
        let record = attempts ?? #"{"outcome":"dead_lettered","id":"c-9","type":"incoming_call","app":"acme","entry":"1764412340000-0","reason":"apns_credentials: InvalidProviderToken","attempts":[{"t":1764412345000,"channel":"voip","status":403,"reason":"InvalidProviderToken","apns_id":"A-1"},{"t":1764412345100,"channel":"alert","status":403,"reason":"InvalidProviderToken"}]}"#
        return StreamEntry(id: id, fields: ["event": event, "reason": "apns_credentials: InvalidProviderToken",
                                            "attempts": record, "first_failure_ms": "1764412345000",
                                            "last_failure_ms": "1764412345100", "replays": replays, "app": "acme"])
    }

    func testTheRoutersFieldsAreReadAndTokensShowTheirLastEightCharacters() {
        let r = DeadLetterRecord(entry: Self.entry("1764412345200-0"), app: "acme", ledger: nil)
        XCTAssertEqual(r.app, "acme")
        XCTAssertEqual(r.deadAtMs, 1764412345200)
        XCTAssertEqual(r.callID, "c-9")
        XCTAssertEqual(r.eventType, "incoming_call")
        XCTAssertEqual(r.callsEntry, "1764412340000-0", "the calls entry the producer's XADD made, from the record")
        XCTAssertEqual(r.deadlineMs, 1764412400000)
        XCTAssertEqual(r.reason, "apns_credentials: InvalidProviderToken")
        XCTAssertEqual(r.replays, 0)
        XCTAssertEqual(r.firstFailureMs, 1764412345000)
        XCTAssertEqual(r.lastFailureMs, 1764412345100)
        XCTAssertEqual(r.attempts.count, 2, "every attempt of the record")
        XCTAssertEqual(r.attempts[0], DeadLetterAttempt(timeMs: 1764412345000, channel: "voip", token: "8899aabb", status: 403,
                                                        reason: "InvalidProviderToken", error: nil, apnsID: "A-1", round: 1))
        XCTAssertEqual(r.attempts[1].token, "00112233", "an alert attempt shows the alert token's last 8 characters")
        XCTAssertEqual(r.rounds.count, 1)
        XCTAssertFalse(r.continuesLedger)
    }

    /// A device's dead letter of a call with devices (`device`, the call's whole event): it
    /// names the device, and its attempts show that device's tokens (an Android phone's FCM token).
    func testADevicesDeadLetterNamesItsDeviceAndShowsItsTokens() {
        let event = #"{"v":1,"id":"c-7","type":"incoming_call","devices":[{"id":"bob-iphone","voip_token":"00112233445566778899aabb","alert_token":"ccddeeff00112233"},{"id":"bob-pixel","fcm_token":"dgvzda:apa91bh-zx_qk-pixel"}]}"#
        let attempts = #"{"outcome":"dead_lettered","id":"c-7","reason":"fcm_credentials: credentials.firebase: refused","attempts":[{"t":5,"device":"bob-pixel","channel":"voip","status":401,"provider":"fcm"}]}"#
        var fields = Self.entry("20-0", event: event, attempts: attempts).fields
        fields["device"] = "bob-pixel"
        let r = DeadLetterRecord(entry: StreamEntry(id: "20-0", fields: fields), app: "acme", ledger: nil)
        XCTAssertEqual(r.device, "bob-pixel")
        XCTAssertEqual(r.attempts.map(\.token), ["qk-pixel"], "the Pixel's FCM token, not another device's")
        XCTAssertTrue(r.summaryJSON(nowMs: 30).text.contains(#""calls_entry":null,"device":"bob-pixel","attempts":1"#),
                      r.summaryJSON(nowMs: 30).text)
        let whole = DeadLetterRecord(entry: Self.entry("21-0"), app: "acme", ledger: nil)
        XCTAssertNil(whole.device)
        XCTAssertFalse(whole.summaryJSON(nowMs: 30).text.contains("device"), "a whole event's dead letter names no device")
    }

    func testAttemptsMayBeAPlainArrayAndMayCarryTheirToken() {
        let attempts = #"[{"t":5,"channel":"voip","token":"ffffffff12345678","error":"timeout"}]"#
        let r = DeadLetterRecord(entry: Self.entry("10-0", attempts: attempts), app: "acme", ledger: nil)
        XCTAssertEqual(r.attempts.map(\.token), ["12345678"], "a token in the attempt wins over the event's")
        XCTAssertEqual(r.attempts.map(\.error), ["timeout"])
        XCTAssertNil(r.attempts[0].status, "no answer, no status")
        XCTAssertNil(r.callsEntry, "a record without an entry names none")
    }

    func testHandEditedNumbersInADeadLetterAreIgnoredRatherThanOverflowing() {
        var fields = Self.entry("1764412345200-0", replays: String(Int.max)).fields
        fields["first_failure_ms"] = String(Int64.min)
        fields["last_failure_ms"] = "-5"
        let r = DeadLetterRecord(entry: StreamEntry(id: "1764412345200-0", fields: fields), app: "acme", ledger: nil)
        XCTAssertEqual(r.replays, 0, "a replay count out of range is not believed")
        XCTAssertEqual(r.replay(ledgerTTLSeconds: 60, ringTimeoutMs: 30_000).replays, 1, "and replaying adds one without overflow")
        XCTAssertNil(r.firstFailureMs)
        XCTAssertNil(r.lastFailureMs)
        XCTAssertNil(DeadLetterRecord.timeMs(ofID: "\(Int64.max)-0"), "an id time past year 287,000 is not a time")
    }

    func testAnInvalidEventIsStillReadable() {
        let entry = StreamEntry(id: "7-1", fields: ["event": "not json {", "reason": "invalid_event: event: not JSON",
                                                    "attempts": #"{"outcome":"dead_lettered","app":"acme"}"#])
        let r = DeadLetterRecord(entry: entry, app: "acme", ledger: nil)
        XCTAssertNil(r.callID)
        XCTAssertEqual(r.reason, "invalid_event: event: not JSON")
        XCTAssertEqual(r.attempts, [])
        XCTAssertEqual(r.eventDigest, EventDigest.of("not json {"), "an id-less event still names its ledger")
        XCTAssertEqual(r.deadAtMs, 7)
    }

    func testAReplayedEventThatDiedAgainCarriesItsEarlierRoundsAndCount() {
        let first = DeadLetterRecord(entry: Self.entry("1000-0"), app: "acme", ledger: nil)
        let replay = first.replay(ledgerTTLSeconds: 60, ringTimeoutMs: 30_000)
        XCTAssertEqual(replay.replays, 1, "the first replay counts 1")
        XCTAssertEqual(replay.eventId, "c-9", "its recorded outcome is forgotten so it is routed again")
        XCTAssertEqual(replay.event, Array(Self.event.utf8), "the event goes back unchanged")
        // What the replay script stores, and the router's new dead letter for the same event.
        let ledger = ["replays": "1", "history": replay.historyJSON, "calls_entry": "2000-0", "dead_entry": "1000-0"]
        let second = DeadLetterRecord(entry: Self.entry("3000-0"), app: "acme", ledger: ledger)
        XCTAssertTrue(second.continuesLedger)
        XCTAssertEqual(second.replays, 1)
        XCTAssertEqual(second.rounds.map(\.round), [1, 2])
        XCTAssertEqual(second.rounds.map(\.deadEntryID), ["1000-0", "3000-0"])
        XCTAssertEqual(second.attempts.count, 4, "the earlier attempts are kept")
        XCTAssertEqual(second.attempts.map(\.round), [1, 1, 2, 2])
        XCTAssertEqual(second.attempts[0].token, "8899aabb", "tokens survive the ledger")
        // A second replay grows the count and keeps both rounds.
        let again = second.replay(ledgerTTLSeconds: 60, ringTimeoutMs: 30_000)
        XCTAssertEqual(again.replays, 2)
        let third = DeadLetterRecord(entry: Self.entry("5000-0"), app: "acme",
                                     ledger: ["replays": "2", "history": again.historyJSON, "calls_entry": "4000-0", "dead_entry": "3000-0"])
        XCTAssertEqual(third.replays, 2)
        XCTAssertEqual(third.rounds.count, 3)
        XCTAssertEqual(third.attempts.count, 6)
        XCTAssertEqual(third.firstFailureMs, 1764412345000, "the first failure is the first round's")
    }

    func testALedgerDoesNotApplyToTheEntryItReplayedNorToOlderOnes() {
        let history = ReplayHistory(rounds: DeadLetterRecord(entry: Self.entry("1000-0"), app: "acme", ledger: nil).rounds).json
        let own = DeadLetterRecord(entry: Self.entry("1000-0"), app: "acme",
                                   ledger: ["replays": "1", "history": history, "calls_entry": "2000-0", "dead_entry": "1000-0"])
        XCTAssertFalse(own.continuesLedger, "the ledger of a replay never joins the dead letter it replayed")
        let older = DeadLetterRecord(entry: Self.entry("1500-0"), app: "acme",
                                     ledger: ["replays": "1", "history": history, "calls_entry": "2000-0", "dead_entry": "1000-0"])
        XCTAssertFalse(older.continuesLedger, "a dead letter older than the replay is not its continuation")
        XCTAssertEqual(older.replays, 0)
    }

    func testHistoryJSONRoundTrips() throws {
        let record = DeadLetterRecord(entry: Self.entry("1000-0"), app: "acme", ledger: nil)
        let history = ReplayHistory(rounds: record.rounds)
        let back = try XCTUnwrap(ReplayHistory(json: history.json))
        XCTAssertEqual(back, history)
        XCTAssertNil(ReplayHistory(json: "[]"), "not a history")
    }

    func testStreamIDs() {
        XCTAssertTrue(DeadLetterRecord.isEntryID("1764412345000-0"))
        XCTAssertFalse(DeadLetterRecord.isEntryID("1764412345000"))
        XCTAssertFalse(DeadLetterRecord.isEntryID("abc-0"))
        XCTAssertFalse(DeadLetterRecord.isEntryID("1-2-3"))
        XCTAssertEqual(DeadLetterRecord.timeMs(ofID: "42-7"), 42)
    }

    func testJSONOutputKeepsItsKeyOrder() {
        let r = DeadLetterRecord(entry: Self.entry("1764412345200-0"), app: "acme", ledger: nil)
        let line = r.summaryJSON(nowMs: 1764412355200).text
        XCTAssertTrue(line.hasPrefix(#"{"id":"1764412345200-0","app":"acme","time_ms":1764412345200,"age_s":10,"reason":"apns_credentials: InvalidProviderToken","call_id":"c-9","type":"incoming_call","calls_entry":"1764412340000-0","attempts":2,"replays":0,"#), line)
        let detail = r.detailJSON(nowMs: 1764412355200).text
        XCTAssertTrue(detail.hasSuffix(#","event":\#(Self.event)}"#), "the event is embedded as JSON: \(detail)")
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(detail.utf8)), "valid JSON")
    }
}
