import APNs
import Foundation

/// Everything an `ApnsSimulator` needs to start: where to listen, its TLS identity, the
/// credentials it accepts, the scenarios it plays and its connection-level faults.
/// Build it in code or read it with `load(jsonFile:)` (format in docs/simulator.md).
public struct SimulatorConfig: Sendable, Equatable {
    /// IPv4 address to listen on. Only loopback makes sense: this is a test double.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free one (read it back from `ApnsSimulator.port`).
    public var port: Int = 0
    /// PEM server certificate (chain) and its key.
    public var certFile: String
    public var keyFile: String
    /// When set, clients may present a certificate signed by this CA (certificate auth);
    /// the bundle id is the certificate subject's UID, as in Apple's push certificates.
    public var clientCAFile: String?
    /// Token auth: PEM public keys by key id (the JWT's `kid`).
    public var tokenKeys: [String: String] = [:]
    /// When set, a JWT's `iss` must equal it (else 403 InvalidProviderToken).
    public var teamId: String?
    /// Bundle ids token-authenticated pushes may address; empty accepts any bundle id
    /// (the topic must still carry the push type's suffix).
    public var bundleIDs: [String] = []
    /// The scenario of tokens not in `scenarios`.
    public var defaultScenario: Scenario = .ok
    /// Scenarios by device token (hex, any case).
    public var scenarios: [String: Scenario] = [:]
    /// The environment each listed token (hex, any case) belongs to, as a device's token
    /// belongs to the environment its app was built for: a simulator of the other environment
    /// (`sandbox`) answers its pushes 400 `BadDeviceToken`, as APNs does. Tokens not listed
    /// belong to both.
    public var tokenEnvironments: [String: ApnsEnvironment] = [:]
    /// When set, each connection gets a GOAWAY after this many requests.
    public var goawayEvery: Int?
    /// SETTINGS_MAX_CONCURRENT_STREAMS of a new connection (APNs starts at 1)...
    public var initialMaxStreams: Int = 1
    /// ...and after the connection's first 200.
    public var raisedMaxStreams: Int = 1000
    /// JSONL request log (appended to); nil for none.
    public var logFile: String?
    /// Behave like the development environment: send `apns-unique-id`.
    public var sandbox: Bool = false
    /// A JWT whose `iat` is older than this gets 403 ExpiredProviderToken (Apple: one hour).
    public var maxTokenAgeSeconds: Int = 3600
    /// How many recent requests `ApnsSimulator.recorded` keeps, with headers and body.
    public var recordLimit: Int = 256
    /// When set, the simulator plays the devices' apps for ring receipts (docs/protocol.md,
    /// *Ring receipts*): for each VoIP push it accepts, it adds the call's `call_ringing` to
    /// the calls stream of the push's bundle id, as the app's backend would once the phone
    /// reported the call to CallKit (`make bench`'s XADD→ringing).
    public var ringReceipts: RingReceipts?

    /// Where the simulator adds ring receipts.
    public struct RingReceipts: Sendable, Equatable {
        /// The Redis holding the calls streams (`redis://HOST:PORT/DB`).
        public var redisURL: String
        /// Bundle id (the VoIP topic without `.voip`) → the calls stream its receipts go to,
        /// such as `pushgw:{acme}:calls`. Pushes of other bundle ids get none.
        public var streams: [String: String]

        public init(redisURL: String, streams: [String: String]) {
            self.redisURL = redisURL
            self.streams = streams
        }
    }

    /// FCM: the service accounts whose JWTs the token endpoint accepts, PEM RSA key files (the
    /// public key, or the private key itself) by client email.
    public var fcmServiceAccounts: [String: String] = [:]
    /// FCM: the token endpoint's path (a service account's `token_uri` is
    /// `https://HOST:PORT` + this).
    public var fcmTokenPath: String = "/token"
    /// FCM: how long an access token it grants lives (Google's: an hour).
    public var fcmAccessTokenLifeSeconds: Int = 3600
    /// FCM: the `retry-after` of a 429 or 503, in seconds.
    public var fcmRetryAfterSeconds: Int = 1
    /// FCM: the projects messages may be sent to; empty accepts any.
    public var fcmProjects: [String] = []

