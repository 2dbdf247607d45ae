/// One problem found in a config file: which file, where in it (the JSON path, such as
/// `apps.acme.credential`), what is wrong and how to fix it. Warnings (unknown keys, loose
/// file modes, duplicate apps) are reported the same way but do not stop the gateway.
///
/// Messages name paths and values the operator wrote, never the contents of a secret file
/// and never the Redis URL (it may hold a password).
package struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Whether the gateway can run with this problem.
    package enum Severity: String, Equatable, Sendable {
        /// The config cannot be used.
        case error
        /// Suspicious but usable.
        case warning
    }

    package let severity: Severity
    /// The config file as the operator named it.
    package let file: String
    /// The JSON path of the offending value; empty for the file as a whole. A value taken
    /// from an environment variable carries its name: `redis.url (PUSHGW_REDIS_URL)`.
    package let path: String
    /// What is wrong, in one clause.
    package let problem: String
    /// What to do about it, in one clause.
    package let fix: String

    package init(_ severity: Severity, file: String, path: String, problem: String, fix: String) {
        self.severity = severity
        self.file = file
        self.path = path
        self.problem = problem
        self.fix = fix
    }

    var isWarning: Bool { severity == .warning }

    /// `file: path: [warning: ]problem; fix`, one line.
    package var description: String {
        let location = path.isEmpty ? file : "\(file): \(path)"
        let tag = severity == .warning ? "warning: " : ""
        return "\(location): \(tag)\(problem); \(fix)"
    }
}

/// What checking a config file found: the config when it is usable, and every problem.
package struct ConfigReport: Sendable {
    /// The parsed config; nil when any problem is an error.
    package let config: GatewayConfig?
    /// Every problem in the order found (file order of the sections), errors and warnings.
    package let problems: [ConfigError]

    package var errors: [ConfigError] { problems.filter { !$0.isWarning } }
    package var warnings: [ConfigError] { problems.filter(\.isWarning) }
}
