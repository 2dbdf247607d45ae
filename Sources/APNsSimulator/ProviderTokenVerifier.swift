import APNs
import COpenSSL
import CMacros
import Foundation

/// Checks provider tokens (`authorization: bearer <JWT>`) the way APNs does
/// (Apple's token docs): header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}`,
/// signature raw r‖s (64 bytes, base64url) over `header.claims`, verified with the
/// configured public key of that `kid`.
///
/// Verified tokens are cached (APNs clients reuse one token for up to an hour, so
/// verifying each request would make the simulator, not the client, the benchmark's
/// bottleneck); the age check still runs on every request.
final class ProviderTokenVerifier {
    /// EVP_PKEY* by key id; freed in `close()`.
    private var keys: [String: OpaquePointer] = [:]
    private let teamId: String?
    private let maxAgeSeconds: Int64
    /// Verified JWT text → its `iat` (unix seconds). Cleared when it reaches `cacheLimit`.
    private var verified: [String: Int64] = [:]
    private let cacheLimit = 1024

    /// Loads every key file; throws naming the first unusable one.
    init(keyFiles: [String: String], teamId: String?, maxAgeSeconds: Int) throws(SimulatorError) {
        self.teamId = teamId
        self.maxAgeSeconds = Int64(maxAgeSeconds)
        keys = try PublicKeyFile.loadAll(keyFiles, where: Self.isP256,
                                         failure: { SimulatorError.unusableKey(keyID: $0, file: $1) })
    }

    /// Frees the keys. The verifier cannot be used afterwards.
    func close() {
        for key in keys.values { EVP_PKEY_free(key) }
        keys = [:]
    }

    /// nil when `authorization` carries a valid, fresh token; otherwise the reason APNs gives.
    func check(authorization: String?, nowSeconds: Int64) -> ApnsReason? {
        guard let authorization, !authorization.isEmpty else { return .missingProviderToken }
        let prefix = "bearer "
        guard authorization.utf8.count > prefix.utf8.count,
              authorization.prefix(prefix.count).lowercased() == prefix else { return .invalidProviderToken }
        let jwt = String(authorization.dropFirst(prefix.count))
        let iat: Int64
        if let cached = verified[jwt] {
            iat = cached
        } else {
            guard let fresh = verify(jwt) else { return .invalidProviderToken }
            if verified.count >= cacheLimit { verified.removeAll(keepingCapacity: true) }
            verified[jwt] = fresh
            iat = fresh
        }
        return nowSeconds - iat > maxAgeSeconds ? .expiredProviderToken : nil
    }

    /// The members of a token part, when it is a JSON object.
    private static func object(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(bytes)),
              case let .object(members)? = JSONValue(serialized: parsed) else { return nil }
        return members
    }

    /// The token's `iat` when its form, key id, team and signature are right; else nil.
    private func verify(_ jwt: String) -> Int64? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]),
              let claimsBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]), signature.count == 64,
              let header = Self.object(headerBytes), let claims = Self.object(claimsBytes),
              header["alg"] == .string("ES256"), case let .string(kid)? = header["kid"], let key = keys[kid],
              case let .string(iss)? = claims["iss"],
              case let .number(issuedAt)? = claims["iat"], issuedAt.rounded() == issuedAt, abs(issuedAt) < 9.0e15 else { return nil }
        let iat = Int64(issuedAt)
        if let teamId, iss != teamId { return nil }
        let signedText = Array(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        return Self.verifyES256(key: key, message: signedText, rawSignature: signature) ? iat : nil
    }

    /// ECDSA P-256/SHA-256 over `message`. JWTs carry r‖s; OpenSSL verifies DER, so the
    /// signature is re-encoded as an ECDSA_SIG first.
    private static func verifyES256(key: OpaquePointer, message: [UInt8], rawSignature: [UInt8]) -> Bool {
        guard let sig = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(sig) }
        let r = rawSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = rawSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else { BN_free(r); BN_free(s); return false }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return false }
        var der: UnsafeMutablePointer<UInt8>?
        let derLength = i2d_ECDSA_SIG(sig, &der)
        guard derLength > 0, let der else { return false }
        defer { pushgw_openssl_free(der) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let ok = message.withUnsafeBufferPointer { m in
            EVP_DigestVerify(ctx, der, Int(derLength), m.baseAddress, m.count)
        }
        ERR_clear_error()
        return ok == 1
    }

    /// Token keys are P-256, in a PEM file holding either the public key or the `.p8` private
    /// key (so a demo can point at the same file the gateway signs with).
    private static func isP256(_ key: OpaquePointer) -> Bool {
        EVP_PKEY_get_base_id(key) == EVP_PKEY_EC && EVP_PKEY_get_bits(key) == 256
    }
}

/// The key files the simulator verifies signatures with.
enum PublicKeyFile {
    /// The key (`EVP_PKEY *`, the caller frees it) of a PEM file holding a public key or a
    /// private key, when `acceptable` says it is of the kind wanted; nil otherwise.
    static func load(_ path: String, where acceptable: (OpaquePointer) -> Bool) -> OpaquePointer? {
        func read(_ body: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
            guard let bio = BIO_new_file(path, "r") else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
        let key = read { PEM_read_bio_PUBKEY($0, nil, nil, nil) } ?? read { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
        ERR_clear_error()
        guard let key else { return nil }
        guard acceptable(key) else {
            EVP_PKEY_free(key)
            return nil
        }
        return key
    }

    /// Every file of `files` (by name) loaded; throws `failure(name, path)` for the first that
    /// does not load or is not `acceptable`, having freed the others.
    static func loadAll(_ files: [String: String], where acceptable: (OpaquePointer) -> Bool,
                        failure: (String, String) -> SimulatorError) throws(SimulatorError) -> [String: OpaquePointer] {
        var keys: [String: OpaquePointer] = [:]
        for (name, path) in files.sorted(by: { $0.key < $1.key }) {
            guard let key = load(path, where: acceptable) else {
                for loaded in keys.values { EVP_PKEY_free(loaded) }
                throw failure(name, path)
            }
            keys[name] = key
        }
        return keys
    }
}

/// Base64url without padding (RFC 7515 §2), as JWTs use it.
enum Base64URL {
    /// The bytes of `text`, or nil when it is not base64url.
    static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "_"): v = 63
            default: return nil
            }
            acc = (acc << 6) | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((acc >> UInt32(bits)) & 0xff))
            }
        }
        // A single leftover character (6 bits) cannot come from whole bytes.
        return bits >= 6 ? nil : out
    }
}
