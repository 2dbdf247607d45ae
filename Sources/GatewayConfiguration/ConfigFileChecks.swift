import Foundation

/// What a file named in the config is for; decides which checks run on it.
enum ConfigFileRole {
    case caBundle, certificate, tokenKey, certificateKey, pkcs12, password, adminToken, webhookSecret
    /// A Google service-account key file (JSON holding the RSA key): checked by loading it
    /// (`ConfigParser.checkServiceAccounts`).
    case serviceAccount

    /// Secrets get the file-mode warning.
    var isSecret: Bool {
        switch self {
        case .caBundle, .certificate: return false
        case .tokenKey, .certificateKey, .pkcs12, .password, .adminToken, .webhookSecret, .serviceAccount: return true
        }
    }
}

extension ConfigReader {
    /// The file path under `key`, resolved and checked for its role; nil when absent (a
    /// "missing" error if `required`), null where `nullIsDefault` says null means the default
    /// (`apns.ca_file`), or not a string. A path that fails a check is still returned: the
    /// problem is recorded, and the config is unusable anyway.
    func filePath(_ object: [String: Any], _ key: String, in parent: JSONPath, role: ConfigFileRole,
                  required: Bool, example: String, nullIsDefault: Bool = false) -> String? {
        guard let found = lookup(object, key, in: parent) else {
            if required { missing(parent.appending(key), example: "\"\(example)\"") }
            return nil
        }
        if nullIsDefault && found.value is NSNull { return nil }
        guard let written = found.value as? String, !written.isEmpty else {
            error(found.path, "expected a file path, found \(JSONKind(found.value).name)",
                  fix: typeFix("write the path in quotes, such as \"\(example)\"", for: found, optional: !required))
            return nil
        }
        // Messages about the file name its path in full (a fix is a command to copy): a path
        // longer than any real one is refused first, quoted short.
        guard written.utf8.count <= ConfigReader.maxPathBytes else {
            error(found.path, "the path \(quoted(written)) is \(written.utf8.count) bytes, over the \(ConfigReader.maxPathBytes)-byte limit",
                  fix: "write the file's real path, such as \"\(example)\"")
            return nil
        }
        let path = resolve(written, fromEnvironment: found.fromEnvironment)
        check(path, role: role, at: found.path)
        return path
    }

    /// Checks one file. Never reads more of a secret than `KeyFileInspection` allows and never
    /// puts what it read into a message.
    private func check(_ path: String, role: ConfigFileRole, at jsonPath: JSONPath) {
        if let reason = KeyFileInspection.unreadableReason(path) {
            let fix: String
            switch reason {
            case String(cString: strerror(ENOENT)):
                let base = jsonPath.variable == nil ? "the config file's directory" : "the working directory"
                fix = "put the file there or correct the path (relative paths start at \(base))"
            case String(cString: strerror(EACCES)):
                fix = "let the user running pushgw read it (chown to that user, chmod 600)"
            default:
                fix = "point it at a readable file"
            }
            error(jsonPath, "cannot read \(path): \(reason)", fix: fix)
            return
        }
        if role.isSecret, let mode = KeyFileInspection.looseMode(path) {
            warning(jsonPath, "\(path) is a secret readable by group or others (mode 0\(String(mode, radix: 8)))",
                    fix: "chmod 600 \(path)")
        }
        switch role {
        case .tokenKey: checkTokenKey(path, at: jsonPath)
        case .certificateKey: checkCertificateKey(path, at: jsonPath)
        case .certificate: checkCertificate(path, at: jsonPath)
        case .adminToken, .webhookSecret: checkAdminToken(path, at: jsonPath)
        case .caBundle, .pkcs12, .password, .serviceAccount: break
        }
    }

    /// The token must pass `AdminTokenFile`'s rule, as `pushgw run` will require.
    private func checkAdminToken(_ path: String, at jsonPath: JSONPath) {
        if case let .failure(problem) = AdminTokenFile.read(path) {
            error(jsonPath, "\(path) \(problem.text)", fix: AdminTokenFile.fix(path))
        }
    }

    private static let downloadP8 =
        "download the APNs auth key (.p8) from the Apple developer account (Certificates, Identifiers & Profiles > Keys)"

    private func checkTokenKey(_ path: String, at jsonPath: JSONPath) {
        let notAPNsKey = "APNs token auth needs the EC P-256 key of a .p8 file"
        switch KeyFileInspection.privateKeyShape(path) {
        case .pkcs8(.ecP256), .unreadable:
            return
        case let .pkcs8(algorithm):
            error(jsonPath, "\(path) holds \(algorithm.name); \(notAPNsKey)", fix: Self.downloadP8)
        case .sec1EC:
            error(jsonPath, "\(path) is an EC key in SEC1 form (BEGIN EC PRIVATE KEY), not PKCS#8 (BEGIN PRIVATE KEY)",
                  fix: "convert with openssl pkcs8 -topk8 -nocrypt -in \(path) -out AuthKey.p8 and point key_file at AuthKey.p8")
        case .pkcs1RSA:
            error(jsonPath, "\(path) holds an RSA key (BEGIN RSA PRIVATE KEY); \(notAPNsKey)", fix: Self.downloadP8)
        case .encrypted:
            error(jsonPath, "\(path) is encrypted (BEGIN ENCRYPTED PRIVATE KEY)",
                  fix: "decrypt it with openssl pkcs8 -topk8 -nocrypt -in \(path) -out AuthKey.p8 and point key_file at AuthKey.p8")
        case .otherPEM, .notPEM:
            error(jsonPath, "\(path) is not a PEM private key (no BEGIN PRIVATE KEY line)", fix: Self.downloadP8)
        }
    }

    private func checkCertificateKey(_ path: String, at jsonPath: JSONPath) {
        switch KeyFileInspection.privateKeyShape(path) {
        case .pkcs8, .sec1EC, .pkcs1RSA, .unreadable:
            return
        case .encrypted:
            error(jsonPath, "\(path) is encrypted (BEGIN ENCRYPTED PRIVATE KEY) and pushgw has no passphrase for it",
                  fix: "decrypt it with openssl pkey -in \(path) -out voip.key and point key_file at voip.key")
        case .otherPEM, .notPEM:
            error(jsonPath, "\(path) is not a PEM private key",
                  fix: "point key_file at the certificate's private key (BEGIN PRIVATE KEY); from a .p12: openssl pkcs12 -in FILE.p12 -nocerts -nodes -out voip.key")
        }
    }

    private func checkCertificate(_ path: String, at jsonPath: JSONPath) {
        switch KeyFileInspection.privateKeyShape(path) {
        case .otherPEM, .unreadable:
            return
        case .pkcs8, .sec1EC, .pkcs1RSA, .encrypted:
            error(jsonPath, "\(path) holds a private key, not a certificate",
                  fix: "swap cert_file and key_file, or point cert_file at the PEM certificate")
        case .notPEM:
            error(jsonPath, "\(path) is not a PEM certificate (a DER .cer from Apple?)",
                  fix: "convert with openssl x509 -inform DER -in \(path) -out voip.pem and point cert_file at voip.pem")
        }
    }
}
