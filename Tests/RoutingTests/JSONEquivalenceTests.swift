import APNs
import Foundation
@testable import Routing
import XCTest

/// The JSONSerialization-free decoding and writing against the code they replaced
/// (`LegacyDecoder`): the same events give the same `CallEvent` (payload bytes included) or the
/// same error, on a hand-made corpus of edge cases and on seeded random and mutated input.
final class JSONEquivalenceTests: XCTestCase {
    private let policy = Fixture.policy()

    /// Decodes `bytes` both ways and fails unless the outcomes agree (the oracle's under the
    /// rules changed since it was frozen, `underTheCurrentRules`): equal events, or errors
    /// naming the same field with the same text, the same id and the same type (for "not JSON"
    /// the detail may differ, the new decoder names the member it happened in, and refuses
    /// bytes that are not UTF-8 as `event: not valid UTF-8 at byte N`).
    /// Returns true when both accepted the event.
    @discardableResult
    private func assertSame(_ bytes: [UInt8], _ label: @autoclosure () -> String,
                            file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let new = Result { () throws(InvalidEvent) in try CallEvent.decode(bytes, entryTimeMs: Fixture.entry, policy: policy) }
        let frozen = Result { () throws(InvalidEvent) in try LegacyDecoder.decode(bytes, entryTimeMs: Fixture.entry, policy: policy) }
        let old = Self.underTheCurrentRules(frozen, bytes: bytes)
        var accepted = false
        switch (new, old) {
        case let (.success(a), .success(b)):
            accepted = true
            if a != b {
                XCTFail("\(label()): events differ\n new voip \(String(decoding: a.voipPayload, as: UTF8.self))\n old voip "
                        + "\(String(decoding: b.voipPayload, as: UTF8.self))\n new \(a)\n old \(b)", file: file, line: line)
            }
        case let (.failure(a), .failure(b)):
            // Syntax errors inside a member name the member now (the old decoder could not),
            // and bytes that are not UTF-8 are refused before parsing, as `event`.
            let unreadable = a.problem.hasPrefix("not JSON: ") || a.problem.hasPrefix("not valid UTF-8 at byte ")
            if !unreadable {
                XCTAssertEqual(a.field, b.field, "\(label()): \(a) / \(b)", file: file, line: line)
            }
            XCTAssertEqual(a.callID, b.callID, "\(label()): \(a) / \(b)", file: file, line: line)
            XCTAssertEqual(a.kind, b.kind, "\(label()): \(a) / \(b)", file: file, line: line)
            if a.field == nil || unreadable {
                XCTAssertTrue(unreadable && b.problem.hasPrefix("not JSON: "), "\(label()): \(a) / \(b)",
                              file: file, line: line)
            } else {
                XCTAssertEqual(a.description, b.description, label(), file: file, line: line)
            }
        case let (.success(a), .failure(b)):
            XCTFail("\(label()): accepted as \(a.id), the old decoder said \(b)", file: file, line: line)
        case let (.failure(a), .success(b)):
            XCTFail("\(label()): refused (\(a)), the old decoder accepted \(b.id)", file: file, line: line)
        }
        return accepted
    }

    /// The oracle's outcome under the rules that changed since it was frozen (LegacyDecoder must
    /// not change), each checked directly in CallEventTests:
    /// - the fallback alert's payload is built only for an incoming call with an alert token
    ///   (without one no alert can be sent); the oracle builds it for every incoming call. Its
    ///   size was already checked only with a token, so no error changes
    ///   (testWithoutAnAlertTokenNoAlertPayloadIsBuilt);
    /// - hex tokens are lower-cased (testHexTokensAreLowerCasedOnce);
    /// - a unix-ms time more than `CallEvent.largestAheadMs` after the entry is refused, naming
    ///   the field and the likely unit (testMalformedEventsNameTheFieldAtFault): it is
    ///   checked where the oracle read the time, so it wins over any problem found later;
    /// - a refused event's id and type are read whatever the problem
    ///   (testIdAndTypeAreReadEvenWhenTheProblemComesBeforeThem).
    static func underTheCurrentRules(_ old: Result<CallEvent, InvalidEvent>,
                                     bytes: [UInt8]) -> Result<CallEvent, InvalidEvent> {
        // The object as the oracle reads it (JSONSerialization), for the fields it read.
        let root = (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) as? [String: Any]
        if let root, let tooFar = timeTooFarAhead(old, root: root) { return .failure(withIdentity(tooFar, root: root)) }
        switch old {
        case let .success(event):
            return .success(CallEvent(id: event.id, kind: event.kind, voipToken: event.voipToken?.lowercased(),
                                      alertToken: event.alertToken?.lowercased(), sandbox: event.sandbox,
                                      deadlineMs: event.deadlineMs, deadlineFromEvent: event.deadlineFromEvent,
                                      entryTimeMs: event.entryTimeMs, voipPayload: event.voipPayload,
                                      alertPayload: event.kind == .incomingCall && event.alertToken == nil ? [] : event.alertPayload,
                                      alertFromTemplate: event.alertFromTemplate,
                                      voipTokenRegisteredAtMs: event.voipTokenRegisteredAtMs,
                                      alertTokenRegisteredAtMs: event.alertTokenRegisteredAtMs))
        case let .failure(error):
            return .failure(root.map { withIdentity(error, root: $0) } ?? error)
        }
    }

