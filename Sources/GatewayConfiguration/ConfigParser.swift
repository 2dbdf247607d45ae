import Routing
import Retry
import APNs
import EventLoop
import Foundation

extension GatewayConfig {
    /// The config file used when none is named.
    package static let defaultFile = "config/pushgw.json"

    /// Reads `file`, applies the environment's overrides (`ConfigEnvironment`), and checks
    /// everything: every problem is reported, not only the first. Relative paths in the file
    /// are resolved against the file's directory. Reads only the headers of key files.
    package static func load(file: String, environment: [String: String] = ProcessInfo.processInfo.environment,
                            workingDirectory: String = FileManager.default.currentDirectoryPath) -> ConfigReport {
        let absolute = file.hasPrefix("/") ? file : workingDirectory + "/" + file
        let directory = URL(fileURLWithPath: absolute).deletingLastPathComponent().standardizedFileURL.path
        // Only a regular file, opened without blocking (a FIFO would hang the check), and at
        // most a few MiB (a config is a few KiB).
        let data: Data
        switch KeyFileInspection.readRegular(absolute, limit: GatewayConfig.maxFileBytes) {
        case let .success(bytes):
            data = Data(bytes)
        case let .failure(reason):
            let problem = ConfigError(.error, file: file, path: "", problem: "cannot read the config file: \(reason.text)",
                                      fix: "check the path, or name another file with --config FILE (a regular file)")
            return ConfigReport(config: nil, problems: [problem])
        }
        return parse(data, file: file, baseDirectory: directory, environment: environment,
                     workingDirectory: workingDirectory)
    }

    /// Checks config text already in memory; `file` only names it in messages and
    /// `baseDirectory` resolves its relative paths.
    package static func parse(_ data: Data, file: String, baseDirectory: String,
                             environment: [String: String] = [:],
                             workingDirectory: String = FileManager.default.currentDirectoryPath) -> ConfigReport {
        let reader = ConfigReader(file: file, baseDirectory: baseDirectory, workingDirectory: workingDirectory,
                                  environment: environment)
        let json: Any
        do {
            json = try JSONSerialization.jsonObject(with: data)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "invalid JSON"
            reader.error(.root, "is not valid JSON (\(detail))",
                         fix: "fix the syntax; JSON allows no comments and no trailing commas")
            return ConfigReport(config: nil, problems: reader.problems)
        }
        // JSONSerialization accepts trailing commas, which JSON (and the message above) refuses.
        if let problem = JSONStrictness.problem(in: [UInt8](data)) {
            reader.error(.root, "is not valid JSON (\(problem))", fix: "remove the comma; JSON allows no comments and no trailing commas")
            return ConfigReport(config: nil, problems: reader.problems)
        }
        guard let root = json as? [String: Any] else {
            reader.error(.root, "the top level is \(JSONKind(json).name), not an object",
                         fix: "write one object with redis, admin, apns, credentials and apps")
            return ConfigReport(config: nil, problems: reader.problems)
        }
        // JSONSerialization keeps the last of keys written twice, silently: an app or a
        // credential defined twice would lose its first definition without a word.
        for keys in JSONDuplicateKeys.paths(in: [UInt8](data)) ?? [] {
            reader.warning(JSONPath(components: keys), "defined more than once in the same object; only the last one is used",
                           fix: "remove or rename the other definitions")
        }
        let config = ConfigParser(reader).parse(root)
        return ConfigReport(config: reader.hasErrors ? nil : config, problems: reader.problems)
    }
}

/// Turns the JSON of a config into `GatewayConfig`, section by section, recording problems in
/// its `ConfigReader`. Each section returns a value even when parts are wrong (defaults fill
/// the gaps), so that later sections are still checked; the caller drops the result when any
/// error was recorded.
struct ConfigParser {
    let reader: ConfigReader

    init(_ reader: ConfigReader) { self.reader = reader }

