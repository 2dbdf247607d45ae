import EventLoop
import FCM
import Foundation

/// How pushgw talks to Firebase Cloud Messaging (HTTP v1, `fcm`, config/README.md): the send
/// endpoint, the trust store for it and for the service accounts' token endpoints, and the pool
/// sizes. Used only by apps that name an `fcm_credential`; nothing connects to FCM otherwise.
package struct FcmConfig: Equatable, Sendable {
    /// `fcm.googleapis.com:443`, or a simulator's.
    package var endpoint: Endpoint
    /// CA bundle to verify FCM and the token endpoints (or the simulator) against; nil uses the
    /// system trust store.
    package var caFile: String?
    /// HTTP/2 connections per FCM credential.
    package var connections: Int
    /// Time allowed for one message, from queueing to FCM's answer, in milliseconds; the same
    /// for a token exchange.
    package var requestTimeoutMs: Int
    /// Messages waiting for a stream per credential before sends fail fast.
    package var maxQueued: Int

    static let defaultEndpoint = Endpoint(host: "fcm.googleapis.com", port: 443)
    static let defaultConnections = 2
    static let defaultRequestTimeoutMs = 10_000
    static let defaultMaxQueued = 10_000

    package init(endpoint: Endpoint = FcmConfig.defaultEndpoint, caFile: String? = nil,
                 connections: Int = FcmConfig.defaultConnections, requestTimeoutMs: Int = FcmConfig.defaultRequestTimeoutMs,
                 maxQueued: Int = FcmConfig.defaultMaxQueued) {
        self.endpoint = endpoint
        self.caFile = caFile
        self.connections = connections
        self.requestTimeoutMs = requestTimeoutMs
        self.maxQueued = maxQueued
    }
}

/// An FCM credential: the path of a Google service-account key file (JSON with `project_id`,
/// `client_email`, `private_key_id`, `private_key`, `token_uri`). Only the path: the key is read
/// by the FCM module when a pool opens (`FcmCredential.load`), never held in the config.
package struct FcmCredential: Equatable, Sendable {
    package var serviceAccountFile: String

    package init(serviceAccountFile: String) {
        self.serviceAccountFile = serviceAccountFile
    }

    /// The service account as the FCM pool loads it; the error names what is wrong, never the key.
    package func load() -> Result<ServiceAccount, ServiceAccountError> {
        do {
            return .success(try ServiceAccount.load(file: serviceAccountFile))
        } catch {
            return .failure(error)
        }
    }
}

extension ConfigParser {
    /// The `fcm` section; its defaults when absent.
    func parseFCM(_ root: [String: Any]) -> FcmConfig {
        let path = JSONPath.root.appending("fcm")
        guard let section = reader.section(root, "fcm", in: .root) else { return FcmConfig() }
        reader.unknownKeys(section, at: path, known: ["endpoint", "ca_file", "connections", "request_timeout_ms", "max_queued"])
        var config = FcmConfig()
        if let (text, at) = reader.string(section, "endpoint", in: path, required: false,
                                          example: FcmConfig.defaultEndpoint.description) {
            if let endpoint = Endpoint(parsing: text) {
                config.endpoint = endpoint
            } else {
                reader.error(at, "\(reader.quoted(text)) is not host:port with a port in 1-65535",
                             fix: "write host:port, such as \"\(FcmConfig.defaultEndpoint)\" (no scheme, no path)")
            }
        }
        config.caFile = reader.filePath(section, "ca_file", in: path, role: .caBundle, required: false,
                                        example: "/etc/ssl/certs/ca-certificates.crt", nullIsDefault: true)
        (config.connections, config.requestTimeoutMs, config.maxQueued) = poolLimits(
            section, in: path, defaults: (config.connections, config.requestTimeoutMs, config.maxQueued))
        return config
    }

    /// A credential entry with `service_account_file`.
    func parseFcmCredential(_ entry: [String: Any], at path: JSONPath) -> FcmCredential? {
        reader.unknownKeys(entry, at: path, known: ["service_account_file"])
        guard let file = reader.filePath(entry, "service_account_file", in: path, role: .serviceAccount, required: true,
                                         example: "secrets/acme-firebase.json") else { return nil }
        return FcmCredential(serviceAccountFile: file)
    }

    /// Loads each service account as the FCM pool will (`ServiceAccount.load`): the JSON, its
    /// fields, `token_uri`, and the RSA key through OpenSSL. A file that failed its file checks
    /// (unreadable) is not loaded again.
    func checkServiceAccounts(_ credentials: [String: FcmCredential]) {
        for name in credentials.keys.sorted() {
            let path = JSONPath.root.appending("credentials").appending(name).appending("service_account_file")
            guard !reader.hasProblem(at: path), case let .failure(problem) = credentials[name]!.load() else { continue }
            let file = credentials[name]!.serviceAccountFile
            let download = "download a new key for the service account (Firebase console > Project settings > Service accounts > Generate new private key) and point service_account_file at it"
            let fix: String
            switch problem {
            case .unreadable:
                fix = "let the user running pushgw read it (chown to that user, chmod 600)"
            case .notJSON, .keyNotRSA, .keyTooShort, .keyDoesNotLoad:
                fix = download
            case .notServiceAccount:
                fix = "use a service account's key file, not gcloud's application-default credentials: " + download
            case let .missingField(field):
                fix = "the file must have \(field) beside project_id, client_email, private_key_id, private_key and token_uri as Google writes them: " + download
            case .badTokenURI:
                fix = "write \"token_uri\": \"https://oauth2.googleapis.com/token\" in the file (or the https URL of the simulator's token endpoint)"
            }
            reader.error(path, "\(file) \(problem.description)", fix: fix)
        }
    }

    /// An app's `fcm_credential`: the name of an FCM credential. Nil when absent; `.none` after
    /// an error (recorded).
    func parseAppFcmCredential(_ entry: [String: Any], in path: JSONPath, fcmCredentials: Set<String>,
                               declaredCredentials: [String]) -> String?? {
        guard let (name, at) = reader.string(entry, "fcm_credential", in: path, required: false, example: "acme-firebase") else {
            return reader.hasProblem(at: path.appending("fcm_credential")) ? nil : .some(nil)
        }
        if fcmCredentials.contains(name) { return .some(name) }
        if declaredCredentials.contains(name) {
            reader.error(at, "credential \(reader.quoted(name)) is an APNs credential, not a service account",
                         fix: "name a credential with \"service_account_file\" here, and the APNs one in \"credential\"")
        } else {
            let declared = fcmCredentials.isEmpty ? "none" : fcmCredentials.sorted().joined(separator: ", ")
            reader.error(at, "no FCM credential named \(reader.quoted(name)) (declared: \(declared))",
                         fix: "fix the name or declare it under credentials: { \"service_account_file\": … }")
        }
        return nil
    }
}