    /// The unix-ms fields in the order the decoders read them, after the tokens and `sandbox`.
    private static let timeFields = ["deadline", "voip_token_registered_at", "alert_token_registered_at"]

    /// The current rule's error when one of the times the oracle read (all three when it
    /// accepted the event or refused it for a field read after them) is more than a day after
    /// the entry; nil otherwise.
    private static func timeTooFarAhead(_ old: Result<CallEvent, InvalidEvent>, root: [String: Any]) -> InvalidEvent? {
        let timesRead: Int
        switch old {
        case .success:
            timesRead = timeFields.count
        case let .failure(error):
            let field = error.field ?? ""
            if let i = timeFields.firstIndex(of: field) {
                timesRead = i
            } else if field == "voip" || field == "alert" || field.hasPrefix("alert.")
                        || (field == "voip_token" && error.problem.hasPrefix("required when alert_token is absent")) {
                timesRead = timeFields.count
            } else {
                timesRead = 0
            }
        }
        for key in timeFields.prefix(timesRead) {
            // Read by the oracle without a problem: an integer, or a whole double it took as one.
            let ms: Int64
            switch (root[key] as? NSNumber).map(LegacyJSONNumber.init) {
            case let .integer(i)?: ms = i
            case let .floating(d)?: ms = Int64(d)
            case .boolean?, .unsigned?, nil: continue
            }
            guard ms - Fixture.entry > CallEvent.largestAheadMs else { continue }
            let unit = ms >= 500_000 * Fixture.entry ? "nanoseconds?" : ms >= 500 * Fixture.entry ? "microseconds?"
                : "a date, not a ringing call's time?"
            return InvalidEvent(field: key, problem: "\(ms) is more than a day after the event was written (\(Fixture.entry)): "
                                                     + "not unix milliseconds of a ringing call (\(unit))")
        }
        return nil
    }

    /// `error` with the event's id and type as far as they can be read, when it had none.
    private static func withIdentity(_ error: InvalidEvent, root: [String: Any]) -> InvalidEvent {
        var error = error
        if error.callID == nil, let id = root["id"] as? String, !id.isEmpty, id.count <= CallEvent.maxIDCharacters {
            error.callID = id
        }
        if error.kind == nil, let type = root["type"] as? String { error.kind = CallEvent.Kind(rawValue: type) }
        return error
    }

    @discardableResult
    private func assertSame(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        assertSame(Array(json.utf8), json.debugDescription, file: file, line: line)
    }

    /// The example event with `voip` replaced by `voip` (raw JSON text).
    private func withVoip(_ voip: String) -> String { Fixture.eventJSON(["voip": voip]) }

    // MARK: Corpus

