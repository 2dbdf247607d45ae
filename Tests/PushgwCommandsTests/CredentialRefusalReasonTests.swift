import DeadLetters
import Routing
import XCTest

/// The replay warning (`DeadLetterOperations.newestCredentialRefusal`) finds refused
/// credentials by the dead letters' reason code, which Routing's `DeadLetterReason` writes;
/// DeadLetters does not depend on Routing, so the two are held equal here.
final class CredentialRefusalReasonTests: XCTestCase {
    func testTheWarningLooksForTheCodeRoutingWrites() {
        XCTAssertEqual(DeadLetterOperations.credentialRefusalReason, DeadLetterReason.apnsCredentials("InvalidProviderToken").code)
    }
}
