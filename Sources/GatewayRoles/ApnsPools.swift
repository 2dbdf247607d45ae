import APNs
import EventLoop
import GatewayConfiguration

/// The APNs connection pools of a running gateway: one `ApnsClient` per (credential,
/// environment), shared by every app of that credential, created when first needed.
///
/// Why per credential: APNs binds a connection to the team (token auth) or the certificate of
/// its first push, so apps of one team share connections and apps of two credentials never
/// do — one app's broken credential cannot slow another credential's pushes. One
/// `ProviderTokenSource` per key serves both of its environments, so the key signs one token
/// at a time and renewals stay under Apple's once-per-20-minutes limit.
package final class ApnsPools {
    /// Identifies one pool.
    package struct Key: Hashable, Sendable {
        package let credential: String
        package let environment: ApnsEnvironment
    }

    private let loop: EventLoop
    private var config: GatewayConfig
    private var clients: [Key: ApnsClient] = [:]
    private var authentications: [String: ApnsAuthentication] = [:]
    private let log: Log?

    /// `log` receives each pool's outages: its failed connects (limited: the first, then one
    /// line every few seconds with the count of the others) and its return.
    package init(loop: EventLoop, config: GatewayConfig, log: Log? = nil) {
        self.loop = loop
        self.config = config
        self.log = log
    }

    /// Pushes of `share` (an app) waiting for a stream in `credential`'s pools, both
    /// environments, while they are reachable (`ApnsClient.waitingForStreams`). Two look-ups.
    package func waitingForStreams(credential: String, share: Int) -> Int {
        ApnsEnvironment.allCases.reduce(0) {
            $0 + (clients[Key(credential: credential, environment: $1)]?.waitingForStreams(share: share) ?? 0)
        }
    }

    /// The pool for `app` in `environment` (the app's own unless an event asks for sandbox).
    package func client(credential name: String, environment: ApnsEnvironment) throws -> ApnsClient {
        let key = Key(credential: name, environment: environment)
        if let client = clients[key] { return client }
        guard let credential = config.credentials[name] else {
            throw TLSError("no credential named \(name)")
        }
        let authentication: ApnsAuthentication
        if let known = authentications[name] {
            authentication = known
        } else {
            authentication = try credential.authentication()
            authentications[name] = authentication
        }
        let endpoint = config.apns.endpoint(for: environment)
        var settings = ApnsClientSettings(host: endpoint.host, port: endpoint.port, caFile: config.apns.caFile,
                                          authentication: authentication)
        settings.connections = config.apns.connections
        settings.requestTimeoutMs = Int64(config.apns.requestTimeoutMs)
        settings.maxQueued = config.apns.maxQueued
        let client = try ApnsClient(loop: loop, settings: settings)
        let log = self.log
        client.onReachability = { event in
            log?.reachability(event, of: "APNs", pool: ["credential": key.credential, "environment": key.environment.rawValue])
        }
        clients[key] = client
        return client
    }

    /// Switches to `newConfig` (SIGHUP): pools whose credential or APNs settings did not
    /// change keep their connections; the others are closed (their pending pushes fail with
    /// `.clientClosed`, which the router retries) and reopen on the next push with the new
    /// settings. Returns the credentials whose pools were closed: those still configured
    /// (`reopened` at their next push) and those the new config removed (`closed`).
    @discardableResult
    package func apply(_ newConfig: GatewayConfig) -> (reopened: [String], closed: [String]) {
        let apnsChanged = newConfig.apns != config.apns
        var closed: Set<String> = []
        for (key, client) in clients where apnsChanged || newConfig.credentials[key.credential] != config.credentials[key.credential] {
            client.close()
            clients[key] = nil
            closed.insert(key.credential)
        }
        for name in authentications.keys where apnsChanged || newConfig.credentials[name] != config.credentials[name] {
            authentications[name] = nil
        }
        config = newConfig
        // A credential still configured opens again at its next push; a removed one is gone.
        let reopened = closed.filter { newConfig.credentials[$0] != nil }
        return (reopened.sorted(), closed.subtracting(reopened).sorted())
    }

    /// Every pool opened so far, for metrics and shutdown.
    package var all: [Key: ApnsClient] { clients }

    /// Closes every pool; their pending pushes fail with `.clientClosed`.
    package func close() {
        for client in clients.values { client.close() }
        clients.removeAll()
    }
}

extension Log {
    /// A provider pool's outage (each failed connect while none is up, limited) or its return,
    /// for `provider` (`APNs`, `FCM`), with the pool's fields.
    func reachability(_ event: ApnsReachability, of provider: String, pool: [String: Any]) {
        switch event {
        case let .connectFailed(reason, failures, unreachableForMs):
            warn("\(provider) unreachable: connecting failed",
                 pool.merging(["error": reason, "failed_connects": failures, "unreachable_s": Double(unreachableForMs) / 1000]) { $1 },
                 limited: true)
        case let .reachableAgain(afterMs, failures):
            info("\(provider) reachable again", pool.merging(["after_s": Double(afterMs) / 1000, "failed_connects": failures]) { $1 })
        }
    }
}