    func parse(_ root: [String: Any]) -> GatewayConfig {
        reader.unknownKeys(root, at: .root, known: ["redis", "admin", "apns", "fcm", "credentials", "apps", "ingest", "log"])
        let redis = parseRedis(root)
        let admin = parseAdmin(root)
        let apns = parseAPNs(root)
        let fcm = parseFCM(root)
        let (credentials, fcmCredentials, declared, declaredFcm) = parseCredentials(root)
        let apps = parseApps(root, declaredCredentials: declared, fcmCredentials: declaredFcm)
        let ingest = parseIngest(root, admin: admin, appIDs: Set((root["apps"] as? [String: Any])?.keys.map { $0 } ?? []))
        // What only loading the files tells (ConfigCredentialChecks.swift).
        let nowS = Int64(Date().timeIntervalSince1970)
        checkCAFile(apns, nowS: nowS)
        let certificates = checkLoading(credentials, nowS: nowS)
        checkEnvironments(apps: apps, apns: apns, certificates: certificates)
        checkServiceAccounts(fcmCredentials)
        var config = GatewayConfig(redis: redis, admin: admin, apns: apns, credentials: credentials, apps: apps, ingest: ingest)
        config.fcm = fcm
        config.fcmCredentials = fcmCredentials
        config.log = parseLog(root)
        return config
    }

    // MARK: admin

    private func parseAdmin(_ root: [String: Any]) -> AdminConfig {
        let path = JSONPath.root.appending("admin")
        guard let section = reader.section(root, "admin", in: .root) else { return AdminConfig() }
        reader.unknownKeys(section, at: path, known: ["listen", "token_file", "readonly_token_file", "public_host", "max_connections",
                                                      "max_connections_per_client"])
        var config = AdminConfig()
        if let (listen, at) = reader.string(section, "listen", in: path, required: false, example: AdminConfig.defaultListen) {
            if Endpoint(parsing: listen) == nil {
                reader.error(at, "\(reader.quoted(listen)) is not host:port", fix: "write an address such as \"\(AdminConfig.defaultListen)\"")
            } else {
                config.listen = listen
            }
        }
        config.tokenFile = reader.filePath(section, "token_file", in: path, role: .adminToken, required: false,
                                           example: "secrets/admin-token")
        config.readonlyTokenFile = reader.filePath(section, "readonly_token_file", in: path, role: .adminToken, required: false,
                                                   example: "secrets/console-readonly-token")
        config.publicHosts = publicHosts(section, in: path, example: "pushgw.example.com", what: "clients reach the endpoint by")
            ?? config.publicHosts
        (config.maxConnections, config.maxConnectionsPerClient) = connectionCaps(
            section, in: path, most: 4_096, defaults: (AdminConfig.defaultMaxConnections, AdminConfig.defaultMaxConnectionsPerClient))
        if let endpoint = Endpoint(parsing: config.listen), !Endpoint.isLoopback(endpoint.host) {
            let listen = reader.lookup(section, "listen", in: path)?.path ?? path.appending("listen")
            reader.warning(listen, "\(reader.quoted(config.listen)) listens beyond loopback: /metrics, /healthz and /readyz answer anyone who reaches it"
                           + (config.tokenFile == nil ? ", and without admin.token_file nothing asks who it is" : ""),
                           fix: "listen on 127.0.0.1, or let only the scrapers reach the port (firewall)"
                               + (config.tokenFile == nil ? "; set admin.token_file to open the admin API with a token" : ""))
        }
        return config
    }

    /// `public_host`: host names separated by commas, lower case; nil when absent or wrong
    /// (the problem recorded). `what`: who uses the names, for the fix.
    func publicHosts(_ section: [String: Any], in path: JSONPath, example: String, what: String) -> [String]? {
        guard let (text, at) = reader.string(section, "public_host", in: path, required: false, example: example) else { return nil }
        let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if let bad = names.first(where: { !GatewayConfig.isHostName($0) }) {
            reader.error(at, "\(reader.quoted(bad)) is not a host name",
                         fix: "write the names \(what), such as \"\(example)\" (several separated by commas; no port, no scheme)")
            return nil
        }
        return names
    }

    /// `max_connections` and `max_connections_per_client` (at most the first), each at most
    /// `most`; the defaults where absent or wrong (the problem recorded).
    func connectionCaps(_ section: [String: Any], in path: JSONPath, most: Int,
                        defaults: (total: Int, perClient: Int)) -> (total: Int, perClient: Int) {
        let total = reader.positiveInteger(section, "max_connections", in: path, fallback: defaults.total, most: most) ?? defaults.total
        var perClient = min(defaults.perClient, total)
        if let value = reader.positiveInteger(section, "max_connections_per_client", in: path, fallback: perClient, most: most) {
            if value > total {
                reader.error(path.appending("max_connections_per_client"), "\(value) is over max_connections (\(total))",
                             fix: "make it at most max_connections, such as half of it (one client should not hold every connection)")
            } else {
                perClient = value
            }
        }
        return (total, perClient)
    }

