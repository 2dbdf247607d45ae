import DeadLetters

extension ConfigParser {
    /// `apps.APP.dead_letters`: `{ "max_entries": N, "max_age_days": D, "max_megabytes": M }`,
    /// each optional (defaults 10,000, 14 and 64). Nil after recording a problem.
    func parseDeadLetters(_ entry: [String: Any], in parent: JSONPath) -> DeadLetterRetentionPolicy? {
        let path = parent.appending("dead_letters")
        guard let section = reader.section(entry, "dead_letters", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["max_entries", "max_age_days", "max_megabytes"])
        let fallback = DeadLetterRetentionPolicy.default
        let entries = reader.positiveInteger(section, "max_entries", in: path, fallback: fallback.maxEntries,
                                             most: 10_000_000)
        let days = reader.positiveInteger(section, "max_age_days", in: path, fallback: fallback.maxAgeSeconds / 86_400,
                                          most: 3650)
        let megabytes = reader.positiveInteger(section, "max_megabytes", in: path, fallback: fallback.maxBytes >> 20,
                                               most: 65_536)
        guard let entries, let days, let megabytes else { return nil }
        return DeadLetterRetentionPolicy(maxEntries: entries, maxAgeSeconds: days * 86_400, maxBytes: megabytes << 20)
    }
}

extension GatewayConfig {
    /// Each app's ring timeout, ms: what the dead-letter tools need to tell a replay's deadline
    /// (`DeadLetterOperations.ringTimeoutsMs`).
    package var ringTimeoutsMs: [String: Int64] { apps.mapValues { Int64($0.ringTimeoutSeconds) * 1000 } }
}
