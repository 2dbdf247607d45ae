// APNs token-based authentication (Apple's token docs): the ES256 signing key, the JWT,
// and the policy that decides when a new JWT is minted.
//
// Owns: loading Apple's .p8 key through OpenSSL 3, signing, token renewal.
// Does no I/O besides reading the key file once, and never logs or reports key material.
import COpenSSL
import Foundation
import JSONOutput

/// Why a signing key could not be loaded or used.
///
/// Messages name the file (or say "PEM text") and the problem, never the key material,
/// so they are safe to log and to show in CLI output. OpenSSL's own reason strings are
/// included where they help; they describe the failure, not the key.
public struct ProviderTokenError: Error, Equatable, CustomStringConvertible {
    /// A human-readable explanation, free of key material.
    public let message: String

    /// The same as `message`, so that `"\(error)"` reads well in logs.
    public var description: String { message }

    init(_ message: String) {
        self.message = message
    }
}

/// An ES256 signing key for APNs token auth: an EC P-256 private key in PKCS#8 PEM
/// (Apple's `.p8` file, `-----BEGIN PRIVATE KEY-----`).
///
/// APNs "supports only the ES256 algorithm" (Apple's token docs), so loading refuses any
/// other key type or curve up front rather than producing tokens Apple would reject with
/// 403 `InvalidProviderToken` at the first push.
///
/// The key is immutable once loaded. OpenSSL 3 allows concurrent signing with one
/// `EVP_PKEY` (each signature uses its own `EVP_MD_CTX`), so the class is `Sendable`
/// and one instance may serve every connection of the key.
public final class ES256SigningKey: @unchecked Sendable {
    /// The OpenSSL key (`EVP_PKEY *`), owned by this object and freed in `deinit`.
    private let pkey: OpaquePointer

    private init(pkey: OpaquePointer) {
        self.pkey = pkey
    }

    deinit {
        EVP_PKEY_free(pkey)
    }