    public init(certFile: String, keyFile: String) {
        self.certFile = certFile
        self.keyFile = keyFile
    }

    /// Reads a config file. Relative file paths in it are relative to the file's directory.
    /// Throws `SimulatorConfigError` naming the JSON path of every problem found.
    public static func load(jsonFile: String) throws(SimulatorConfigError) -> SimulatorConfig {
        guard let data = FileManager.default.contents(atPath: jsonFile) else {
            throw SimulatorConfigError([.init(path: "$", message: "cannot read \(jsonFile)")])
        }
        let baseDir = URL(fileURLWithPath: jsonFile).deletingLastPathComponent().path
        return try parse(json: data, baseDirectory: baseDir)
    }

    /// Parses a config from JSON text; relative paths are resolved against `baseDirectory`.
    public static func parse(json: Data, baseDirectory: String) throws(SimulatorConfigError) -> SimulatorConfig {
        guard let parsed = try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed]),
              let root = JSONValue(serialized: parsed) else {
            throw SimulatorConfigError([.init(path: "$", message: "not valid JSON")])
        }
        var reader = ConfigReader(baseDirectory: baseDirectory)
        let config = reader.read(root)
        guard let config, reader.problems.isEmpty else { throw SimulatorConfigError(reader.problems) }
        return config
    }
}

/// The problems of a simulator config file, each with the JSON path it concerns
/// (`$.scenarios.00ff`), so that all of them can be fixed in one go.
public struct SimulatorConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    /// One problem at one place of the file.
    public struct Problem: Equatable, Sendable {
        public let path: String
        public let message: String
    }
    public let problems: [Problem]
    init(_ problems: [Problem]) { self.problems = problems }
    public var description: String { problems.map { "\($0.path): \($0.message)" }.joined(separator: "; ") }
}

/// A JSON value with its type kept exact (a `true` is never read as 1).
enum JSONValue: Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    /// What `JSONSerialization` read, typed: its booleans are the `NSNumber` class of `true`,
    /// told apart from its numbers. Nil for a value it never makes.
    init?(serialized value: Any) {
        switch value {
        case is NSNull: self = .null
        case let s as String: self = .string(s)
        case let n as NSNumber:
            self = type(of: n) == type(of: NSNumber(value: true)) ? .bool(n.boolValue) : .number(n.doubleValue)
        case let a as [Any]:
            var items: [JSONValue] = []
            for item in a {
                guard let v = JSONValue(serialized: item) else { return nil }
                items.append(v)
            }
            self = .array(items)
        case let o as [String: Any]:
            var members: [String: JSONValue] = [:]
            for (key, item) in o {
                guard let v = JSONValue(serialized: item) else { return nil }
                members[key] = v
            }
            self = .object(members)
        default: return nil
        }
    }
}

/// Walks the JSON tree, collecting every problem instead of stopping at the first.
private struct ConfigReader {
    let baseDirectory: String
    var problems: [SimulatorConfigError.Problem] = []

    static let knownKeys: Set<String> = [
        "host", "port", "cert_file", "key_file", "client_ca_file", "token_keys", "team_id", "bundle_ids",
        "default_scenario", "scenarios", "goaway_every", "initial_max_streams", "raised_max_streams",
        "log_file", "sandbox", "max_token_age_s", "record_limit", "token_environments", "ring_receipts",
        "fcm_service_accounts", "fcm_token_path", "fcm_access_token_life_s", "fcm_retry_after_s", "fcm_projects",
        "fcm_scenarios",
    ]

