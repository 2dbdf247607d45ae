/// The `log` section (config/README.md): how much the gateway's log says. The level stays a
/// command-line option (`pushgw run --log-level`); this holds what a config reload may change.
package struct LogConfig: Equatable, Sendable {
    /// `call finished` lines written per second at most (`calls_per_second`); above it one line
    /// a second counts the calls not logged. 0: no `call finished` line.
    package var callsPerSecond = LogConfig.defaultCallsPerSecond

    static let defaultCallsPerSecond = 100
    /// A line per call costs more than routing the call at tens of thousands a second
    /// (docs/operations.md, Logs); past this a log line per call is no longer readable anyway.
    static let callsPerSecondRange = 0...100_000

    package init(callsPerSecond: Int = LogConfig.defaultCallsPerSecond) {
        self.callsPerSecond = callsPerSecond
    }
}

extension ConfigParser {
    /// The `log` section; its defaults when absent.
    func parseLog(_ root: [String: Any]) -> LogConfig {
        let path = JSONPath.root.appending("log")
        guard let section = reader.section(root, "log", in: .root) else { return LogConfig() }
        reader.unknownKeys(section, at: path, known: ["calls_per_second"])
        var config = LogConfig()
        if let n = reader.integer(section, "calls_per_second", in: path, fallback: config.callsPerSecond,
                                  least: LogConfig.callsPerSecondRange.lowerBound, most: LogConfig.callsPerSecondRange.upperBound) {
            config.callsPerSecond = n
        }
        return config
    }
}