    // MARK: apns

    private func parseAPNs(_ root: [String: Any]) -> ApnsConfig {
        let path = JSONPath.root.appending("apns")
        guard let section = reader.section(root, "apns", in: .root) else { return ApnsConfig() }
        reader.unknownKeys(section, at: path,
                           known: ["production", "sandbox", "ca_file", "connections", "request_timeout_ms", "max_queued"])
        var config = ApnsConfig()
        config.productionEndpoint = parseEndpoint(section, "production", in: path,
                                                  fallback: ApnsConfig.defaultProductionEndpoint)
        config.sandboxEndpoint = parseEndpoint(section, "sandbox", in: path, fallback: ApnsConfig.defaultSandboxEndpoint)
        config.caFile = reader.filePath(section, "ca_file", in: path, role: .caBundle, required: false,
                                        example: "/etc/ssl/certs/ca-certificates.crt", nullIsDefault: true)
        (config.connections, config.requestTimeoutMs, config.maxQueued) = poolLimits(
            section, in: path, defaults: (config.connections, config.requestTimeoutMs, config.maxQueued))
        return config
    }

    /// A provider pool's `connections` (1-64), `request_timeout_ms` (1-600000) and `max_queued`
    /// (1-1000000): `apns` and `fcm` have the same three. The defaults where absent or wrong
    /// (the problem recorded).
    func poolLimits(_ section: [String: Any], in path: JSONPath,
                    defaults: (connections: Int, requestTimeoutMs: Int, maxQueued: Int)) -> (Int, Int, Int) {
        (reader.positiveInteger(section, "connections", in: path, fallback: defaults.connections, most: 64) ?? defaults.connections,
         reader.positiveInteger(section, "request_timeout_ms", in: path, fallback: defaults.requestTimeoutMs, most: 600_000)
            ?? defaults.requestTimeoutMs,
         reader.positiveInteger(section, "max_queued", in: path, fallback: defaults.maxQueued, most: 1_000_000) ?? defaults.maxQueued)
    }

    private func parseEndpoint(_ apns: [String: Any], _ key: String, in parent: JSONPath, fallback: Endpoint) -> Endpoint {
        let path = parent.appending(key)
        guard let section = reader.section(apns, key, in: parent) else { return fallback }
        reader.unknownKeys(section, at: path, known: ["endpoint"])
        guard let (text, at) = reader.string(section, "endpoint", in: path, required: false,
                                             example: fallback.description) else { return fallback }
        guard let endpoint = Endpoint(parsing: text) else {
            reader.error(at, "\(reader.quoted(text)) is not host:port with a port in 1-65535 (a host of at most 253 visible ASCII characters)",
                         fix: "write host:port, such as \"\(fallback)\" (no scheme, no path)")
            return fallback
        }
        return endpoint
    }

    // MARK: credentials

    /// The APNs and FCM credentials that parsed, and the names of all declared ones (apps
    /// naming a broken credential get that credential's problems, not an "unknown credential"
    /// one too). An entry with `service_account_file` is an FCM credential (ConfigFCM.swift).
    private func parseCredentials(_ root: [String: Any])
        -> ([String: Credential], [String: FcmCredential], declared: [String], declaredFcm: Set<String>) {
        var credentials: [String: Credential] = [:]
        var fcmCredentials: [String: FcmCredential] = [:]
        var fcmNames = Set<String>()
        guard let names = forEachNamedObject(
            root, "credentials", nameKind: "credential name",
            emptyFix: "declare one, such as \"acme-key\": { \"team_id\": …, \"key_id\": …, \"key_file\": … }",
            renameFix: "rename the credential (and the apps' \"credential\" that name it); it appears in logs and metrics",
            objectFix: "describe the credential: { \"team_id\": …, \"key_id\": …, \"key_file\": … } or { \"cert_file\": …, \"key_file\": … }",
            { name, at, entry in
                if entry["service_account_file"] != nil {
                    fcmNames.insert(name)
                    fcmCredentials[name] = parseFcmCredential(entry, at: at)
                    return fcmCredentials[name] != nil
                }
                credentials[name] = parseCredential(entry, at: at)
                return credentials[name] != nil
            })
        else { return ([:], [:], [], []) }
        return (credentials, fcmCredentials, names, fcmNames)
    }

