// FCM: Firebase Cloud Messaging's HTTP v1 API as pushgw's second provider, on the APNs module's
// HTTP/2 pool (docs/architecture.md, "FCM"). Owns: the Google service account (its JSON file and
// RS256 key), the OAuth 2.0 access token of a service account, the message of a ring, FCM's
// answer table and the client that sends through the shared pool.
// Must not: open connections of its own (the pool's are shared), know about Redis, events or
// apps, or log: it reports, the roles log. Never returns or prints key material.
import APNs
import COpenSSL
import Foundation
import JSONOutput

/// Why a service-account file cannot be used. Each case names what is wrong in the file (a
/// field, the key) so `config check` can say which and how to fix it; none carries the key.
public enum ServiceAccountError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file could not be read (the OS's reason).
    case unreadable(String)
    /// The file is not one JSON object.
    case notJSON
    /// `type` is there and is not `service_account` (an `authorized_user` file from
    /// `gcloud auth application-default login` is the usual mix-up).
    case notServiceAccount(type: String)
    /// A required field is absent or not a non-empty string.
    case missingField(String)
    /// `token_uri` is not an `https://host[:port]/path` URL.
    case badTokenURI(String)
    /// `private_key` is a key of another algorithm (the JWT is RS256).
    case keyNotRSA(found: String)
    /// `private_key` is RSA but too short for Google (at least 2048 bits).
    case keyTooShort(bits: Int)
    /// `private_key` does not load as a PEM private key (OpenSSL's reason, never the key).
    case keyDoesNotLoad(String)

    public var description: String {
        switch self {
        case let .unreadable(why): return "cannot be read: \(why)"
        case .notJSON: return "is not a JSON object (a Google service-account key file is one)"
        case let .notServiceAccount(type): return "is a \"\(type)\" credential, not a service account (\"type\": \"service_account\")"
        case let .missingField(name): return "has no \(name) (a non-empty string)"
        case let .badTokenURI(uri): return "has token_uri \(uri), not an https:// URL"
        case let .keyNotRSA(found): return "has a private_key of type \(found); FCM's OAuth token is signed RS256 with an RSA key"
        case let .keyTooShort(bits): return "has a \(bits)-bit RSA private_key; Google's keys are 2048 bits"
        case let .keyDoesNotLoad(why): return "has a private_key that does not load: \(why)"
        }
    }
}

/// An RSA private key that signs RS256 (RSASSA-PKCS1-v1_5 with SHA-256) through OpenSSL 3's
/// EVP: the service account's key, for the JWT it exchanges for an access token. Immutable once
/// loaded; one `EVP_PKEY` may sign from several contexts, so it is `Sendable`.
public final class RS256SigningKey: @unchecked Sendable {
    private let pkey: OpaquePointer

    private init(pkey: OpaquePointer) { self.pkey = pkey }

    deinit { EVP_PKEY_free(pkey) }

    /// Loads the PEM text of a service account's `private_key` (PKCS#8, `BEGIN PRIVATE KEY`).
    /// Refuses an encrypted key (no prompt on a server), another algorithm and keys under
    /// 2048 bits; messages never quote the key.
    public static func load(pem: String) throws(ServiceAccountError) -> RS256SigningKey {
        ERR_clear_error()
        let bytes = Array(pem.utf8)
        guard !bytes.isEmpty else { throw .missingField("private_key") }
        if bytes.firstRange(of: Array("ENCRYPTED PRIVATE KEY".utf8)) != nil {
            throw .keyDoesNotLoad("it is encrypted; Google's key files hold it unencrypted")
        }
        let loaded: OpaquePointer? = bytes.withUnsafeBytes { raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            // A refusing callback, not NULL: OpenSSL would otherwise ask a terminal for a passphrase.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in -1 }, nil)
        }
        ERR_clear_error()
        guard let pkey = loaded else {
            if bytes.firstRange(of: Array("PRIVATE KEY-----".utf8)) != nil {
                throw .keyDoesNotLoad("OpenSSL cannot decode it (damaged, or its line breaks lost: they are \\n in the JSON)")
            }
            throw .keyDoesNotLoad("it holds no PEM private key (-----BEGIN PRIVATE KEY-----)")
        }
        let key = RS256SigningKey(pkey: pkey)
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA else {
            throw .keyNotRSA(found: EVP_PKEY_get0_type_name(pkey).map { String(cString: $0) } ?? "unknown")
        }
        let bits = Int(EVP_PKEY_get_bits(pkey))
        guard bits >= 2048 else { throw .keyTooShort(bits: bits) }
        return key
    }

