import CallStorage
import Foundation

/// What the gateway's router recorded over the last hour, per app and per minute: counts by
/// outcome (the alert fallbacks also by cause), a histogram of XADD→answer latency and, with
/// ring receipts, one of XADD→ringing (the call's entry to its device's receipt). The
/// console's overview and its chart read it; the router's record hook feeds it.
///
/// A ring of `minutes` buckets per app, reused as the clock moves on: memory is fixed (a few
/// kilobytes per app) and recording is a few array writes, so the hot path does not notice it.
/// Pure: the caller passes the time (unix ms). Loop-owned like the router.
public struct OutcomeHistory: Sendable {
    /// Minutes kept.
    public static let minutes = 60

    /// Latency histogram buckets: bucket `i` holds latencies up to `upperBoundMs(i)`, which
    /// grows by a factor 2^(1/4) (19 %) per bucket from 1 ms; the last holds everything beyond
    /// (about 2 minutes).
    public static let latencyBuckets = 72

    public static func upperBoundMs(_ bucket: Int) -> Double { pow(2, Double(bucket) / 4) }

    static func bucket(latencyMs: Int64) -> Int {
        guard latencyMs > 1 else { return 0 }
        let i = Int((4 * log2(Double(latencyMs))).rounded(.up))
        return min(i, latencyBuckets - 1)
    }

    /// One minute of one app.
    struct Minute: Sendable {
        /// The minute (unix ms / 60,000) the counts belong to; -1 when unused.
        var minute: Int64 = -1
        /// Count per outcome name (`delivered_voip`, …).
        var outcomes: [String: Int] = [:]
        /// Of `outcomes` and `latency`, what was added to the fleet's counts already (`flushed`;
        /// `flushedLatency` is empty until the first flush with latencies).
        var flushed: [String: Int] = [:]
        var flushedLatency: [Int32] = []
        /// Count per fallback cause of `delivered_alert`.
        var causes: [String: Int] = [:]
        var latency = [Int32](repeating: 0, count: OutcomeHistory.latencyBuckets)
        var latencyCount = 0
        /// XADD→ringing, made at the minute's first receipt (empty for an app without receipts).
        var ringLatency: [Int32] = []
        var ringCount = 0
    }

    private var rings: [String: [Minute]] = [:]

    public init() {}

    /// Counts one recorded call of `app`: its outcome, the fallback cause of an alert, and its
    /// XADD→answer latency when APNs answered.
    public mutating func record(app: String, outcome: String, cause: String?, latencyMs: Int64?, nowMs: Int64) {
        let minute = nowMs / 60_000
        let slot = Int(minute % Int64(OutcomeHistory.minutes))
        if rings[app] == nil { rings[app] = [Minute](repeating: Minute(), count: OutcomeHistory.minutes) }
        rings[app]!.withUnsafeMutableBufferPointer { ring in
            if ring[slot].minute != minute { ring[slot] = Minute(minute: minute) }
            ring[slot].outcomes[outcome, default: 0] += 1
            if let cause { ring[slot].causes[cause, default: 0] += 1 }
            if let latencyMs {
                ring[slot].latency[OutcomeHistory.bucket(latencyMs: latencyMs)] += 1
                ring[slot].latencyCount += 1
            }
        }
    }

    /// Counts one ring of `app`: a device's receipt `latencyMs` after its call's entry (XADD).
    public mutating func recordRing(app: String, latencyMs: Int64, nowMs: Int64) {
        let minute = nowMs / 60_000
        let slot = Int(minute % Int64(OutcomeHistory.minutes))
        if rings[app] == nil { rings[app] = [Minute](repeating: Minute(), count: OutcomeHistory.minutes) }
        rings[app]!.withUnsafeMutableBufferPointer { ring in
            if ring[slot].minute != minute { ring[slot] = Minute(minute: minute) }
            if ring[slot].ringLatency.isEmpty { ring[slot].ringLatency = [Int32](repeating: 0, count: OutcomeHistory.latencyBuckets) }
            ring[slot].ringLatency[OutcomeHistory.bucket(latencyMs: latencyMs)] += 1
            ring[slot].ringCount += 1
        }
    }

    /// The figures of `app` over the last `minutes` minutes (the current one included).
    public struct Window: Equatable, Sendable {
        public var outcomes: [String: Int] = [:]
        public var causes: [String: Int] = [:]
        /// Calls with a latency.
        public var measured = 0
        /// Upper bounds of the latency quantiles, ms; nil without measurements.
        public var p50Ms: Double?
        public var p99Ms: Double?
        /// Rings heard (receipts) and the upper bounds of their XADD→ringing quantiles, ms.
        public var rang = 0
        public var ringP50Ms: Double?
        public var ringP99Ms: Double?
        public var total: Int { outcomes.values.reduce(0, +) }
    }

