import Foundation

/// A throwaway PKI for loopback TLS tests, made by `scripts/make-pki.sh` (the demo and the
/// benchmarks use the same script) in a fresh directory of the tests' scratch space: a CA, a
/// server certificate for `localhost` and `127.0.0.1`, one from the same CA for another name
/// only, a client certificate whose subject carries `UID=com.example.app` (as Apple's push
/// certificates carry the bundle id), two P-256 keys for provider tokens (one to configure, one
/// to forge with), and for Redis over TLS a server certificate, an expired one, one for another
/// host name, a client certificate and a second CA that signed none of them. Every property is
/// a file path. `remove()` deletes it all.
public struct TestPKI: Sendable {
    public let directory: String
    public let caCert: String
    public let caKey: String
    public let serverCert: String
    public let serverKey: String
    /// Signed by the same CA for `elsewhere.example` only: a client connecting to
    /// 127.0.0.1 or localhost must refuse it.
    public let otherHostCert: String
    public let otherHostKey: String
    public let clientCert: String
    public let clientKey: String
    /// The bundle id in the client certificate's subject UID.
    public let clientBundleID = "com.example.app"
    /// A `.p8` (PKCS#8 PEM) P-256 private key for signing JWTs, and its PEM public key.
    public let jwtKey: String
    public let jwtPublicKey: String
    /// Another P-256 private key, configured nowhere: tokens signed with it must be refused.
    public let otherJWTKey: String
    /// The client certificate and key as PKCS#12, and the file holding its password.
    public let clientP12: String
    public let clientP12PasswordFile: String
    public let clientP12Password = "test-password"
    /// redis-server's certificate (localhost, 127.0.0.1) and key.
    public let redisCert: String
    public let redisKey: String
    /// The same names, expired.
    public let redisExpiredCert: String
    public let redisExpiredKey: String
    /// A certificate for other.example only.
    public let redisOtherHostCert: String
    public let redisOtherHostKey: String
    /// A client certificate for redis-server's `tls-auth-clients yes`.
    public let redisClientCert: String
    public let redisClientKey: String
    /// A CA that signed none of these: trusting it alone refuses every server here.
    public let otherCACert: String
    /// An RSA 2048 private key (PKCS#8 PEM) for a Google service account, and its public key.
    public let fcmKey: String
    public let fcmPublicKey: String
    /// The service account's project, email and key id in `serviceAccountJSON`.
    public let fcmProjectID = "pushgw-test"
    public let fcmClientEmail = "pushgw@pushgw-test.iam.gserviceaccount.com"
    public let fcmKeyID = "fcm-key-1"

