import Routing
import XCTest

/// `DeadLetterReason.codes` lists the code of every case, once, in the order of the cases.
final class DeadLetterReasonCodesTests: XCTestCase {
    func testTheCodesAreThoseOfTheCases() {
        let oneOfEach: [DeadLetterReason] = [.invalidEvent("x"), .apnsCredentials("x"), .apnsConfig("x"), .apnsRequest("x"), .fcmCredentials("x"),
                                             .retriesExhausted(.voip), .payloadTooLarge(.alert), .invalidPush("x"), .redeliveryLimit(5)]
        XCTAssertEqual(oneOfEach.map(\.code), DeadLetterReason.codes)
        XCTAssertEqual(Set(DeadLetterReason.codes).count, DeadLetterReason.codes.count)
    }
}
