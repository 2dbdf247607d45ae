import Foundation

/// The overview's chart of one app's last hour, drawn as inline SVG nodes from `OutcomeHistory`:
/// one stacked bar per minute (outcomes, left axis: calls) and the minute's XADD→answer p99 as
/// a line (right axis: ms). Colours come from the stylesheet's classes (`o-delivered_voip`,
/// …): the page's Content-Security-Policy allows no inline style. Pure.
enum OutcomeChart {
    static let width = 640.0
    static let height = 190.0
    static let left = 40.0
    static let right = 48.0
    static let top = 10.0
    static let bottom = 20.0

    /// Stacking order, bottom up; other outcomes stack last.
    static let order = ["delivered_voip", "delivered_alert", "dead_lettered", "expired", "undeliverable", "cancelled"]

    static func svg(app: String, points: [OutcomeHistory.Point]) -> Node {
        let plotW = width - left - right
        let plotH = height - top - bottom
        let totals = points.map { $0.outcomes.values.reduce(0, +) }
        let maxCalls = niceCeiling(Double(totals.max() ?? 0))
        let maxMs = niceCeiling(points.compactMap(\.p99Ms).max() ?? 0)
        let slot = plotW / Double(max(points.count, 1))
        var s: [Node] = []
        // Grid and axes.
        for i in 0...2 {
            let y = top + plotH * Double(i) / 2
            s.append(.el("line", ["class": "grid", "x1": f(left), "x2": f(left + plotW), "y1": f(y), "y2": f(y)]))
            let calls = maxCalls * Double(2 - i) / 2
            s.append(.el("text", ["class": "axis", "x": f(left - 4), "y": f(y + 3), "text-anchor": "end"], .text(short(calls))))
            if maxMs > 0 {
                s.append(.el("text", ["class": "axis latency", "x": f(left + plotW + 4), "y": f(y + 3)], .text(short(maxMs * Double(2 - i) / 2) + " ms")))
            }
        }
        s.append(.el("text", ["class": "axis", "x": f(left), "y": f(height - 4)], "−60 min"))
        s.append(.el("text", ["class": "axis", "x": f(left + plotW), "y": f(height - 4), "text-anchor": "end"], "now"))
        // Bars.
        if maxCalls > 0 {
            for (i, p) in points.enumerated() {
                var y = top + plotH
                let x = left + slot * Double(i) + 0.5
                let names = order.filter { p.outcomes[$0] != nil } + p.outcomes.keys.filter { !order.contains($0) }.sorted()
                for name in names {
                    let n = Double(p.outcomes[name] ?? 0)
                    let h = plotH * n / maxCalls
                    y -= h
                    s.append(.el("rect", ["class": "o-" + name, "x": f(x), "y": f(y), "width": f(max(slot - 1, 1)), "height": f(h)],
                                 .el("title", .text("\(name): \(Int(n)) (\(p.minutesAgo) min ago)"))))
                }
            }
        }
        // The p99 line.
        if maxMs > 0 {
            let coordinates = points.enumerated().compactMap { i, p -> (x: String, y: String)? in
                guard let ms = p.p99Ms else { return nil }
                return (f(left + slot * (Double(i) + 0.5)), f(top + plotH - plotH * ms / maxMs))
            }
            if coordinates.count > 1 {
                s.append(.el("polyline", ["class": "p99", "points": coordinates.map { $0.x + "," + $0.y }.joined(separator: " ")]))
            }
            for c in coordinates {
                s.append(.el("circle", ["class": "p99", "cx": c.x, "cy": c.y, "r": "1.8"]))
            }
        }
        if totals.allSatisfy({ $0 == 0 }) {
            s.append(.el("text", ["class": "empty", "x": f(left + plotW / 2), "y": f(top + plotH / 2), "text-anchor": "middle"],
                         "no calls in the last hour"))
        }
        return .el("svg", ["class": "chart", "viewBox": "0 0 " + f(width) + " " + f(height), "role": "img",
                           "aria-label": "outcomes and p99 latency of " + app + " over the last hour"], children: s)
    }

    /// The smallest of 1, 2, 5 × 10^n at or above `v` (0 for 0).
    static func niceCeiling(_ v: Double) -> Double {
        guard v > 0 else { return 0 }
        let magnitude = pow(10, floor(log10(v)))
        for step in [1.0, 2, 5, 10] where step * magnitude >= v { return step * magnitude }
        return 10 * magnitude
    }

    private static func f(_ v: Double) -> String { String(format: "%.1f", v) }

    private static func short(_ v: Double) -> String {
        if v >= 10_000 { return String(format: "%.0fk", v / 1000) }
        if v >= 1000 { return String(format: "%.1fk", v / 1000) }
        return v == v.rounded() ? String(Int(v)) : String(format: "%.1f", v)
    }
}
