import COpenSSL
import CMacros

/// Why a TLS context or connection could not be set up. The message names the file
/// or setting and OpenSSL's own reason; it never contains key material.
public struct TLSError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// What failed, for callers that explain it (`pushgw config check`).
    public let kind: Kind
    public init(_ message: String, kind: Kind = .other) {
        self.message = message
        self.kind = kind
    }

    /// The failures of loading a client certificate that need different fixes.
    public enum Kind: Equatable, Sendable {
        case other
        /// The certificate (chain) file does not load.
        case certificateFile
        /// The private key file does not load.
        case keyFile
        /// The file is no PKCS#12 bundle.
        case notPKCS12
        /// The bundle does not open with the password (a wrong one, or none given).
        case pkcs12Password
        /// The key is not the certificate's.
        case keyMismatch
    }
    public var description: String { message }

    /// OpenSSL's error queue as one line, emptied.
    static func drainOpenSSL() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            parts.append(stringFromCBuffer(buf))
        }
        return parts.isEmpty ? "unknown OpenSSL error" : parts.joined(separator: "; ")
    }
}

/// A client certificate presented during the TLS handshake (APNs certificate auth).
public enum ClientCertificate: Equatable, Sendable {
    /// PEM certificate (chain) and PEM private key files.
    case pem(certFile: String, keyFile: String)
    /// A PKCS#12 bundle and its password (read from a file by the config layer).
    case pkcs12(file: String, password: String)
}

/// An OpenSSL `SSL_CTX`: TLS 1.2+, ALPN `h2`, peer verification. One per credential and
/// role; every connection of a pool shares it.
///
/// Sendable: an `SSL_CTX` is not changed after it is set up here, and OpenSSL lets threads
/// share a context that is no longer being configured.
public final class TLSContext: @unchecked Sendable {
    /// The `SSL_CTX*`, for `SSL_new`.
    public let ctx: OpaquePointer
    /// True for contexts that accept connections.
    public let isServer: Bool

    init(ctx: OpaquePointer, isServer: Bool) {
        self.ctx = ctx
        self.isServer = isServer
    }

    deinit { SSL_CTX_free(ctx) }

    /// A client context offering ALPN `alpn` (`h2` by default; nil offers none, as for Redis),
    /// verifying the server against `caFile` or, when nil, the system trust store.
    public static func client(caFile: String?, certificate: ClientCertificate? = nil,
                              alpn: String? = "h2") throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new: \(TLSError.drainOpenSSL())") }
        let context = TLSContext(ctx: ctx, isServer: false)
        try context.applyCommon()
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let caFile {
            guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else {
                throw TLSError("cannot load CA file \(caFile): \(TLSError.drainOpenSSL())")
            }
        } else if SSL_CTX_set_default_verify_paths(ctx) != 1 {
            throw TLSError("cannot load the system trust store: \(TLSError.drainOpenSSL())")
        }
        if let alpn {
            // ALPN wire format: length-prefixed protocol names.
            let wire = [UInt8(alpn.utf8.count)] + Array(alpn.utf8)
            guard SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0 else { throw TLSError("cannot set ALPN") }
        }
        if let certificate { try context.use(certificate) }
        return context
    }

    /// A server context with `certFile`/`keyFile`, selecting ALPN `h2`. With `clientCAFile`,
    /// a client certificate is requested and verified against it (but not required, so token
    /// auth works on the same port), or, with `requireClientCertificate`, required: a client
    /// without one is refused in the handshake. Without `alpnH2` no protocol is selected, and
    /// clients speak HTTP/1.1 (the producers' HTTP API on evhttp).
    public static func server(certFile: String, keyFile: String, clientCAFile: String? = nil,
                              requireClientCertificate: Bool = false, alpnH2: Bool = true) throws(TLSError) -> TLSContext {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw TLSError("SSL_CTX_new: \(TLSError.drainOpenSSL())") }
        let context = TLSContext(ctx: ctx, isServer: true)
        try context.applyCommon()
        try context.use(.pem(certFile: certFile, keyFile: keyFile))
        if let clientCAFile {
            guard SSL_CTX_load_verify_locations(ctx, clientCAFile, nil) == 1 else {
                throw TLSError("cannot load client CA file \(clientCAFile): \(TLSError.drainOpenSSL())")
            }
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (requireClientCertificate ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), nil)
        }
        guard alpnH2 else { return context }
        SSL_CTX_set_alpn_select_cb(ctx, { _, out, outlen, input, inlen, _ in
            // nghttp2_select_next_protocol would also do; h2 is all we speak.
            var i = 0
            while i < Int(inlen) {
                let len = Int(input![i])
                if len == 2, i + 2 < Int(inlen) + 0, input![i + 1] == 0x68, input![i + 2] == 0x32 {
                    out!.pointee = input! + i + 1
                    outlen!.pointee = 2
                    return SSL_TLSEXT_ERR_OK
                }
                i += 1 + len
            }
            return SSL_TLSEXT_ERR_NOACK
        }, nil)
        return context
    }

    private func applyCommon() throws(TLSError) {
        guard pushgw_ssl_ctx_set_min_tls12(ctx) == 1 else { throw TLSError("cannot require TLS 1.2") }
        // OpenSSL 3 reports a peer closing without close_notify as an error; TLSStream treats
        // it as an orderly close (as libevent 2.1's bufferevent_openssl did before it).
        SSL_CTX_set_options(ctx, UInt64(pushgw_ssl_op_ignore_unexpected_eof()))
    }

    func use(_ certificate: ClientCertificate) throws(TLSError) {
        switch certificate {
        case let .pem(certFile, keyFile):
            guard SSL_CTX_use_certificate_chain_file(ctx, certFile) == 1 else {
                throw TLSError("cannot load certificate \(certFile): \(TLSError.drainOpenSSL())", kind: .certificateFile)
            }
            guard SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM) == 1 else {
                throw TLSError("cannot load private key \(keyFile): \(TLSError.drainOpenSSL())", kind: .keyFile)
            }
        case let .pkcs12(file, password):
            guard let bio = BIO_new_file(file, "rb") else { throw TLSError("cannot open PKCS#12 file \(file)", kind: .notPKCS12) }
            defer { BIO_free(bio) }
            guard let p12 = d2i_PKCS12_bio(bio, nil) else {
                throw TLSError("\(file) is not a PKCS#12 file: \(TLSError.drainOpenSSL())", kind: .notPKCS12)
            }
            defer { PKCS12_free(p12) }
            var key: OpaquePointer?
            var cert: OpaquePointer?
            var chain: OpaquePointer?
            guard PKCS12_parse(p12, password, &key, &cert, &chain) == 1, let key, let cert else {
                throw TLSError("cannot open PKCS#12 file \(file) (wrong password?): \(TLSError.drainOpenSSL())", kind: .pkcs12Password)
            }
            defer { EVP_PKEY_free(key); X509_free(cert) }
            guard SSL_CTX_use_certificate(ctx, cert) == 1, SSL_CTX_use_PrivateKey(ctx, key) == 1 else {
                throw TLSError("cannot use the certificate in \(file): \(TLSError.drainOpenSSL())")
            }
            if let chain { OPENSSL_sk_pop_free(chain, { X509_free(OpaquePointer($0)) }) }
        }
        guard SSL_CTX_check_private_key(ctx) == 1 else {
            ERR_clear_error()
            throw TLSError("certificate and private key do not match", kind: .keyMismatch)
        }
    }
}

/// A Swift string from a NUL-terminated C buffer filled by a C function.
public func stringFromCBuffer(_ buf: [CChar]) -> String {
    buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}
