// GatewayConfiguration: the config file of config/README.md read, checked and typed: the
// config values (here), the parser and its typed JSON reader, file checks, key-file
// inspection, environment overrides, JSON paths, the problems with their fixes, and the
// did-you-mean suggestion the command line shares.
// Owns: what the operator wrote and whether it is usable. Holds no business rules: it hands
// typed values to the modules that act on them.
// Must not: run a loop, open a connection or log (it is a leaf below the roles, the admin
// endpoint and the command line); OpenSSL (TLSContext) is used only to check that files load.
import Routing
import Retry
import APNs
import CallStorage
import DeadLetters
import EventLoop
import RedisClient

/// The whole configuration of one pushgw process (config/README.md), after parsing, environment
/// overrides and checks. Every file path in it is already resolved against the config file's
/// directory. Secrets appear only as paths: no key, password or token is ever held here.
///
/// Build one with `GatewayConfig.load(file:environment:)`; `ConfigReport` says what was wrong.
package struct GatewayConfig: Equatable, Sendable {
    package var redis: RedisConfig
    package var admin: AdminConfig
    package var apns: ApnsConfig
    /// Credentials by name; apps refer to them by that name, so one team's key serves many apps.
    package var credentials: [String: Credential]
    /// Apps by id; the id is the `{APP}` hash tag of every Redis key of that app.
    package var apps: [String: AppConfig]
    /// The producers' HTTP API; nil (the default) keeps it off (ConfigIngest.swift).
    package var ingest: IngestConfig?
    /// How pushgw reaches FCM (ConfigFCM.swift); used only by apps with an `fcm_credential`.
    package var fcm = FcmConfig()
    /// FCM credentials (service accounts) by name, declared under `credentials` beside the APNs
    /// ones (one namespace: a name is one or the other); apps name one in `fcm_credential`.
    package var fcmCredentials: [String: FcmCredential] = [:]
    /// How much the log says (ConfigLog.swift).
    package var log = LogConfig()

    package init(redis: RedisConfig, admin: AdminConfig = AdminConfig(), apns: ApnsConfig = ApnsConfig(),
                credentials: [String: Credential], apps: [String: AppConfig], ingest: IngestConfig? = nil) {
        self.redis = redis
        self.admin = admin
        self.apns = apns
        self.credentials = credentials
        self.apps = apps
        self.ingest = ingest
    }
}

/// Where Redis is and the key prefix of every key pushgw reads or writes.
package struct RedisConfig: Equatable, Sendable {
    /// `redis://[user:password@]host:port/db`, `rediss://…` (TLS) or `unix:///path`. May hold a
    /// password: never log it, use `redactedURL`. With `sentinel`, its host and port are not
    /// used (the sentinels name the primary); scheme, credentials and db are.
    package var url: String
    /// The first part of every key (`PREFIX:{APP}:calls`); no braces, colons or spaces.
    package var prefix: String
    /// Trust and client certificate for `rediss://` and for sentinels reached over TLS.
    package var tls: RedisTLSOptions
    /// The sentinels that name the primary, when Redis runs under Sentinel.
    package var sentinel: RedisSentinelOptions?
    /// The seed nodes of a Redis Cluster (`redis.cluster.seeds`); the URL then gives only the
    /// scheme, credentials (and db 0).
    package var clusterSeeds: [Endpoint]?
    /// `redis.cluster.allowed_hosts`: where redirects and slot maps may send the credentials
    /// beside the seeds' hosts; nil: what a seed announces (`RedisNodeTrust`).
    package var clusterAllowedHosts: [HostPattern]?

    static let defaultPrefix = "pushgw"

    package init(url: String, prefix: String = RedisConfig.defaultPrefix, tls: RedisTLSOptions = RedisTLSOptions(),
                sentinel: RedisSentinelOptions? = nil, clusterSeeds: [Endpoint]? = nil, clusterAllowedHosts: [HostPattern]? = nil) {
        self.url = url
        self.prefix = prefix
        self.tls = tls
        self.sentinel = sentinel
        self.clusterSeeds = clusterSeeds
        self.clusterAllowedHosts = clusterAllowedHosts
    }

    /// The URL with any user and password replaced by `***`, and the sentinels: safe for logs.
    package var redactedURL: String {
        var text = url
        if let schemeEnd = url.range(of: "://"), let at = url[schemeEnd.upperBound...].lastIndex(of: "@") {
            text = String(url[..<schemeEnd.upperBound]) + "***" + String(url[at...])
        }
        if let clusterSeeds { return "\(text) on the cluster of \(clusterSeeds.map(\.description).joined(separator: ","))" }
        return sentinel.map { "\(text) via \($0)" } ?? text
    }

    /// The cluster client's settings, when `redis.cluster` is set: every node connection with
    /// the URL's scheme, credentials and TLS, named `clientName`.
    package func cluster(clientName: String? = nil) throws -> RedisCluster.Config? {
        guard let clusterSeeds else { return nil }
        return RedisCluster.Config(seeds: clusterSeeds, connection: try connection(clientName: clientName),
                                   allowedHosts: clusterAllowedHosts)
    }

    /// The settings of every Redis connection pushgw makes, named `clientName` in Redis.
    /// Throws the URL's parse error (`config check` reports it first).
    package func connection(clientName: String? = nil) throws -> RedisConnection.Config {
        RedisConnection.Config(url: try RedisURL(parsing: url), tls: tls, sentinel: sentinel, clientName: clientName)
    }
}

