import DeadLetters
import Foundation
import RedisClient
import XCTest

/// One exported entry (`pushgw export`): `{"id","time_ms","fields"}`, the fields sorted by name
/// and kept as text, a result's `result` as its JSON, bytes that are not UTF-8 beside their
/// base64.
final class ExportLineTests: XCTestCase {
    func testFieldsAreTextButAResultIsItsJSONAndOtherBytesComeWithTheirBase64() {
        let result = StreamEntry(id: "1796000000000-3", fields: ["result": #"{"outcome":"expired","id":"c-1"}"#])
        XCTAssertEqual(DeadLetterOperations.exportLine(result, of: .results),
                       #"{"id":"1796000000000-3","time_ms":1796000000000,"fields":{"result":{"outcome":"expired","id":"c-1"}}}"#)
        XCTAssertEqual(DeadLetterOperations.exportLine(result, of: .dead),
                       #"{"id":"1796000000000-3","time_ms":1796000000000,"fields":{"result":"{\"outcome\":\"expired\",\"id\":\"c-1\"}"}}"#,
                       "only a result's result is parsed")
        let notJSON = StreamEntry(id: "5-0", fields: ["result": "not json"])
        XCTAssertEqual(DeadLetterOperations.exportLine(notJSON, of: .results), #"{"id":"5-0","time_ms":5,"fields":{"result":"not json"}}"#)
        let bytes = StreamEntry(id: "7-1", values: ["reason": Array("invalid_event".utf8), "event": [0x7b, 0xff, 0x7d]])
        XCTAssertEqual(DeadLetterOperations.exportLine(bytes, of: .dead),
                       #"{"id":"7-1","time_ms":7,"fields":{"event":"{\#u{FFFD}}","event_base64":"e/99","reason":"invalid_event"}}"#)
    }
}