    /// The RS256 signature of `message` (256 bytes for a 2048-bit key).
    public func sign(_ message: [UInt8]) throws(ServiceAccountError) -> [UInt8] {
        ERR_clear_error()
        guard let ctx = EVP_MD_CTX_new() else { throw .keyDoesNotLoad("RS256 signing failed: out of memory") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else {
            ERR_clear_error()
            throw .keyDoesNotLoad("RS256 signing could not start")
        }
        var length = 0
        let sized = message.withUnsafeBufferPointer { EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }
        guard sized == 1 else {
            ERR_clear_error()
            throw .keyDoesNotLoad("RS256 signing failed")
        }
        var signature = [UInt8](repeating: 0, count: length)
        let signed = message.withUnsafeBufferPointer { m in
            signature.withUnsafeMutableBufferPointer { EVP_DigestSign(ctx, $0.baseAddress, &length, m.baseAddress, m.count) }
        }
        guard signed == 1 else {
            ERR_clear_error()
            throw .keyDoesNotLoad("RS256 signing failed")
        }
        return Array(signature.prefix(length))
    }
}

/// Where a service account's tokens are exchanged: `token_uri` split for the HTTP/2 pool.
public struct TokenEndpoint: Equatable, Sendable {
    public let host: String
    public let port: Int
    /// The request path, `/token` for Google's `https://oauth2.googleapis.com/token`.
    public let path: String
    /// The URI as written: the JWT's `aud`.
    public let uri: String

    /// Parses `https://host[:port][/path]`; nil for anything else (http, no host, a bad port).
    public init?(uri: String) {
        let scheme = "https://"
        guard uri.lowercased().hasPrefix(scheme) else { return nil }
        let rest = uri.dropFirst(scheme.count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let path = rest.dropFirst(authority.count)
        guard !authority.isEmpty, !authority.contains("@"), !path.contains("#") else { return nil }
        var host = String(authority)
        var port = 443
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
            guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            host = String(authority[..<colon])
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
        self.path = path.isEmpty ? "/" : String(path)
        self.uri = uri
    }
}

/// A Google service account as its key file describes it (Firebase console, Project settings >
/// Service accounts > Generate new private key): the project whose devices it reaches, its
/// identity, its RSA key and where it exchanges JWTs for access tokens.
public struct ServiceAccount: Sendable {
    public let projectID: String
    public let clientEmail: String
    /// The key's id, the JWT's `kid`.
    public let privateKeyID: String
    public let tokenEndpoint: TokenEndpoint
    public let key: RS256SigningKey

    /// The OAuth 2.0 scope that lets an access token send FCM messages.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    /// The life of the JWT asserted at the token endpoint: Google's maximum, one hour.
    public static let assertionLifeSeconds: Int64 = 3600

    /// Reads and checks a service-account key file: every field present, `token_uri` https,
    /// the key RSA and loadable. The error says which; it never holds the key.
    public static func load(file: String) throws(ServiceAccountError) -> ServiceAccount {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw .unreadable(access(file, R_OK) == 0 ? "not a readable file" : String(cString: strerror(errno)))
        }
        return try parse(data)
    }

    /// Checks the JSON text of a key file (as `load(file:)`).
    public static func parse(_ data: Data) throws(ServiceAccountError) -> ServiceAccount {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { throw .notJSON }
        if let type = object["type"] as? String, type != "service_account" { throw .notServiceAccount(type: type) }
        func field(_ name: String) throws(ServiceAccountError) -> String {
            guard let value = object[name] as? String, !value.isEmpty else { throw .missingField(name) }
            return value
        }
        let project = try field("project_id")
        let email = try field("client_email")
        let keyID = try field("private_key_id")
        let pem = try field("private_key")
        let uri = try field("token_uri")
        guard let endpoint = TokenEndpoint(uri: uri) else { throw .badTokenURI(uri) }
        let key = try RS256SigningKey.load(pem: pem)
        return ServiceAccount(projectID: project, clientEmail: email, privateKeyID: keyID, tokenEndpoint: endpoint, key: key)
    }

    public init(projectID: String, clientEmail: String, privateKeyID: String, tokenEndpoint: TokenEndpoint, key: RS256SigningKey) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.tokenEndpoint = tokenEndpoint
        self.key = key
    }

    /// The JWT of Google's server-to-server flow, issued at `issuedAt` (unix seconds):
    /// header `{"alg":"RS256","kid":…,"typ":"JWT"}`, claims `aud` (the token URI), `exp`
    /// (an hour on), `iat`, `iss` (the client email) and `scope` (FCM's), RS256-signed.
    public func assertion(issuedAt: Int64) throws(ServiceAccountError) -> String {
        let header = base64URL(OrderedJSON.object([("alg", .string("RS256")), ("kid", .string(privateKeyID)),
                                                       ("typ", .string("JWT"))]).text.utf8)
        let claims = base64URL(OrderedJSON.object([
            ("aud", .string(tokenEndpoint.uri)), ("exp", .int(issuedAt + Self.assertionLifeSeconds)), ("iat", .int(issuedAt)),
            ("iss", .string(clientEmail)), ("scope", .string(Self.messagingScope)),
        ]).text.utf8)
        let signingInput = header + "." + claims
        let signature = try key.sign(Array(signingInput.utf8))
        return signingInput + "." + base64URL(signature)
    }
}
