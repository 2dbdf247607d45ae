/// A Redis read of the console that failed, as its error said.
public struct ConsoleReadError: Error, Equatable, Sendable {
    public var text: String
    public init(_ text: String) { self.text = text }
}

/// What the gateway tells the console's overview at the moment of a page view: read from the
/// objects it already keeps (the router, the Redis probe, the APNs pools), no I/O. Plain data.
public struct ConsoleFigures: Equatable, Sendable {
    public struct App: Equatable, Sendable {
        public var id: String
        public var bundleID: String
        /// `production` or `sandbox`.
        public var environment: String
        /// Why APNs refused the app's credentials or topic (it then stops routing it); nil
        /// when it is healthy.
        public var refusal: String?
        /// Entries in the app's calls stream, and those delivered and not yet acknowledged;
        /// nil until the probe sampled them.
        public var backlog: Int64?
        public var pending: Int64?
        /// Tokens refused as `BadDeviceToken` in the app's environment and accepted in the
        /// other one since this gateway started; nil when none.
        public var environmentMismatches: EnvironmentMismatches?
        /// Ring receipts are on for the app (`ring_receipt_timeout_ms`).
        public var ringReceipts = false
        /// With receipts on: its calls in a row without any receipt, when its receipts are
        /// missing (its backend stopped adding `call_ringing`); nil when they are not.
        public var receiptsMissing: Int64?
        /// Its `limits` and where it stands against them in this process; nil when this
        /// process does not route (no router role).
        public var limits: Limits?

        public init(id: String, bundleID: String, environment: String, refusal: String? = nil, backlog: Int64? = nil,
                    pending: Int64? = nil, environmentMismatches: EnvironmentMismatches? = nil) {
            self.id = id
            self.bundleID = bundleID
            self.environment = environment
            self.refusal = refusal
            self.backlog = backlog
            self.pending = pending
            self.environmentMismatches = environmentMismatches
        }
    }

    /// An app's `limits` (docs/operations.md, *Limits*) and this process's figures against them.
    public struct Limits: Equatable, Sendable {
        /// Its in-flight cap: `max_in_flight`, or the router's default.
        public var maxInFlight: Int
        /// The cap is the app's own `max_in_flight`, not the default.
        public var maxInFlightSet: Bool
        /// `events_per_second` and `burst`; nil: no rate.
        public var eventsPerSecond: Int?
        public var burst: Int?
        /// Its calls being routed by this process now (`pushgw_app_calls_in_flight`).
        public var inFlight: Int
        /// Seconds its events waited in its stream for its rate (`pushgw_app_throttled_seconds_total`);
        /// nil without a rate.
        public var throttledSeconds: Double?

        public init(maxInFlight: Int, maxInFlightSet: Bool, eventsPerSecond: Int? = nil, burst: Int? = nil, inFlight: Int,
                    throttledSeconds: Double? = nil) {
            self.maxInFlight = maxInFlight
            self.maxInFlightSet = maxInFlightSet
            self.eventsPerSecond = eventsPerSecond
            self.burst = burst
            self.inFlight = inFlight
            self.throttledSeconds = throttledSeconds
        }
    }

    /// An app's tokens of the other environment (docs/protocol.md, *Feedback*).
    public struct EnvironmentMismatches: Equatable, Sendable {
        public var count: Int
        /// The environment that accepted the last of them (`sandbox`, `production`).
        public var acceptedIn: String
        /// When the last was seen, unix ms.
        public var lastAtMs: Int64

        public init(count: Int, acceptedIn: String, lastAtMs: Int64) {
            self.count = count
            self.acceptedIn = acceptedIn
            self.lastAtMs = lastAtMs
        }
    }

    public var apps: [App]
    /// Redis answered the probe's PING recently.
    public var redisReachable: Bool
    /// Calls this process is working on.
    public var callsInFlight: Int
    /// `/readyz`'s problems, one line each; empty when ready.
    public var readinessProblems: [String]

    public init(apps: [App] = [], redisReachable: Bool = false, callsInFlight: Int = 0, readinessProblems: [String] = []) {
        self.apps = apps
        self.redisReachable = redisReachable
        self.callsInFlight = callsInFlight
        self.readinessProblems = readinessProblems
    }
}
