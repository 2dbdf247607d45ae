import Foundation
import JSONOutput
import XCTest

/// The one JSON writer off the hot path: what it escapes, what it leaves, and how a log line's
/// fields (`[String: Any]`) are written.
final class OrderedJSONTests: XCTestCase {
    func testKeysKeepTheOrderGivenAndStringsAreEscapedButSlashesAreNot() {
        let json = OrderedJSON.object([("z", .string("a/b \"q\" \\ \n\u{1}é")), ("a", .int(-3)), ("m", .null),
                                       ("b", .array([.bool(true), .bool(false)]))])
        XCTAssertEqual(json.text, #"{"z":"a/b \"q\" \\ \n\u0001é","a":-3,"m":null,"b":[true,false]}"#)
        XCTAssertFalse(json.text.contains(#"\/"#), "a slash is written as it is")
    }

    func testALogLinesFieldsAreWrittenWithSortedKeysAndTheirTypesKept() throws {
        let fields: [String: Any] = [
            "msg": "GET /status", "count": 3, "big": Int64.max, "ok": true, "ratio": 0.25, "whole": 2.0,
            "nested": ["b": 1, "a": ["x"]] as [String: Any], "list": [1, "two"] as [Any], "none": Optional<Int>.none as Any,
            "some": Optional(7) as Any, "error": URLError(.timedOut),
        ]
        let text = OrderedJSON(loggable: fields).text
        let keys = ["big", "count", "error", "list", "msg", "nested", "none", "ok", "ratio", "some", "whole"]
        let parsed = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        XCTAssertEqual(parsed?.keys.sorted(), keys, "every field is written, none drops the line: \(text)")
        XCTAssertTrue(text.hasPrefix(#"{"big":9223372036854775807,"count":3,"error":""#), text)
        XCTAssertTrue(text.contains(#""list":[1,"two"],"msg":"GET /status","nested":{"a":["x"],"b":1},"none":null,"ok":true,"ratio":0.25,"some":7,"whole":2}"#),
                      text)
        let error = try XCTUnwrap(parsed?["error"] as? String)
        XCTAssertFalse(error.isEmpty, "a value of another type is written as its description")
    }

    func testEveryIntegerTypeIsANumberAndOneBeyondInt64IsWrittenExactlyAsAString() {
        let fields: [String: Any] = ["a": UInt16(8080), "b": Int8(-1), "c": UInt(7), "d": UInt64.max, "e": Int32.min]
        XCTAssertEqual(OrderedJSON(loggable: fields).text, #"{"a":8080,"b":-1,"c":7,"d":"18446744073709551615","e":-2147483648}"#)
    }

    func testNumbersThatAreNotFiniteAreWrittenAsStringsNotAsInvalidJSON() {
        let text = OrderedJSON(loggable: ["inf": Double.infinity, "nan": Double.nan] as [String: Any]).text
        XCTAssertEqual(text, #"{"inf":"inf","nan":"nan"}"#)
    }

    func testEmbeddedJSONIsOnlyMadeFromJSONAndWrittenAsItWasSpelled() throws {
        XCTAssertNil(EmbeddedJSON("{not json"))
        XCTAssertNil(EmbeddedJSON(#"{"a":1}, "b""#), "one value, not two")
        let event = try XCTUnwrap(EmbeddedJSON(#"{"type":"incoming_call","n":1.0,"a":[1e2]}"#))
        XCTAssertEqual(OrderedJSON.object([("event", .embedded(event))]).text, #"{"event":{"type":"incoming_call","n":1.0,"a":[1e2]}}"#,
                       "keys and numbers as the producer wrote them")
    }
}
