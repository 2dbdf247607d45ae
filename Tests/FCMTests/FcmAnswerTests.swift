import APNs
import Foundation
import XCTest
@testable import FCM

/// FCM's answers read from Google's bodies and classified once, by `FcmErrorCode.table`: the
/// FcmError detail's `errorCode` before the API status, an `INVALID_ARGUMENT` about the token an
/// invalid token, an unknown code by its status. No sockets.
final class FcmAnswerTests: XCTestCase {
    private func response(_ status: Int, _ body: String, retryAfter: Int64? = nil) -> FcmResponse {
        FcmResponse(ProviderPostAnswer(status: status, body: Array(body.utf8), retryAfterSeconds: retryAfter))
    }

    func testEachCodeIsInTheTableOnce() {
        let texts = FcmErrorCode.table.map(\.text)
        XCTAssertEqual(Set(texts).count, texts.count)
        for row in FcmErrorCode.table {
            XCTAssertEqual(FcmErrorCode(text: row.text, status: 0), row.reason)
            XCTAssertEqual(row.reason.text, row.text)
            XCTAssertEqual(row.reason.status, row.status)
            XCTAssertEqual(row.reason.kind, row.kind)
        }
        XCTAssertEqual(FcmErrorCode(text: "SOMETHING_NEW", status: 503).kind, .retryable)
        XCTAssertEqual(FcmErrorCode(text: "SOMETHING_NEW", status: 403).kind, .credential)
        XCTAssertEqual(FcmErrorCode(text: "SOMETHING_NEW", status: 400).kind, .requestError)
        XCTAssertEqual(FcmErrorCode(text: "SOMETHING_NEW", status: 400).text, "SOMETHING_NEW")
    }

    func testTheDetailsCodeComesBeforeTheStatus() {
        let thirdParty = response(401, #"{"error":{"code":401,"message":"Auth error from APNS or Web Push Service","status":"UNAUTHENTICATED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"THIRD_PARTY_AUTH_ERROR"}]}}"#)
        XCTAssertEqual(thirdParty.code, .thirdPartyAuthError)
        XCTAssertEqual(thirdParty.kind, .credential, "not a refused access token")
        let expired = response(401, #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#)
        XCTAssertEqual(expired.code, .unauthenticated)
        XCTAssertEqual(expired.kind, .renewAccessToken)
        let unregistered = response(404, #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#)
        XCTAssertEqual(unregistered.kind, .tokenInvalid)
        XCTAssertEqual(unregistered.reasonText, "UNREGISTERED")
    }

    func testAnInvalidArgumentAboutTheTokenIsAnInvalidToken() {
        let token = response(400, #"{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#)
        XCTAssertTrue(token.namesToken)
        XCTAssertEqual(token.kind, .tokenInvalid)
        let field = response(400, #"{"error":{"code":400,"message":"Invalid value","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}"#)
        XCTAssertEqual(field.kind, .tokenInvalid)
        let ttl = response(400, #"{"error":{"code":400,"message":"Invalid value at 'message.android.ttl'","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.android.ttl"}]}]}}"#)
        XCTAssertFalse(ttl.namesToken)
        XCTAssertEqual(ttl.kind, .requestError)
    }

    func testRetryAfterAndBodiesThatAreNotGooglesAreReadByStatus() {
        let quota = response(429, #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#, retryAfter: 30)
        XCTAssertEqual(quota.code, .quotaExceeded)
        XCTAssertEqual(quota.retryAfterSeconds, 30)
        XCTAssertEqual(response(502, "<html>Bad Gateway</html>").kind, .retryable)
        XCTAssertNil(response(502, "<html>Bad Gateway</html>").code)
        XCTAssertEqual(response(502, "").reasonText, "HTTP 502")
        let accepted = response(200, #"{"name":"projects/p/messages/0:1"}"#)
        XCTAssertTrue(accepted.isAccepted)
        XCTAssertNil(accepted.kind)
        XCTAssertEqual(accepted.messageName, "projects/p/messages/0:1")
    }
}