    private func parseCredential(_ entry: [String: Any], at path: JSONPath) -> Credential? {
        let isToken = entry["team_id"] != nil || entry["key_id"] != nil
        let isCertificate = entry["cert_file"] != nil
        let isPKCS12 = entry["p12_file"] != nil
        let kinds = "team_id + key_id + key_file for a .p8 token key, cert_file + key_file for a PEM certificate, or p12_file (+ password_file) for a PKCS#12 bundle"
        switch (isToken, isCertificate, isPKCS12) {
        case (true, false, false):
            reader.unknownKeys(entry, at: path, known: ["team_id", "key_id", "key_file"])
            let team = appleID(entry, "team_id", in: path, what: "Team ID",
                               fix: "copy the 10-character Team ID from Membership details in the Apple developer account")
            let key = appleID(entry, "key_id", in: path, what: "Key ID",
                              fix: "copy the 10-character Key ID shown with the key (it is also in the file name AuthKey_KEYID.p8)")
            let file = reader.filePath(entry, "key_file", in: path, role: .tokenKey, required: true,
                                       example: "secrets/AuthKey_KEY1234567.p8")
            guard let team, let key, let file else { return nil }
            return .token(teamId: team, keyId: key, keyFile: file)
        case (false, true, false):
            reader.unknownKeys(entry, at: path, known: ["cert_file", "key_file"])
            let cert = reader.filePath(entry, "cert_file", in: path, role: .certificate, required: true,
                                       example: "secrets/voip.pem")
            let key = reader.filePath(entry, "key_file", in: path, role: .certificateKey, required: true,
                                      example: "secrets/voip.key")
            guard let cert, let key else { return nil }
            return .certificate(certFile: cert, keyFile: key)
        case (false, false, true):
            reader.unknownKeys(entry, at: path, known: ["p12_file", "password_file"])
            let file = reader.filePath(entry, "p12_file", in: path, role: .pkcs12, required: true,
                                       example: "secrets/voip.p12")
            let password = reader.filePath(entry, "password_file", in: path, role: .password, required: false,
                                           example: "secrets/voip.p12.password")
            guard let file else { return nil }
            return .pkcs12(file: file, passwordFile: password)
        case (false, false, false):
            reader.error(path, "cannot tell what kind of credential this is", fix: "write \(kinds)")
            return nil
        default:
            reader.error(path, "mixes the keys of different kinds of credential", fix: "write only one of: \(kinds)")
            return nil
        }
    }