    /// Loads a key from a `.p8` file.
    ///
    /// Every error message names `path`, so a misconfigured key is easy to find; none
    /// contains the file's content.
    public static func load(p8File path: String) throws(ProviderTokenError) -> ES256SigningKey {
        let source = "APNs signing key file '\(path)'"
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ProviderTokenError("\(source) does not exist")
        }
        guard !isDirectory.boolValue else {
            throw ProviderTokenError("\(source) is a directory, not a .p8 key file")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ProviderTokenError("\(source) cannot be read (check its permissions)")
        }
        return try load(pem: [UInt8](data), source: source)
    }

    /// Loads a key from PEM text (the content of a `.p8` file).
    ///
    /// Refuses, with a message naming the problem: text without a PEM private key, an
    /// encrypted key (Apple's `.p8` files are unencrypted, and OpenSSL must never prompt
    /// for a passphrase on a server), a non-EC key (e.g. RSA), and an EC key on a curve
    /// other than P-256. OpenSSL's decoder also accepts the SEC1 form
    /// (`-----BEGIN EC PRIVATE KEY-----`) of the same key; that is harmless and allowed.
    public static func load(p8PEM: String) throws(ProviderTokenError) -> ES256SigningKey {
        try load(pem: Array(p8PEM.utf8), source: "APNs signing key PEM text")
    }

    /// The shared loader; `source` starts every error message.
    private static func load(pem: [UInt8], source: String) throws(ProviderTokenError) -> ES256SigningKey {
        ERR_clear_error()
        if pem.isEmpty {
            throw ProviderTokenError("\(source) is empty")
        }
        // Look for the marker as bytes, so that a file that is not UTF-8 gets the
        // "holds no private key" message below instead of a decoding failure.
        if pem.firstRange(of: Array("-----BEGIN ENCRYPTED PRIVATE KEY-----".utf8)) != nil {
            throw ProviderTokenError(
                "\(source) holds an encrypted private key; APNs .p8 keys are unencrypted PKCS#8")
        }
        let loaded: OpaquePointer? = pem.withUnsafeBytes { raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            // A callback that refuses, instead of NULL: with NULL, OpenSSL would ask for a
            // passphrase on the terminal if the key turned out to be encrypted after all.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in -1 }, nil)
        }
        guard let pkey = loaded else {
            // OpenSSL 3's decoder reasons ("unsupported") would mislead here, so say what we saw.
            ERR_clear_error()
            if pem.firstRange(of: Array("PRIVATE KEY-----".utf8)) != nil {
                throw ProviderTokenError("\(source) holds a private key that OpenSSL cannot decode (damaged or truncated?)")
            }
            throw ProviderTokenError(
                "\(source) holds no PEM private key (expected Apple's .p8 format, -----BEGIN PRIVATE KEY-----)")
        }
        // Owned from here on: either handed to the key object or freed on refusal.
        let key = ES256SigningKey(pkey: pkey)
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC else {
            let type = EVP_PKEY_get0_type_name(pkey).map { String(cString: $0) } ?? "unknown"
            throw ProviderTokenError(
                "\(source) holds a key of type \(type); APNs token auth (ES256) needs an EC P-256 key")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1 else {
            throw ProviderTokenError(
                "\(source) holds an EC key whose curve cannot be determined; "
                    + "ES256 needs P-256 (prime256v1)\(openSSLReason())")
        }
        let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == SN_X9_62_prime256v1 else {
            throw ProviderTokenError(
                "\(source) holds an EC key on curve \(curve); ES256 needs P-256 (prime256v1)")
        }
        return key
    }

    /// Signs `message` for a JWT: ECDSA over SHA-256(`message`), returned as the raw
    /// 64-byte `r‖s` that RFC 7515 (JOSE) specifies, not the DER `ECDSA-Sig-Value`
    /// OpenSSL produces. APNs has been seen to accept DER too, but raw is the standard
    /// (Apple's token docs, "Signature").
    ///
    /// ECDSA is randomised: two signatures of the same message differ, and both verify.
    public func sign(_ message: [UInt8]) throws(ProviderTokenError) -> [UInt8] {
        ERR_clear_error()
        guard let ctx = EVP_MD_CTX_new() else {
            throw ProviderTokenError("ES256 signing failed: out of memory")
        }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else {
            throw ProviderTokenError("ES256 signing could not start\(Self.openSSLReason())")
        }
        // First call sizes the buffer (an upper bound: 72 bytes for P-256), second signs.
        var derLength = 0
        let sized = message.withUnsafeBufferPointer { EVP_DigestSign(ctx, nil, &derLength, $0.baseAddress, $0.count) }
        guard sized == 1 else {
            throw ProviderTokenError("ES256 signing failed\(Self.openSSLReason())")
        }
        var der = [UInt8](repeating: 0, count: derLength)
        let signed = message.withUnsafeBufferPointer { msg in
            der.withUnsafeMutableBufferPointer { EVP_DigestSign(ctx, $0.baseAddress, &derLength, msg.baseAddress, msg.count) }
        }
        guard signed == 1 else {
            throw ProviderTokenError("ES256 signing failed\(Self.openSSLReason())")
        }
        return try Self.jose(fromDER: der.prefix(derLength))
    }

    /// Converts a DER `ECDSA-Sig-Value` to `r‖s`, each left-padded to 32 bytes.
    private static func jose(fromDER der: ArraySlice<UInt8>) throws(ProviderTokenError) -> [UInt8] {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig = parsed else {
            throw ProviderTokenError("ES256 signing produced an unreadable signature\(openSSLReason())")
        }
        defer { ECDSA_SIG_free(sig) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(sig, &r, &s)
        var out = [UInt8](repeating: 0, count: 64)
        let written = out.withUnsafeMutableBufferPointer { buffer -> (Int32, Int32) in
            (BN_bn2binpad(r, buffer.baseAddress, 32), BN_bn2binpad(s, buffer.baseAddress! + 32, 32))
        }
        guard written == (32, 32) else {
            throw ProviderTokenError("ES256 signing produced a signature that does not fit P-256")
        }
        return out
    }

    /// The reason of the most recent OpenSSL error as `": reason"` (or `""`), clearing the
    /// thread's error queue so that no stale error leaks into a later TLS call.
    private static func openSSLReason() -> String {
        defer { ERR_clear_error() }
        let code = ERR_peek_last_error()
        guard code != 0, let reason = ERR_reason_error_string(code) else { return "" }
        return " (OpenSSL: \(String(cString: reason)))"
    }
}

/// Encodes `bytes` as base64url without padding (RFC 4648 §5, as JWTs require: RFC 7515 §2).
public func base64URL(_ bytes: some Sequence<UInt8>) -> String {
    var text = Data(bytes).base64EncodedString()
    while text.last == "=" { text.removeLast() }
    return String(text.map { character -> Character in
        switch character {
        case "+": "-"
        case "/": "_"
        default: character
        }
    })
}

/// Builds APNs provider tokens: `base64url(header).base64url(claims).base64url(signature)`
/// with header `{"alg":"ES256","kid":keyId}` and claims `{"iss":teamId,"iat":issuedAt}`.
///
/// There is deliberately no `typ` header (Apple's console validator rejects it) and no
/// `exp`/`aud` claim; `iat` is a JSON number of seconds, not a string (APNSwift #246).
/// See Apple's token docs. The signer has no clock and no cache: `ProviderTokenSource`
/// decides when to call it, because Apple punishes minting too often.
public struct ProviderTokenSigner: Sendable {
    /// The 10-character Team ID, sent as `iss`.
    public let teamId: String
    /// The 10-character Key ID of the `.p8` key, sent as `kid`.
    public let keyId: String
    /// The key that signs every token.
    public let key: ES256SigningKey

    /// Creates a signer. The IDs are not checked here: the configuration validator does
    /// that before any connection is opened.
    public init(teamId: String, keyId: String, key: ES256SigningKey) {
        self.teamId = teamId
        self.keyId = keyId
        self.key = key
    }

    /// Signs a token stating `iat` = `unixSeconds` (UTC seconds since 1970, not milliseconds).
    ///
    /// Returns the bare JWT; the connection sends it as `authorization: bearer <token>`.
    public func token(issuedAt unixSeconds: Int64) throws(ProviderTokenError) -> String {
        // Keys in sorted order, `alg,kid` and `iat,iss`: stable bytes for the same input.
        let header = base64URL(OrderedJSON.object([("alg", .string("ES256")), ("kid", .string(keyId))]).text.utf8)
        let claims = base64URL(OrderedJSON.object([("iat", .int(unixSeconds)), ("iss", .string(teamId))]).text.utf8)
        let signingInput = header + "." + claims
        let signature = try key.sign(Array(signingInput.utf8))
        return signingInput + "." + base64URL(signature)
    }
}

/// When to mint a new provider token for one key: a pure policy with no clock of its own
/// (times are unix seconds passed in), shared by every connection that uses the key.
///
/// Apple's rules (Apple's token docs, "Refresh window"): refresh "no more than once every
/// 20 minutes and no less than once every 60 minutes"; a token with `iat` over an hour
/// old gets 403 `ExpiredProviderToken`; a new token more often than every 20 minutes
/// gets 429 `TooManyProviderTokenUpdates`, after which the connection is unusable for a
/// while. Hence:
///
/// | event                          | age of current token | decision              |
/// |--------------------------------|----------------------|-----------------------|
/// | `tokenNeeded`, no token yet    | –                    | issue                 |
/// | `tokenNeeded`                  | < 3000 s (50 min)    | keep                  |
/// | `tokenNeeded`                  | ≥ 3000 s             | issue                 |
/// | `providerTokenExpired`, none   | –                    | issue                 |
/// | `providerTokenExpired`         | < 1200 s (20 min)    | keep (refused: 429)   |
/// | `providerTokenExpired`         | ≥ 1200 s             | issue                 |
///
/// A clock that steps backwards gives a negative age, which keeps the current token.
public struct ProviderTokenSchedule: Equatable, Sendable {
    /// Age at which a token is replaced before Apple's 60-minute expiry (apns2 and pushy
    /// use the same 50 minutes).
    public static let renewAfterSeconds: Int64 = 3000
    /// Apple's minimum interval between two tokens of one key on a connection.
    public static let minimumIntervalSeconds: Int64 = 1200

    /// Creates a schedule with no token issued yet.
    public init() {}

    /// The `iat` of the current token in unix seconds; `nil` until the first token is issued.
    public private(set) var issuedAt: Int64?

    /// What the token's owner must do.
    public enum Decision: Equatable, Sendable {
        /// Keep sending the current token.
        case keep
        /// Sign a new token with `iat` = the given unix seconds; the schedule has already
        /// recorded it as current.
        case issue(at: Int64)
    }

    /// A request is about to be sent and needs a token at `now`: the first call issues;
    /// afterwards a token is issued only when the current one is `renewAfterSeconds` old.
    public mutating func tokenNeeded(now: Int64) -> Decision {
        guard let issuedAt else { return issue(now) }
        return now - issuedAt >= Self.renewAfterSeconds ? issue(now) : .keep
    }

    /// APNs answered 403 `ExpiredProviderToken` at `now`: issue a new token unless the
    /// current one is younger than `minimumIntervalSeconds`, in which case a new one would
    /// earn 429 `TooManyProviderTokenUpdates`, so the current token is kept.
    public mutating func providerTokenExpired(now: Int64) -> Decision {
        guard let issuedAt else { return issue(now) }
        return now - issuedAt >= Self.minimumIntervalSeconds ? issue(now) : .keep
    }

    private mutating func issue(_ now: Int64) -> Decision {
        issuedAt = now
        return .issue(at: now)
    }
}

/// Owns one key's current provider token and renews it by `ProviderTokenSchedule`: what
/// the APNs connections of that key call before each request and on 403
/// `ExpiredProviderToken`.
///
/// One instance per key, shared by all of its connections, so that Apple sees one token
/// at a time and never more than one new token per 20 minutes. Not thread-safe: like
/// everything else it is owned by the event loop (see `EventLoop`) and only called there.
public final class ProviderTokenSource {
    /// Signs new tokens.
    public let signer: ProviderTokenSigner
    /// Wall-clock unix seconds; injected so that tests can move time.
    private let clock: () -> Int64
    /// Decides when to sign; its `issuedAt` is the `iat` of `token`.
    private var schedule = ProviderTokenSchedule()
    /// The current token; `nil` until the first request.
    private var token: String?
    /// How many times the current token was replaced by a new one. The first token is
    /// not a renewal, so this stays 0 until the first replacement.
    public private(set) var renewals: Int = 0

    /// Creates a source that mints its first token on the first `currentToken()` call.
    public init(signer: ProviderTokenSigner, clock: @escaping () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.signer = signer
        self.clock = clock
    }

    /// The token to send now: the current one, or a new one if it is 50 minutes old (or
    /// none exists yet).
    public func currentToken() throws(ProviderTokenError) -> String {
        var next = schedule
        let decision = next.tokenNeeded(now: clock())
        return try apply(decision, schedule: next)
    }

    /// APNs answered 403 `ExpiredProviderToken`. Returns the token to resend with: a new
    /// one, or the current one if it is under 20 minutes old (a new one would earn 429
    /// `TooManyProviderTokenUpdates`; the 403 then means the clock or key is wrong, not
    /// that the token is old).
    public func providerTokenExpired() throws(ProviderTokenError) -> String {
        var next = schedule
        let decision = next.providerTokenExpired(now: clock())
        return try apply(decision, schedule: next)
    }

    /// Signs if `decision` says so; commits `next` only once a token is in hand, so a
    /// failed signature leaves the old token and schedule in place.
    private func apply(_ decision: ProviderTokenSchedule.Decision, schedule next: ProviderTokenSchedule) throws(ProviderTokenError) -> String {
        switch decision {
        case .keep:
            guard let token else {
                preconditionFailure("ProviderTokenSchedule kept a token that was never issued")
            }
            return token
        case .issue(let issuedAt):
            let fresh = try signer.token(issuedAt: issuedAt)
            if token != nil { renewals += 1 }
            token = fresh
            schedule = next
            return fresh
        }
    }
}
