// The Prometheus metrics registry. Pure values and text: no sockets, no clock, no locks.

/// The metrics of one process, rendered as Prometheus text format 0.0.4.
///
/// Loop-owned: a registry and its families are plain objects used from the loop thread only
/// (observations come from loop callbacks, scrapes are answered on the loop), so nothing is
/// locked. Families render in registration order, series sorted by their label values, so
/// the same values always give the same text (the tests compare it byte for byte).
///
/// Cardinality is bounded: a family keeps at most `maxSeriesPerFamily` label sets; values
/// for new label sets beyond it are dropped and counted in `droppedSeries` (label values
/// coming from outside, such as an unknown APNs reason, cannot grow memory without end).
package final class MetricsRegistry {
    package let maxSeriesPerFamily: Int
    private var families: [MetricFamily] = []
    private var names: Set<String> = []
    /// Observations dropped because their family was full.
    package internal(set) var droppedSeries = 0

    package init(maxSeriesPerFamily: Int = 1_000) {
        precondition(maxSeriesPerFamily > 0, "maxSeriesPerFamily must be positive")
        self.maxSeriesPerFamily = maxSeriesPerFamily
    }

    /// A counter family. Its name must end in `_total` (Prometheus conventions).
    package func counter(_ name: String, help: String, labels: [String] = []) -> CounterFamily {
        precondition(name.hasSuffix("_total"), "counter \(name) must end in _total")
        return register(CounterFamily(name: name, help: help, labelNames: labels, registry: self))
    }

    /// A gauge family.
    package func gauge(_ name: String, help: String, labels: [String] = []) -> GaugeFamily {
        register(GaugeFamily(name: name, help: help, labelNames: labels, registry: self))
    }

    /// A histogram family with fixed upper bounds `buckets` (strictly increasing, finite; the
    /// `+Inf` bucket is implicit). Durations are in seconds and the name says so (`_seconds`).
    package func histogram(_ name: String, help: String, labels: [String] = [], buckets: [Double]) -> HistogramFamily {
        precondition(!buckets.isEmpty && buckets.allSatisfy(\.isFinite), "histogram \(name): finite buckets required")
        precondition(zip(buckets, buckets.dropFirst()).allSatisfy { $0 < $1 }, "histogram \(name): buckets must increase")
        precondition(!labels.contains("le"), "histogram \(name): the label le is reserved")
        return register(HistogramFamily(name: name, help: help, labelNames: labels, buckets: buckets, registry: self))
    }

    private func register<F: MetricFamily>(_ family: F) -> F {
        precondition(PrometheusText.isValidMetricName(family.name), "invalid metric name \(family.name)")
        precondition(family.labelNames.allSatisfy(PrometheusText.isValidLabelName), "invalid label name in \(family.name)")
        precondition(Set(family.labelNames).count == family.labelNames.count, "duplicate label name in \(family.name)")
        precondition(names.insert(family.name).inserted, "metric \(family.name) registered twice")
        families.append(family)
        return family
    }

    /// The whole registry as Prometheus text (content type `PrometheusText.contentType`).
    package func render() -> String {
        var out = ""
        out.reserveCapacity(16 * 1024)
        for family in families { family.render(into: &out) }
        return out
    }
}

/// What every family shares: a name, a help text, label names and a typed renderer.
package protocol MetricFamily: AnyObject {
    var name: String { get }
    var help: String { get }
    var labelNames: [String] { get }
    func render(into out: inout String)
}

