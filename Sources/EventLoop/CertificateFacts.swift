import CMacros
import COpenSSL
import Glibc

/// What a certificate says about itself, read with OpenSSL: its subject, its validity dates,
/// its public key and the APNs environments Apple's extensions grant it. For `pushgw config
/// check`, the expiry metrics and the router (a certificate that reaches one environment only
/// cannot try a `BadDeviceToken` in the other). No key material is kept.
public struct CertificateFacts: Equatable, Sendable {
    /// The subject, one line (`CN=Apple Push Services: com.acme.phone, …`).
    public var subject: String
    /// Validity, unix seconds.
    public var notBeforeS: Int64
    public var notAfterS: Int64
    /// The public key: `RSA 2048-bit`, `EC prime256v1`, …
    public var key: String
    /// Apple's push environment extensions (OIDs 1.2.840.113635.100.6.3.1, development, and
    /// 1.2.840.113635.100.6.3.2, production). A universal certificate has both.
    public var apnsDevelopment: Bool
    public var apnsProduction: Bool

    /// The certificate of `certificates` valid at `nowS` that expires first: when a CA bundle
    /// starts to lose what it trusts (expired ones in it trust nothing already); nil when none is valid.
    public static func soonestExpiry(of certificates: [CertificateFacts], nowS: Int64) -> CertificateFacts? {
        certificates.filter { $0.notBeforeS <= nowS && nowS < $0.notAfterS }.min { $0.notAfterS < $1.notAfterS }
    }

    /// True when the certificate grants both APNs environments (a universal certificate).
    public var reachesBothApnsEnvironments: Bool { apnsDevelopment && apnsProduction }

    private static let developmentOID = "1.2.840.113635.100.6.3.1"
    private static let productionOID = "1.2.840.113635.100.6.3.2"

    /// The facts of the certificate `x509` (an `X509 *`); nil when its dates cannot be read.
    static func of(_ x509: OpaquePointer) -> CertificateFacts? {
        guard let notBefore = seconds(X509_get0_notBefore(x509)), let notAfter = seconds(X509_get0_notAfter(x509)) else {
            return nil
        }
        var name = [CChar](repeating: 0, count: 512)
        X509_NAME_oneline(X509_get_subject_name(x509), &name, Int32(name.count))
        return CertificateFacts(subject: stringFromCBuffer(name), notBeforeS: notBefore, notAfterS: notAfter,
                                key: keyDescription(X509_get0_pubkey(x509)),
                                apnsDevelopment: hasExtension(x509, developmentOID), apnsProduction: hasExtension(x509, productionOID))
    }

    private static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func hasExtension(_ x509: OpaquePointer, _ oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(x509, object, -1) >= 0
    }

    private static func keyDescription(_ key: OpaquePointer?) -> String {
        guard let key else { return "no public key" }
        let bits = EVP_PKEY_get_bits(key)
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA: return "RSA \(bits)-bit"
        case EVP_PKEY_EC:
            var group = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &group, group.count, &length) == 1 else { return "EC \(bits)-bit" }
            return "EC " + stringFromCBuffer(group)
        case EVP_PKEY_ED25519: return "Ed25519"
        default: return "a \(bits)-bit key of another type"
        }
    }
}

extension TLSContext {
    /// Loads a client certificate and its key exactly as a client context does (PEM files or a
    /// PKCS#12 bundle and its password; the key must match the certificate) and returns the
    /// certificate's facts. Throws what `client(caFile:certificate:)` would throw.
    public static func facts(of certificate: ClientCertificate) throws(TLSError) -> CertificateFacts {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError("SSL_CTX_new: \(TLSError.drainOpenSSL())") }
        let context = TLSContext(ctx: ctx, isServer: false)
        try context.use(certificate)
        guard let leaf = SSL_CTX_get0_certificate(ctx), let facts = CertificateFacts.of(leaf) else {
            throw TLSError("the certificate's validity dates cannot be read")
        }
        return facts
    }

    /// The certificates of a PEM file such as a CA bundle, in order. Throws when the file
    /// cannot be read or holds no certificate (a private key given as `apns.ca_file`, a DER
    /// file): OpenSSL would load such a file as a trust store that trusts nothing.
    public static func certificates(inPEMFile path: String) throws(TLSError) -> [CertificateFacts] {
        ERR_clear_error()
        guard let bio = BIO_new_file(path, "rb") else {
            ERR_clear_error()
            throw TLSError("cannot open \(path)")
        }
        defer { BIO_free(bio) }
        var found: [CertificateFacts] = []
        while let x509 = PEM_read_bio_X509(bio, nil, { _, _, _, _ in -1 }, nil) {
            defer { X509_free(x509) }
            if let facts = CertificateFacts.of(x509) { found.append(facts) }
        }
        // The loop ends at the end of the file (or at a PEM block that is no certificate).
        ERR_clear_error()
        guard !found.isEmpty else { throw TLSError("\(path) holds no PEM certificate") }
        return found
    }
}
