// RedisStreams: the Redis connections (hiredis async on the loop), commands, pipelining,
// Lua scripts and the key layout of DESIGN.md §2.
// Owns: every Redis key name and command. Must not know about APNs.
// Status: not built yet (issue 3). Only the key layout is fixed here.

/// The Redis keys of one app, as fixed by the producer contract (DESIGN.md §2).
/// Every key carries the app id as a Redis Cluster hash tag, so one app's keys share a slot.
public struct AppKeys: Equatable, Sendable {
    /// The configurable prefix (`pushgw` by default).
    public let prefix: String
    /// The app id, as configured.
    public let app: String

    public init(prefix: String = "pushgw", app: String) {
        self.prefix = prefix
        self.app = app
    }

    private var base: String { "\(prefix):{\(app)}:" }
    /// Producers' stream of call events.
    public var calls: String { base + "calls" }
    /// One entry per event that reached its outcome.
    public var results: String { base + "results" }
    /// One entry per token APNs declared invalid.
    public var feedback: String { base + "feedback" }
    /// Dead letters.
    public var dead: String { base + "dead" }
}