/// The admin endpoint: health, metrics and the admin API (evhttp).
package struct AdminConfig: Equatable, Sendable {
    /// `host:port` to listen on.
    package var listen: String
    /// File holding the bearer token of the admin API; nil leaves the admin API closed
    /// (health and metrics stay open).
    package var tokenFile: String?
    /// File holding the read-only token of the operators' console: it signs in to see the
    /// pages, never to replay or purge. Nil: no read-only access.
    package var readonlyTokenFile: String?
    /// Host names (lower case) a request's `Host` may name besides loopback names and IP
    /// addresses: the names clients reach the endpoint by (`admin.public_host`).
    package var publicHosts: [String] = []
    /// Connections open at once, in all and from one client address.
    package var maxConnections = AdminConfig.defaultMaxConnections
    package var maxConnectionsPerClient = AdminConfig.defaultMaxConnectionsPerClient

    static let defaultListen = "127.0.0.1:9464"
    static let defaultMaxConnections = 64
    static let defaultMaxConnectionsPerClient = 32

    package init(listen: String = AdminConfig.defaultListen, tokenFile: String? = nil, readonlyTokenFile: String? = nil,
                 publicHosts: [String] = []) {
        self.listen = listen
        self.tokenFile = tokenFile
        self.readonlyTokenFile = readonlyTokenFile
        self.publicHosts = publicHosts
    }
}

/// How pushgw talks to APNs: the two endpoints, the trust store and the pool sizes.
package struct ApnsConfig: Equatable, Sendable {
    package var productionEndpoint: Endpoint
    package var sandboxEndpoint: Endpoint
    /// CA bundle to verify APNs (or the simulator) against; nil uses the system trust store.
    package var caFile: String?
    /// HTTP/2 connections per credential and environment.
    package var connections: Int
    /// Time allowed for one push, from queueing to APNs' answer, in milliseconds.
    package var requestTimeoutMs: Int
    /// Pushes waiting for a stream per credential and environment before sends fail fast
    /// with `ApnsClientError.queueFull`.
    package var maxQueued: Int

    static let defaultProductionEndpoint = Endpoint(host: ApnsEnvironment.production.defaultHost,
                                                           port: ApnsEnvironment.defaultPort)
    static let defaultSandboxEndpoint = Endpoint(host: ApnsEnvironment.sandbox.defaultHost,
                                                        port: ApnsEnvironment.defaultPort)
    static let defaultConnections = 2
    static let defaultRequestTimeoutMs = 10_000
    static let defaultMaxQueued = 10_000

    package init(productionEndpoint: Endpoint = ApnsConfig.defaultProductionEndpoint,
                sandboxEndpoint: Endpoint = ApnsConfig.defaultSandboxEndpoint,
                caFile: String? = nil, connections: Int = ApnsConfig.defaultConnections,
                requestTimeoutMs: Int = ApnsConfig.defaultRequestTimeoutMs,
                maxQueued: Int = ApnsConfig.defaultMaxQueued) {
        self.productionEndpoint = productionEndpoint
        self.sandboxEndpoint = sandboxEndpoint
        self.caFile = caFile
        self.connections = connections
        self.requestTimeoutMs = requestTimeoutMs
        self.maxQueued = maxQueued
    }

    /// The endpoint pushes for `environment` go to.
    package func endpoint(for environment: ApnsEnvironment) -> Endpoint {
        switch environment {
        case .production: return productionEndpoint
        case .sandbox: return sandboxEndpoint
        }
    }
}

/// How pushgw proves to APNs that it may push for an app. Only file paths: the key, the
/// certificate key and the PKCS#12 password are read by the APNs module when it connects.
package enum Credential: Equatable, Sendable {
    /// Token auth: an ES256 JWT signed with the team's `.p8` key (EC P-256, PKCS#8 PEM).
    case token(teamId: String, keyId: String, keyFile: String)
    /// Certificate auth with a PEM certificate (chain) and its PEM private key.
    case certificate(certFile: String, keyFile: String)
    /// Certificate auth with a PKCS#12 bundle; the password, if any, is the first line of
    /// `passwordFile`.
    case pkcs12(file: String, passwordFile: String?)

    /// True for token auth, which every push type accepts; certificates do not cover all.
    package var isToken: Bool {
        if case .token = self { return true }
        return false
    }
}

