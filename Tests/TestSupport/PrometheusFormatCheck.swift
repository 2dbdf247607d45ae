import Foundation

/// Checks Prometheus text format 0.0.4 the way a scraper reads it, with two independent
/// readers: a small one written here (the rules a reviewer can see) and Python's
/// `prometheus_client` parser (the reference implementation; `make test` installs it).
public enum PrometheusFormatCheck {
    /// The problems the local reader finds; empty when the text is well formed.
    ///
    /// Rules: lines are `# HELP name text`, `# TYPE name counter|gauge|histogram` or samples
    /// `name{label="value",…} number`; each family has one TYPE, given before its samples; a
    /// sample belongs to the family of the last TYPE (histograms: `_bucket`, `_sum`, `_count`);
    /// label values use only the escapes \\ \" \n; bucket counts never decrease and the `+Inf`
    /// bucket equals `_count`; counters are never negative; the text ends with a newline.
    public static func problems(_ text: String) -> [String] {
        var problems: [String] = []
        guard text.isEmpty || text.hasSuffix("\n") else { return ["the text does not end with a newline"] }
        let name = "[a-zA-Z_:][a-zA-Z0-9_:]*"
        let labelValue = #""(?:[^"\\\n]|\\\\|\\"|\\n)*""#
        let sample = try! NSRegularExpression(pattern:
            "^(\(name))(?:\\{([a-zA-Z_][a-zA-Z0-9_]*=\(labelValue)(?:,[a-zA-Z_][a-zA-Z0-9_]*=\(labelValue))*)?\\})? (\\S+)$")
        let help = try! NSRegularExpression(pattern: "^# HELP (\(name)) .*$")
        let type = try! NSRegularExpression(pattern: "^# TYPE (\(name)) (counter|gauge|histogram)$")
        var types: [String: String] = [:]
        var current: (name: String, type: String)?
        var lastBucket: [String: Double] = [:]   // labels without le → last cumulative count
        var infBucket: [String: Double] = [:]
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let l = String(line)
            let range = NSRange(l.startIndex..., in: l)
            func group(_ m: NSTextCheckingResult, _ n: Int) -> String? {
                Range(m.range(at: n), in: l).map { String(l[$0]) }
            }
            if let m = type.firstMatch(in: l, range: range) {
                let family = group(m, 1)!
                if types[family] != nil { problems.append("line \(i + 1): second TYPE for \(family)") }
                types[family] = group(m, 2)!
                current = (family, group(m, 2)!)
                continue
            }
            if help.firstMatch(in: l, range: range) != nil { continue }
            if l.hasPrefix("#") { problems.append("line \(i + 1): unknown comment \(l)"); continue }
            guard let m = sample.firstMatch(in: l, range: range) else {
                problems.append("line \(i + 1): not a sample: \(l)")
                continue
            }
            let sampleName = group(m, 1)!
            let labels = group(m, 2) ?? ""
            let valueText = group(m, 3)!
            guard let value = Double(valueText) ?? (valueText == "+Inf" ? .infinity : valueText == "-Inf" ? -.infinity : nil)
                    ?? (valueText == "NaN" ? .nan : nil) else {
                problems.append("line \(i + 1): bad value \(valueText)")
                continue
            }
            guard let (family, kind) = current else {
                problems.append("line \(i + 1): sample before any TYPE")
                continue
            }
            switch kind {
            case "histogram":
                let withoutLE = labels.replacingOccurrences(of: #",?le="[^"]*""#, with: "", options: .regularExpression)
                if sampleName == family + "_bucket" {
                    guard labels.contains("le=\"") else { problems.append("line \(i + 1): bucket without le"); continue }
                    if value < (lastBucket[withoutLE] ?? 0) { problems.append("line \(i + 1): bucket count decreases") }
                    lastBucket[withoutLE] = value
                    if labels.contains("le=\"+Inf\"") { infBucket[withoutLE] = value; lastBucket[withoutLE] = nil }
                } else if sampleName == family + "_count" {
                    if infBucket[withoutLE] != value { problems.append("line \(i + 1): _count differs from the +Inf bucket") }
                } else if sampleName != family + "_sum" {
                    problems.append("line \(i + 1): \(sampleName) is not part of histogram \(family)")
                }
            default:
                if sampleName != family { problems.append("line \(i + 1): \(sampleName) under TYPE of \(family)") }
                if kind == "counter" && value < 0 { problems.append("line \(i + 1): negative counter") }
            }
        }
        return problems
    }

    /// Parses `text` with `prometheus_client.parser`; returns nil when it parsed, else the
    /// parser's complaint (or why the parser could not run).
    public static func referenceParserComplaint(_ text: String) -> String? {
        let script = """
            import sys
            from prometheus_client.parser import text_string_to_metric_families
            families = list(text_string_to_metric_families(sys.stdin.read()))
            print(len(families))
            """
        do {
            let (status, out, err) = try runCommand("python3", ["-c", script], stdin: text)
            return status == 0 && Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) != nil
                ? nil : "prometheus_client refused the text (status \(status)): \(err)"
        } catch {
            return "python3 could not run: \(error)"
        }
    }
}
