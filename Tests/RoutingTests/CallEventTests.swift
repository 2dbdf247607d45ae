import APNs
import Foundation
@testable import Routing
import XCTest

/// `CallEvent.decode`: the producer contract of docs/protocol.md, and a corpus of malformed events
/// whose messages must name the field at fault.
final class CallEventTests: XCTestCase {
    private func decode(_ json: String, entry: Int64 = Fixture.entry) throws(InvalidEvent) -> CallEvent {
        try CallEvent.decode(Array(json.utf8), entryTimeMs: entry, policy: Fixture.policy())
    }

    func testTheDesignExampleDecodesWithBothPayloadsSerializedDeterministically() throws {
        let event = try decode(Fixture.eventJSON())
        XCTAssertEqual(event.id, "call-7f3a9c")
        XCTAssertEqual(event.kind, .incomingCall)
        XCTAssertEqual(event.voipToken, Fixture.voipToken)
        XCTAssertEqual(event.alertToken, Fixture.alertToken)
        XCTAssertEqual(event.sandbox, false)
        XCTAssertEqual(event.deadlineMs, Fixture.deadline)
        XCTAssertTrue(event.deadlineFromEvent)
        XCTAssertEqual(event.entryTimeMs, Fixture.entry)
        XCTAssertTrue(event.alertFromTemplate)
        XCTAssertEqual(String(decoding: event.voipPayload, as: UTF8.self),
                       #"{"caller":"+15551234567","callerName":"Alice Johnson","deadline":1764412330000,"#
                       + #""hasVideo":false,"id":"call-7f3a9c","sessionId":"abc-123-def"}"#,
                       "the producer's keys, sorted, plus id and deadline for de-duplication")
        XCTAssertEqual(String(decoding: event.alertPayload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Missed call","body":"Alice Johnson tried to call you"},"#
                       + #""sound":"default"},"id":"call-7f3a9c","call_id":"call-7f3a9c"}"#)
        XCTAssertEqual(try decode(Fixture.eventJSON()), event, "decoding is deterministic")
    }

    func testDefaultsNullsAndUnknownFields() throws {
        let event = try decode(Fixture.eventJSON(["v": nil, "deadline": nil, "sandbox": "null", "voip_token": "null",
                                                  "priority": #""high""#, "x-trace": #"{"a":[1,2]}"#]))
        XCTAssertEqual(event.deadlineMs, Fixture.entry + 30_000, "no deadline: the stream entry's time + ring timeout")
        XCTAssertFalse(event.deadlineFromEvent)
        XCTAssertNil(event.sandbox, "null means absent")
        XCTAssertNil(event.voipToken)
        XCTAssertEqual(event.alertToken, Fixture.alertToken)
    }

    /// A replay's `call_deadline` (the original call's) caps the default deadline, never
    /// extends it; the event's own `deadline` wins; an unreadable one counts as passed.
    func testAReplaysCallDeadlineCapsTheDefaultDeadline() throws {
        let noDeadline = Array(Fixture.eventJSON(["deadline": nil]).utf8)
        func deadline(_ field: String?, event: [UInt8] = noDeadline) throws -> Int64 {
            try CallEvent.decode(event, entryTimeMs: Fixture.entry, policy: Fixture.policy(), callDeadline: field.map { Array($0.utf8) }).deadlineMs
        }
        XCTAssertEqual(try deadline(nil), Fixture.entry + 30_000)
        XCTAssertEqual(try deadline(String(Fixture.entry - 60_000)), Fixture.entry - 60_000, "the original call's, passed")
        XCTAssertEqual(try deadline(String(Fixture.entry + 5_000)), Fixture.entry + 5_000)
        XCTAssertEqual(try deadline(String(Fixture.entry + 3_600_000)), Fixture.entry + 30_000, "never later than the ring timeout")
        for garbage in ["", "-5", "1e300", "12a", String(repeating: "9", count: 17), "١٢"] {
            XCTAssertEqual(try deadline(garbage), 0, "unreadable counts as passed: \(garbage)")
        }
        XCTAssertEqual(try deadline(String(Fixture.entry - 60_000), event: Array(Fixture.eventJSON().utf8)), Fixture.deadline,
                       "the event's own deadline wins")
        let replayed = try CallEvent.decode(noDeadline, entryTimeMs: Fixture.entry, policy: Fixture.policy(),
                                            callDeadline: Array(String(Fixture.entry - 60_000).utf8))
        XCTAssertTrue(String(decoding: replayed.voipPayload, as: UTF8.self).contains(#""deadline":\#(Fixture.entry - 60_000)"#),
                      "the VoIP payload carries the original deadline")
    }

    /// A replay of one device's dead letter (`replayed_device`) rings that device of the event's
    /// `devices` alone; a device the event does not list makes it invalid, named.
    func testAReplayedDeviceKeepsThatDeviceAlone() throws {
        let event = Array(#"{"v":1,"id":"c-1","type":"incoming_call","devices":[{"id":"phone","voip_token":"aa01"},{"id":"pad","voip_token":"aa02"}]}"#.utf8)
        let all = try CallEvent.decode(event, entryTimeMs: Fixture.entry, policy: Fixture.policy())
        XCTAssertEqual(all.devices.map(\.id), ["phone", "pad"])
        let one = try CallEvent.decode(event, entryTimeMs: Fixture.entry, policy: Fixture.policy(), replayedDevice: Array("pad".utf8))
        XCTAssertEqual(one.devices.map(\.id), ["pad"])
        XCTAssertEqual(one.devices.first?.voipToken, "aa02")
        XCTAssertThrowsError(try CallEvent.decode(event, entryTimeMs: Fixture.entry, policy: Fixture.policy(),
                                                  replayedDevice: Array("watch".utf8))) { error in
            XCTAssertEqual((error as? InvalidEvent)?.field, "devices")
            XCTAssertTrue("\(error)".contains("watch"), "\(error)")
        }
    }

    func testTheProducersIdAndDeadlineInsideVoipAreKept() throws {
        let event = try decode(Fixture.eventJSON(["voip": #"{"id":"app-own","deadline":"soon"}"#]))
        XCTAssertEqual(String(decoding: event.voipPayload, as: UTF8.self), #"{"deadline":"soon","id":"app-own"}"#)
        let bare = try decode(Fixture.eventJSON(["voip": nil]))
        XCTAssertEqual(String(decoding: bare.voipPayload, as: UTF8.self),
                       #"{"deadline":1764412330000,"id":"call-7f3a9c"}"#)
    }

    func testVoipValuesAreWrittenBackExactly() throws {
        let voip = #"{"s":"a\u0001b\n\"\\\/é","n":[1.5,-3,1e2,12345678901234567,0,true,null],"o":{"z":1,"a":{}},"e":[]}"#
        let event = try decode(Fixture.eventJSON(["voip": voip]))
        XCTAssertEqual(String(decoding: event.voipPayload, as: UTF8.self),
                       #"{"deadline":1764412330000,"e":[],"id":"call-7f3a9c","#
                       + #""n":[1.5,-3,100.0,12345678901234567,0,true,null],"o":{"a":{},"z":1},"s":"a\u0001b\n\"\\/é"}"#)
    }

    func testCallCancelledNeedsOnlyTheId() throws {
        let event = try decode(#"{"id":"call-1","type":"call_cancelled"}"#)
        XCTAssertEqual(event.kind, .callCancelled)
        XCTAssertNil(event.voipToken)
        XCTAssertEqual(event.voipPayload, [], "a cancel sends no push")
        let huge = String(repeating: "x", count: 6_000)
        XCTAssertNoThrow(try decode(#"{"id":"call-1","type":"call_cancelled","voip":{"big":"\#(huge)"}}"#),
                         "payload limits apply to pushes, and a cancel sends none")
    }

    func testAWholeNumberWrittenAsAFloatIsAnInteger() throws {
        XCTAssertEqual(try decode(Fixture.eventJSON(["deadline": "1764412330000.0"])).deadlineMs, 1_764_412_330_000)
    }

    func testAnOversizeVoipPayloadIsAcceptedWhenThereIsNoVoipToken() throws {
        let big = String(repeating: "x", count: 5_200)
        let event = try decode(Fixture.eventJSON(["voip_token": nil, "voip": #"{"note":"\#(big)"}"#]))
        XCTAssertNil(event.voipToken)
    }

    func testEventAlertTextOverridesTheTemplateAndAMissingPartComesFromIt() throws {
        let full = try decode(Fixture.eventJSON(["alert": #"{"title":"Bob","body":"Call me"}"#]))
        XCTAssertFalse(full.alertFromTemplate)
        XCTAssertEqual(String(decoding: full.alertPayload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Bob","body":"Call me"},"sound":"default"},"id":"call-7f3a9c","call_id":"call-7f3a9c"}"#)
        let partial = try decode(Fixture.eventJSON(["alert": #"{"body":"Call me"}"#]))
        XCTAssertTrue(partial.alertFromTemplate)
        XCTAssertEqual(String(decoding: partial.alertPayload, as: UTF8.self),
                       #"{"aps":{"alert":{"title":"Missed call","body":"Call me"},"sound":"default"},"id":"call-7f3a9c","call_id":"call-7f3a9c"}"#)
    }

    func testTemplatePlaceholdersFallBackToEachOtherThenToUnknownCaller() {
        let t = FallbackTemplate(title: "{caller}", body: "{callerName} ({caller}) {x}", sound: nil, unknownCaller: "Someone")
        XCTAssertEqual(t.render(callerName: "Alice", caller: "+1555").body, "Alice (+1555) {x}")
        XCTAssertEqual(t.render(callerName: nil, caller: "+1555").body, "+1555 (+1555) {x}")
        XCTAssertEqual(t.render(callerName: "Alice", caller: "").title, "Alice")
        XCTAssertEqual(t.render(callerName: nil, caller: nil).body, "Someone (Someone) {x}")
        XCTAssertEqual(t.render(callerName: "{caller}", caller: "+1").body, "{caller} (+1) {x}",
                       "a name is not filled again")
        XCTAssertEqual(t.render(callerName: String(repeating: "a", count: 1_000), caller: "1").body.count,
                       FallbackTemplate.maxFilledCharacters + " (1) {x}".count, "filled values are cut")
    }

    func testWithoutAnAlertTokenNoAlertPayloadIsBuilt() throws {
        let event = try decode(Fixture.eventJSON(["alert_token": nil]))
        XCTAssertNil(event.alertToken)
        XCTAssertTrue(event.alertPayload.isEmpty, "no alert can be sent, so none is built")
        XCTAssertFalse(event.voipPayload.isEmpty)
        // Nor is its size checked: an alert that would be too large is no error without a token.
        let huge = String(repeating: "x", count: 5_000)
        let quiet = try decode(Fixture.eventJSON(["alert_token": nil, "alert": #"{"title":"\#(huge)","body":"b"}"#]))
        XCTAssertTrue(quiet.alertPayload.isEmpty)
    }

    func testANumericCallerFillsTheTemplateWithItsJSONText() throws {
        let event = try decode(Fixture.eventJSON(["voip": #"{"caller":15551234567}"#]))
        XCTAssertTrue(String(decoding: event.alertPayload, as: UTF8.self).contains(#""body":"15551234567 tried to call you""#))
    }

    // MARK: Malformed corpus

    /// One malformed event: its bytes, the field the message must name, a fragment of the problem.
    private struct Bad {
        let name: String
        let bytes: [UInt8]
        let field: String?
        let fragment: String
        init(_ name: String, _ json: String, _ field: String?, _ fragment: String) {
            self.init(name, Array(json.utf8), field, fragment)
        }
        init(_ name: String, _ bytes: [UInt8], _ field: String?, _ fragment: String) {
            self.name = name
            self.bytes = bytes
            self.field = field
            self.fragment = fragment
        }
    }

    private var corpus: [Bad] {
        let e = Fixture.eventJSON
        let long = String(repeating: "i", count: 129)
        let bigName = String(repeating: "A", count: 5_200)
        return [
            Bad("truncated JSON", #"{"id":"#, "id", "not JSON: unexpected end of input"),
            Bad("empty bytes", "", nil, "not JSON: empty"),
            Bad("invalid UTF-8", [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], "event", "not valid UTF-8 at byte 2"),
            Bad("a bad byte inside the key voip_token", Array(#"{"v":1,"id":"a","type":"incoming_call","voip_"#.utf8) + [0xFF]
                + Array(#"token":"ab","alert_token":"cd"}"#.utf8), "event", "not valid UTF-8 at byte 45"),
            Bad("a bad byte in the id", Array(#"{"v":1,"id":"call-"#.utf8) + [0xC3, 0x28] + Array(#"","type":"call_cancelled"}"#.utf8),
                "event", "not valid UTF-8 at byte 18"),
            Bad("an overlong slash", Array(#"{"id":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8), "event", "not valid UTF-8 at byte 7"),
            Bad("an encoded surrogate", Array(#"{"id":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8), "event",
                "not valid UTF-8 at byte 7"),
            Bad("above U+10FFFF", Array(#"{"id":""#.utf8) + [0xF4, 0x90, 0x80, 0x80] + Array(#""}"#.utf8), "event",
                "not valid UTF-8 at byte 7"),
            Bad("a sequence cut at the end", Array(#"{"id":"x"}"#.utf8) + [0xE2, 0x82], "event", "not valid UTF-8 at byte 10"),
            Bad("number too large for JSONSerialization", e(["deadline": "1e400"]), "deadline", "not JSON: number 1e400 is out of range"),
            Bad("a 60,000-digit number in the voip dictionary", e(["voip": "{\"n\":\(String(repeating: "9", count: 60_000))}"]),
                "voip.n", "not JSON: number \(String(repeating: "9", count: 64))… is out of range"),
            Bad("array at the root", "[1,2]", "event", "expected a JSON object, got array"),
            Bad("string at the root", #""call""#, "event", "expected a JSON object, got string"),
            Bad("over 64 KiB", e(["pad": "\"" + String(repeating: "p", count: 70_000) + "\""]), "event",
                "over the 65536-byte limit"),
            Bad("v: 2", e(["v": "2"]), "v", "unsupported version 2"),
            Bad("v as a string", e(["v": #""1""#]), "v", "expected an integer, got string"),
            Bad("v as true", e(["v": "true"]), "v", "expected an integer, got boolean"),
            Bad("id missing", e(["id": nil]), "id", "required"),
            Bad("id empty", e(["id": #""""#]), "id", "empty"),
            Bad("id too long", e(["id": "\"\(long)\""]), "id", "129 characters, over 128"),
            Bad("id a number", e(["id": "42"]), "id", "expected a string, got number"),
            Bad("type missing", e(["type": nil]), "type", "required"),
            Bad("type unknown", e(["type": #""ring""#]), "type", #"unknown event type "ring""#),
            Bad("type a boolean", e(["type": "true"]), "type", "expected a string, got boolean"),
            Bad("type of 60,000 characters", e(["type": "\"call\(String(repeating: "9", count: 60_000))\""]), "type",
                #"unknown event type "call\#(String(repeating: "9", count: 60))…" (expected"#),
            Bad("voip_token not hex", e(["voip_token": #""xyz1""#]), "voip_token", "not a hex string"),
            Bad("voip_token odd length", e(["voip_token": #""abc""#]), "voip_token", "odd length (3 hex digits)"),
            Bad("voip_token odd and not hex", e(["voip_token": #""abz""#]), "voip_token", "not a hex string"),
            Bad("voip_token a number", e(["voip_token": "1234"]), "voip_token", "expected a string, got number"),
            Bad("voip_token empty", e(["voip_token": #""""#]), "voip_token", "empty"),
            Bad("alert_token not hex", e(["alert_token": #""zz""#]), "alert_token", "not a hex string"),
            Bad("alert_token odd length", e(["alert_token": #""abcde""#]), "alert_token", "odd length (5 hex digits)"),
            Bad("alert_token an array", e(["alert_token": "[]"]), "alert_token", "expected a string, got array"),
            // Long enough to truncate, then overflow, a 16 KiB header block, then far beyond.
            Bad("voip_token of 16,040 hex digits", e(["voip_token": "\"\(String(repeating: "ab", count: 8_020))\""]),
                "voip_token", "16040 hex digits, over the 400-digit limit"),
            Bad("voip_token of 16,048 hex digits", e(["voip_token": "\"\(String(repeating: "ab", count: 8_024))\""]),
                "voip_token", "16048 hex digits, over the 400-digit limit"),
            Bad("alert_token of 60,000 hex digits", e(["alert_token": "\"\(String(repeating: "cd", count: 30_000))\""]),
                "alert_token", "60000 hex digits, over the 400-digit limit"),
            Bad("voip_token of 402 hex digits", e(["voip_token": "\"\(String(repeating: "ab", count: 201))\""]),
                "voip_token", "402 hex digits, over the 400-digit limit"),
            Bad("no token at all", e(["voip_token": nil, "alert_token": "null"]), "voip_token",
                "required when alert_token is absent"),
            Bad("sandbox as 1", e(["sandbox": "1"]), "sandbox", "expected a boolean, got number"),
            Bad("sandbox as a string", e(["sandbox": #""false""#]), "sandbox", "expected a boolean, got string"),
            Bad("deadline as a string", e(["deadline": #""1764412330000""#]), "deadline",
                "expected an integer (unix ms), got string"),
            Bad("deadline as true", e(["deadline": "true"]), "deadline", "expected an integer (unix ms), got boolean"),
            Bad("deadline with a fraction", e(["deadline": "1764412330000.5"]), "deadline",
                "expected an integer (unix ms), got 1764412330000.5"),
            Bad("deadline in seconds", e(["deadline": "1764412330"]), "deadline",
                "1764412330 is not a unix time in milliseconds (seconds?)"),
            Bad("deadline in microseconds", e(["deadline": "1764412330000000"]), "deadline",
                "1764412330000000 is more than a day after the event was written (1764412300000): not unix milliseconds of a ringing call (microseconds?)"),
            Bad("deadline in nanoseconds", e(["deadline": "1764412330000000000"]), "deadline", "(nanoseconds?)"),
            Bad("deadline a year out", e(["deadline": "\(Fixture.entry + 365 * 86_400_000)"]), "deadline",
                "more than a day after the event was written"),
            Bad("registered_at in microseconds", e(["voip_token_registered_at": "1764412290000000"]),
                "voip_token_registered_at", "not unix milliseconds of a ringing call (microseconds?)"),
            Bad("alert registered_at in nanoseconds", e(["alert_token_registered_at": "1764412290000000000"]),
                "alert_token_registered_at", "(nanoseconds?)"),
            Bad("deadline beyond Int64", e(["deadline": "18446744073709551615"]), "deadline", "out of range"),
            Bad("deadline an object", e(["deadline": "{}"]), "deadline", "got object"),
            Bad("voip an array", e(["voip": "[]"]), "voip", "expected an object, got array"),
            Bad("voip a string", e(["voip": #""hi""#]), "voip", "expected an object, got string"),
            Bad("voip over 5120 bytes", e(["voip": "{\"callerName\":\"\(bigName)\"}"]), "voip",
                "over the 5120-byte VoIP limit"),
            Bad("alert a string", e(["alert": #""Missed""#]), "alert", "expected an object, got string"),
            Bad("alert.title a number", e(["alert": #"{"title":5,"body":"b"}"#]), "alert.title",
                "expected a string, got number"),
            Bad("alert.body a boolean", e(["alert": #"{"title":"t","body":false}"#]), "alert.body",
                "expected a string, got boolean"),
            Bad("voip_token_registered_at a string", e(["voip_token_registered_at": #""yesterday""#]),
                "voip_token_registered_at", "expected an integer (unix ms), got string"),
            Bad("alert_token_registered_at false", e(["alert_token_registered_at": "false"]),
                "alert_token_registered_at", "expected an integer (unix ms), got boolean"),
        ]
    }

    func testMalformedEventsNameTheFieldAtFault() {
        XCTAssertGreaterThanOrEqual(corpus.count, 20)
        for bad in corpus {
            do {
                let event = try CallEvent.decode(bad.bytes, entryTimeMs: Fixture.entry, policy: Fixture.policy())
                XCTFail("\(bad.name): accepted as \(event.id)")
            } catch {
                XCTAssertEqual(error.field, bad.field, "\(bad.name): \(error)")
                let prefix = bad.field.map { "\($0): " } ?? "not JSON: "
                XCTAssertTrue(error.description.hasPrefix(prefix), "\(bad.name): message starts with the field: \(error)")
                XCTAssertTrue(error.description.contains(bad.fragment),
                              "\(bad.name): expected \"\(bad.fragment)\" in \"\(error)\"")
            }
        }
    }

    func testEveryProblemQuotesAtMostAShortPrefixOfTheInput() {
        for bad in corpus {
            do {
                _ = try CallEvent.decode(bad.bytes, entryTimeMs: Fixture.entry, policy: Fixture.policy())
            } catch {
                XCTAssertLessThanOrEqual(error.description.count, 200, "\(bad.name): \(error.description.prefix(300))")
            }
        }
    }

    func testATokenOfTheLongestAcceptedLengthDecodes() throws {
        let longest = String(repeating: "ab", count: PushNotification.maxTokenHexDigits / 2)
        let event = try decode(Fixture.eventJSON(["voip_token": "\"\(longest)\""]))
        XCTAssertEqual(event.voipToken, longest, "400 hex digits (200 bytes) is a token")
    }

    /// 180 family emoji (25 bytes each) in `callerName`: 4,606 bytes of alert once filled in,
    /// which refused the whole event, its VoIP push included. The alert is fitted instead.
    func testACallerNameTooLongForTheAlertIsShortenedAndTheVoipPushStays() throws {
        let family = "👨‍👩‍👧‍👦"
        XCTAssertEqual(family.utf8.count, 25)
        let name = String(repeating: family, count: 180)
        let event = try decode(Fixture.eventJSON(["voip": #"{"caller":"+15551234567","callerName":"\#(name)"}"#]))
        XCTAssertLessThanOrEqual(event.alertPayload.count, 4096)
        let alert = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(event.alertPayload)) as? [String: Any])
        let body = try XCTUnwrap(((alert["aps"] as? [String: Any])?["alert"] as? [String: Any])?["body"] as? String)
        XCTAssertTrue(body.hasSuffix("… tried to call you"), body)
        let kept = body.dropLast("… tried to call you".count)
        XCTAssertTrue(kept.count > 100 && name.hasPrefix(kept), "the name cut at a character boundary, as long as fits: \(kept.count)")
        let longer = #"{"aps":{"alert":{"title":"Missed call","body":""#.utf8.count + (kept.count + 1) * 25
        XCTAssertGreaterThan(longer + "… tried to call you\"},\"sound\":\"default\"},\"id\":\"call-7f3a9c\",\"call_id\":\"call-7f3a9c\"}".utf8.count, 4096,
                             "one more character would not fit")
        XCTAssertTrue(String(decoding: event.voipPayload, as: UTF8.self).contains(name), "the VoIP payload keeps the whole name")
    }

    func testAnEventsOwnAlertTextTooLongIsShortenedToFit() throws {
        let body = String(repeating: "B", count: 5_000), title = String(repeating: "é", count: 3_000)
        let event = try decode(Fixture.eventJSON(["alert": #"{"title":"\#(title)","body":"\#(body)"}"#]))
        XCTAssertLessThanOrEqual(event.alertPayload.count, 4096)
        XCTAssertGreaterThan(event.alertPayload.count, 4000, "as long as fits")
        let alert = try XCTUnwrap(((try JSONSerialization.jsonObject(with: Data(event.alertPayload)) as? [String: Any])?["aps"]
                                   as? [String: Any])?["alert"] as? [String: String])
        XCTAssertTrue(alert["body"]!.hasSuffix("…") && body.hasPrefix(alert["body"]!.dropLast()), "body cut with an ellipsis")
        XCTAssertTrue(alert["title"]!.hasSuffix("…") && title.hasPrefix(alert["title"]!.dropLast()), "title cut with an ellipsis")
        XCTAssertFalse(event.alertFromTemplate)

        let alertOnly = try decode(Fixture.eventJSON(["voip_token": nil, "alert": #"{"title":"t","body":"\#(body)"}"#]))
        XCTAssertLessThanOrEqual(alertOnly.alertPayload.count, 4096, "an alert-only event is sent shortened, not refused")
    }

    func testTheOversizeVoipMessageGivesTheSerializedSize() {
        let name = String(repeating: "A", count: 5_200)
        do {
            _ = try decode(Fixture.eventJSON(["voip": "{\"callerName\":\"\(name)\"}"]))
            XCTFail("over-size VoIP payload accepted")
        } catch {
            // {"callerName":"A…","deadline":1764412330000,"id":"call-7f3a9c"}
            let size = #"{"callerName":"","deadline":1764412330000,"id":"call-7f3a9c"}"#.utf8.count + 5_200
            XCTAssertEqual(error.description, "voip: payload is \(size) bytes, over the 5120-byte VoIP limit")
        }
    }

    func testAnInvalidEventKeepsTheCallIdTypeAndEntryForItsDeadLetter() {
        do {
            _ = try decode(Fixture.eventJSON(["deadline": #""soon""#]))
            XCTFail("accepted")
        } catch {
            XCTAssertEqual(error.callID, "call-7f3a9c")
            let dead = DeadLetter.invalidEvent(error, app: "acme", entry: "1764412300000-0")
            XCTAssertEqual(dead.reason.code, "invalid_event")
            XCTAssertFalse(dead.appUnhealthy)
            XCTAssertTrue(dead.isInvalidEvent, "its result does not claim the id")
            XCTAssertEqual(dead.record.jsonString,
                           #"{"outcome":"dead_lettered","id":"call-7f3a9c","type":"incoming_call","app":"acme","#
                           + #""entry":"1764412300000-0","#
                           + #""reason":"invalid_event: deadline: expected an integer (unix ms), got string","attempts":[]}"#)
        }
        do {
            _ = try decode(#"{"type":"incoming_call"}"#)
            XCTFail("accepted")
        } catch {
            XCTAssertNil(error.callID, "no id to keep")
            XCTAssertEqual(error.kind, .incomingCall)
        }
    }

    func testIdAndTypeAreReadEvenWhenTheProblemComesBeforeThem() {
        // `v` is checked before `id` and `type`: the producer still gets them back.
        do {
            _ = try decode(#"{"v":2,"id":"call-v2","type":"call_cancelled"}"#)
            XCTFail("accepted")
        } catch {
            XCTAssertEqual(error.field, "v")
            XCTAssertEqual(error.callID, "call-v2")
            XCTAssertEqual(error.kind, .callCancelled)
        }
        do {
            _ = try decode(#"{"v":1,"id":"call-t","type":"ringing","voip_token":"ab"}"#)
            XCTFail("accepted")
        } catch {
            XCTAssertEqual(error.callID, "call-t")
            XCTAssertNil(error.kind, "an unknown type is named in the reason, not echoed as a type")
        }
        let poison = CallEvent.identity(Array(#"{"v":"x","id":"call-p","type":"incoming_call"}"#.utf8),
                                        entryTimeMs: Fixture.entry, policy: Fixture.policy())
        XCTAssertEqual(poison.id, "call-p")
        XCTAssertEqual(poison.kind, .incomingCall)
        XCTAssertNil(CallEvent.identity(Array("[1]".utf8), entryTimeMs: Fixture.entry, policy: Fixture.policy()).id)
    }

    func testHexTokensAreLowerCasedOnce() throws {
        let upper = String(repeating: "AB", count: 32), mixed = "Ab01cDeF"
        let event = try decode(Fixture.eventJSON(["voip_token": "\"\(upper)\"", "alert_token": "\"\(mixed)\""]))
        XCTAssertEqual(event.voipToken, Fixture.voipToken, "one spelling per token: lower case")
        XCTAssertEqual(event.alertToken, "ab01cdef")
        XCTAssertEqual(try decode(Fixture.eventJSON()).voipToken, Fixture.voipToken, "lower case stays as sent")
    }

    func testADeadlineUpToADayAheadIsAccepted() throws {
        let event = try decode(Fixture.eventJSON(["deadline": "\(Fixture.entry + 86_400_000)"]))
        XCTAssertEqual(event.deadlineMs, Fixture.entry + 86_400_000)
    }
}
