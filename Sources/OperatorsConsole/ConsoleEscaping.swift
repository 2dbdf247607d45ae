import HTTPMessages
import VisibleText

/// Every value the console shows that it did not write itself (ids, tokens, names, reasons,
/// event JSON: anything a producer, Redis or APNs gave) goes through one of these functions,
/// one per context of the page, and through nothing else: text and attribute values through
/// the renderer of `Node` only, query and path components where a link is built. Pure.
///
/// Control and bidi characters are first made visible as `\uXXXX`, as the command line shows
/// them (`TerminalText`): a right-to-left override in a call id must not reorder a row here
/// either.
public enum ConsoleEscaping {
    /// Text between tags (`<td>…</td>`, `<pre>…</pre>`): `&`, `<`, `>` and both quotes escaped
    /// (quotes are harmless there, but then no quote of a value reaches a page unescaped in
    /// any context, which a check of a page can rely on), controls made visible (line feeds
    /// kept when `keepingLines`, for a multi-line `<pre>`). `Node.render` calls it.
    static func html(_ text: String, keepingLines: Bool = false) -> String {
        escape(keepingLines ? TerminalText.line(text) : TerminalText.field(text))
    }

    /// A quoted attribute value (`value="…"`, `href="…"`): as text, its line feeds made
    /// visible too. The renderer always quotes with `"`.
    static func attribute(_ text: String) -> String {
        escape(TerminalText.field(text))
    }

    /// A value inside a JSON data block of a page (`<script type="application/json">`, never
    /// executed): a JSON string literal whose `<`, `>`, `&`, U+2028 and U+2029 are `\uXXXX`,
    /// so no `</script>` or `<!--` can end or change the block.
    public static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "<", ">", "&", "'", "\u{2028}", "\u{2029}": out += unicodeEscape(scalar.value)
            default:
                if scalar.value < 0x20 || TerminalText.isControl(scalar) {
                    out += unicodeEscape(scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// One component of a query string or path (`app=…`, `/console/dead/APP/ID`), as
    /// `FormData.component` encodes it: an id cannot add a parameter, a path segment or a
    /// scheme (`javascript:` stays `javascript%3A`).
    public static func queryComponent(_ text: String) -> String { FormData.component(text) }

    /// A device token as the command line shows it: its last 8 characters after `…`, so a
    /// page (or a screenshot of it) never carries a whole token.
    public static func shortToken(_ token: String?) -> String {
        guard let token, !token.isEmpty else { return "-" }
        return token.count <= 8 ? token : "…" + String(token.suffix(8))
    }

    private static func escape(_ text: String) -> String {
        // Most values (entry ids, app ids, outcome names) need nothing: no copy then.
        if !text.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 }) {
            return text
        }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func unicodeEscape(_ v: UInt32) -> String { "\\u" + hex(v, digits: 4) }

    private static func hex(_ v: UInt32, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}