    func testNumbersAreReadAndWrittenBackAsBefore() {
        let numbers = ["0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.5", "-1.5", "1e2", "1E2", "1e+2", "1e-2", "1.0e0",
                       "2e0", "100e-2", "0e400", "1e-400", "1e-99999", "4.9e-324", "2.2250738585072011e-308",
                       "1.7976931348623157e308", "0.1", "0.30000000000000004", "123456789.123456789",
                       "9007199254740992", "9007199254740993", "9007199254740993.0", "12345678901234567",
                       "999999999999999999", "-999999999999999999", "1000000000000000000", "-1000000000000000000",
                       "9223372036854775807", "9223372036854775808", "-9223372036854775807", "-9223372036854775808",
                       "-9223372036854775809", "18446744073709551615", "18446744073709551616", "10000000000000000000",
                       "123456789012345678901234567890", "-123456789012345678901234567890", "1e19", "1e16", "1e15",
                       "1e400", "-1e400", "1E400", "0.0000000000000000000000000000001e400", "1e99999999999999999999",
                       "01", "-01", "00", "1.", ".5", "+1", "-", "1.5e", "1e", "-e", "0x1", "1.e5", "--1", "1e+", "1e-",
                       "Infinity", "NaN", "-Infinity", "true", "false", "null", "tru", "nul", "fals", "truex"]
        for n in numbers {
            assertSame(withVoip(#"{"n":\#(n)}"#))
            assertSame(withVoip(#"{"n":[\#(n)]}"#))
            assertSame(withVoip(#"{"callerName":\#(n)}"#))
            assertSame(Fixture.eventJSON(["deadline": n]))
            assertSame(Fixture.eventJSON(["v": n]))
            assertSame(Fixture.eventJSON(["sandbox": n]))
            assertSame(n)
        }
    }

    func testStringsEscapesAndEncodingsAreReadAsBefore() {
        let strings = [#""""#, #""a""#, #""\"""#, #""\\""#, #""\/""#, #""\b\f\n\r\t""#, #""\u0000""#, #""\u001f\u007f""#,
                       #""\u00e9\u00E9""#, #""\ud83d\ude00""#, #""\uD83D\uDE00""#, #""\ud800""#, #""\udc00""#,
                       #""\ud800\u0041""#, #""\ud800\ud800""#, #""\ud800x""#, #""\u12""#, #""\u12g4""#, #""\x""#,
                       #""\'""#, #""\""#, #""abc"#, "\"a\u{7F}b\"", "\"é\"", "\"日本\"", "\"😀\"", "\"\u{2028}\"",
                       "\"e\u{301}\"", "\"a\tb\"", "\"a\nb\"", "\"\u{1}\"", "\"<\\/script>\"",
                       // A byte order mark opening a run of raw bytes was dropped by JSONSerialization.
                       "\"\u{FEFF}abc\"", "\"a\u{FEFF}b\"", "\"\\n\u{FEFF}a\"", "\"\u{FEFF}\u{FEFF}a\"", "\"\u{FEFF}\"",
                       "\"\\t\u{FEFF}\"", "\"\\uFEFFa\"", "\"\u{FEFF}\\u0041\u{FEFF}\"", "\"\u{FFFE}\u{FFFF}\u{10FFFF}\""]
        for s in strings {
            assertSame(withVoip(#"{"s":\#(s)}"#))
            assertSame(withVoip(#"{\#(s):1}"#))
            assertSame(withVoip(#"{"callerName":\#(s)}"#))
            assertSame(Fixture.eventJSON(["id": s]))
            assertSame(Fixture.eventJSON(["alert": #"{"title":\#(s),"body":\#(s)}"#]))
        }
        // Invalid UTF-8 inside strings and out: truncated, overlong, surrogate, beyond U+10FFFF, stray bytes.
        let bad: [[UInt8]] = [[0xC3], [0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                              [0xF8, 0x88, 0x80, 0x80, 0x80], [0x80], [0xFF], [0xC3, 0xA9], [0xE2, 0x82, 0xAC],
                              [0xF0, 0x9F, 0x98, 0x80]]
        for b in bad {
            let inString = Array(#"{"id":"x"#.utf8) + b + Array(#"","type":"call_cancelled"}"#.utf8)
            assertSame(inString, "bytes \(b) in a string")
            let inKey = Array(#"{""#.utf8) + b + Array(#"":1,"id":"x","type":"call_cancelled"}"#.utf8)
            assertSame(inKey, "bytes \(b) in a key")
            assertSame(Array(#"{"id":"x","type":"call_cancelled"}"#.utf8) + b, "bytes \(b) after the object")
        }
        // Byte order marks and the other encodings JSONSerialization recognised.
        let cancel = #"{"id":"x","type":"call_cancelled"}"#
        assertSame([0xEF, 0xBB, 0xBF] + Array(cancel.utf8), "UTF-8 BOM")
        assertSame([0xEF, 0xBB, 0xBF, 0xEF, 0xBB, 0xBF] + Array(cancel.utf8), "two UTF-8 BOMs")
        assertSame([0xEF, 0xBB, 0xBF], "a BOM alone")
        assertSame([0xEF, 0xBB], "half a BOM")
        let utf16 = Array(cancel.utf16)
        assertSame(utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16LE")
        assertSame(utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }, "UTF-16BE")
        assertSame([0xFF, 0xFE] + utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16LE with BOM")
        assertSame([0xFE, 0xFF] + utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }, "UTF-16BE with BOM")
        assertSame(cancel.unicodeScalars.flatMap { s in [UInt8(s.value & 0xFF), 0, 0, 0] }, "UTF-32LE")
        assertSame(cancel.unicodeScalars.flatMap { s in [0, 0, 0, UInt8(s.value & 0xFF)] }, "UTF-32BE")
        assertSame([0x31, 0x00], "1 in UTF-16LE")
        assertSame([0x00, 0x31], "1 in UTF-16BE")
        assertSame([0x7B, 0x7D, 0x00], "{} and a NUL")
        assertSame([0x22, 0x00, 0x00, 0x22, 0x00], "NULs in a string")
        assertSame([0x20, 0x00, 0x7B, 0x00, 0x7D, 0x00], "UTF-16LE object")
        assertSame([0xFF, 0xFE, 0x00, 0xD8, 0x22, 0x00], "UTF-16LE, lone surrogate")
    }

    func testStructureWhitespaceAndDuplicatesAreReadAsBefore() {
        let e = Fixture.eventJSON()
        let inner = e.dropFirst().dropLast()
        for doc in ["", " ", "{}", "[]", "[1,2]", #""x""#, "1", "null", "true", "{", "}", "[", "{]", "[}",
                    " \(e) ", "\t\n\r\(e)\r\n\t", "\u{0B}\(e)", "\u{0C}\(e)", "\(e) x", "\(e)\(e)", "\(e),", "\(e)]",
                    "{\(inner),}", "{\(inner) ,}", "{\(inner),,}", "{,\(inner)}", "{\(inner) , }", "{\(inner);}",
                    "{ \(inner.replacingOccurrences(of: ",", with: " , ").replacingOccurrences(of: ":", with: " : ")) }",
                    "{\(inner.replacingOccurrences(of: ",", with: "\n,\t"))}",
                    "{\(inner),\"id\":\"second\"}", "{\"id\":\"first\",\(inner)}", "{\(inner),\"type\":\"call_cancelled\"}",
                    "{\(inner),\"voip\":null}", "{\(inner),\"voip\":{}}", "{\(inner),\"alert\":null,\"alert\":{\"title\":\"t\"}}",
                    "{\(inner),\"v\":1,\"v\":2}", "{\(inner),\"v\":2,\"v\":1}", "{\(inner),\"id\":1}",
                    "{\(inner),\"x\":[1,]}", "{\(inner),\"x\":[1 ,]}", "{\(inner),\"x\":[,]}", "{\(inner),\"x\":[1,,2]}",
                    "{\(inner),\"x\":[1 2]}", "{\(inner),\"x\":{\"a\":}}", "{\(inner),\"x\":{\"a\"}}", "{\(inner),\"x\":{1:2}}",
                    "{\(inner),\"x\":{\"a\":1,}}", "{\(inner),\"x\":[[[[[[[[[[1]]]]]]]]]]}", "{\(inner),\"x\":[[[1]]}",
                    "{\(inner),\"x\":\"unterminated}", "{\(inner),\"x\":tru}", "{\(inner),\"x\":nulll}", "{\(inner),1}",
                    "{'id':'x'}", "{\"id\":\"x\",\"type\":\"call_cancelled\"}garbage"] {
            assertSame(doc)
        }
        // Duplicate and canonically equivalent keys in `voip`: the last value under the first spelling.
        for voip in [#"{"a":1,"a":2}"#, #"{"a":1,"b":2,"a":3}"#, #"{"K":1,"\#u{212A}":2}"#, #"{"\#u{212A}":1,"K":2}"#,
                     #"{"\#u{E9}":1,"e\#u{301}":2}"#, #"{"e\#u{301}":1,"\#u{E9}":2,"f":3}"#, #"{"id":null}"#,
                     #"{"deadline":null,"id":7}"#, #"{"id":"a","id":"b"}"#, #"{"callerName":"A","callerName":"B"}"#,
                     #"{"caller":"1","caller":null}"#, #"{"o":{"z":1,"z":{"y":2,"y":3}}}"#, #"{"":1,"":2}"#,
                     #"{"a\u0000":1,"a":2}"#, #"{"ab":1,"a":2,"abcdefghi":3,"abcdefgh":4,"abcdefgh\u0000":5}"#] {
            assertSame(withVoip(voip))
        }
        // More than 16 members, so duplicates are merged through a dictionary.
        assertSame("{\(inner),\"\u{FEFF}type\":\"call_cancelled\"}")
        assertSame("{\(inner),\"\u{FEFF}\u{FEFF}type\":\"call_cancelled\"}")
        let many = (0..<40).map { #""k\#($0 % 25)":\#($0)"# } + [#""K":1"#, "\"\u{212A}\":2", "\"\u{E9}\":3", "\"e\u{301}\":4"]
        assertSame(withVoip("{" + many.joined(separator: ",") + "}"))
        assertSame("{" + many.joined(separator: ",") + "," + inner + "}")
    }

    func testTemplatesAreFilledAsBefore() {
        let names = [nil, "", "Alice", "{caller}", "{callerName}", "é", "e\u{301}", "\r\n", String(repeating: "a", count: 256),
                     String(repeating: "a", count: 257), String(repeating: "é", count: 300), String(repeating: "e\u{301}", count: 300),
                     String(repeating: "😀", count: 260), "A\"B\\C\u{1}"]
        let templates = ["", "Missed call", "{callerName} tried to call you", "{caller}{callerName}{caller}", "{", "}", "{{caller}}",
                         "{caller", "{callerName", "{callerNam}", "{Caller}", "x{caller}\r\n{callerName}y", "{caller}\u{301}",
                         "\u{301}{caller}", "Appel manqué de {callerName}", "{callerName} 📞", "{\u{301}caller}", "{ caller}",
                         "\r\n{caller}\r\n"]
        for title in templates {
            for body in templates.prefix(6) + [title] {
                let t = FallbackTemplate(title: title, body: body, sound: nil, unknownCaller: "Someone")
                for name in names {
                    for number in [nil, "+15551234567", "{callerName}", ""] {
                        let new = t.render(callerName: name, caller: number)
                        let old = LegacyDecoder.render(t, callerName: name, caller: number)
                        XCTAssertTrue(new.title.utf8.elementsEqual(old.title.utf8) && new.body.utf8.elementsEqual(old.body.utf8),
                                      "\(title.debugDescription) / \(body.debugDescription) with \(String(describing: name)), "
                                      + "\(String(describing: number))")
                    }
                }
            }
        }
    }

    /// The day-ahead rule where the oracle refused the event for a field it reads after the
    /// times (or accepted it): the time's problem is reported, as the decoder reads the times
    /// first; a problem found before the times is still the one reported.
    func testATimeTooFarAheadIsReportedBeforeProblemsFoundAfterIt() {
        let far = "\(Fixture.entry * 1000)"
        let cases: [([String: String?], String)] = [
            (["deadline": far], "deadline"),
            (["deadline": far, "voip": "[1]"], "deadline"),
            (["deadline": far, "alert": #""x""#], "deadline"),
            (["voip_token_registered_at": far, "alert": #"{"title":1}"#], "voip_token_registered_at"),
            (["alert_token_registered_at": far, "voip_token": nil, "alert_token": nil], "alert_token_registered_at"),
            (["deadline": #""x""#, "voip_token_registered_at": far], "deadline"),
            (["deadline": "1", "alert_token_registered_at": far], "deadline"),
            (["sandbox": "0", "deadline": far], "sandbox"),
        ]
        for (changes, field) in cases {
            let json = Fixture.eventJSON(changes)
            XCTAssertFalse(assertSame(json), json)
            XCTAssertThrowsError(try CallEvent.decode(Array(json.utf8), entryTimeMs: Fixture.entry, policy: policy), json) { error in
                XCTAssertEqual((error as? InvalidEvent)?.field, field, json)
            }
        }
    }

    func testOutcomeRecordsAreWrittenAsBefore() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<500 {
            let attempts = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                AttemptRecord(sentAtMs: Int64.random(in: Int64.min...Int64.max, using: &rng), channel: Bool.random(using: &rng) ? .voip : .alert,
                              status: Bool.random(using: &rng) ? Int.random(in: -1000...1000, using: &rng) : nil,
                              reason: rng.maybeString(), error: rng.maybeString(), apnsID: rng.maybeString())
            }
            let record = OutcomeRecord(outcome: CallOutcome.allCases.randomElement(using: &rng)!, id: rng.maybeString(),
                                       type: Bool.random(using: &rng) ? CallEvent.Kind.allCases.randomElement(using: &rng) : nil,
                                       app: rng.string(), channel: Bool.random(using: &rng) ? .alert : nil,
                                       apnsID: rng.maybeString(), cause: FallbackCause.allCases.randomElement(using: &rng),
                                       reason: rng.maybeString(),
                                       latencyMs: Bool.random(using: &rng) ? Int64.random(in: -5...Int64.max, using: &rng) : nil,
                                       attempts: attempts)
            XCTAssertEqual(record.json(), LegacyDecoder.json(record), String(decoding: LegacyDecoder.json(record), as: UTF8.self))
        }
        XCTAssertEqual(OutcomeRecord(outcome: .cancelled, id: nil, type: nil, app: "").jsonString,
                       #"{"outcome":"cancelled","app":"","attempts":[]}"#)
    }

    func testStringsAreEscapedAsBefore() {
        var rng = SplitMix64(seed: 11)
        for _ in 0..<3_000 {
            let s = rng.string()
            var new = JSONWriter()
            new.string(s)
            var old = LegacyJSONWriter()
            old.string(s)
            XCTAssertEqual(new.bytes, old.bytes, s.debugDescription)
        }
        for v: Int64 in [0, 1, -1, 9, 10, -10, 99, 100, Int64.max, Int64.min, Int64.min + 1, 1_764_412_330_000] {
            var w = JSONWriter(capacity: 0)
            w.int(v)
            XCTAssertEqual(String(decoding: w.bytes, as: UTF8.self), String(v))
        }
        var w = JSONWriter(capacity: 0)
        w.unsigned(UInt64.max)
        XCTAssertEqual(String(decoding: w.finish(), as: UTF8.self), String(UInt64.max))
    }

    // MARK: Random input

    /// Random JSON documents (random values, whitespace, escapes, number forms) as `voip`, as
    /// `alert`, as fields, and as the whole event.
    func testRandomDocumentsDecodeAsBefore() {
        var rng = SplitMix64(seed: 2024)
        var accepted = 0
        for round in 0..<1_500 {
            let voip = rng.jsonObject(depth: 0)
            if assertSame(Array(withVoip(voip).utf8), "round \(round): voip \(voip)") { accepted += 1 }
            let field = ["v", "id", "type", "voip_token", "alert_token", "sandbox", "deadline", "alert", "voip",
                         "voip_token_registered_at", "alert_token_registered_at"].randomElement(using: &rng)!
            let value = rng.jsonValue(depth: 1)
            assertSame(Array(Fixture.eventJSON([field: value]).utf8), "round \(round): \(field) = \(value)")
            if round % 10 == 0 {
                let doc = rng.jsonValue(depth: 0)
                assertSame(Array(doc.utf8), "round \(round): \(doc)")
            }
        }
        XCTAssertGreaterThan(accepted, 1_000, "random VoIP dictionaries are accepted (unless over 5120 bytes)")
    }

    /// Valid events cut, flipped, spliced and extended at random; and random bytes.
    func testMutatedAndRandomBytesDecodeAsBefore() {
        var rng = SplitMix64(seed: 99)
        let seeds = [Fixture.eventJSON(), Fixture.eventJSON(["alert": #"{"title":"T","body":"B\n\u00e9"}"#, "x": #"[1,{"a":null}]"#]),
                     #"{"id":"call-1","type":"call_cancelled"}"#, Fixture.eventJSON(["voip": #"{"n":[1.5,-3,1e2],"s":"\"\\"}"#])]
        let alphabet = Array(#"{}[]:,"\ 0123456789-+.eEtrufalsn"#.utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xA9, 0xFF, 0x1F]
        var accepted = 0
        for round in 0..<4_000 {
            var b = Array(seeds.randomElement(using: &rng)!.utf8)
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let at = Int.random(in: 0...b.count, using: &rng)
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where at < b.count: b[at] = alphabet.randomElement(using: &rng)!
                case 1: b.insert(alphabet.randomElement(using: &rng)!, at: at)
                case 2 where at < b.count: b.removeSubrange(at..<min(b.count, at + Int.random(in: 1...8, using: &rng)))
                case 3 where !b.isEmpty:
                    let from = Int.random(in: 0..<b.count, using: &rng)
                    b.insert(contentsOf: b[from..<min(b.count, from + Int.random(in: 1...12, using: &rng))], at: at)
                default: b = Array(b.prefix(at))
                }
            }
            if assertSame(b, "round \(round): \(b)") { accepted += 1 }
        }
        XCTAssertGreaterThan(accepted, 200, "mutations that still decode, so that path is compared too")
        for round in 0..<3_000 {
            let n = Int.random(in: 0...40, using: &rng)
            let b = (0..<n).map { _ in
                Bool.random(using: &rng) ? alphabet.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            }
            assertSame(b, "random round \(round): \(b)")
        }
    }

    // MARK: The parser alone

    func testNestingIsBoundedAt64Levels() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        XCTAssertNoThrow(try JSONParser.parse(Array(ok.utf8)))
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        XCTAssertThrowsError(try JSONParser.parse(Array(deep.utf8))) { error in
            XCTAssertEqual("\(error)", "nested deeper than 64 levels at byte 64")
        }
        let objects = String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65)
        XCTAssertThrowsError(try JSONParser.parse(Array(objects.utf8)))
        // A deep `voip` is refused as not JSON (JSONSerialization took up to 512 levels), naming
        // the start of the path where it happened.
        let voip = String(repeating: #"{"a":"#, count: 64) + "1" + String(repeating: "}", count: 64)
        XCTAssertThrowsError(try CallEvent.decode(Array(withVoip(voip).utf8), entryTimeMs: Fixture.entry, policy: policy)) { error in
            let path = "voip" + String(repeating: ".a", count: 30)
            XCTAssertEqual((error as? InvalidEvent)?.field, path + "…")
            XCTAssertTrue("\(error)".hasPrefix(path + "…: not JSON: nested deeper than 64 levels at byte "), "\(error)")
        }
        // Even 64 KiB of brackets neither crashes nor recurses past the bound.
        XCTAssertThrowsError(try JSONParser.parse(Array(repeating: UInt8(ascii: "["), count: CallEvent.maxEventBytes)))
    }

    func testTheParserKeepsNumberKindsAndMemberOrder() throws {
        let v = try JSONParser.parse(Array(#"{"b":[1,-2,1.0,18446744073709551615,-9223372036854775808,true,null,"s"],"a":{}}"#.utf8))
        let expected = JSONValue.object(JSONObject(members: [
            JSONMember(key: "b", value: .array([.int(1), .int(-2), .double(1), .uint(.max), .double(-9_223_372_036_854_775_808),
                                                .bool(true), .null, .string("s")])),
            JSONMember(key: "a", value: .object(JSONObject(members: []))),
        ]))
        XCTAssertEqual(v, expected)
    }

    func testErrorsSayWhatAndWhere() {
        for (text, message) in [("", "unexpected end of input at byte 0"), ("{\"a\":x}", "unexpected 'x' where a value should start at byte 5"),
                                ("[1 2]", "unexpected '2' (expected ',' or ']') at byte 3"), ("01", "number with a leading zero at byte 1"),
                                ("\"abc", "unterminated string at byte 0"), ("1e400", "number 1e400 is out of range at byte 0"),
                                ("\"\\q\"", "invalid escape sequence at byte 1"), ("\"\u{1}\"", "unescaped control character in a string at byte 1"),
                                ("{} x", "unexpected 'x' after the value at byte 3"), ("tru", "unexpected end of input in true at byte 3")] {
            XCTAssertThrowsError(try JSONParser.parse(Array(text.utf8)), text.debugDescription) { error in
                XCTAssertEqual("\(error)", message, text.debugDescription)
            }
        }
    }

    /// Random bytes never crash the parser: each either parses or throws.
    func testRandomBytesNeverCrashTheParser() {
        var rng = SplitMix64(seed: 5)
        let alphabet = Array(#"{}[]:,"\ 0123456789-.eEtrufalsn"#.utf8)
        var parsed = 0
        for _ in 0..<50_000 {
            let n = Int.random(in: 0...64, using: &rng)
            let b = (0..<n).map { _ in
                Int.random(in: 0..<4, using: &rng) == 0 ? UInt8.random(in: 0...255, using: &rng) : alphabet.randomElement(using: &rng)!
            }
            if (try? JSONParser.parse(b)) != nil { parsed += 1 }
        }
        XCTAssertGreaterThan(parsed, 0, "some random inputs are JSON")
    }
}

/// A small seeded generator (SplitMix64), so every run sees the same "random" input.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A string mixing ASCII, control characters, quotes, backslashes and non-ASCII, 0…40 scalars.
    mutating func string() -> String {
        let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "/", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{8}", "\u{C}",
                                      "\u{1F}", "\u{7F}", "é", "\u{301}", "日", "😀", "\u{2028}", "{", "}", "K", "\u{212A}"]
        var s = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...40, using: &self) { s.append(pool.randomElement(using: &self)!) }
        return String(s)
    }

    mutating func maybeString() -> String? { Bool.random(using: &self) ? string() : nil }

    /// Optional whitespace of the four JSON kinds.
    mutating func space() -> String {
        Int.random(in: 0..<4, using: &self) == 0 ? String((0..<Int.random(in: 1...3, using: &self)).map { _ in [" ", "\t", "\n", "\r"].randomElement(using: &self)! }) : ""
    }

    /// A JSON string literal, with escapes of every kind.
    mutating func jsonString() -> String {
        var out = "\""
        for _ in 0..<Int.random(in: 0...12, using: &self) {
            out += ["a", "b", "K", "\u{212A}", "é", "e\u{301}", "日", "😀", "\u{FEFF}", "\\uFEFF", "\\\"", "\\\\", "\\/", "\\n", "\\t", "\\u0000", "\\u001F",
                    "\\u00e9", "\\uD83D\\uDE00", "/", " ", "\u{7F}", "\u{2028}", "id", "deadline", "caller"].randomElement(using: &self)!
        }
        return out + "\""
    }

    mutating func jsonNumber() -> String {
        switch Int.random(in: 0..<8, using: &self) {
        case 0: return String(Int64.random(in: -1000...1000, using: &self))
        case 1: return String(Int64.random(in: Int64.min...Int64.max, using: &self))
        case 2: return String(UInt64.random(in: UInt64(Int64.max)...UInt64.max, using: &self))
        case 3: return String(Double.random(in: -1e6...1e6, using: &self))
        case 4: return "\(Int.random(in: 0...99, using: &self))e\(["", "+", "-"].randomElement(using: &self)!)\(Int.random(in: 0...330, using: &self))"
        case 5: return ["0", "-0", "0.0", "-0.0", "1.0", "1E2", "100e-2", "123456789012345678901234567890"].randomElement(using: &self)!
        case 6: return "-" + String(UInt64.random(in: 100_000_000_000_000_000...UInt64.max, using: &self))
        default: return "\(Int.random(in: 0...9, using: &self)).\(Int.random(in: 0...999_999, using: &self))"
        }
    }

    mutating func jsonValue(depth: Int) -> String {
        let choice = Int.random(in: 0..<(depth < 4 ? 8 : 5), using: &self)
        switch choice {
        case 0: return ["true", "false", "null"].randomElement(using: &self)!
        case 1, 2: return jsonNumber()
        case 3, 4: return jsonString()
        case 5: return jsonObject(depth: depth + 1)
        default:
            let elements = (0..<Int.random(in: 0...4, using: &self)).map { _ in space() + jsonValue(depth: depth + 1) + space() }
            return "[" + elements.joined(separator: ",") + (elements.isEmpty || Int.random(in: 0..<8, using: &self) > 0 ? "" : ",") + "]"
        }
    }

    mutating func jsonObject(depth: Int) -> String {
        let members = (0..<Int.random(in: 0...6, using: &self)).map { _ in
            space() + jsonString() + space() + ":" + space() + jsonValue(depth: depth + 1) + space()
        }
        return "{" + members.joined(separator: ",") + (members.isEmpty || Int.random(in: 0..<8, using: &self) > 0 ? "" : ",") + "}"
    }
}
