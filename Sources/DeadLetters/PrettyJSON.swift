import Foundation
import JSONOutput

/// Reading and re-indenting JSON text without reordering it.
public enum PrettyJSON {
    /// Whether `text` is one valid JSON value (objects, arrays and scalars alike).
    public static func isValid(_ text: String) -> Bool {
        EmbeddedJSON(text) != nil
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