/// Series of one value per label set (counters and gauges).
package class ValueFamily {
    package let name: String
    package let help: String
    package let labelNames: [String]
    fileprivate unowned let registry: MetricsRegistry
    fileprivate var values: [[String]: Double] = [:]
    /// Series made by `preset` (label sets from the config): they do not count against the cap.
    private var presets = 0

    fileprivate init(name: String, help: String, labelNames: [String], registry: MetricsRegistry) {
        self.name = name
        self.help = help
        self.labelNames = labelNames
        self.registry = registry
        // A family without labels has exactly one series, shown from the start (as 0).
        if labelNames.isEmpty { values[[]] = 0 }
    }

    /// The current value for `labels`; nil when that series does not exist.
    package func value(_ labels: [String] = []) -> Double? { values[labels] }

    /// Label sets present, in render order.
    package var labelSets: [[String]] { values.keys.sorted(by: PrometheusText.labelOrder) }

    /// Removes every series (a family without labels goes back to 0). For families mirrored
    /// from a source at scrape time, so a label set that disappeared stops being shown.
    package func removeAll() {
        values.removeAll(keepingCapacity: true)
        presets = 0
        if labelNames.isEmpty { values[[]] = 0 }
    }

    /// Shows the series of `labels` at 0 unless it exists: a counter that exists before its
    /// first event lets `rate()` and `increase()` see that event. For label sets the config
    /// bounds (its apps × a fixed table), so they do not count against
    /// `MetricsRegistry.maxSeriesPerFamily`.
    package func preset(_ labels: [String]) {
        precondition(labels.count == labelNames.count, "\(name) takes \(labelNames.count) label values, got \(labels.count)")
        guard values[labels] == nil else { return }
        values[labels] = 0
        presets += 1
    }

    fileprivate func update(_ labels: [String], _ change: (inout Double) -> Void) {
        precondition(labels.count == labelNames.count, "\(name) takes \(labelNames.count) label values, got \(labels.count)")
        // One hash of the labels per update on the usual path (the router updates several
        // series per call).
        if let i = values.index(forKey: labels) {
            change(&values.values[i])
            return
        }
        guard values.count - presets < registry.maxSeriesPerFamily else {
            registry.droppedSeries += 1
            return
        }
        var value = 0.0
        change(&value)
        values[labels] = value
    }

    fileprivate func render(type: String, into out: inout String) {
        PrometheusText.header(name: name, help: help, type: type, into: &out)
        for labels in labelSets {
            PrometheusText.sample(name: name, labelNames: labelNames, labelValues: labels, value: values[labels]!, into: &out)
        }
    }
}

/// A monotonically increasing count (`…_total`).
package final class CounterFamily: ValueFamily, MetricFamily {
    /// Adds `amount` (≥ 0) to the series of `labels`.
    package func inc(_ labels: [String] = [], by amount: Double = 1) {
        precondition(amount >= 0, "a counter never decreases (\(name))")
        update(labels) { $0 += amount }
    }

    /// Sets the series to `total`: for counters mirrored at scrape time from a cumulative
    /// source (`ApnsClientStats`, `RouterRole.Stats`) that only ever grows.
    package func set(_ labels: [String] = [], total: Double) {
        update(labels) { $0 = total }
    }

    package func render(into out: inout String) { render(type: "counter", into: &out) }
}

/// A value that goes up and down.
package final class GaugeFamily: ValueFamily, MetricFamily {
    package func set(_ labels: [String] = [], _ value: Double) { update(labels) { $0 = value } }
    package func inc(_ labels: [String] = [], by amount: Double = 1) { update(labels) { $0 += amount } }

    package func render(into out: inout String) { render(type: "gauge", into: &out) }
}

