import APNs
import EventLoop
import DeadLetters
import Foundation

/// The checks `config check` makes by loading what the config names, as `pushgw push` and
/// `pushgw run` load it (`CredentialLoading`): every credential (a `.p8` key must be EC P-256; a
/// certificate must load with its key, which must match it, or from its PKCS#12 bundle with its
/// password; it must be valid now and is warned about 30 days before it expires), the CA file
/// (it must hold certificates), and what the environments imply (a certificate for one APNs
/// environment only; an app whose environment's endpoint is the other environment's host).
/// A credential whose files already failed their checks is not loaded again.
extension ConfigParser {
    /// Loads each credential; answers the certificates that loaded, by credential name.
    func checkLoading(_ credentials: [String: Credential], nowS: Int64) -> [String: CertificateFacts] {
        var loaded: [String: CertificateFacts] = [:]
        for name in credentials.keys.sorted() {
            let credential = credentials[name]!
            let path = JSONPath.root.appending("credentials").appending(name)
            guard !reader.hasProblem(at: path) else { continue }
            switch credential.load() {
            case .success(.token):
                break
            case let .success(.certificate(facts)):
                loaded[name] = facts
                checkDates(facts, at: certificatePath(credential, path), nowS: nowS,
                           fix: "renew the certificate in the Apple developer account (Certificates, Identifiers & Profiles > Certificates), "
                               + "then point \(certificatePath(credential, path).key) at the new one and reload pushgw")
            case let .failure(problem):
                report(problem, of: credential, at: path)
            }
        }
        return loaded
    }

    private func certificatePath(_ credential: Credential, _ path: JSONPath) -> JSONPath {
        if case .pkcs12 = credential { return path.appending("p12_file") }
        return path.appending("cert_file")
    }

    private func report(_ problem: LoadingError, of credential: Credential, at path: JSONPath) {
        switch credential {
        case let .token(_, _, keyFile):
            reader.error(path.appending("key_file"), "\(keyFile) does not load as an APNs signing key: \(problem.message)",
                         fix: "download the APNs auth key (.p8) from the Apple developer account (Certificates, Identifiers & Profiles > Keys)")
        case let .certificate(certFile, keyFile):
            switch problem.kind {
            case .keyMismatch:
                reader.error(path.appending("key_file"), "the private key in \(keyFile) is not the key of the certificate in \(certFile)",
                             fix: "point key_file at the key the certificate was issued for (openssl x509 -noout -pubkey -in \(certFile) and openssl pkey -pubout -in \(keyFile) must print the same key)")
            case .keyFile:
                reader.error(path.appending("key_file"), "\(keyFile) does not load as the certificate's private key: \(problem.message)",
                             fix: "point key_file at the certificate's PEM private key (from a .p12: openssl pkcs12 -in FILE.p12 -nocerts -nodes -out voip.key)")
            default:
                reader.error(path.appending("cert_file"), "\(certFile) does not load as a certificate: \(problem.message)",
                             fix: "point cert_file at the PEM certificate (from Apple's .cer: openssl x509 -inform DER -in aps.cer -out voip.pem)")
            }
        case let .pkcs12(file, passwordFile):
            switch (problem.kind, passwordFile) {
            case (.pkcs12Password, nil):
                reader.error(path.appending("p12_file"), "\(file) does not open without a password",
                             fix: "add \"password_file\": a file whose first line is the password the bundle was exported with (chmod 600)")
            case let (.pkcs12Password, passwordFile?):
                reader.error(path.appending("password_file"), "the password in \(passwordFile) does not open \(file)",
                             fix: "put the password the bundle was exported with on the first line of \(passwordFile) (openssl pkcs12 -info -noout -in \(file) asks for it)")
            case (.keyMismatch, _):
                reader.error(path.appending("p12_file"), "the private key in \(file) is not the key of its certificate",
                             fix: "export the certificate with its own private key again (Keychain Access: the certificate with its key, Export as .p12)")
            default:
                reader.error(path.appending("p12_file"), "\(file) does not load as a PKCS#12 bundle: \(problem.message)",
                             fix: "export the push certificate with its private key as a .p12 from Keychain Access, or use cert_file and key_file (PEM)")
            }
        }
    }

    /// An error for a certificate that is not valid at `nowS`, a warning within
    /// `GatewayConfig.expiryWarningSeconds` of its end.
    private func checkDates(_ facts: CertificateFacts, at path: JSONPath, nowS: Int64, fix: String) {
        if facts.notAfterS <= nowS {
            reader.error(path, "the certificate \(reader.quoted(facts.subject)) expired on \(Self.date(facts.notAfterS)): APNs refuses it", fix: fix)
        } else if facts.notBeforeS > nowS {
            reader.error(path, "the certificate \(reader.quoted(facts.subject)) is not valid before \(Self.date(facts.notBeforeS))",
                         fix: "check the machine's clock, or use a certificate valid now")
        } else if facts.notAfterS - nowS <= GatewayConfig.expiryWarningSeconds {
            let days = (facts.notAfterS - nowS) / 86_400
            reader.warning(path, "the certificate \(reader.quoted(facts.subject)) expires on \(Self.date(facts.notAfterS)), in \(days == 1 ? "1 day" : "\(days) days")",
                           fix: fix)
        }
    }