    /// A Team ID or Key ID: ten upper-case letters or digits, as Apple issues them.
    private func appleID(_ entry: [String: Any], _ key: String, in path: JSONPath, what: String, fix: String) -> String? {
        guard let (id, at) = reader.string(entry, key, in: path, required: true, example: "ABCDE12345") else { return nil }
        guard id.count == 10, id.unicodeScalars.allSatisfy({ ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") }) else {
            reader.error(at, "\(reader.quoted(id)) is not an Apple \(what) (10 upper-case letters or digits)", fix: fix)
            return nil
        }
        return id
    }

    /// Walks a top-level section of named objects (`credentials`, `apps`) in name order,
    /// handing each entry that is an object to `parse` with its path, and returns every name.
    /// Reports an empty section, a name that breaks `GatewayConfig.nameRule` (the entry is
    /// still parsed, so its own problems show too) and an entry that is not an object
    /// (skipped), each before the entry's own problems. Nil when the section is not an object
    /// (`ConfigReader.section` reported it).
    ///
    /// `parse` says whether the entry gave a value. An entry that gave none without an error
    /// under its path is an error here: no app or credential ever drops out of a config
    /// without a word (`config check` would count one app fewer and pass).
    private func forEachNamedObject(_ root: [String: Any], _ key: String, nameKind: String, emptyFix: String,
                                    renameFix: String, objectFix: String,
                                    _ parse: (_ name: String, _ at: JSONPath, _ entry: [String: Any]) -> Bool) -> [String]? {
        let path = JSONPath.root.appending(key)
        guard let section = reader.section(root, key, in: .root) else { return nil }
        if section.isEmpty {
            reader.error(path, "no \(key) declared", fix: emptyFix)
        }
        let names = section.keys.sorted()
        for name in names {
            let at = path.appending(name)
            if !GatewayConfig.isName(name) {
                reader.error(at, "\(nameKind) \(reader.quoted(name)) must be \(GatewayConfig.nameRule)", fix: renameFix)
            }
            guard let entry = section[name] as? [String: Any] else {
                reader.error(at, "expected an object, found \(JSONKind(section[name] as Any).name)", fix: objectFix)
                continue
            }
            if !parse(name, at, entry) && !reader.hasProblem(at: at) {
                reader.error(at, "could not be read, and no key of it says why",
                             fix: "check each key against config/README.md; please report this config (secrets removed) as a pushgw bug")
            }
        }
        return names
    }

    // MARK: apps

    private func parseApps(_ root: [String: Any], declaredCredentials: [String], fcmCredentials: Set<String>) -> [String: AppConfig] {
        var apps: [String: AppConfig] = [:]
        var used = Set<String>()
        guard let names = forEachNamedObject(
            root, "apps", nameKind: "app id",
            emptyFix: "declare one, such as \"acme\": { \"bundle_id\": …, \"credential\": …, \"environment\": … }",
            renameFix: "rename the app; its id becomes the {APP} part of every Redis key",
            objectFix: "describe the app: { \"bundle_id\": …, \"credential\": …, \"environment\": … }",
            { id, at, entry in
                if let name = entry["credential"] as? String { used.insert(name) }
                if let name = entry["fcm_credential"] as? String { used.insert(name) }
                apps[id] = parseApp(entry, at: at, declaredCredentials: declaredCredentials, fcmCredentials: fcmCredentials)
                return apps[id] != nil
            })
        else { return [:] }
        // An unused credential is worth a warning, unless some app names one that does not
        // exist: then the unused one is probably what it meant, and the error says so already.
        let allNamesKnown = used.allSatisfy { declaredCredentials.contains($0) }
        for name in declaredCredentials where !used.contains(name) && !names.isEmpty && allNamesKnown {
            reader.warning(JSONPath.root.appending("credentials").appending(name), "no app uses this credential",
                           fix: "remove it, or name it in an app's \"credential\"")
        }
        warnAboutDuplicates(apps)
        return apps
    }

    private func parseApp(_ entry: [String: Any], at path: JSONPath, declaredCredentials: [String],
                          fcmCredentials: Set<String>) -> AppConfig? {
        reader.unknownKeys(entry, at: path,
                           known: ["bundle_id", "credential", "environment", "ring_timeout_s", "retry", "fallback_alert",
                                   "missed_call_alert", "dead_letters", "ring_receipt_timeout_ms",
                                   "voip_suspected_after_silent_rings", "fcm_credential", "webhooks", "limits", "retention"])
        let bundleId = parseBundleID(entry, in: path)
        var credential: String?
        if let (name, at) = reader.string(entry, "credential", in: path, required: true, example: "acme-key") {
            if fcmCredentials.contains(name) {
                reader.error(at, "credential \(reader.quoted(name)) is an FCM service account, not an APNs credential",
                             fix: "name it in \"fcm_credential\", and an APNs credential (.p8 key or certificate) in \"credential\"")
            } else if declaredCredentials.contains(name) {
                credential = name
            } else {
                let declared = declaredCredentials.isEmpty ? "none" : declaredCredentials.joined(separator: ", ")
                reader.error(at, "no credential named \(reader.quoted(name)) (declared: \(declared))",
                             fix: "fix the name or declare it under credentials")
            }
        }
        var environment: ApnsEnvironment?
        if let (text, at) = reader.string(entry, "environment", in: path, required: true, example: "production") {
            environment = ApnsEnvironment(rawValue: text)
            if environment == nil {
                reader.error(at, "\(reader.quoted(text)) is not an APNs environment",
                             fix: "write \"production\" (App Store, TestFlight) or \"sandbox\" (builds run from Xcode)")
            }
        }
        let ring = reader.positiveInteger(entry, "ring_timeout_s", in: path, fallback: AppConfig.defaultRingTimeoutSeconds,
                                          most: 86_400)
        if let ring, ring > AppConfig.longestSensibleRingSeconds {
            reader.warning(path.appending("ring_timeout_s"),
                           "a call whose event has no deadline rings for \(ring) s (\(ring >= 3600 ? "\(ring / 3600) h \(ring % 3600 / 60) min" : "\(ring / 60) min")): a late or replayed call would ring long after its caller gave up",
                           fix: "write how long a caller waits, in seconds, such as \(AppConfig.defaultRingTimeoutSeconds) (at most a few minutes)")
        }
        let retry = parseRetry(entry, in: path)
        let fallback = parseFallbackAlert(entry, in: path)
        let missedCallAlert = parseMissedCallAlert(entry, in: path)
        let deadLetters = parseDeadLetters(entry, in: path)
        let receiptTimeout = parseRingReceiptTimeout(entry, in: path)
        let limits = parseLimits(entry, in: path)
        let suspectAfter = parseVoipSuspectedAfter(entry, in: path, receipts: receiptTimeout.flatMap { $0 } != nil)
        let fcmCredential = parseAppFcmCredential(entry, in: path, fcmCredentials: fcmCredentials,
                                                  declaredCredentials: declaredCredentials)
        let webhooks = parseWebhooks(entry, in: path)
        let retention = parseRetention(entry, in: path, ringSeconds: ring, alertTTLSeconds: retry?.alertTTLSeconds)
        guard let bundleId, let credential, let environment, let ring, let retry, let fallback, let missedCallAlert,
              let deadLetters, let receiptTimeout, let suspectAfter, let fcmCredential, let webhooks, let limits,
              let retention else {
            return nil
        }
        var app = AppConfig(bundleId: bundleId, credential: credential, environment: environment,
                            ringTimeoutSeconds: ring, retry: retry, fallbackAlert: fallback, missedCallAlert: missedCallAlert,
                            deadLetters: deadLetters)
        app.ringReceiptTimeoutMs = receiptTimeout
        app.voipSuspectedAfterSilentRings = suspectAfter
        app.fcmCredential = fcmCredential
        app.webhooks = webhooks
        app.limits = limits
        app.retention = retention
        return app
    }

    /// `voip_suspected_after_silent_rings`: a whole number in `AppConfig.voipSuspectedAfterRange`
    /// (absent: `AppConfig.defaultVoipSuspectedAfter`); a warning when ring receipts are off,
    /// where it means nothing. Nil when it is invalid (the error is reported).
    private func parseVoipSuspectedAfter(_ entry: [String: Any], in path: JSONPath, receipts: Bool) -> Int? {
        let key = "voip_suspected_after_silent_rings"
        let range = AppConfig.voipSuspectedAfterRange
        let fallback = AppConfig.defaultVoipSuspectedAfter
        guard reader.lookup(entry, key, in: path) != nil else { return fallback }
        guard let n = reader.positiveInteger(entry, key, in: path, fallback: fallback, most: range.upperBound) else { return nil }
        guard n >= range.lowerBound else {
            reader.error(path.appending(key), "\(n) silent ring would suspect a token of iOS's silent VoIP ban at its first lost push",
                         fix: "write how many silent rings in a row (a VoIP push accepted, no receipt) make a token suspected, from \(range.lowerBound) to \(range.upperBound), such as \(fallback)")
            return nil
        }
        if !receipts {
            reader.warning(path.appending(key), "ring receipts are off for this app, so nothing counts silent rings",
                           fix: "set ring_receipt_timeout_ms (such as 4000) to turn ring receipts on, or remove this key")
        }
        return n
    }

    /// `ring_receipt_timeout_ms`: absent (off), or milliseconds in `AppConfig.ringReceiptTimeoutRange`.
    /// Nil when it is invalid (the error is reported); `.some(nil)` when it is absent.
    private func parseRingReceiptTimeout(_ entry: [String: Any], in path: JSONPath) -> Int?? {
        guard reader.lookup(entry, "ring_receipt_timeout_ms", in: path) != nil else { return .some(nil) }
        let range = AppConfig.ringReceiptTimeoutRange
        guard let ms = reader.positiveInteger(entry, "ring_receipt_timeout_ms", in: path, fallback: 4_000, most: range.upperBound)
        else { return nil }
        guard ms >= range.lowerBound else {
            reader.error(path.appending("ring_receipt_timeout_ms"), "\(ms) ms is under the least of \(range.lowerBound) ms",
                         fix: "write how long a phone takes to report a call to CallKit, from \(range.lowerBound) to \(range.upperBound), such as 4000; remove the key to turn ring receipts off")
            return nil
        }
        return .some(ms)
    }

    /// `missed_call_alert`: `"undelivered"` (the default) or `"unanswered"`.
    private func parseMissedCallAlert(_ entry: [String: Any], in path: JSONPath) -> MissedCallAlert? {
        guard let (text, at) = reader.string(entry, "missed_call_alert", in: path, required: false,
                                             example: MissedCallAlert.undelivered.rawValue) else {
            // Absent: the default; a value of another type (null too) was reported by `string`.
            return reader.lookup(entry, "missed_call_alert", in: path) == nil ? .undelivered : nil
        }
        guard let mode = MissedCallAlert(rawValue: text) else {
            reader.error(at, "\(reader.quoted(text)) is not a missed-call alert mode",
                         fix: "write \"undelivered\" (the alert goes to a device whose VoIP push was not delivered) or "
                              + "\"unanswered\" (every device gets it when nobody answered by the deadline; needs call_answered events)")
            return nil
        }
        return mode
    }

    private func parseBundleID(_ entry: [String: Any], in path: JSONPath) -> String? {
        guard let (id, at) = reader.string(entry, "bundle_id", in: path, required: true, example: "com.acme.phone") else {
            return nil
        }
        guard id.utf8.count <= GatewayConfig.maxBundleIDCharacters else {
            reader.error(at, "\(reader.quoted(id)) is \(id.count) characters, over the \(GatewayConfig.maxBundleIDCharacters)-character limit",
                         fix: "write the app's bundle id, such as \"com.acme.phone\"")
            return nil
        }
        guard GatewayConfig.isBundleID(id) else {
            reader.error(at, "\(reader.quoted(id)) is not a bundle id",
                         fix: "write the app's reverse-DNS bundle id, such as \"com.acme.phone\" (letters, digits and hyphens in at least two dot-separated parts)")
            return nil
        }
        if id.lowercased().hasSuffix(".voip") {
            reader.warning(at, "\(reader.quoted(id)) ends with .voip, the suffix of the VoIP topic",
                           fix: "write the bare bundle id \"\(id.dropLast(5))\"; pushgw adds .voip to VoIP pushes itself")
        }
        return id
    }

    private func parseRetry(_ entry: [String: Any], in parent: JSONPath) -> RetryPolicies? {
        let path = parent.appending("retry")
        guard let section = reader.section(entry, "retry", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["voip", "alert"])
        let voip = parsePolicy(section, "voip", in: path, fallback: RetryPolicies.defaultVoip, extraKeys: [])
        let alert = parsePolicy(section, "alert", in: path, fallback: RetryPolicies.defaultAlert, extraKeys: ["ttl_s"])
        var ttl: Int? = RetryPolicies.defaultAlertTTLSeconds
        if let alertSection = section["alert"] as? [String: Any] {
            ttl = reader.positiveInteger(alertSection, "ttl_s", in: path.appending("alert"),
                                         fallback: RetryPolicies.defaultAlertTTLSeconds, most: 30 * 86_400)
        }
        guard let voip, let alert, let ttl else { return nil }
        return RetryPolicies(voip: voip, alert: alert, alertTTLSeconds: ttl)
    }

    private func parsePolicy(_ retry: [String: Any], _ key: String, in parent: JSONPath, fallback: RetryPolicy,
                             extraKeys: [String]) -> RetryPolicy? {
        let path = parent.appending(key)
        guard let section = reader.section(retry, key, in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["max_attempts", "base_ms", "cap_ms"] + extraKeys)
        let attempts = reader.positiveInteger(section, "max_attempts", in: path, fallback: fallback.maxAttempts,
                                              most: RetryPolicy.attemptsLimit)
        let base = reader.positiveInteger(section, "base_ms", in: path, fallback: fallback.baseMs, most: RetryPolicy.delayLimitMs)
        let cap = reader.positiveInteger(section, "cap_ms", in: path, fallback: fallback.capMs, most: RetryPolicy.delayLimitMs)
        guard let attempts, let base, let cap else { return nil }
        guard cap >= base else {
            reader.error(path.appending("cap_ms"), "cap_ms \(cap) is below base_ms \(base)",
                         fix: "make cap_ms at least base_ms (it bounds the growing delay)")
            return nil
        }
        return RetryPolicy(maxAttempts: attempts, baseMs: base, capMs: cap)
    }

    private func parseFallbackAlert(_ entry: [String: Any], in parent: JSONPath) -> FallbackTemplate? {
        let path = parent.appending("fallback_alert")
        guard let section = reader.section(entry, "fallback_alert", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["title", "body", "sound"])
        var alert = FallbackTemplate()
        var ok = true
        // An alert is at most 4096 bytes: the template's texts and the sound leave room for the
        // caller's name and the call id (pushgw shortens a name that does not fit).
        func bounded(_ text: String, _ at: JSONPath, most: Int) -> Bool {
            guard text.utf8.count > most else { return true }
            reader.error(at, "\(reader.quoted(text)) is \(text.utf8.count) bytes, over the \(most)-byte limit",
                         fix: "shorten it: the whole alert must fit in 4096 bytes")
            return false
        }
        for key in ["title", "body"] {
            guard section[key] != nil else { continue }
            if let (text, at) = reader.string(section, key, in: path, required: false, example: "Missed call"),
               bounded(text, at, most: FallbackTemplate.maxTextBytes) {
                if key == "title" { alert.title = text } else { alert.body = text }
            } else {
                ok = false
            }
        }
        if section["sound"] != nil {
            if section["sound"] is NSNull {
                alert.sound = nil
            } else if let (sound, at) = reader.string(section, "sound", in: path, required: false, example: "default"),
                      bounded(sound, at, most: FallbackTemplate.maxSoundBytes) {
                alert.sound = sound
            } else {
                ok = false
            }
        }
        return ok ? alert : nil
    }

    /// Apps that share bundle id and environment push to the same devices under two ids:
    /// likely a copy-paste slip, so a warning, on every app after the first.
    private func warnAboutDuplicates(_ apps: [String: AppConfig]) {
        var first: [String: String] = [:]
        for id in apps.keys.sorted() {
            let app = apps[id]!
            let key = "\(app.bundleId) \(app.environment.rawValue)"
            if let earlier = first[key] {
                reader.warning(JSONPath.root.appending("apps").appending(id).appending("bundle_id"),
                               "app \"\(id)\" has the same bundle id and environment as app \"\(earlier)\" (\(app.bundleId), \(app.environment.rawValue))",
                               fix: "remove one of them, or correct the bundle id or environment")
            } else {
                first[key] = id
            }
        }
    }
}

extension GatewayConfig {
    /// The largest config file read, in bytes.
    static let maxFileBytes = 4 * 1024 * 1024

