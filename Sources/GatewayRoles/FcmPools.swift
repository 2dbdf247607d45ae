import APNs
import EventLoop
import FCM
import GatewayConfiguration

/// Why an FCM credential's client could not be made.
package enum FcmPoolError: Error, Equatable, CustomStringConvertible {
    /// No FCM credential of that name in the config.
    case unknownCredential(String)
    /// Its service-account file does not load (the field or the key, never the key itself).
    case serviceAccount(credential: String, file: String, ServiceAccountError)
    /// The TLS setup failed (the CA file).
    case tls(TLSError)

    /// What is wrong, without the credential's name (its dead letter names it).
    package var problem: String {
        switch self {
        case .unknownCredential: return "no FCM credential of that name in the config"
        case let .serviceAccount(_, file, problem): return "\(file) \(problem.description)"
        case let .tls(error): return "TLS: \(error.message)"
        }
    }

    package var description: String {
        switch self {
        case let .unknownCredential(name): return "no FCM credential named \(name)"
        case let .serviceAccount(name, file, problem): return "credentials.\(name): \(file) \(problem.description)"
        case let .tls(error): return "TLS: \(error.message)"
        }
    }
}

/// The FCM clients of a running gateway: one `FcmClient` per FCM credential (a service account),
/// shared by every app that names it and created when first needed, so one access token serves
/// all of its messages and apps of two service accounts never share connections. Nothing is
/// opened for a config without FCM credentials. The clients' pools are the APNs client's
/// (`ProviderPost`), one to FCM and one to the account's token endpoint.
package final class FcmPools {
    private let loop: EventLoop
    private var config: GatewayConfig
    private var clients: [String: FcmClient] = [:]
    private let log: Log?

    /// `log` receives each pool's outages, limited, as for APNs (`ApnsPools`).
    package init(loop: EventLoop, config: GatewayConfig, log: Log? = nil) {
        self.loop = loop
        self.config = config
        self.log = log
    }

    /// The client of FCM credential `name`, made at its first use: the service account read and
    /// its key loaded (as `config check` did).
    package func client(credential name: String) throws(FcmPoolError) -> FcmClient {
        if let client = clients[name] { return client }
        guard let credential = config.fcmCredentials[name] else { throw .unknownCredential(name) }
        let account: ServiceAccount
        switch credential.load() {
        case let .success(loaded): account = loaded
        case let .failure(problem): throw .serviceAccount(credential: name, file: credential.serviceAccountFile, problem)
        }
        var settings = FcmClientSettings(host: config.fcm.endpoint.host, port: config.fcm.endpoint.port, caFile: config.fcm.caFile)
        settings.connections = config.fcm.connections
        settings.requestTimeoutMs = Int64(config.fcm.requestTimeoutMs)
        settings.maxQueued = config.fcm.maxQueued
        let client: FcmClient
        do {
            client = try FcmClient(loop: loop, settings: settings, account: account)
        } catch {
            throw .tls(error)
        }
        let log = self.log
        client.messagePool.onReachability = { event in log?.reachability(event, of: "FCM", pool: ["credential": name]) }
        clients[name] = client
        return client
    }

    /// Switches to `newConfig` (SIGHUP): clients whose credential and `fcm` settings did not
    /// change keep their connections and access token; the others are closed (their pending
    /// messages fail with `.clientClosed`) and are made again at their next message. Returns
    /// the credentials whose clients were closed: those still configured (`reopened`) and those
    /// the new config removed (`closed`).
    @discardableResult
    package func apply(_ newConfig: GatewayConfig) -> (reopened: [String], closed: [String]) {
        let fcmChanged = newConfig.fcm != config.fcm
        var closed: [String] = []
        for (name, client) in clients where fcmChanged || newConfig.fcmCredentials[name] != config.fcmCredentials[name] {
            client.close()
            clients[name] = nil
            closed.append(name)
        }
        config = newConfig
        let reopened = closed.filter { newConfig.fcmCredentials[$0] != nil }
        return (reopened.sorted(), closed.filter { newConfig.fcmCredentials[$0] == nil }.sorted())
    }

    /// Every client made so far, for metrics and shutdown.
    package var all: [String: FcmClient] { clients }

    /// Closes every client; their pending messages fail with `.clientClosed`.
    package func close() {
        for client in clients.values { client.close() }
        clients.removeAll()
    }
}
