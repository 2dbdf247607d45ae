// Gateway: configuration, process roles, the CLI. Holds no business rules: it reads what the
// operator wrote, checks it, and hands typed values to the modules that act on them.
import Routing
import Retry
import APNs
import DeadLetters
import RedisStreams

/// The whole configuration of one pushgw process (config/README.md), after parsing, environment
/// overrides and checks. Every file path in it is already resolved against the config file's
/// directory. Secrets appear only as paths: no key, password or token is ever held here.
///
/// Build one with `GatewayConfig.load(file:environment:)`; `ConfigReport` says what was wrong.
public struct GatewayConfig: Equatable, Sendable {
    public var redis: RedisConfig
    public var admin: AdminConfig
    public var apns: ApnsConfig
    /// Credentials by name; apps refer to them by that name, so one team's key serves many apps.
    public var credentials: [String: Credential]
    /// Apps by id; the id is the `{APP}` hash tag of every Redis key of that app.
    public var apps: [String: AppConfig]

    public init(redis: RedisConfig, admin: AdminConfig = AdminConfig(), apns: ApnsConfig = ApnsConfig(),
                credentials: [String: Credential], apps: [String: AppConfig]) {
        self.redis = redis
        self.admin = admin
        self.apns = apns
        self.credentials = credentials
        self.apps = apps
    }
}

/// Where Redis is and the key prefix of every key pushgw reads or writes.
public struct RedisConfig: Equatable, Sendable {
    /// `redis://[user:password@]host:port/db`, `rediss://…` (TLS) or `unix:///path`. May hold a
    /// password: never log it, use `redactedURL`. With `sentinel`, its host and port are not
    /// used (the sentinels name the primary); scheme, credentials and db are.
    public var url: String
    /// The first part of every key (`PREFIX:{APP}:calls`); no braces, colons or spaces.
    public var prefix: String
    /// Trust and client certificate for `rediss://` and for sentinels reached over TLS.
    public var tls: RedisTLSOptions
    /// The sentinels that name the primary, when Redis runs under Sentinel.
    public var sentinel: RedisSentinelOptions?

    public static let defaultPrefix = "pushgw"

    public init(url: String, prefix: String = RedisConfig.defaultPrefix, tls: RedisTLSOptions = RedisTLSOptions(),
                sentinel: RedisSentinelOptions? = nil) {
        self.url = url
        self.prefix = prefix
        self.tls = tls
        self.sentinel = sentinel
    }

    /// The URL with any user and password replaced by `***`, and the sentinels: safe for logs.
    public var redactedURL: String {
        var text = url
        if let schemeEnd = url.range(of: "://"), let at = url[schemeEnd.upperBound...].lastIndex(of: "@") {
            text = String(url[..<schemeEnd.upperBound]) + "***" + String(url[at...])
        }
        return sentinel.map { "\(text) via \($0)" } ?? text
    }

    /// The settings of every Redis connection pushgw makes, named `clientName` in Redis.
    /// Throws the URL's parse error (`config check` reports it first).
    public func connection(clientName: String? = nil) throws -> RedisConnection.Config {
        RedisConnection.Config(url: try RedisURL(parsing: url), tls: tls, sentinel: sentinel, clientName: clientName)
    }
}

/// The admin endpoint: health, metrics and the admin API (evhttp).
public struct AdminConfig: Equatable, Sendable {
    /// `host:port` to listen on.
    public var listen: String
    /// File holding the bearer token of the admin API; nil leaves the admin API closed
    /// (health and metrics stay open).
    public var tokenFile: String?
    /// File holding the read-only token of the operators' console: it signs in to see the
    /// pages, never to replay or purge. Nil: no read-only access.
    public var readonlyTokenFile: String?

    public static let defaultListen = "127.0.0.1:9464"

    public init(listen: String = AdminConfig.defaultListen, tokenFile: String? = nil, readonlyTokenFile: String? = nil) {
        self.listen = listen
        self.tokenFile = tokenFile
        self.readonlyTokenFile = readonlyTokenFile
    }
}

