// VisibleText: how pushgw shows text it did not write (call ids, reasons, events, APNs'
// answers) to people: the command line, the log and the operators' console all make control
// and bidi characters visible through this one file. A leaf: no dependencies.

/// Text that came from Redis, producers or APNs, made safe to print: a terminal must never
/// receive a character that it acts on or that hides or reorders what follows. A call id
/// holding ESC, OSC 52 or a right-to-left override would otherwise recolour the screen, write
/// the clipboard, or show one reason and call id as another.
///
/// Such characters are C0 controls (ESC, BEL, …), DEL, C1 controls (U+0080–U+009F) and the
/// bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C). Each is
/// written as `\uXXXX`: visible, and the way JSON escapes it, so a line of JSON stays the same
/// JSON (such characters can only stand inside its strings). `CommandOutput` applies this to every
/// line the command line prints, `Log` to every log line and the operators' console to every
/// value it shows from an event; the `dead` verbs also apply it to
/// each field they print (`field`), so a line break in a call id cannot start a fake row.
public enum TerminalText {
    /// True for a character a terminal acts on or that reorders or hides text (see above).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v < 0x20 || (v >= 0x7F && v <= 0x9F) || (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069)
            || v == 0x200E || v == 0x200F || v == 0x061C
    }

    /// `text` with every control character written as `\uXXXX`, line feeds and tabs kept (a
    /// multi-line message, an indented help text).
    public static func line(_ text: String) -> String {
        escaped(text, keepingLines: true)
    }

    /// `text` with every control character written as `\uXXXX`, line feeds and tabs included:
    /// one field of a line (a table cell, a value after a label).
    public static func field(_ text: String) -> String {
        escaped(text, keepingLines: false)
    }

    /// Bytes that should be UTF-8 text as one field: each byte that is not part of valid UTF-8
    /// written as `\xNN`, then as `field`.
    public static func field(bytes: [UInt8]) -> String {
        var out = ""
        var parser = Unicode.UTF8.ForwardParser()
        var input = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &input) {
            case let .valid(encoded):
                append(Unicode.UTF8.decode(encoded), to: &out, keepingLines: false)
                offset += encoded.count
            case let .error(length):
                for b in bytes[offset..<offset + length] { out += "\\x" + hex(UInt32(b), digits: 2) }
                offset += length
            case .emptyInput:
                return out
            }
        }
    }

    private static func escaped(_ text: String, keepingLines: Bool) -> String {
        // Nearly every line is plain ASCII without controls: no copy then.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F || (keepingLines && ($0 == 0x0A || $0 == 0x09)) }) { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars { append(scalar, to: &out, keepingLines: keepingLines) }
        return out
    }

    private static func append(_ scalar: Unicode.Scalar, to out: inout String, keepingLines: Bool) {
        if isControl(scalar) && !(keepingLines && (scalar == "\n" || scalar == "\t")) {
            out += "\\u" + hex(scalar.value, digits: 4)
        } else {
            out.unicodeScalars.append(scalar)
        }
    }

    private static func hex(_ v: UInt32, digits: Int) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}
