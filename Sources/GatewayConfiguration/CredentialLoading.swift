import APNs
import EventLoop
import Foundation

/// A credential loaded as `pushgw push` and `pushgw run` load it (OpenSSL, through `EventLoop`'s
/// TLS layer and APNs' signing-key loader), so `config check` refuses what they would refuse and
/// the router knows which APNs environments a certificate reaches. Reads files only; never
/// returns or prints key material.
extension Credential {
    /// The client certificate of a certificate credential, with its PKCS#12 password read from
    /// its file (the first line); nil for token auth. The error names the file, never its content.
    package func clientCertificate() throws(TLSError) -> ClientCertificate? {
        switch self {
        case .token:
            return nil
        case let .certificate(certFile, keyFile):
            return .pem(certFile: certFile, keyFile: keyFile)
        case let .pkcs12(file, passwordFile):
            var password = ""
            if let passwordFile {
                guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                    throw TLSError("cannot read the PKCS#12 password file \(passwordFile)")
                }
                password = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
            }
            return .pkcs12(file: file, password: password)
        }
    }

    /// What loading the credential found: a token key loads as an ES256 key (EC P-256), a
    /// certificate with its key (they must match) or from its PKCS#12 bundle and password.
    package func load() -> Result<LoadedCredential, LoadingError> {
        switch self {
        case let .token(_, _, keyFile):
            do {
                _ = try ES256SigningKey.load(p8File: keyFile)
                return .success(.token)
            } catch {
                return .failure(LoadingError(message: error.description, kind: .other))
            }
        case .certificate, .pkcs12:
            do throws(TLSError) {
                guard let certificate = try clientCertificate() else { preconditionFailure("a certificate credential") }
                return .success(.certificate(try TLSContext.facts(of: certificate)))
            } catch {
                return .failure(LoadingError(message: error.description, kind: error.kind))
            }
        }
    }

    /// True when pushes of this credential can go to both APNs environments: a token key
    /// reaches both, a certificate when it is universal (Apple's development and production
    /// extensions). A certificate that cannot be loaded reaches none (`config check` says why).
    package var reachesBothEnvironments: Bool {
        if isToken { return true }
        switch load() {
        case .success(.token): return true
        case let .success(.certificate(facts)): return facts.reachesBothApnsEnvironments
        case .failure: return false
        }
    }
}

/// A credential that loaded.
package enum LoadedCredential: Equatable, Sendable {
    case token
    case certificate(CertificateFacts)
}

/// Why a credential did not load: OpenSSL's or the key loader's reason, naming the file.
package struct LoadingError: Error, Equatable, Sendable {
    package var message: String
    /// For a certificate: what failed (OpenSSL's side, `TLSError.Kind`).
    package var kind: TLSError.Kind
}

/// One certificate's expiry, for the metric `pushgw_certificate_expiry_timestamp_seconds`.
package struct CertificateExpiry: Equatable, Sendable {
    /// The credential's name, or `apns.ca_file`.
    package var name: String
    /// `credential` or `ca`.
    package var kind: String
    /// Unix seconds.
    package var notAfterS: Int64

    package init(name: String, kind: String, notAfterS: Int64) {
        self.name = name
        self.kind = kind
        self.notAfterS = notAfterS
    }
}

extension GatewayConfig {
    /// How long before a certificate or the CA file expires `config check` warns.
    package static let expiryWarningSeconds: Int64 = 30 * 86_400

    /// When each certificate credential and the CA file expire (those that load). For the CA
    /// file: its soonest-expiring certificate that is valid now (`TLSContext.soonestExpiry`).
    package func certificateExpiries(nowS: Int64) -> [CertificateExpiry] {
        var out: [CertificateExpiry] = []
        for name in credentials.keys.sorted() {
            if case let .success(.certificate(facts)) = credentials[name]!.load() {
                out.append(CertificateExpiry(name: name, kind: "credential", notAfterS: facts.notAfterS))
            }
        }
        if let caFile = apns.caFile, let certificates = try? TLSContext.certificates(inPEMFile: caFile),
           let soonest = CertificateFacts.soonestExpiry(of: certificates, nowS: nowS) {
            out.append(CertificateExpiry(name: "apns.ca_file", kind: "ca", notAfterS: soonest.notAfterS))
        }
        return out
    }
}
