/// How fast a bulk replay puts events back on the calls streams (`--rate N/s`): redrive to the
/// origin in a controlled manner, so a replay of thousands does not become a burst on the
/// router and APNs (rabbitmq-server#2541).
public struct ReplayRate: Equatable, Sendable, CustomStringConvertible {
    /// Replays per second, > 0.
    public let perSecond: Double

    /// The default: 100 replays a second.
    public static let `default` = ReplayRate(perSecond: 100)

    public init(perSecond: Double) {
        precondition(perSecond > 0 && perSecond.isFinite, "a rate must be positive")
        self.perSecond = perSecond
    }

    /// Reads `N/s`, `N/m`, `N/h` or a bare `N` (per second); N a positive number.
    /// Nil for anything else.
    public init?(parsing text: String) {
        var number = Substring(text)
        var per = 1.0
        if let slash = text.firstIndex(of: "/") {
            number = text[..<slash]
            switch text[text.index(after: slash)...] {
            case "s", "sec": per = 1
            case "m", "min": per = 60
            case "h": per = 3600
            default: return nil
            }
        }
        guard let n = Double(number), n > 0, n.isFinite else { return nil }
        self.init(perSecond: n / per)
    }

    public var description: String {
        perSecond == perSecond.rounded() ? "\(Int(perSecond))/s" : "\(perSecond)/s"
    }
}

/// When each replay of a bulk replay is due: the `index`-th (0-based) at
/// `startMs + ceil(index · 1000 / rate)`, so any second holds at most about `rate` replays
/// and a slow Redis does not cause a catch-up burst beyond that spacing. Pure.
public struct ReplayPacer: Equatable, Sendable {
    public let rate: ReplayRate
    /// Monotonic ms of the first replay.
    public let startMs: Int64

    public init(rate: ReplayRate, startMs: Int64) {
        self.rate = rate
        self.startMs = startMs
    }

    /// Monotonic ms at which replay number `index` may go.
    public func dueMs(index: Int) -> Int64 {
        precondition(index >= 0, "replays count from 0")
        return startMs + Int64((Double(index) * 1000 / rate.perSecond).rounded(.up))
    }
}
