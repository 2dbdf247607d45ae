@testable import APNs
import CNGHTTP2
import XCTest

/// The request headers of a push, laid out in a connection's fixed buffer: every write is
/// bounded, and what does not fit is refused whole (never truncated, never written past the
/// buffer; `make test` runs these under AddressSanitizer).
final class RequestHeaderBlockTests: XCTestCase {
    private func push(token: String = String(repeating: "ab", count: 32), expiration: Int64? = 1_764_412_345) throws
        -> PushNotification {
        try PushNotification(deviceToken: token, bundleID: "com.acme.phone", pushType: .voip, payload: Array("{}".utf8),
                             expiration: expiration, apnsID: "123e4567-e89b-12d3-a456-426614174000")
    }

    /// The fields as (name, value) texts.
    private func fields(_ built: (UnsafePointer<nghttp2_nv>, Int)) -> [(String, String)] {
        (0..<built.1).map { i in
            let f = built.0[i]
            return (String(decoding: UnsafeBufferPointer(start: f.name, count: f.namelen), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(start: f.value, count: f.valuelen), as: UTF8.self))
        }
    }

    func testATokenOrTopicLongerThanAPNsCouldIssueIsRefusedByThePushItself() throws {
        for digits in [16_040, 16_048, 60_000] {
            XCTAssertThrowsError(try push(token: String(repeating: "a", count: digits)), "\(digits) digits") {
                XCTAssertEqual($0 as? PushNotificationError, .deviceTokenTooLong(digits: digits, limit: 400))
                XCTAssertEqual("\($0)", "device token is \(digits) hex digits, over the 400-digit limit")
            }
        }
        XCTAssertNoThrow(try push(token: String(repeating: "a", count: PushNotification.maxTokenHexDigits)))
        let longBundle = "com." + String(repeating: "a", count: 20_000)
        XCTAssertThrowsError(try PushNotification(deviceToken: "ab", bundleID: longBundle, pushType: .voip,
                                                  payload: Array("{}".utf8))) {
            XCTAssertEqual($0 as? PushNotificationError, .invalidTopic(bytes: 20_009))
        }
        XCTAssertThrowsError(try PushNotification(deviceToken: "ab", topic: "com.acme\r\nx-injected: 1", pushType: .alert,
                                                  payload: Array("{}".utf8)), "a topic cannot carry a line break")
    }

    func testATopicIsVisibleASCIIOnly() {
        for bad in ["", "com.acme app", "com.acme\u{7F}", "com.acme\t", "com.acmé", "com.acme\u{0}"] {
            XCTAssertFalse(PushNotification.isTopic(bad), "\(Array(bad.utf8))")
        }
        for good in ["!", "~", "com.acme.app.voip", String(repeating: "a", count: PushNotification.maxTopicBytes)] {
            XCTAssertTrue(PushNotification.isTopic(good), good)
        }
        XCTAssertFalse(PushNotification.isTopic(String(repeating: "a", count: PushNotification.maxTopicBytes + 1)))
    }

    func testAProviderPostIsLaidOutAfterTheSamePseudoHeadersWithItsOwnBearer() throws {
        let block = RequestHeaderBlock(authority: "fcm.googleapis.com")
        let post = ProviderPost(path: "/v1/projects/acme/messages:send", bearerToken: "ya29.token", body: Array("{}".utf8))
        let built = fields(try block.build(post))
        XCTAssertEqual(built.map(\.0), [":method", ":scheme", ":authority", ":path", "authorization", "content-type"])
        XCTAssertEqual(built[2].1, "fcm.googleapis.com")
        XCTAssertEqual(built[3].1, "/v1/projects/acme/messages:send")
        XCTAssertEqual(built[4].1, "Bearer ya29.token", "OAuth's spelling of the scheme")
        XCTAssertEqual(built[5].1, "application/json")
        // The same token as an APNs JWT on the same block is laid out again in Apple's spelling.
        XCTAssertEqual(fields(try block.build(try push(), bearerToken: "ya29.token"))[4].1, "bearer ya29.token")
        XCTAssertEqual(fields(try block.build(post))[4].1, "Bearer ya29.token")
        let exchange = fields(try block.build(ProviderPost(path: "/token", contentType: "application/x-www-form-urlencoded",
                                                           bearerToken: nil, body: Array("a=b".utf8))))
        XCTAssertEqual(exchange.map(\.0), [":method", ":scheme", ":authority", ":path", "content-type"], "no bearer")
        let huge = ProviderPost(path: "/v1/projects/" + String(repeating: "p", count: RequestHeaderBlock.byteCapacity), bearerToken: "t",
                                body: Array("{}".utf8))
        XCTAssertThrowsError(try block.build(huge)) { XCTAssertTrue("\($0)".hasPrefix("request headers too large at :path"), "\($0)") }
        XCTAssertEqual(fields(try block.build(post))[3].1, "/v1/projects/acme/messages:send", "the block stays usable")
    }

    func testHeadersThatDoNotFitAreRefusedAndTheBlockStaysUsable() throws {
        let block = RequestHeaderBlock(authority: "api.push.apple.com")
        let n = try push()
        // A bearer that alone overflows the block, then one that leaves room only for part of
        // the push's own fields: both refused whole.
        for bearerBytes in [RequestHeaderBlock.byteCapacity + 10, RequestHeaderBlock.byteCapacity - 120] {
            XCTAssertThrowsError(try block.build(n, bearerToken: String(repeating: "j", count: bearerBytes)),
                                 "a \(bearerBytes)-byte bearer") { error in
                XCTAssertTrue("\(error)".hasPrefix("request headers too large at "), "\(error)")
            }
        }
        let built = fields(try block.build(n, bearerToken: "jwt.jwt.jwt"))
        XCTAssertEqual(built.map(\.0), [":method", ":scheme", ":authority", ":path", "authorization", "apns-push-type",
                                        "apns-topic", "apns-priority", "apns-expiration", "apns-id"])
        XCTAssertEqual(built[2].1, "api.push.apple.com")
        XCTAssertEqual(built[3].1, "/3/device/" + String(repeating: "ab", count: 32))
        XCTAssertEqual(built[4].1, "bearer jwt.jwt.jwt")
        XCTAssertEqual(built[8].1, "1764412345", "the expiration is whole, never cut")
        let certificate = fields(try block.build(try push(expiration: 0), bearerToken: nil))
        XCTAssertFalse(certificate.contains { $0.0 == "authorization" }, "no bearer for certificate auth")
        XCTAssertEqual(certificate.first { $0.0 == "apns-expiration" }?.1, "0")
    }

    func testAnAuthorityThatDoesNotFitFailsEveryBuildCleanly() throws {
        let block = RequestHeaderBlock(authority: String(repeating: "h", count: RequestHeaderBlock.byteCapacity))
        for _ in 0..<2 {
            XCTAssertThrowsError(try block.build(try push(), bearerToken: nil)) { error in
                XCTAssertEqual((error as? RequestHeadersTooLarge)?.field, ":authority")
            }
        }
    }
}
