// IngestEndpoint: the producers' HTTP API (docs/protocol.md "The HTTP API", docs/http-api.yaml):
// a listener of its own (`ingest.listen`) on the admin endpoint's server code (AdminServer:
// evhttp, the request screen, the connection admission), with its own guess limits
// (CredentialGuard) for the API keys, and the routes that turn a request into the event a
// Redis producer would have written (IngestRoutes, through CallStorage's CallIntake).
// Owns: what producers may do over HTTP, and their keys and request rates.
// Must not: route calls or read the router's state: it writes the calls stream and reads
// result keys, as any producer does; never on the admin endpoint's port.
import AdminEndpoint
import CallStorage
import EventLoop
import GatewayConfiguration
import GatewayRoles
import RedisClient

/// The HTTP API of a running gateway, on the process's loop. Lifecycle: create it,
/// `start()` before the loop runs (it listens; a port in use is retried every 5 s, logged
/// once), `close()` after the loop stopped. Loop-owned.
package final class IngestEndpoint {
    private let loop: EventLoop
    private var config: IngestConfig
    private let log: Log
    private let routes: IngestRoutes
    private let guesses: CredentialGuard
    private var server: AdminServer?
    private let listening: ListenRetry

    /// `apps`: the config's apps (their keys and policies); `topology`: where the events go
    /// (the process's store's).
    package init(loop: EventLoop, config: IngestConfig, apps: [AppRuntime], topology: RedisTopology, log: Log) {
        self.loop = loop
        self.config = config
        self.log = log
        guesses = CredentialGuard(loop: loop, log: log, credential: "API key")
        listening = ListenRetry(loop: loop, everyMs: 5_000, log: log, what: "HTTP API", fix: "set ingest.listen to a free address")
        let served = IngestEndpoint.served(config, apps: apps)
        routes = IngestRoutes(loop: loop, intake: CallIntake(topology: topology), apps: served.apps, keys: served.keys,
                              rate: served.rate, guesses: guesses)
    }

    /// What the routes serve of `config` and `apps`.
    private static func served(_ config: IngestConfig, apps: [AppRuntime]) -> (apps: [String: IngestRoutes.App], keys: APIKeys,
                                                                              rate: AppRequestRate) {
        var served: [String: IngestRoutes.App] = [:]
        for app in apps { served[app.id] = IngestRoutes.App(keys: app.keys, policy: app.policy, retention: app.retention) }
        return (served, APIKeys(keyHashes: config.apps.mapValues(\.keyHashes)),
                AppRequestRate(buckets: config.apps.mapValues { TokenBucket(perSecond: $0.requestsPerSecond, burst: $0.burst) }))
    }

    /// A reloaded config (SIGHUP): its keys, rates and apps are served from the next request
    /// on (a new key works, a removed one is refused), without closing a connection. False,
    /// and nothing changes, when it listens otherwise (`IngestConfig.listensAs`): that takes a
    /// restart. Each app's bucket starts full.
    package func apply(_ newConfig: IngestConfig, apps: [AppRuntime]) -> Bool {
        guard newConfig.listensAs(config) else { return false }
        config = newConfig
        let served = IngestEndpoint.served(newConfig, apps: apps)
        routes.update(apps: served.apps, keys: served.keys, rate: served.rate)
        return true
    }

    /// The port the API listens on; nil while it is not bound.
    package var port: Int? { server?.boundPort }

    /// Loads the TLS files and listens. A TLS file that no longer loads (`config check`
    /// loaded it) leaves the API closed, with an error in the log: it never falls back to
    /// plain HTTP.
    package func start() {
        loop.assertInLoop()
        guard let endpoint = Endpoint(parsing: config.listen) else {
            log.error("HTTP API not started: ingest.listen is not host:port", ["listen": config.listen])
            return
        }
        var tls: TLSContext?
        if let cert = config.tlsCertFile, let key = config.tlsKeyFile {
            do {
                tls = try TLSContext.server(certFile: cert, keyFile: key, clientCAFile: config.tlsClientCAFile,
                                            requireClientCertificate: config.tlsClientCAFile != nil, alpnH2: false)
            } catch {
                log.error("HTTP API not started: its TLS certificate does not load", ["error": error.message])
                return
            }
        }
        var limits = AdminServer.Limits()
        limits.maxConnections = config.maxConnections
        limits.maxConnectionsPerClient = config.maxConnectionsPerClient
        limits.requestsPerConnectionPerSecond = 1_000  // producers keep connections alive; the app's rate bounds them
        limits.acceptsPerTurn = 32
        limits.answeringOutlivesDeadline = true  // a `?wait` may outlast the request deadline
        // Bodies up to twice the event limit reach the routes, which answer 413 in JSON; beyond,
        // evhttp answers 413 itself.
        limits.maxBodyBytes = 2 * AdminServer.maxBodyBytes
        let server = AdminServer(loop: loop, limits: limits, publicHosts: config.publicHosts + [endpoint.host], log: log,
                                 name: "ingest", tls: tls, answering: routes.answer)
        self.server = server
        if listening.bind(server, to: endpoint) {
            log.info("HTTP API", ["listen": endpoint.description, "port": port ?? endpoint.port, "tls": tls != nil,
                                  "apps": config.apps.keys.sorted()])
        }
    }

    package func close() {
        listening.close()
        routes.close()
        server?.close()
        server = nil
        guesses.close()
    }
}
