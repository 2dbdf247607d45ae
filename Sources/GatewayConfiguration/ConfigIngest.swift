import EventLoop
import Foundation

/// The producers' HTTP API (`ingest`, config/README.md; docs/protocol.md "The HTTP API"): a
/// listener of its own, never the admin endpoint's, with per-app API keys. Off unless the
/// section is present.
package struct IngestConfig: Equatable, Sendable {
    /// `host:port` to listen on.
    package var listen: String
    /// The server certificate (chain) and key, PEM. Both or neither: without them the
    /// listener speaks plain HTTP, which `config check` allows on loopback only (behind a
    /// proxy that ends TLS).
    package var tlsCertFile: String?
    package var tlsKeyFile: String?
    /// With TLS: the CA whose client certificates the API requires (mutual TLS), beside the
    /// API key; nil: no client certificate is asked for.
    package var tlsClientCAFile: String?
    /// Host names a request's `Host` may give besides IP addresses and `localhost`.
    package var publicHosts: [String] = []
    /// Connections open at once, in all and from one client address.
    package var maxConnections = IngestConfig.defaultMaxConnections
    package var maxConnectionsPerClient = IngestConfig.defaultMaxConnectionsPerClient
    /// The apps producers may send for, by app id: an app not here has no key and refuses
    /// every request.
    package var apps: [String: IngestApp] = [:]

    /// Whether `other` listens as this one does (address, TLS files, names, caps): what a
    /// reload cannot change (the keys and rates of `apps` it can).
    package func listensAs(_ other: IngestConfig) -> Bool {
        var mine = self, theirs = other
        mine.apps = [:]
        theirs.apps = [:]
        return mine == theirs
    }

    static let defaultMaxConnections = 256
    static let defaultMaxConnectionsPerClient = 64

    package init(listen: String, tlsCertFile: String? = nil, tlsKeyFile: String? = nil, apps: [String: IngestApp] = [:]) {
        self.listen = listen
        self.tlsCertFile = tlsCertFile
        self.tlsKeyFile = tlsKeyFile
        self.apps = apps
    }
}

/// One app's access to the HTTP API: its keys and its request rate.
package struct IngestApp: Equatable, Sendable {
    /// SHA-256 of each API key, 64 lower-case hex digits: several, so that a key can be
    /// rotated (add the new one, move the producers, remove the old one). The keys themselves
    /// are never in the config (`pushgw apikey new APP` makes one and prints its hash).
    package var keyHashes: [String]
    /// Requests per second the app's bucket refills with, and how many it holds.
    package var requestsPerSecond: Int
    package var burst: Int

    static let defaultRequestsPerSecond = 100

    package init(keyHashes: [String], requestsPerSecond: Int = IngestApp.defaultRequestsPerSecond, burst: Int? = nil) {
        self.keyHashes = keyHashes
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst ?? 2 * requestsPerSecond
    }
}

extension ConfigParser {
    /// `ingest`: nil when absent (the HTTP API is off). `admin` is the parsed admin section
    /// (the two never share a port), `appIDs` the declared apps.
    func parseIngest(_ root: [String: Any], admin: AdminConfig, appIDs: Set<String>) -> IngestConfig? {
        guard root["ingest"] != nil else { return nil }
        let path = JSONPath.root.appending("ingest")
        guard let section = reader.section(root, "ingest", in: .root) else { return nil }
        reader.unknownKeys(section, at: path, known: ["listen", "tls_cert_file", "tls_key_file", "tls_client_ca_file", "public_host",
                                                      "max_connections", "max_connections_per_client", "apps"])
        let example = "127.0.0.1:9480"
        var config = IngestConfig(listen: example)
        if let (listen, at) = reader.string(section, "listen", in: path, required: true, example: example) {
            if let endpoint = Endpoint(parsing: listen) {
                config.listen = listen
                if let adminEndpoint = Endpoint(parsing: admin.listen), endpoint.port == adminEndpoint.port,
                   endpoint.port != 0, ConfigParser.overlap(endpoint.host, adminEndpoint.host) {
                    reader.error(at, "\(reader.quoted(listen)) is the admin endpoint's address (admin.listen \(reader.quoted(admin.listen)))",
                                 fix: "give the HTTP API a port of its own, such as \"\(example)\": producers never reach the admin endpoint")
                }
            } else {
                reader.error(at, "\(reader.quoted(listen)) is not host:port", fix: "write an address such as \"\(example)\"")
            }
        }
        config.tlsCertFile = reader.filePath(section, "tls_cert_file", in: path, role: .certificate, required: false,
                                             example: "secrets/ingest.pem")
        config.tlsKeyFile = reader.filePath(section, "tls_key_file", in: path, role: .certificateKey, required: false,
                                            example: "secrets/ingest.key")
        config.tlsClientCAFile = reader.filePath(section, "tls_client_ca_file", in: path, role: .caBundle, required: false,
                                                 example: "secrets/producers-ca.pem")
        if config.tlsClientCAFile != nil && config.tlsCertFile == nil {
            reader.error(path.appending("tls_client_ca_file"), "asks for client certificates without TLS",
                         fix: "set ingest.tls_cert_file and ingest.tls_key_file too, or remove tls_client_ca_file")
        }
        switch (config.tlsCertFile, config.tlsKeyFile) {
        case (nil, nil):
            if let endpoint = Endpoint(parsing: config.listen), !Endpoint.isLoopback(endpoint.host) {
                reader.error(path.appending("listen"), "\(reader.quoted(config.listen)) listens beyond loopback without TLS: API keys would cross the network in clear",
                             fix: "set ingest.tls_cert_file and ingest.tls_key_file, or listen on 127.0.0.1 behind a proxy that ends TLS")
            }
        case (_?, nil):
            reader.missing(path.appending("tls_key_file"), example: "\"secrets/ingest.key\"")
        case (nil, _?):
            reader.missing(path.appending("tls_cert_file"), example: "\"secrets/ingest.pem\"")
        case let (cert?, key?):
            if !reader.hasProblem(at: path.appending("tls_cert_file")) && !reader.hasProblem(at: path.appending("tls_key_file")) {
                do {
                    _ = try TLSContext.server(certFile: cert, keyFile: key, clientCAFile: config.tlsClientCAFile,
                                              requireClientCertificate: config.tlsClientCAFile != nil, alpnH2: false)
                } catch {
                    reader.error(path.appending(error.kind == .keyFile ? "tls_key_file" : "tls_cert_file"), "does not load: \(error.message)",
                                 fix: "give the PEM certificate (chain) of the API's host name and its unencrypted private key")
                }
            }
        }
        config.publicHosts = publicHosts(section, in: path, example: "push-api.example.com", what: "producers reach the API by")
            ?? config.publicHosts
        (config.maxConnections, config.maxConnectionsPerClient) = connectionCaps(
            section, in: path, most: 65_536, defaults: (IngestConfig.defaultMaxConnections, IngestConfig.defaultMaxConnectionsPerClient))
        config.apps = parseIngestApps(section, in: path, appIDs: appIDs)
        return config
    }