    /// The longest bundle id accepted: a reverse-DNS name is at most as long as a DNS name
    /// (253 characters); 255 leaves the rounding. It becomes `apns-topic` with a suffix.
    static let maxBundleIDCharacters = 255

    /// What `isName` accepts, for messages.
    package static let nameRule = "1-64 letters, digits, \".\", \"_\" or \"-\""

    /// True for a name that may go into Redis keys, log lines and metric labels (app ids,
    /// credential names, `redis.prefix`): 1-64 ASCII letters, digits, `.`, `_` or `-`; no
    /// braces (a Redis Cluster hash tag), colons (key separators), `*` (a pattern), spaces or
    /// control characters.
    package static func isName(_ name: String) -> Bool {
        let utf8 = name.utf8
        return !utf8.isEmpty && utf8.count <= 64 && utf8.allSatisfy { c in
            (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39)
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        }
    }

    /// True for a DNS host name: dot-separated labels of ASCII letters, digits and hyphens,
    /// at most 253 characters (no port, no scheme).
    static func isHostName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && label.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "-"
            }
        }
    }

    /// True for a reverse-DNS bundle id: at least two dot-separated parts of ASCII letters,
    /// digits and hyphens, at most `maxBundleIDCharacters` long.
    package static func isBundleID(_ id: String) -> Bool {
        guard id.utf8.count <= maxBundleIDCharacters else { return false }
        let parts = id.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2 && parts.allSatisfy { part in
            !part.isEmpty && part.unicodeScalars.allSatisfy {
                ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "-"
            }
        }
    }
}