/// Observations counted into fixed buckets, with their sum and count.
package final class HistogramFamily: MetricFamily {
    package let name: String
    package let help: String
    package let labelNames: [String]
    /// Upper bounds, increasing; `+Inf` is implicit.
    package let buckets: [Double]
    private unowned let registry: MetricsRegistry

    /// One label set's state: `counts[i]` observations ≤ `buckets[i]` and > the bound before
    /// (not cumulative: rendering adds up); `counts[buckets.count]` those above every bound.
    package struct Series: Equatable {
        package var counts: [UInt64]
        package var sum: Double
        package var count: UInt64

        mutating func record(_ value: Double, inBucket bucket: Int) {
            counts[bucket] += 1
            sum += value
            count += 1
        }
    }
    private var series: [[String]: Series] = [:]

    fileprivate init(name: String, help: String, labelNames: [String], buckets: [Double], registry: MetricsRegistry) {
        self.name = name
        self.help = help
        self.labelNames = labelNames
        self.buckets = buckets
        self.registry = registry
        if labelNames.isEmpty { series[[]] = Series(counts: Array(repeating: 0, count: buckets.count + 1), sum: 0, count: 0) }
    }

    /// Records one observation (seconds, for `_seconds` histograms). NaN is ignored.
    package func observe(_ labels: [String] = [], _ value: Double) {
        precondition(labels.count == labelNames.count, "\(name) takes \(labelNames.count) label values, got \(labels.count)")
        guard !value.isNaN else { return }
        // Buckets are few (≈ 15): a linear scan beats a binary search's branches here.
        let bucket = buckets.firstIndex { value <= $0 } ?? buckets.count
        if let i = series.index(forKey: labels) {
            series.values[i].record(value, inBucket: bucket)
            return
        }
        guard series.count < registry.maxSeriesPerFamily else {
            registry.droppedSeries += 1
            return
        }
        var fresh = Series(counts: Array(repeating: 0, count: buckets.count + 1), sum: 0, count: 0)
        fresh.record(value, inBucket: bucket)
        series[labels] = fresh
    }

    /// The state of `labels`; nil when nothing was observed for it.
    package func series(_ labels: [String] = []) -> Series? { series[labels] }

    package func render(into out: inout String) {
        PrometheusText.header(name: name, help: help, type: "histogram", into: &out)
        let bucketNames = labelNames + ["le"]
        for labels in series.keys.sorted(by: PrometheusText.labelOrder) {
            let s = series[labels]!
            var cumulative: UInt64 = 0
            for (i, bound) in buckets.enumerated() {
                cumulative += s.counts[i]
                PrometheusText.sample(name: name + "_bucket", labelNames: bucketNames,
                                      labelValues: labels + [PrometheusText.format(bound)], value: Double(cumulative), into: &out)
            }
            PrometheusText.sample(name: name + "_bucket", labelNames: bucketNames, labelValues: labels + ["+Inf"],
                                  value: Double(s.count), into: &out)
            PrometheusText.sample(name: name + "_sum", labelNames: labelNames, labelValues: labels, value: s.sum, into: &out)
            PrometheusText.sample(name: name + "_count", labelNames: labelNames, labelValues: labels,
                                  value: Double(s.count), into: &out)
        }
    }
}

/// The Prometheus text exposition format, version 0.0.4: names, escaping and numbers.
package enum PrometheusText {
    /// The `Content-Type` of a rendered registry.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    package static func isValidMetricName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isLetter(first) || first == UInt8(ascii: "_") || first == UInt8(ascii: ":") else {
            return false
        }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":") }
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved for Prometheus itself).
    package static func isValidLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isLetter(first) || first == UInt8(ascii: "_"), !name.hasPrefix("__") else {
            return false
        }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
    }

    /// A label value inside double quotes: backslash, double quote and line feed escaped.
    static func escapeLabelValue(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else {
            return value
        }
        var out = ""
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// A HELP text: backslash and line feed escaped (double quotes stay).
    static func escapeHelp(_ text: String) -> String {
        text.replacingAll("\\", with: "\\\\").replacingAll("\n", with: "\\n")
    }

    /// A sample value or bucket bound: integers without a fraction (`3`, not `3.0`), others in
    /// the shortest form that reads back the same (`0.005`), and `+Inf`, `-Inf`, `NaN`.
    package static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func header(name: String, help: String, type: String, into out: inout String) {
        out += "# HELP \(name) \(escapeHelp(help))\n# TYPE \(name) \(type)\n"
    }

    static func sample(name: String, labelNames: [String], labelValues: [String], value: Double, into out: inout String) {
        out += name
        if !labelNames.isEmpty {
            out += "{"
            for (i, label) in labelNames.enumerated() {
                if i > 0 { out += "," }
                out += label
                out += "=\""
                out += escapeLabelValue(labelValues[i])
                out += "\""
            }
            out += "}"
        }
        out += " "
        out += format(value)
        out += "\n"
    }

    /// Series order: by label values, element by element.
    static func labelOrder(_ a: [String], _ b: [String]) -> Bool { a.lexicographicallyPrecedes(b) }

    private static func isLetter(_ c: UInt8) -> Bool { (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) }
    private static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
}

private extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        guard contains(target) else { return self }
        var out = ""
        for c in self { if c == target { out += replacement } else { out.append(c) } }
        return out
    }
}
