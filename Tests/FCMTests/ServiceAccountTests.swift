import Foundation
import TestSupport
import XCTest
@testable import FCM

/// A Google service-account key file loads with its RSA key, and its JWT assertion is the one
/// Google's server-to-server flow asks for: RS256 over `header.claims`, verified here by the
/// `openssl` command line with the account's public key, independent of pushgw's signer.
final class ServiceAccountTests: XCTestCase {
    func testTheAssertionIsRS256WithGooglesClaims() throws {
        let pki = try TestPKI.shared()
        let uri = "https://127.0.0.1:8443/token"
        let account = try ServiceAccount.parse(Data(try pki.serviceAccountJSON(tokenURI: uri).utf8))
        XCTAssertEqual(account.projectID, pki.fcmProjectID)
        XCTAssertEqual(account.tokenEndpoint, TokenEndpoint(uri: uri))
        XCTAssertEqual(account.tokenEndpoint.port, 8443)
        let jwt = try account.assertion(issuedAt: 1_700_000_000)
        let parts = jwt.split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)
        XCTAssertEqual(try decoded(parts[0]), "{\"alg\":\"RS256\",\"kid\":\"\(pki.fcmKeyID)\",\"typ\":\"JWT\"}")
        XCTAssertEqual(try decoded(parts[1]),
                       "{\"aud\":\"\(uri)\",\"exp\":1700003600,\"iat\":1700000000,\"iss\":\"\(pki.fcmClientEmail)\","
                           + "\"scope\":\"https://www.googleapis.com/auth/firebase.messaging\"}")
        let directory = makeTemporaryDirectory("pushgw-fcm-jwt")
        let input = directory + "/input", signature = directory + "/signature"
        try Data((parts[0] + "." + parts[1]).utf8).write(to: URL(fileURLWithPath: input))
        try Data(try bytes(parts[2])).write(to: URL(fileURLWithPath: signature))
        XCTAssertEqual(try bytes(parts[2]).count, 256, "a 2048-bit RSA signature")
        let (status, out, err) = try runCommand("openssl", ["dgst", "-sha256", "-verify", pki.fcmPublicKey, "-signature", signature, input])
        XCTAssertEqual(status, 0, out + err)
    }

    func testTokenURIs() {
        XCTAssertEqual(TokenEndpoint(uri: "https://oauth2.googleapis.com/token")?.host, "oauth2.googleapis.com")
        XCTAssertEqual(TokenEndpoint(uri: "https://oauth2.googleapis.com/token")?.port, 443)
        XCTAssertEqual(TokenEndpoint(uri: "https://[::1]:9000/t")?.host, "::1")
        XCTAssertEqual(TokenEndpoint(uri: "https://h")?.path, "/")
        XCTAssertNil(TokenEndpoint(uri: "http://oauth2.googleapis.com/token"))
        XCTAssertNil(TokenEndpoint(uri: "https://:443/token"))
        XCTAssertNil(TokenEndpoint(uri: "https://h:99999/token"))
        XCTAssertNil(TokenEndpoint(uri: "https://user@h/token"))
    }

    func testAKeyOfAnotherKindIsRefusedWithoutQuotingIt() throws {
        let pki = try TestPKI.shared()
        let ec = try String(contentsOfFile: pki.jwtKey, encoding: .utf8)
        XCTAssertThrowsError(try RS256SigningKey.load(pem: ec)) { error in
            XCTAssertEqual(error as? ServiceAccountError, .keyNotRSA(found: "EC"))
            XCTAssertFalse("\(error)".contains("PRIVATE KEY-----"))
        }
        XCTAssertThrowsError(try RS256SigningKey.load(pem: "not a key")) { error in
            guard case .keyDoesNotLoad = error as? ServiceAccountError else { return XCTFail("\(error)") }
        }
    }

    private func bytes(_ base64URL: String) throws -> [UInt8] {
        var text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return [UInt8](try XCTUnwrap(Data(base64Encoded: text)))
    }

    private func decoded(_ base64URL: String) throws -> String {
        String(decoding: try bytes(base64URL), as: UTF8.self)
    }
}
