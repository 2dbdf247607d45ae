/// An app's share of the gateway (`limits`, config/README.md): how many of its calls the router
/// holds at once, and how fast its events are read. Absent keys keep the gateway's defaults:
/// the router's in-flight cap per app, and no rate.
package struct AppLimits: Equatable, Sendable {
    /// Calls of the app in flight at once in one process (`max_in_flight`); nil: the router's
    /// default (`RouterRoleSettings.perAppInFlight`).
    package var maxInFlight: Int?
    /// Events read per second (`events_per_second`), with `burst` read at once after a quiet
    /// spell; nil: as fast as they come. An app over it waits in its stream: nothing is dropped.
    package var eventsPerSecond: Int?
    /// Events read at once after a quiet spell (`burst`); with a rate only. Defaults to one
    /// second's worth.
    package var burst: Int?

    package init(maxInFlight: Int? = nil, eventsPerSecond: Int? = nil, burst: Int? = nil) {
        self.maxInFlight = maxInFlight
        self.eventsPerSecond = eventsPerSecond
        self.burst = burst
    }

    /// The bounds `config check` names: in flight up to the APNs client's queue, a rate up to
    /// what one process routes, a burst up to a minute of the highest rate.
    static let maxInFlightRange = 1...10_000
    static let eventsPerSecondRange = 1...100_000
    static let burstRange = 1...6_000_000
}

extension ConfigParser {
    /// `limits`: `max_in_flight`, `events_per_second`, `burst`, each optional; nil when a key
    /// is invalid (reported).
    func parseLimits(_ entry: [String: Any], in parent: JSONPath) -> AppLimits? {
        let path = parent.appending("limits")
        guard let section = reader.section(entry, "limits", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["max_in_flight", "events_per_second", "burst"])
        var limits = AppLimits()
        var valid = true
        func optional(_ key: String, _ range: ClosedRange<Int>, example: Int) -> Int? {
            guard reader.lookup(section, key, in: path) != nil else { return nil }
            guard let n = reader.positiveInteger(section, key, in: path, fallback: example, most: range.upperBound) else {
                valid = false
                return nil
            }
            return n
        }
        limits.maxInFlight = optional("max_in_flight", AppLimits.maxInFlightRange, example: 1_000)
        limits.eventsPerSecond = optional("events_per_second", AppLimits.eventsPerSecondRange, example: 500)
        limits.burst = optional("burst", AppLimits.burstRange, example: limits.eventsPerSecond ?? 500)
        if limits.burst != nil && limits.eventsPerSecond == nil && valid {
            reader.error(path.appending("burst"), "a burst without events_per_second limits nothing",
                         fix: "add \"events_per_second\" (events read per second, 1 to \(AppLimits.eventsPerSecondRange.upperBound)), or remove \"burst\"")
            valid = false
        }
        return valid ? limits : nil
    }
}