    /// The CA file must hold PEM certificates, one of them valid now; warned 30 days before the
    /// soonest-expiring valid one ends (`CertificateFacts.soonestExpiry`).
    func checkCAFile(_ apns: ApnsConfig, nowS: Int64) {
        let path = JSONPath.root.appending("apns").appending("ca_file")
        guard let caFile = apns.caFile, !reader.hasProblem(at: path) else { return }
        let certificates: [CertificateFacts]
        do {
            certificates = try TLSContext.certificates(inPEMFile: caFile)
        } catch {
            let what: String
            switch KeyFileInspection.privateKeyShape(caFile) {
            case .pkcs8, .sec1EC, .pkcs1RSA, .encrypted: what = " (it holds a private key)"
            case .notPEM: what = " (it is not PEM: a DER file?)"
            case .otherPEM, .unreadable: what = ""
            }
            reader.error(path, "\(caFile) holds no PEM certificate\(what): TLS to APNs would trust nothing",
                         fix: "point ca_file at a PEM bundle of the CAs APNs' servers chain to (such as /etc/ssl/certs/ca-certificates.crt), or remove it to use the system trust store")
            return
        }
        guard let soonest = CertificateFacts.soonestExpiry(of: certificates, nowS: nowS) else {
            reader.error(path, "none of the \(certificates.count) certificates in \(caFile) is valid now",
                         fix: "replace it with a current CA bundle (APNs' servers chain to the USERTrust RSA Certification Authority)")
            return
        }
        checkDates(soonest, at: path, nowS: nowS,
                   fix: "replace \(caFile) with a bundle that has the CA's new certificate before then (pushgw_certificate_expiry_timestamp_seconds tracks it)")
    }

    /// What the apps' environments imply: a certificate granted one APNs environment only
    /// cannot serve an app of the other (APNs answers `BadCertificateEnvironment`) nor try a
    /// `BadDeviceToken` in the other environment; an app's environment whose endpoint is the
    /// other environment's Apple host gets every token refused.
    func checkEnvironments(apps: [String: AppConfig], apns: ApnsConfig, certificates: [String: CertificateFacts]) {
        for name in certificates.keys.sorted() {
            let facts = certificates[name]!
            guard facts.apnsDevelopment != facts.apnsProduction else { continue }  // universal, or no Apple extension to read
            let granted: ApnsEnvironment = facts.apnsProduction ? .production : .sandbox
            let path = JSONPath.root.appending("credentials").appending(name)
            for id in apps.keys.sorted() where apps[id]!.credential == name && apps[id]!.environment != granted {
                reader.error(JSONPath.root.appending("apps").appending(id).appending("environment"),
                             "app \(reader.quoted(id)) is a \(apps[id]!.environment.rawValue) app, but credential \(reader.quoted(name))'s certificate is for \(granted.rawValue) only: APNs refuses it (BadCertificateEnvironment)",
                             fix: "use a certificate for \(apps[id]!.environment.rawValue) (a universal \"Sandbox & Production\" certificate serves both), or a .p8 token key")
            }
            reader.warning(path, "its certificate is for \(granted.rawValue) only: a token refused with BadDeviceToken cannot be tried in \(granted.other.rawValue), so a token of the other environment is marked invalid",
                           fix: "use a universal \"Sandbox & Production\" certificate or a .p8 token key, which reach both environments")
        }
        for environment in ApnsEnvironment.allCases {
            let endpoint = environment == .production ? apns.productionEndpoint : apns.sandboxEndpoint
            let host = endpoint.host.lowercased()
            let otherHosts = environment == .production ? ["api.sandbox.push.apple.com", "api.development.push.apple.com"]
                                                        : ["api.push.apple.com"]
            guard otherHosts.contains(host) else { continue }
            let users = apps.keys.sorted().filter { apps[$0]!.environment == environment }
            let used = users.isEmpty ? "events that ask for \(environment.rawValue)"
                : (users.count == 1 ? "app " : "apps ") + users.map { reader.quoted($0) }.joined(separator: ", ")
            reader.warning(JSONPath.root.appending("apns").appending(environment.rawValue).appending("endpoint"),
                           "the \(environment.rawValue) endpoint is Apple's \(environment.other.rawValue) host \(host): pushes of \(used) go to the other environment, which refuses their tokens (BadDeviceToken)",
                           fix: "set it to \(environment.defaultHost):\(ApnsEnvironment.defaultPort)")
        }
    }

    /// A certificate's date as people read it, in UTC. Only a problem's text needs one: a
    /// Foundation date formatter here loaded ICU's calendar and time-zone data into every
    /// process at start (2.3 MB of resident pages) for dates nobody read.
    private static func date(_ unixS: Int64) -> String { DeadFormat.time(unixS * 1000) }
}
