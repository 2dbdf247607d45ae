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
    static func appendHTML(_ text: String, keepingLines: Bool = false, to out: inout [UInt8]) {
        appendEscaped(keepingLines ? TerminalText.line(text) : TerminalText.field(text), to: &out)
    }

    /// A quoted attribute value (`value="…"`, `href="…"`): as text, its line feeds made
    /// visible too. The renderer always quotes with `"`.
    static func appendAttribute(_ text: String, to out: inout [UInt8]) {
        appendEscaped(TerminalText.field(text), to: &out)
    }

    /// `appendHTML` as a string.
    static func html(_ text: String, keepingLines: Bool = false) -> String {
        var out: [UInt8] = []
        appendHTML(text, keepingLines: keepingLines, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `appendAttribute` as a string.
    static func attribute(_ text: String) -> String {
        var out: [UInt8] = []
        appendAttribute(text, to: &out)
        return String(decoding: out, as: UTF8.self)
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

    /// Appends `text`'s UTF-8 with the five characters of markup written as entities. They are
    /// all ASCII, so a byte equal to one of them is that character, never part of another's
    /// encoding: the runs between them are copied as they are.
    private static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            var run = 0
            for i in bytes.indices {
                let entity: StaticString
                switch bytes[i] {
                case 0x26: entity = "&amp;"
                case 0x3C: entity = "&lt;"
                case 0x3E: entity = "&gt;"
                case 0x22: entity = "&quot;"
                case 0x27: entity = "&#39;"
                default: continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
                entity.withUTF8Buffer { out.append(contentsOf: $0) }
                run = i + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        }
    }

    private static func unicodeEscape(_ v: UInt32) -> String { "\\u" + hex(v, digits: 4) }

    private static func hex(_ v: UInt32, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}