/// A `host:port` pair, checked: a non-empty host without spaces and a port in 1...65535.
/// IPv6 hosts are written in brackets (`[::1]:443`) and kept without them in `host`.
public struct Endpoint: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`; nil when either part is missing or invalid.
    public init?(parsing text: String) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"),
                  text[text.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { return nil } // unbracketed IPv6
        }
        // A host name is at most 253 characters (DNS), of visible ASCII: it becomes the
        // `:authority` of every request and the TLS server name.
        guard !hostPart.isEmpty, hostPart.utf8.count <= 253, hostPart.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              !hostPart.contains("/"),
              portPart.allSatisfy(\.isASCII), let port = Int(portPart), (1...65535).contains(port) else { return nil }
        self.host = String(hostPart)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// How pushgw talks to APNs: the two endpoints, the trust store and the pool sizes.
public struct ApnsConfig: Equatable, Sendable {
    public var productionEndpoint: Endpoint
    public var sandboxEndpoint: Endpoint
    /// CA bundle to verify APNs (or the simulator) against; nil uses the system trust store.
    public var caFile: String?
    /// HTTP/2 connections per credential and environment.
    public var connections: Int
    /// Time allowed for one push, from queueing to APNs' answer, in milliseconds.
    public var requestTimeoutMs: Int
    /// Pushes waiting for a stream per credential and environment before sends fail fast
    /// with `ApnsClientError.queueFull`.
    public var maxQueued: Int

    public static let defaultProductionEndpoint = Endpoint(host: ApnsEnvironment.production.defaultHost,
                                                           port: ApnsEnvironment.defaultPort)
    public static let defaultSandboxEndpoint = Endpoint(host: ApnsEnvironment.sandbox.defaultHost,
                                                        port: ApnsEnvironment.defaultPort)
    public static let defaultConnections = 2
    public static let defaultRequestTimeoutMs = 10_000
    public static let defaultMaxQueued = 10_000

    public init(productionEndpoint: Endpoint = ApnsConfig.defaultProductionEndpoint,
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
    public func endpoint(for environment: ApnsEnvironment) -> Endpoint {
        switch environment {
        case .production: return productionEndpoint
        case .sandbox: return sandboxEndpoint
        }
    }
}

/// How pushgw proves to APNs that it may push for an app. Only file paths: the key, the
/// certificate key and the PKCS#12 password are read by the APNs module when it connects.
public enum Credential: Equatable, Sendable {
    /// Token auth: an ES256 JWT signed with the team's `.p8` key (EC P-256, PKCS#8 PEM).
    case token(teamId: String, keyId: String, keyFile: String)
    /// Certificate auth with a PEM certificate (chain) and its PEM private key.
    case certificate(certFile: String, keyFile: String)
    /// Certificate auth with a PKCS#12 bundle; the password, if any, is the first line of
    /// `passwordFile`.
    case pkcs12(file: String, passwordFile: String?)

    /// True for token auth, which every push type accepts; certificates do not cover all.
    public var isToken: Bool {
        if case .token = self { return true }
        return false
    }
}

/// One app: where its pushes go, with which credential, and how patient to be.
public struct AppConfig: Equatable, Sendable {
    /// Reverse-DNS bundle id without any push-type suffix (pushgw adds `.voip`).
    public var bundleId: String
    /// Name of an entry of `GatewayConfig.credentials`.
    public var credential: String
    public var environment: ApnsEnvironment
    /// How long a call rings when its event carries no deadline, in seconds.
    public var ringTimeoutSeconds: Int
    public var retry: RetryPolicies
    public var fallbackAlert: FallbackTemplate
    /// Retention of the app's dead-letter stream (`dead_letters`).
    public var deadLetters: DeadLetterRetentionPolicy

    public static let defaultRingTimeoutSeconds = 30

    public init(bundleId: String, credential: String, environment: ApnsEnvironment,
                ringTimeoutSeconds: Int = AppConfig.defaultRingTimeoutSeconds,
                retry: RetryPolicies = RetryPolicies(), fallbackAlert: FallbackTemplate = FallbackTemplate(),
                deadLetters: DeadLetterRetentionPolicy = .default) {
        self.bundleId = bundleId
        self.credential = credential
        self.environment = environment
        self.ringTimeoutSeconds = ringTimeoutSeconds
        self.retry = retry
        self.fallbackAlert = fallbackAlert
        self.deadLetters = deadLetters
    }
}

/// The retry policies of one app, one per channel. The Retry module turns them into delays.
public struct RetryPolicies: Equatable, Sendable {
    /// VoIP retries; always bounded by the call's deadline as well.
    public var voip: RetryPolicy
    /// Alert fallback retries; bounded by `alertTTLSeconds`.
    public var alert: RetryPolicy
    /// How long an alert fallback may keep retrying, in seconds from the event.
    public var alertTTLSeconds: Int

    public static let defaultVoip = RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2_000)
    public static let defaultAlert = RetryPolicy(maxAttempts: 8, baseMs: 500, capMs: 60_000)
    public static let defaultAlertTTLSeconds = 86_400

    public init(voip: RetryPolicy = RetryPolicies.defaultVoip, alert: RetryPolicy = RetryPolicies.defaultAlert,
                alertTTLSeconds: Int = RetryPolicies.defaultAlertTTLSeconds) {
        self.voip = voip
        self.alert = alert
        self.alertTTLSeconds = alertTTLSeconds
    }
}

