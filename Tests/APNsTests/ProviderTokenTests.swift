import APNs
import Foundation
import TestSupport
import XCTest

/// Provider tokens are checked by verifiers that share no code with ours: Python's
/// `cryptography` package and the `openssl` CLI, on keys made by the `openssl` CLI.
final class ProviderTokenTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = URL(fileURLWithPath: makeTemporaryDirectory("pushgw-jwt"), isDirectory: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Signing, verified independently

    func testTokenVerifiesWithPythonCryptographyAndOpenSSLCLI() throws {
        let (p8, pub) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let key = try ES256SigningKey.load(p8File: p8)
        let token = try ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key)
            .token(issuedAt: 1_760_000_000)

        let python = try pythonVerify(token: token, publicKey: pub, kid: "KEY1234567", iss: "TEAM123456", iat: 1_760_000_000)
        XCTAssertEqual(python.status, 0, "Python's cryptography must accept the token: \(python.errorTail)")
        XCTAssertEqual(python.output.trimmingCharacters(in: .whitespacesAndNewlines), "OK")

        let openssl = try openSSLVerify(token: token, publicKey: pub)
        XCTAssertEqual(openssl.status, 0, "openssl dgst must accept the signature: \(openssl.errorTail)")
        XCTAssertTrue(openssl.output.contains("Verified OK"), openssl.output)
    }

    func testTamperedTokenFailsIndependentVerification() throws {
        let (p8, pub) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let signer = ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: try ES256SigningKey.load(p8File: p8))
        let token = try signer.token(issuedAt: 1_760_000_000)
        let parts = token.split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)

        // Claims of another iat under the original signature.
        let otherClaims = try signer.token(issuedAt: 1_760_000_001).split(separator: ".")[1]
        let forgedClaims = [parts[0], String(otherClaims), parts[2]].joined(separator: ".")
        assertRejectedAsInvalidSignature(try pythonVerify(token: forgedClaims, publicKey: pub, kid: "KEY1234567", iss: "TEAM123456", iat: 1_760_000_001),
                                         "a signature must not cover different claims")
        XCTAssertNotEqual(try openSSLVerify(token: forgedClaims, publicKey: pub).status, 0,
                          "a signature must not cover different claims")

        // One bit of s flipped.
        var signature = try XCTUnwrap(base64URLDecode(parts[2]))
        signature[63] ^= 0x01
        let forgedSignature = [parts[0], parts[1], base64URL(signature)].joined(separator: ".")
        assertRejectedAsInvalidSignature(try pythonVerify(token: forgedSignature, publicKey: pub, kid: "KEY1234567", iss: "TEAM123456", iat: 1_760_000_000),
                                         "a modified signature must not verify")
        XCTAssertNotEqual(try openSSLVerify(token: forgedSignature, publicKey: pub).status, 0,
                          "a modified signature must not verify")

        // The untouched token under another key's public half.
        let (_, otherPub) = try makeKey(name: "other", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        XCTAssertNotEqual(try openSSLVerify(token: token, publicKey: otherPub).status, 0,
                          "a token must verify only with its own key")
    }

    func testSignatureIsRawRAndSOfSixtyFourBytesAndRandomised() throws {
        let (p8, _) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let pem = try String(contentsOfFile: p8, encoding: .utf8)
        let key = try ES256SigningKey.load(p8PEM: pem)
        let first = try key.sign(Array("message".utf8))
        let second = try key.sign(Array("message".utf8))
        XCTAssertEqual(first.count, 64, "ES256 in JOSE form is r‖s, 32 bytes each, not DER")
        XCTAssertEqual(second.count, 64)
        XCTAssertNotEqual(first, second, "ECDSA signatures use a fresh nonce each time")
    }

    func testHeaderAndClaimsHaveExactlyTheFieldsAPNsExpects() throws {
        let (p8, _) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let token = try ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: try ES256SigningKey.load(p8File: p8))
            .token(issuedAt: 1_760_000_000)
        let parts = token.split(separator: ".").map(String.init)
        XCTAssertFalse(token.contains("=") || token.contains("+") || token.contains("/"), "JWT parts are unpadded base64url")
        XCTAssertEqual(String(decoding: try XCTUnwrap(base64URLDecode(parts[0])), as: UTF8.self),
                       #"{"alg":"ES256","kid":"KEY1234567"}"#, "no typ header, as Apple's token docs show")
        XCTAssertEqual(String(decoding: try XCTUnwrap(base64URLDecode(parts[1])), as: UTF8.self),
                       #"{"iat":1760000000,"iss":"TEAM123456"}"#, "iat is a number of seconds, no exp or aud")
    }

    func testBase64URLUsesURLAlphabetWithoutPadding() {
        XCTAssertEqual(base64URL([0xFB, 0xFF]), "-_8", "+ and / become - and _, = is dropped")
        XCTAssertEqual(base64URL([UInt8]()), "")
        XCTAssertEqual(base64URL(Array("any carnal pleas".utf8)), "YW55IGNhcm5hbCBwbGVhcw")
    }

    // MARK: Refused keys

    func testRSAKeyIsRefusedByName() throws {
        let (p8, _) = try makeKey(name: "rsa", genpkeyOptions: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        let error = try loadError(p8File: p8)
        XCTAssertTrue(error.message.contains("RSA"), "the message must say what the key is: \(error)")
        XCTAssertTrue(error.message.contains("P-256"), "the message must say what is needed: \(error)")
        XCTAssertTrue(error.message.contains(p8), "the message must name the file: \(error)")
        try assertNoKeyMaterial(error, pemFile: p8)
    }

    func testP384KeyIsRefusedByCurve() throws {
        let (p8, _) = try makeKey(name: "p384", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
        let error = try loadError(p8File: p8)
        XCTAssertTrue(error.message.contains("secp384r1"), "the message must name the wrong curve: \(error)")
        XCTAssertTrue(error.message.contains("P-256"), "the message must say what is needed: \(error)")
        try assertNoKeyMaterial(error, pemFile: p8)

        let pem = try String(contentsOfFile: p8, encoding: .utf8)
        let pemError: ProviderTokenError
        do {
            _ = try ES256SigningKey.load(p8PEM: pem)
            return XCTFail("a P-384 key given as PEM text must be refused too")
        } catch {
            pemError = error
        }
        XCTAssertTrue(pemError.message.contains("secp384r1"), "\(pemError)")
    }

    func testMissingFileErrorNamesThePath() throws {
        let path = directory.appendingPathComponent("AuthKey_NOPE.p8").path
        let error = try loadError(p8File: path)
        XCTAssertTrue(error.message.contains(path), "the message must name the missing file: \(error)")
        XCTAssertTrue(error.message.contains("does not exist"), "\(error)")
    }

    func testEncryptedKeyIsRefusedWithoutPrompting() throws {
        let (p8, _) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let encrypted = directory.appendingPathComponent("encrypted.p8").path
        try run(["openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "pass:secret", "-in", p8, "-out", encrypted])
        let error = try loadError(p8File: encrypted)
        XCTAssertTrue(error.message.contains("encrypted"), "\(error)")
        try assertNoKeyMaterial(error, pemFile: encrypted)
    }

    func testTextWithoutAValidPrivateKeyIsRefused() throws {
        let (_, pub) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        for text in ["", "not a key", try String(contentsOfFile: pub, encoding: .utf8)] {
            do {
                _ = try ES256SigningKey.load(p8PEM: text)
                XCTFail("text without a private key must be refused: \(text.prefix(20))")
            } catch {
                XCTAssertTrue(error.message.contains("APNs signing key PEM text"), "\(error)")
            }
        }
        let (p8, _) = try makeKey(name: "cut", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let lines = try String(contentsOfFile: p8, encoding: .utf8).split(separator: "\n")
        let truncated = ([lines[0], lines[1]] + [lines[lines.count - 1]]).joined(separator: "\n")
        do {
            _ = try ES256SigningKey.load(p8PEM: truncated)
            XCTFail("a truncated key must be refused")
        } catch {
            XCTAssertTrue(error.message.contains("cannot decode"), "\(error)")
            XCTAssertFalse(error.message.contains(lines[1]), "the message must not quote the key")
        }
    }

    // MARK: Renewal policy

    func testScheduleTable() {
        let t0: Int64 = 1_760_000_000
        var schedule = ProviderTokenSchedule()
        XCTAssertNil(schedule.issuedAt)

        // (event, seconds after t0, expected decision, rule)
        let table: [(event: String, at: Int64, expected: ProviderTokenSchedule.Decision, rule: String)] = [
            ("needed", 0, .issue(at: t0), "the first request issues a token"),
            ("needed", 60, .keep, "a fresh token is reused"),
            ("needed", 2999, .keep, "kept until 50 minutes old"),
            ("needed", 3000, .issue(at: t0 + 3000), "renewed at 50 minutes"),
            ("expired", 3000 + 300, .keep, "ExpiredProviderToken 5 min after issue: a new token would earn 429"),
            ("expired", 3000 + 1199, .keep, "still under the 20-minute minimum"),
            ("needed", 3000 + 1199, .keep, "a refused renewal keeps the current token"),
            ("expired", 3000 + 1500, .issue(at: t0 + 4500), "ExpiredProviderToken 25 min after issue renews"),
            ("needed", 4500 + 2999, .keep, "the 50-minute clock restarts at the forced renewal"),
            ("needed", 4500 + 3000, .issue(at: t0 + 7500), "and renews 50 minutes after it"),
            ("needed", 7500 - 100, .keep, "a clock stepping backwards keeps the token"),
        ]
        for row in table {
            let decision = row.event == "needed"
                ? schedule.tokenNeeded(now: t0 + row.at)
                : schedule.providerTokenExpired(now: t0 + row.at)
            XCTAssertEqual(decision, row.expected, "\(row.event) at +\(row.at) s: \(row.rule)")
        }
        XCTAssertEqual(schedule.issuedAt, t0 + 7500)

        var fresh = ProviderTokenSchedule()
        XCTAssertEqual(fresh.providerTokenExpired(now: t0), .issue(at: t0), "with no token yet, an expiry issues one")
        XCTAssertEqual(ProviderTokenSchedule.renewAfterSeconds, 3000)
        XCTAssertEqual(ProviderTokenSchedule.minimumIntervalSeconds, 1200)
    }

    func testSourceRenewsOnItsClockAndCountsRenewals() throws {
        let (p8, pub) = try makeKey(name: "p256", genpkeyOptions: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let signer = ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: try ES256SigningKey.load(p8File: p8))
        let t0: Int64 = 1_760_000_000
        var now = t0
        let source = ProviderTokenSource(signer: signer, clock: { now })

        let first = try source.currentToken()
        XCTAssertEqual(try iat(of: first), t0)
        XCTAssertEqual(source.renewals, 0, "the first token is not a renewal")

        now = t0 + 2999
        XCTAssertEqual(try source.currentToken(), first, "the token is reused for 50 minutes")
        XCTAssertEqual(source.renewals, 0)

        now = t0 + 3000
        let second = try source.currentToken()
        XCTAssertNotEqual(second, first)
        XCTAssertEqual(try iat(of: second), t0 + 3000, "the new token states the clock's time")
        XCTAssertEqual(source.renewals, 1)
        XCTAssertEqual(try source.currentToken(), second)

        now = t0 + 3000 + 300
        XCTAssertEqual(try source.providerTokenExpired(), second, "under 20 minutes old: resend with the same token")
        XCTAssertEqual(source.renewals, 1)

        now = t0 + 3000 + 1500
        let third = try source.providerTokenExpired()
        XCTAssertEqual(try iat(of: third), t0 + 4500)
        XCTAssertEqual(source.renewals, 2)
        XCTAssertEqual(try source.currentToken(), third, "connections pick up the renewed token")

        let verified = try pythonVerify(token: third, publicKey: pub, kid: "KEY1234567", iss: "TEAM123456", iat: t0 + 4500)
        XCTAssertEqual(verified.status, 0, "renewed tokens are valid: \(verified.errorTail)")
    }

    // MARK: Helpers

    /// Makes a PKCS#8 private key and its public PEM with the `openssl` CLI.
    private func makeKey(name: String, genpkeyOptions: [String]) throws -> (p8: String, publicKey: String) {
        let raw = directory.appendingPathComponent("\(name).raw.pem").path
        let p8 = directory.appendingPathComponent("\(name).p8").path
        let pub = directory.appendingPathComponent("\(name).pub.pem").path
        try run(["openssl", "genpkey"] + genpkeyOptions + ["-out", raw])
        try run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", raw, "-out", p8])
        try run(["openssl", "pkey", "-in", p8, "-pubout", "-out", pub])
        return (p8, pub)
    }

    /// Verifies with Python's `cryptography`: parts, header, claims and the signature.
    private func pythonVerify(token: String, publicKey: String, kid: String, iss: String, iat: Int64) throws -> ProcessResult {
        let script = #"""
        import base64, json, sys
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, utils
        token, pub, kid, iss, iat = sys.argv[1:6]
        def b64(s):
            assert not set(s) & set("=+/"), "not unpadded base64url: " + s
            return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
        h, c, s = token.split(".")
        header, claims = json.loads(b64(h)), json.loads(b64(c))
        assert header == {"alg": "ES256", "kid": kid}, header
        assert claims == {"iss": iss, "iat": int(iat)} and type(claims["iat"]) is int, claims
        sig = b64(s)
        assert len(sig) == 64, len(sig)
        der = utils.encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        key = serialization.load_pem_public_key(open(pub, "rb").read())
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1", key
        key.verify(der, (h + "." + c).encode(), ec.ECDSA(hashes.SHA256()))
        print("OK")
        """#
        return try run(["python3", "-c", script, token, publicKey, kid, iss, String(iat)], check: false)
    }

    /// The Python verifier got as far as the signature and refused it (not some earlier check).
    private func assertRejectedAsInvalidSignature(_ result: ProcessResult, _ rule: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotEqual(result.status, 0, rule, file: file, line: line)
        XCTAssertTrue(result.error.contains("InvalidSignature"), "\(rule): \(result.errorTail)", file: file, line: line)
    }

    /// Verifies with `openssl dgst`, after converting r‖s to DER in Swift (no Python involved).
    private func openSSLVerify(token: String, publicKey: String) throws -> ProcessResult {
        let parts = token.split(separator: ".")
        let signature = try XCTUnwrap(base64URLDecode(String(parts[2])))
        XCTAssertEqual(signature.count, 64)
        let message = directory.appendingPathComponent("message-\(UUID().uuidString)").path
        let sig = directory.appendingPathComponent("sig-\(UUID().uuidString).der").path
        try Data((parts[0] + "." + parts[1]).utf8).write(to: URL(fileURLWithPath: message))
        try Data(derECDSASignature(r: signature[0 ..< 32], s: signature[32 ..< 64])).write(to: URL(fileURLWithPath: sig))
        return try run(["openssl", "dgst", "-sha256", "-verify", publicKey, "-signature", sig, message], check: false)
    }

    /// `ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }` in DER.
    private func derECDSASignature(r: ArraySlice<UInt8>, s: ArraySlice<UInt8>) -> [UInt8] {
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop(while: { $0 == 0 }))
            if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }

    private func base64URLDecode(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map(Array.init)
    }

    private func iat(of token: String, file: StaticString = #filePath, line: UInt = #line) throws -> Int64 {
        let claims = try XCTUnwrap(base64URLDecode(String(token.split(separator: ".")[1])), file: file, line: line)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(claims)) as? [String: Any], file: file, line: line)
        return try XCTUnwrap((object["iat"] as? NSNumber)?.int64Value, file: file, line: line)
    }

    private func loadError(p8File path: String, file: StaticString = #filePath, line: UInt = #line) throws -> ProviderTokenError {
        do {
            _ = try ES256SigningKey.load(p8File: path)
        } catch {
            return error
        }
        XCTFail("loading \(path) must fail", file: file, line: line)
        throw CocoaError(.fileReadUnknown)
    }

    /// No line of the key's base64 body may appear in an error message.
    private func assertNoKeyMaterial(_ error: ProviderTokenError, pemFile: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let body = try String(contentsOfFile: pemFile, encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("-----") }
        XCTAssertFalse(body.isEmpty, file: file, line: line)
        for chunk in body where error.message.contains(chunk) {
            XCTFail("the error message contains key material: \(error)", file: file, line: line)
        }
    }

    private struct ProcessResult {
        var status: Int32
        var output: String
        var error: String
        /// The end of stderr: enough to see why a verifier refused.
        var errorTail: String { String(error.suffix(400)) }
    }

    /// Runs a command found on PATH; with `check`, a non-zero exit fails the test.
    @discardableResult
    private func run(_ arguments: [String], check: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> ProcessResult {
        let (status, output, error) = try runCommand(arguments[0], Array(arguments.dropFirst()))
        let result = ProcessResult(status: status, output: output, error: error)
        if check && result.status != 0 {
            XCTFail("\(arguments.prefix(2).joined(separator: " ")) failed: \(result.errorTail)", file: file, line: line)
            throw CocoaError(.executableLoad)
        }
        return result
    }
}
