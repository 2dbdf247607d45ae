import APNs
import EventLoop
import Foundation
import GatewayConfiguration

extension Credential {
    /// How an `ApnsClient` proves itself with this credential: a provider-token source for a
    /// `.p8` key (share it between every pool of the credential, so the key signs one token
    /// at a time), the client certificate otherwise. Reads the key or password file; the
    /// error names the file, never its content.
    package func authentication() throws -> ApnsAuthentication {
        switch self {
        case let .token(teamId, keyId, keyFile):
            let key = try ES256SigningKey.load(p8File: keyFile)
            return .token(ProviderTokenSource(signer: ProviderTokenSigner(teamId: teamId, keyId: keyId, key: key)))
        case .certificate, .pkcs12:
            guard let certificate = try clientCertificate() else { preconditionFailure("a certificate credential") }
            return .certificate(certificate)
        }
    }
}
