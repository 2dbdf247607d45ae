import Foundation

/// A JSON value for output whose key order is part of the format (scripts read `--json`
/// lines; people read the same keys in the same order every time).
public indirect enum OrderedJSON: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)
    case array([OrderedJSON])
    case object([(String, OrderedJSON)])
    /// JSON text inserted as is; the caller guarantees it is valid JSON.
    case raw(String)

    /// An optional string, `null` when nil.
    public static func string(_ s: String?) -> OrderedJSON { s.map { .string($0) } ?? .null }
    /// An optional integer, `null` when nil.
    public static func int<N: BinaryInteger>(_ n: N?) -> OrderedJSON { n.map { .int(Int64($0)) } ?? .null }

    /// Compact text, keys in the order given.
    public var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .int(n): out += String(n)
        case let .string(s): OrderedJSON.quote(s, into: &out)
        case let .raw(text): out += text
        case let .array(items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case let .object(fields):
            out += "{"
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out += "," }
                OrderedJSON.quote(key, into: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    /// Appends `s` as a JSON string literal.
    static func quote(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Reading and re-indenting JSON text without reordering it.
public enum PrettyJSON {
    /// Whether `text` is one valid JSON value (objects, arrays and scalars alike).
    public static func isValid(_ text: String) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil
    }

    /// `text` (valid JSON) re-indented with two spaces per level, keys and values in their
    /// original order and spelling; nil when `text` is not valid JSON. Every line but the
    /// first starts with `margin`.
    public static func pretty(_ text: String, margin: String = "") -> String? {
        guard isValid(text) else { return nil }
        let chars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        var depth = 0
        var inString = false
        var escaped = false
        func newline() {
            out.append(contentsOf: ("\n" + margin + String(repeating: "  ", count: depth)).unicodeScalars)
        }
        var i = 0
        while i < chars.count {
            let c = chars[i]
            i += 1
            if inString {
                out.append(c)
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inString = false }
                continue
            }
            switch c {
            case "\"":
                inString = true
                out.append(c)
            case "{", "[":
                // An empty container stays on one line.
                var j = i
                while j < chars.count, [" ", "\n", "\r", "\t"].contains(chars[j]) { j += 1 }
                if j < chars.count, chars[j] == (c == "{" ? "}" : "]") {
                    out.append(c)
                    out.append(chars[j])
                    i = j + 1
                } else {
                    out.append(c)
                    depth += 1
                    newline()
                }
            case "}", "]":
                depth -= 1
                newline()
                out.append(c)
            case ",":
                out.append(c)
                newline()
            case ":":
                out.append(contentsOf: ": ".unicodeScalars)
            case " ", "\n", "\r", "\t":
                break
            default:
                out.append(c)
            }
        }
        return String(out)
    }

    /// Parses `text` as a JSON object; nil when it is not one.
    public static func object(_ text: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }
}

/// Typed reads of JSONSerialization values (NSNumber booleans are not integers).
enum JSONRead {
    static func int(_ value: Any?) -> Int64? {
        guard let number = value as? NSNumber, !(value is String) else { return nil }
        if type(of: number) == type(of: NSNumber(value: true)) { return nil }
        let d = number.doubleValue
        guard d.rounded() == d, abs(d) < 9.0e15 else { return nil }
        return number.int64Value
    }

    static func string(_ value: Any?) -> String? { value as? String }
}
