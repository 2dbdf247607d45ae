/// How fast a bulk replay puts events back on the calls streams (`--rate N/s`): redrive to the
/// origin in a controlled manner, so a replay of thousands does not become a burst on the
/// router and APNs (rabbitmq-server#2541).
///
/// Invariant: `slowest <= self <= fastest` (1/h to 10000/s), so every figure a rate gives
/// (a replay's due time, its text) is a small finite number. A rate is only made by parsing
/// what a person typed (`init?(parsing:)`) or from those bounds (`init?(_:per:)`).
public struct ReplayRate: Equatable, Sendable, CustomStringConvertible {
    /// The unit a rate was written in; it is shown in the same unit.
    public enum Unit: String, Sendable {
        case second = "s", minute = "m", hour = "h"

        var seconds: Double {
            switch self {
            case .second: return 1
            case .minute: return 60
            case .hour: return 3600
            }
        }
    }

    /// The number as written (`300` of `300/m`).
    public let amount: Double
    public let unit: Unit

    /// Replays per second, in 1/3600 ... 10,000.
    public var perSecond: Double { amount / unit.seconds }

    /// One replay an hour: a job of the console's 1,000 ends within 42 days.
    public static let slowest = ReplayRate(checked: 1, .hour)
    /// 10,000 a second: more than a router takes without delaying live calls.
    public static let fastest = ReplayRate(checked: 10_000, .second)
    /// The default: 100 replays a second.
    public static let `default` = ReplayRate(checked: 100, .second)

    /// What a rate may be, for the messages that refuse one.
    public static let forms = "a number of replays per second, minute or hour from 1/h to 10000/s (20/s, 300/m, 5/h; 20 is 20/s)"

    private init(checked amount: Double, _ unit: Unit) {
        self.amount = amount
        self.unit = unit
    }

    /// Nil outside `slowest ... fastest` (or for a number that is not finite).
    public init?(_ amount: Double, per unit: Unit) {
        let perSecond = amount / unit.seconds
        guard amount.isFinite, perSecond >= ReplayRate.slowest.perSecond, perSecond <= ReplayRate.fastest.perSecond else { return nil }
        self.init(checked: amount, unit)
    }

    /// Reads `N/s`, `N/m`, `N/h` or a bare `N` (per second), N written as digits with at most
    /// one decimal point (at most 9 digits before it and 6 after: no exponent, sign, `inf` or
    /// `nan`), within the bounds. Nil for anything else.
    public init?(parsing text: String) {
        var number = Substring(text)
        var unit = Unit.second
        if let slash = text.firstIndex(of: "/") {
            number = text[..<slash]
            switch text[text.index(after: slash)...] {
            case "s", "sec": unit = .second
            case "m", "min": unit = .minute
            case "h": unit = .hour
            default: return nil
            }
        }
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        func digits(_ part: Substring, most: Int) -> Bool {
            !part.isEmpty && part.utf8.count <= most && part.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
        guard digits(parts[0], most: 9), parts.count == 1 || digits(parts[1], most: 6), let n = Double(number) else { return nil }
        self.init(n, per: unit)
    }

    /// `20/s`, `300/m`, `2.5/h`: what `init?(parsing:)` reads back.
    public var description: String {
        // amount <= 36,000,000 (10000/s written per hour): whole ones convert exactly.
        let n = amount == amount.rounded() ? String(Int64(amount)) : "\(amount)"
        return n + "/" + unit.rawValue
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

    /// Monotonic ms at which replay number `index` (>= 0) may go. The offset is at most
    /// index · 3,600,000 ms (the slowest rate); past 9e15 ms (285,000 years) it stays there.
    public func dueMs(index: Int) -> Int64 {
        precondition(index >= 0, "replays count from 0")
        let offset = (Double(index) * 1000 / rate.perSecond).rounded(.up)
        let (due, overflow) = startMs.addingReportingOverflow(offset < 9e15 ? Int64(offset) : 9_000_000_000_000_000)
        return overflow ? Int64.max : due
    }
}