    /// A Google service-account key file's JSON for `fcmKey`, exchanging tokens at `tokenURI`;
    /// `changes` replace (or, with NSNull, remove) its fields.
    public func serviceAccountJSON(tokenURI: String, changes: [String: Any] = [:]) throws -> String {
        var fields: [String: Any] = [
            "type": "service_account", "project_id": fcmProjectID, "private_key_id": fcmKeyID,
            "private_key": try String(contentsOfFile: fcmKey, encoding: .utf8), "client_email": fcmClientEmail,
            "client_id": "100000000000000000001", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": tokenURI,
        ]
        for (key, value) in changes { fields[key] = value is NSNull ? nil : value }
        let data = try JSONSerialization.data(withJSONObject: fields, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// Writes `serviceAccountJSON` to `path` (mode 600) and returns `path`.
    @discardableResult
    public func writeServiceAccount(to path: String, tokenURI: String, changes: [String: Any] = [:]) throws -> String {
        try Data(try serviceAccountJSON(tokenURI: tokenURI, changes: changes).utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return path
    }

    /// Generates everything (a second or so of `openssl` runs).
    public static func make() throws -> TestPKI {
        let pki = TestPKI(directory: makeTemporaryDirectory("pushgw-pki"))
        do {
            try pki.generate()
        } catch {
            pki.remove()
            throw error
        }
        return pki
    }

    /// One PKI for the whole test process (generating one costs a second of `openssl` runs),
    /// removed with the scratch directory at the end. Tests must not change its files.
    public static func shared() throws -> TestPKI {
        try sharedPKI.get()
    }

    private static let sharedPKI = Result { try TestPKI.make() }

    /// Deletes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private init(directory: String) {
        self.directory = directory
        caCert = directory + "/ca.pem"
        caKey = directory + "/ca.key"
        serverCert = directory + "/server.pem"
        serverKey = directory + "/server.key"
        otherHostCert = directory + "/other-host.pem"
        otherHostKey = directory + "/other-host.key"
        clientCert = directory + "/client.pem"
        clientKey = directory + "/client.key"
        jwtKey = directory + "/AuthKey.p8"
        jwtPublicKey = directory + "/AuthKey.pub.pem"
        otherJWTKey = directory + "/AuthKey_OTHER.p8"
        clientP12 = directory + "/client.p12"
        clientP12PasswordFile = directory + "/client.p12.password"
        redisCert = directory + "/redis.pem"
        redisKey = directory + "/redis.key"
        redisExpiredCert = directory + "/redis-expired.pem"
        redisExpiredKey = directory + "/redis-expired.key"
        redisOtherHostCert = directory + "/redis-otherhost.pem"
        redisOtherHostKey = directory + "/redis-otherhost.key"
        redisClientCert = directory + "/redis-client.pem"
        redisClientKey = directory + "/redis-client.key"
        otherCACert = directory + "/other-ca.pem"
        fcmKey = directory + "/fcm-service-account.key"
        fcmPublicKey = directory + "/fcm-service-account.pub.pem"
    }

    private func generate() throws {
        let (status, _, err) = try runCommand("/bin/bash", [packageRoot + "/scripts/make-pki.sh", directory, clientBundleID])
        guard status == 0 else { throw PKIError("scripts/make-pki.sh failed: \(err.prefix(500))") }
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", otherJWTKey])
    }

    /// An APNs provider token (`{"alg":"ES256","kid":…}.{"iss":…,"iat":…}.r‖s`) signed by
    /// the `openssl` CLI with `keyFile` (default: `jwtKey`), independent of pushgw's signer.
    public func providerToken(keyID: String, teamID: String, issuedAt: Int64, keyFile: String? = nil) throws -> String {
        let header = Self.base64URL(Array("{\"alg\":\"ES256\",\"kid\":\"\(keyID)\"}".utf8))
        let claims = Self.base64URL(Array("{\"iss\":\"\(teamID)\",\"iat\":\(issuedAt)}".utf8))
        let signingInput = header + "." + claims
        let inputFile = directory + "/jwt-input-\(UUID().uuidString)"
        let signatureFile = inputFile + ".sig"
        defer {
            try? FileManager.default.removeItem(atPath: inputFile)
            try? FileManager.default.removeItem(atPath: signatureFile)
        }
        try signingInput.write(toFile: inputFile, atomically: true, encoding: .utf8)
        try openssl(["dgst", "-sha256", "-sign", keyFile ?? jwtKey, "-out", signatureFile, inputFile])
        let der = try [UInt8](Data(contentsOf: URL(fileURLWithPath: signatureFile)))
        return signingInput + "." + Self.base64URL(try Self.rawSignature(fromDER: der))
    }

    /// JWS wants r‖s (32 + 32 bytes); OpenSSL signs `SEQUENCE { INTEGER r, INTEGER s }`.
    static func rawSignature(fromDER der: [UInt8]) throws -> [UInt8] {
        var i = 0
        func length() throws -> Int {
            guard i < der.count else { throw PKIError("truncated DER signature") }
            let first = Int(der[i]); i += 1
            guard first & 0x80 != 0 else { return first }
            var n = 0
            for _ in 0..<(first & 0x7f) {
                guard i < der.count else { throw PKIError("truncated DER signature") }
                n = n << 8 | Int(der[i]); i += 1
            }
            return n
        }
        func integer() throws -> [UInt8] {
            guard i < der.count, der[i] == 0x02 else { throw PKIError("DER signature: INTEGER expected") }
            i += 1
            let n = try length()
            guard i + n <= der.count else { throw PKIError("truncated DER signature") }
            let bytes = Array(der[i..<(i + n)].drop { $0 == 0 })
            i += n
            guard bytes.count <= 32 else { throw PKIError("DER signature: integer over 32 bytes") }
            return [UInt8](repeating: 0, count: 32 - bytes.count) + bytes
        }
        guard der.first == 0x30 else { throw PKIError("DER signature: SEQUENCE expected") }
        i = 1
        _ = try length()
        return try integer() + integer()
    }

    /// Base64url without padding.
    public static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private func openssl(_ arguments: [String]) throws {
        let (status, _, err) = try runCommand("/usr/bin/openssl", arguments)
        guard status == 0 else {
            throw PKIError("openssl \(arguments.prefix(2).joined(separator: " ")) failed: \(err.prefix(500))")
        }
    }
}

/// A step of `TestPKI` failed; the message says which and what `openssl` printed.
public struct PKIError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