    mutating func read(_ root: JSONValue) -> SimulatorConfig? {
        guard case let .object(o) = root else {
            problem("$", "must be an object")
            return nil
        }
        for key in o.keys.sorted() where !Self.knownKeys.contains(key) { problem("$.\(key)", "unknown key") }
        let cert = file(o, "cert_file", required: true)
        let key = file(o, "key_file", required: true)
        var c = SimulatorConfig(certFile: cert ?? "", keyFile: key ?? "")
        if let host = string(o, "host") {
            if host.split(separator: ".").count == 4, host.split(separator: ".").allSatisfy({ UInt8($0) != nil }) {
                c.host = host
            } else {
                problem("$.host", "must be an IPv4 address such as 127.0.0.1")
            }
        }
        if let port = int(o, "port", in: 0...65535) { c.port = port }
        c.clientCAFile = file(o, "client_ca_file", required: false)
        if let keys = object(o, "token_keys") {
            for (kid, v) in keys.sorted(by: { $0.key < $1.key }) {
                guard case let .string(path) = v, !path.isEmpty else { problem("$.token_keys.\(kid)", "must be a file path"); continue }
                c.tokenKeys[kid] = resolve(path)
            }
        }
        c.teamId = string(o, "team_id")
        if let ids = o["bundle_ids"] {
            if case let .array(items) = ids {
                for (i, item) in items.enumerated() {
                    if case let .string(s) = item, !s.isEmpty { c.bundleIDs.append(s) } else { problem("$.bundle_ids[\(i)]", "must be a bundle id string") }
                }
            } else {
                problem("$.bundle_ids", "must be an array of strings")
            }
        }
        if let s = string(o, "default_scenario"), let scenario = scenario(s, at: "$.default_scenario") { c.defaultScenario = scenario }
        if let table = object(o, "scenarios") {
            for (token, v) in table.sorted(by: { $0.key < $1.key }) {
                let at = "$.scenarios.\(token)"
                guard token.utf8.allSatisfy({ isHex($0) }), !token.isEmpty else { problem(at, "key must be a hex device token"); continue }
                guard case let .string(s) = v else { problem(at, "must be a scenario string"); continue }
                if let scenario = scenario(s, at: at) { c.scenarios[token.lowercased()] = scenario }
            }
        }
        if let table = object(o, "token_environments") {
            for (token, v) in table.sorted(by: { $0.key < $1.key }) {
                let at = "$.token_environments.\(token)"
                guard token.utf8.allSatisfy({ isHex($0) }), !token.isEmpty else { problem(at, "key must be a hex device token"); continue }
                guard case let .string(name) = v, let environment = ApnsEnvironment(rawValue: name) else {
                    problem(at, "must be \"production\" or \"sandbox\"")
                    continue
                }
                c.tokenEnvironments[token.lowercased()] = environment
            }
        }
        c.goawayEvery = int(o, "goaway_every", in: 1...Int(Int32.max))
        if let n = int(o, "initial_max_streams", in: 1...Int(Int32.max)) { c.initialMaxStreams = n }
        if let n = int(o, "raised_max_streams", in: 1...Int(Int32.max)) { c.raisedMaxStreams = n }
        c.logFile = file(o, "log_file", required: false)
        if let v = o["sandbox"] {
            if case let .bool(b) = v { c.sandbox = b } else { problem("$.sandbox", "must be true or false") }
        }
        if let n = int(o, "max_token_age_s", in: 1...Int(Int32.max)) { c.maxTokenAgeSeconds = n }
        if let n = int(o, "record_limit", in: 0...1_000_000) { c.recordLimit = n }
        if let receipts = object(o, "ring_receipts") { c.ringReceipts = ringReceipts(receipts) }
        if let accounts = object(o, "fcm_service_accounts") {
            for (email, v) in accounts.sorted(by: { $0.key < $1.key }) {
                guard case let .string(path) = v, !path.isEmpty else { problem("$.fcm_service_accounts.\(email)", "must be a file path"); continue }
                c.fcmServiceAccounts[email] = resolve(path)
            }
        }
        if let table = object(o, "fcm_scenarios") {
            for (token, v) in table.sorted(by: { $0.key < $1.key }) {
                let at = "$.fcm_scenarios.\(token)"
                guard !token.isEmpty, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    problem(at, "key must be an FCM registration token (visible ASCII)")
                    continue
                }
                guard case let .string(s) = v else { problem(at, "must be a scenario string"); continue }
                // One table with the device tokens', matched in any case (SimulatorConfig.scenarios).
                if let scenario = scenario(s, at: at) { c.scenarios[token.lowercased()] = scenario }
            }
        }
        if let path = string(o, "fcm_token_path") {
            if path.hasPrefix("/"), !path.hasPrefix("/v1/projects/") { c.fcmTokenPath = path } else { problem("$.fcm_token_path", "must be a path such as /token") }
        }
        if let n = int(o, "fcm_access_token_life_s", in: 1...86_400) { c.fcmAccessTokenLifeSeconds = n }
        if let n = int(o, "fcm_retry_after_s", in: 0...3_600) { c.fcmRetryAfterSeconds = n }
        if let ids = o["fcm_projects"] {
            if case let .array(items) = ids {
                for (i, item) in items.enumerated() {
                    if case let .string(s) = item, !s.isEmpty { c.fcmProjects.append(s) } else { problem("$.fcm_projects[\(i)]", "must be a project id string") }
                }
            } else {
                problem("$.fcm_projects", "must be an array of strings")
            }
        }
        return c
    }

    /// `ring_receipts`: `{"redis_url": "redis://…", "streams": {"BUNDLE_ID": "STREAM", …}}`.
    private mutating func ringReceipts(_ o: [String: JSONValue]) -> SimulatorConfig.RingReceipts? {
        for key in o.keys.sorted() where key != "redis_url" && key != "streams" { problem("$.ring_receipts.\(key)", "unknown key") }
        guard case let .string(url)? = o["redis_url"], url.hasPrefix("redis://") || url.hasPrefix("rediss://") else {
            problem("$.ring_receipts.redis_url", "must be a redis:// URL such as redis://127.0.0.1:6379/0")
            return nil
        }
        guard case let .object(table)? = o["streams"], !table.isEmpty else {
            problem("$.ring_receipts.streams", "must be an object: bundle id → calls stream, such as {\"com.acme.phone\": \"pushgw:{acme}:calls\"}")
            return nil
        }
        var streams: [String: String] = [:]
        for (bundle, v) in table.sorted(by: { $0.key < $1.key }) {
            guard case let .string(stream) = v, !stream.isEmpty else { problem("$.ring_receipts.streams.\(bundle)", "must be a stream name"); continue }
            streams[bundle] = stream
        }
        return SimulatorConfig.RingReceipts(redisURL: url, streams: streams)
    }

    private mutating func problem(_ path: String, _ message: String) {
        problems.append(.init(path: path, message: message))
    }

    private func resolve(_ path: String) -> String {
        path.hasPrefix("/") ? path : baseDirectory + "/" + path
    }

    private mutating func string(_ o: [String: JSONValue], _ key: String) -> String? {
        guard let v = o[key], v != .null else { return nil }
        guard case let .string(s) = v, !s.isEmpty else { problem("$.\(key)", "must be a non-empty string"); return nil }
        return s
    }

    private mutating func file(_ o: [String: JSONValue], _ key: String, required: Bool) -> String? {
        guard o[key] != nil, o[key] != .null else {
            if required { problem("$.\(key)", "is required") }
            return nil
        }
        return string(o, key).map(resolve)
    }

    private mutating func int(_ o: [String: JSONValue], _ key: String, in range: ClosedRange<Int>) -> Int? {
        guard let v = o[key], v != .null else { return nil }
        guard case let .number(d) = v, d.rounded() == d, d >= Double(range.lowerBound), d <= Double(range.upperBound) else {
            problem("$.\(key)", "must be an integer in \(range.lowerBound)...\(range.upperBound)")
            return nil
        }
        return Int(d)
    }

    private mutating func object(_ o: [String: JSONValue], _ key: String) -> [String: JSONValue]? {
        guard let v = o[key], v != .null else { return nil }
        guard case let .object(inner) = v else { problem("$.\(key)", "must be an object"); return nil }
        return inner
    }

    private mutating func scenario(_ text: String, at path: String) -> Scenario? {
        do {
            return try Scenario(parsing: text)
        } catch {
            problem(path, error.description)
            return nil
        }
    }

    private func isHex(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70)
    }
}