    public func window(app: String, minutes: Int, nowMs: Int64) -> Window {
        var w = Window()
        var latency = [Int](repeating: 0, count: OutcomeHistory.latencyBuckets)
        var ringLatency = [Int](repeating: 0, count: OutcomeHistory.latencyBuckets)
        let current = nowMs / 60_000
        for m in ring(app) where m.minute >= 0 && m.minute > current - Int64(minutes) && m.minute <= current {
            for (k, v) in m.outcomes { w.outcomes[k, default: 0] += v }
            for (k, v) in m.causes { w.causes[k, default: 0] += v }
            for i in 0..<OutcomeHistory.latencyBuckets { latency[i] += Int(m.latency[i]) }
            w.measured += m.latencyCount
            for (i, n) in m.ringLatency.enumerated() { ringLatency[i] += Int(n) }
            w.rang += m.ringCount
        }
        w.p50Ms = OutcomeHistory.quantile(0.50, latency, count: w.measured)
        w.p99Ms = OutcomeHistory.quantile(0.99, latency, count: w.measured)
        w.ringP50Ms = OutcomeHistory.quantile(0.50, ringLatency, count: w.rang)
        w.ringP99Ms = OutcomeHistory.quantile(0.99, ringLatency, count: w.rang)
        return w
    }

    /// One point of the chart: a minute's counts and its p99.
    public struct Point: Equatable, Sendable {
        /// Minutes before now (0 = the current minute).
        public var minutesAgo: Int
        public var outcomes: [String: Int]
        public var p99Ms: Double?
    }

    /// The last hour of `app`, oldest minute first, one point per minute (empty minutes too).
    public func series(app: String, nowMs: Int64) -> [Point] {
        let current = nowMs / 60_000
        let byMinute = Dictionary(ring(app).filter { $0.minute >= 0 }.map { ($0.minute, $0) }, uniquingKeysWith: { a, _ in a })
        return (0..<OutcomeHistory.minutes).reversed().map { ago in
            guard let m = byMinute[current - Int64(ago)] else { return Point(minutesAgo: ago, outcomes: [:], p99Ms: nil) }
            return Point(minutesAgo: ago, outcomes: m.outcomes,
                         p99Ms: OutcomeHistory.quantile(0.99, m.latency.map { Int($0) }, count: m.latencyCount))
        }
    }

    /// Whether `app` had a call delivered (an outcome `delivered_…`) in a minute after the one
    /// of `afterMs` (the same minute may hold it before or after: it does not count), within the
    /// hour kept.
    public func delivered(app: String, afterMs: Int64) -> Bool {
        let after = afterMs / 60_000
        return ring(app).contains { m in
            m.minute > after && m.outcomes.contains { $0.key.hasPrefix("delivered") && $0.value > 0 }
        }
    }

    private func ring(_ app: String) -> [Minute] { rings[app] ?? [] }

    // MARK: The fleet's figures

    /// What was counted and not yet added to the fleet's counts (`FleetFigureStore.add`), per
    /// minute and app: a minute's outcomes less what `flushed` took of them.
    public func unflushed() -> [FleetMinuteCounts] {
        var out: [FleetMinuteCounts] = []
        for app in rings.keys.sorted() {
            for m in rings[app]! where m.minute >= 0 {
                var delta: [String: Int] = [:]
                for (k, v) in m.outcomes where v != m.flushed[k, default: 0] { delta[k] = v - m.flushed[k, default: 0] }
                var latency: [Int: Int] = [:]
                for (i, n) in m.latency.enumerated() {
                    let before = m.flushedLatency.isEmpty ? 0 : m.flushedLatency[i]
                    if n != before { latency[i] = Int(n - before) }
                }
                if !delta.isEmpty || !latency.isEmpty {
                    out.append(FleetMinuteCounts(minute: m.minute, app: app, outcomes: delta, latency: latency))
                }
            }
        }
        return out
    }

    /// `counts` (what `unflushed` gave) are in the fleet's counts now. A minute the ring reused
    /// since is gone, and so is what it held.
    public mutating func flushed(_ counts: [FleetMinuteCounts]) {
        for c in counts {
            let slot = Int(c.minute % Int64(OutcomeHistory.minutes))
            guard rings[c.app]?[slot].minute == c.minute else { continue }
            for (k, n) in c.outcomes { rings[c.app]![slot].flushed[k, default: 0] += n }
            guard !c.latency.isEmpty else { continue }
            if rings[c.app]![slot].flushedLatency.isEmpty {
                rings[c.app]![slot].flushedLatency = [Int32](repeating: 0, count: OutcomeHistory.latencyBuckets)
            }
            for (i, n) in c.latency { rings[c.app]![slot].flushedLatency[i] += Int32(n) }
        }
    }

    /// The upper bound of the bucket holding the `q` quantile; nil for an empty histogram.
    static func quantile(_ q: Double, _ buckets: [Int], count: Int) -> Double? {
        guard count > 0 else { return nil }
        let rank = max(1, Int((q * Double(count)).rounded(.up)))
        var seen = 0
        for (i, n) in buckets.enumerated() {
            seen += n
            if seen >= rank { return upperBoundMs(i) }
        }
        return upperBoundMs(buckets.count - 1)
    }
}