    private func parseIngestApps(_ section: [String: Any], in parent: JSONPath, appIDs: Set<String>) -> [String: IngestApp] {
        let path = parent.appending("apps")
        guard let apps = reader.section(section, "apps", in: parent) else { return [:] }
        if apps.isEmpty {
            reader.warning(path, "no app has an API key: every request is refused",
                           fix: "add \"APP\": { \"api_keys\": [\"<hash>\"] } with the hash `pushgw apikey new APP` prints")
        }
        var out: [String: IngestApp] = [:]
        for id in apps.keys.sorted() {
            let at = path.appending(id)
            if !appIDs.contains(id) {
                let near = DidYouMean.nearest(id, among: appIDs.sorted()).map { " (did you mean \"\($0)\"?)" } ?? ""
                reader.error(at, "no app \(reader.quoted(id)) is declared under apps\(near)", fix: "name an app of apps, or declare it there")
                continue
            }
            guard let entry = apps[id] as? [String: Any] else {
                reader.error(at, "expected an object, found \(JSONKind(apps[id] as Any).name)",
                             fix: "write { \"api_keys\": [\"<hash>\"], \"requests_per_second\": 100 }")
                continue
            }
            reader.unknownKeys(entry, at: at, known: ["api_keys", "requests_per_second", "burst"])
            let hashes = parseKeyHashes(entry, in: at)
            let rate = reader.positiveInteger(entry, "requests_per_second", in: at, fallback: IngestApp.defaultRequestsPerSecond,
                                              most: 1_000_000)
            let burst = reader.positiveInteger(entry, "burst", in: at, fallback: 2 * (rate ?? IngestApp.defaultRequestsPerSecond),
                                               most: 1_000_000)
            guard let hashes, let rate, let burst else { continue }
            out[id] = IngestApp(keyHashes: hashes, requestsPerSecond: rate, burst: burst)
        }
        return out
    }

    /// `api_keys`: a non-empty array of SHA-256 hex digests, read in lower case.
    private func parseKeyHashes(_ entry: [String: Any], in parent: JSONPath) -> [String]? {
        let path = parent.appending("api_keys")
        let fix = "write the hash `pushgw apikey new APP` prints (64 hex digits), not the key itself"
        guard let found = reader.lookup(entry, "api_keys", in: parent) else {
            reader.missing(path, example: "[\"<hash>\"]")
            return nil
        }
        guard let list = found.value as? [Any], !list.isEmpty else {
            reader.error(found.path, "expected a non-empty array of key hashes, found \(JSONKind(found.value).name)", fix: fix)
            return nil
        }
        var hashes: [String] = []
        for (i, item) in list.enumerated() {
            let at = path.appending(String(i))
            guard let text = item as? String else {
                reader.error(at, "expected a string, found \(JSONKind(item).name)", fix: fix)
                return nil
            }
            let lower = text.lowercased()
            guard lower.utf8.count == 64, lower.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
                // Never quote it: it may be a key pasted where its hash belongs.
                reader.error(at, "is not a SHA-256 hash (64 hex digits); a key written here would be a secret in the config", fix: fix)
                return nil
            }
            if hashes.contains(lower) {
                reader.warning(at, "the same key hash is listed twice", fix: "remove one of them")
            } else {
                hashes.append(lower)
            }
        }
        return hashes
    }

    /// Whether two listen hosts may be the same socket: equal, or one of them a wildcard.
    static func overlap(_ a: String, _ b: String) -> Bool {
        let wildcards: Set<String> = ["0.0.0.0", "::", "*", ""]
        return a == b || wildcards.contains(a) || wildcards.contains(b)
            || (Endpoint.isLoopback(a) && Endpoint.isLoopback(b) && (a == "localhost" || b == "localhost"))
    }
}
