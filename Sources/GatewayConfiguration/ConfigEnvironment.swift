/// The environment variables that override config values, for what differs per deployment
/// (config/README.md). A variable that is set but empty counts as unset, so a compose file may
/// list them all. Paths given this way are resolved against the working directory, not the
/// config file's directory.
enum ConfigEnvironment {
    /// Each variable and the JSON path whose value it replaces.
    package static let overrides: [(variable: String, path: String)] = [
        ("PUSHGW_REDIS_URL", "redis.url"),
        ("PUSHGW_REDIS_PREFIX", "redis.prefix"),
        ("PUSHGW_ADMIN_LISTEN", "admin.listen"),
        ("PUSHGW_ADMIN_PUBLIC_HOST", "admin.public_host"),
        ("PUSHGW_APNS_CA_FILE", "apns.ca_file"),
        ("PUSHGW_APNS_PRODUCTION_ENDPOINT", "apns.production.endpoint"),
        ("PUSHGW_APNS_SANDBOX_ENDPOINT", "apns.sandbox.endpoint"),
        ("PUSHGW_FCM_ENDPOINT", "fcm.endpoint"),
    ]

    /// The overrides present in `environment`, by JSON path.
    static func active(in environment: [String: String]) -> [String: (variable: String, value: String)] {
        var found: [String: (variable: String, value: String)] = [:]
        for (variable, path) in overrides {
            if let value = environment[variable], !value.isEmpty { found[path] = (variable, value) }
        }
        return found
    }
}