/// One app: where its pushes go, with which credential, and how patient to be.
package struct AppConfig: Equatable, Sendable {
    /// Reverse-DNS bundle id without any push-type suffix (pushgw adds `.voip`).
    package var bundleId: String
    /// Name of an entry of `GatewayConfig.credentials`.
    package var credential: String
    package var environment: ApnsEnvironment
    /// How long a call rings when its event carries no deadline, in seconds.
    package var ringTimeoutSeconds: Int
    package var retry: RetryPolicies
    package var fallbackAlert: FallbackTemplate
    /// Which devices of a call get the missed-call alert (`missed_call_alert`).
    package var missedCallAlert: MissedCallAlert
    /// Retention of the app's dead-letter stream (`dead_letters`).
    package var deadLetters: DeadLetterRetentionPolicy
    /// Ring receipts (`ring_receipt_timeout_ms`): how long after APNs accepted a VoIP push its
    /// device's `call_ringing` is expected; nil (the default): off.
    package var ringReceiptTimeoutMs: Int? = nil
    /// The app's in-flight cap and event rate (`limits`); empty: the gateway's defaults.
    package var limits = AppLimits()
    /// The FCM credential (a name in `GatewayConfig.fcmCredentials`) its Android devices are
    /// rung with; nil (the default): the app has no Android devices.
    package var fcmCredential: String? = nil
    /// Where the app's results are POSTed (`webhooks`, docs/webhooks.md); nil (the default): nowhere.
    package var webhooks: WebhookConfig? = nil
    /// How long the app's per-call keys live in Redis (`retention`): its idempotency window,
    /// cancellation markers and known-invalid tokens; today's values by default.
    package var retention = RetentionWindows.defaults
    /// The bounds of `ring_receipt_timeout_ms`: a phone reports a call to CallKit within a
    /// second or two of the push; past 30 s the caller has given up.
    static let ringReceiptTimeoutRange = 500...30_000
    /// With ring receipts on (`voip_suspected_after_silent_rings`): after this many silent rings
    /// in a row a VoIP token is suspected of iOS's silent VoIP ban, and after this many calls in
    /// a row without any receipt the app's receipts are missing (docs/protocol.md).
    package var voipSuspectedAfterSilentRings = AppConfig.defaultVoipSuspectedAfter
    static let defaultVoipSuspectedAfter = 3
    /// Its bounds: one lost push is no ban; past 20 a banned phone stays silent for weeks of calls.
    static let voipSuspectedAfterRange = 2...20

    static let defaultRingTimeoutSeconds = 30
    /// Above this `config check` warns: people stop waiting for an answer within a minute or
    /// two, and a call nobody stops rings until its deadline.
    static let longestSensibleRingSeconds = 180

    package init(bundleId: String, credential: String, environment: ApnsEnvironment,
                ringTimeoutSeconds: Int = AppConfig.defaultRingTimeoutSeconds,
                retry: RetryPolicies = RetryPolicies(), fallbackAlert: FallbackTemplate = FallbackTemplate(),
                missedCallAlert: MissedCallAlert = .undelivered, deadLetters: DeadLetterRetentionPolicy = .default) {
        self.bundleId = bundleId
        self.credential = credential
        self.environment = environment
        self.ringTimeoutSeconds = ringTimeoutSeconds
        self.retry = retry
        self.fallbackAlert = fallbackAlert
        self.missedCallAlert = missedCallAlert
        self.deadLetters = deadLetters
    }
}

/// The retry policies of one app, one per channel. The Retry module turns them into delays.
package struct RetryPolicies: Equatable, Sendable {
    /// VoIP retries; always bounded by the call's deadline as well.
    package var voip: RetryPolicy
    /// Alert fallback retries; bounded by `alertTTLSeconds`.
    package var alert: RetryPolicy
    /// How long an alert fallback may keep retrying, in seconds from the event.
    package var alertTTLSeconds: Int

    static let defaultVoip = RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2_000)
    static let defaultAlert = RetryPolicy(maxAttempts: 8, baseMs: 500, capMs: 60_000)
    static let defaultAlertTTLSeconds = 86_400

    package init(voip: RetryPolicy = RetryPolicies.defaultVoip, alert: RetryPolicy = RetryPolicies.defaultAlert,
                alertTTLSeconds: Int = RetryPolicies.defaultAlertTTLSeconds) {
        self.voip = voip
        self.alert = alert
        self.alertTTLSeconds = alertTTLSeconds
    }
}

