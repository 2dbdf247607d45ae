import DeadLetters

extension ConfigParser {
    /// `apps.APP.dead_letters`: `{ "max_entries": N, "max_age_days": D }`, both optional
    /// (defaults 10,000 and 14). Nil after recording a problem.
    func parseDeadLetters(_ entry: [String: Any], in parent: JSONPath) -> DeadLetterRetentionPolicy? {
        let path = parent.appending("dead_letters")
        guard let section = reader.section(entry, "dead_letters", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["max_entries", "max_age_days"])
        let fallback = DeadLetterRetentionPolicy.default
        let entries = reader.positiveInteger(section, "max_entries", in: path, fallback: fallback.maxEntries,
                                             most: 10_000_000)
        let days = reader.positiveInteger(section, "max_age_days", in: path, fallback: fallback.maxAgeSeconds / 86_400,
                                          most: 3650)
        guard let entries, let days else { return nil }
        return DeadLetterRetentionPolicy(maxEntries: entries, maxAgeSeconds: days * 86_400)
    }
}

extension GatewayConfig {
    /// Each app's ring timeout, ms: what the dead-letter tools need to tell a replay's deadline
    /// (`DeadLetterOperations.ringTimeoutsMs`).
    package var ringTimeoutsMs: [String: Int64] { apps.mapValues { Int64($0.ringTimeoutSeconds) * 1000 } }
}
