import FCM
import Foundation
import XCTest
@testable import Routing

/// The FCM messages of a call, byte for byte: a ring is a data-only message at high priority
/// whose TTL is the whole seconds left to the deadline (never longer) and whose collapse key is
/// the call id, its data values strings; a missed call is a notification at normal priority
/// tagged with the call id; the end of a ring elsewhere is a high-priority data message.
final class FcmMessagesTests: XCTestCase {
    private func fields(_ json: String) throws -> [JSONMember] {
        guard case let .object(o) = try JSONParser.parse(Array(json.utf8)) else { throw XCTSkip("not an object") }
        return o.unique
    }

    func testARingIsAHighPriorityDataMessageThatLivesUntilTheDeadline() throws {
        let voip = try fields(#"{"caller":"+15551234567","callerName":"Alice","video":true,"n":3,"extra":{"a":[1]},"from":"x","google.x":"y","id":"ignored"}"#)
        let message = try XCTUnwrap(FcmMessages.ring(token: "tok:APA91", callID: "call-7f3a9c", deadlineMs: 1_700_000_027_999,
                                                     nowMs: 1_700_000_000_500, fields: voip))
        XCTAssertEqual(message.token, "tok:APA91")
        XCTAssertEqual(String(decoding: message.body, as: UTF8.self),
                       #"{"message":{"token":"tok:APA91","android":{"priority":"HIGH","ttl":"27s","collapse_key":"call-7f3a9c"},"#
                           + #""data":{"caller":"+15551234567","callerName":"Alice","deadline":"1700000027999","extra":"{\"a\":[1]}","#
                           + #""id":"call-7f3a9c","n":"3","type":"incoming_call","video":"true"}}}"#)
        let parsed = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(message.body)) as? [String: Any])
        let data = try XCTUnwrap((parsed["message"] as? [String: Any])?["data"] as? [String: Any])
        XCTAssertTrue(data.values.allSatisfy { $0 is String }, "FCM's data values are strings")
        XCTAssertNil(data["from"], "reserved keys are left out")
        XCTAssertNil(data["google.x"])
    }

    func testARingIsNeverSentPastItsDeadline() throws {
        XCTAssertNil(FcmMessages.ring(token: "t", callID: "c", deadlineMs: 1000, nowMs: 1000, fields: []))
        XCTAssertNil(FcmMessages.ring(token: "t", callID: "c", deadlineMs: 1000, nowMs: 2000, fields: []))
        let last = try XCTUnwrap(FcmMessages.ring(token: "t", callID: "c", deadlineMs: 1999, nowMs: 1000, fields: []))
        XCTAssertTrue(String(decoding: last.body, as: UTF8.self).contains(#""ttl":"0s""#), "under a second left: now or never")
        XCTAssertNil(FcmMessages.ring(token: "", callID: "c", deadlineMs: 5000, nowMs: 1000, fields: []), "FCM's client refuses an empty token")
    }

    func testAMissedCallIsATaggedNotification() throws {
        let message = try XCTUnwrap(FcmMessages.missedCall(token: "t", callID: "call-1", title: "Missed call",
                                                           body: "Alice tried to call you", ttlSeconds: 86_400))
        XCTAssertEqual(String(decoding: message.body, as: UTF8.self),
                       #"{"message":{"token":"t","notification":{"title":"Missed call","body":"Alice tried to call you"},"#
                           + #""android":{"priority":"NORMAL","ttl":"86400s","notification":{"tag":"call-1"}},"#
                           + #""data":{"id":"call-1","type":"missed_call"}}}"#)
    }

    func testTheEndOfARingElsewhere() throws {
        let message = try XCTUnwrap(FcmMessages.callEnded(token: "t", callID: "call-1", ended: "answered", deadlineMs: 31_000, nowMs: 1_000))
        XCTAssertEqual(String(decoding: message.body, as: UTF8.self),
                       #"{"message":{"token":"t","android":{"priority":"HIGH","ttl":"30s","collapse_key":"call-1"},"#
                           + #""data":{"ended":"answered","id":"call-1","type":"call_ended"}}}"#)
        XCTAssertNil(FcmMessages.callEnded(token: "t", callID: "c", ended: "answered", deadlineMs: 1_000, nowMs: 1_000))
    }
}
