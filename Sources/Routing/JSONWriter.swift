import Foundation

/// Deterministic JSON output for everything Routing writes (VoIP and alert payloads, outcome
/// records): keys in the order the caller appends them (or sorted by UTF-8 bytes for the
/// producer's dictionaries), no whitespace, `/` and non-ASCII left as they are, control
/// characters escaped. The same value always gives the same bytes, on every platform.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(256) }

    mutating func raw(_ s: String) { bytes.append(contentsOf: s.utf8) }

    mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                raw("\\u00")
                bytes.append(hex[Int(c >> 4)])
                bytes.append(hex[Int(c & 0xF)])
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func int(_ v: Int64) { raw(String(v)) }

    /// An object whose members are written by `body` through `ObjectWriter`.
    mutating func object(_ body: (inout ObjectWriter) -> Void) {
        var o = ObjectWriter(writer: self)
        bytes = []
        o.writer.bytes.append(UInt8(ascii: "{"))
        body(&o)
        o.writer.bytes.append(UInt8(ascii: "}"))
        self = o.writer
    }

    /// A value parsed by `JSONSerialization` (dictionaries with keys sorted by UTF-8 bytes).
    mutating func any(_ value: Any) {
        switch value {
        case let s as String:
            string(s)
        case let n as NSNumber:
            number(n)
        case let d as [String: Any]:
            bytes.append(UInt8(ascii: "{"))
            for (i, key) in d.keys.sorted(by: JSONWriter.utf8Less).enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                string(key)
                bytes.append(UInt8(ascii: ":"))
                any(d[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        case let a as [Any]:
            bytes.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                any(element)
            }
            bytes.append(UInt8(ascii: "]"))
        default:
            // NSNull, the only other thing JSONSerialization produces.
            raw("null")
        }
    }

    private mutating func number(_ n: NSNumber) {
        switch JSONNumber(n) {
        case let .boolean(b): raw(b ? "true" : "false")
        case let .integer(i): int(i)
        case let .unsigned(u): raw(String(u))
        case let .floating(d):
            // Swift's shortest round-trip form ("1.5", "1e-07", "1e+300") is valid JSON.
            raw(d.isFinite ? String(d) : "null")
        }
    }

    static func utf8Less(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

/// Writes the members of one JSON object; `JSONWriter.object` adds the braces.
struct ObjectWriter {
    fileprivate var writer: JSONWriter
    private var count = 0

    fileprivate init(writer: JSONWriter) { self.writer = writer }

    private mutating func key(_ k: String) {
        if count > 0 { writer.raw(",") }
        count += 1
        writer.string(k)
        writer.raw(":")
    }

    mutating func string(_ k: String, _ v: String?) {
        guard let v else { return }
        key(k); writer.string(v)
    }

    mutating func int(_ k: String, _ v: Int64?) {
        guard let v else { return }
        key(k); writer.int(v)
    }

    mutating func object(_ k: String, _ body: (inout ObjectWriter) -> Void) {
        key(k); writer.object(body)
    }

    mutating func array<T>(_ k: String, _ elements: [T], _ body: (inout JSONWriter, T) -> Void) {
        key(k)
        writer.raw("[")
        for (i, e) in elements.enumerated() {
            if i > 0 { writer.raw(",") }
            body(&writer, e)
        }
        writer.raw("]")
    }

    mutating func any(_ k: String, _ v: Any) {
        key(k); writer.any(v)
    }
}

/// What a number parsed by `JSONSerialization` really is. On Linux `true` arrives as an
/// `NSNumber` (`__NSCFBoolean`, objCType "c") that also casts to `Int` and `Double`, and `1`
/// casts to `Bool`; the objCType tells them apart: "c"/"B" boolean, "d"/"f" floating,
/// "Q" unsigned above `Int64.max`, anything else a signed integer.
enum JSONNumber: Equatable {
    case boolean(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case floating(Double)

    init(_ n: NSNumber) {
        switch String(cString: n.objCType) {
        case "c", "B": self = .boolean(n.boolValue)
        case "d", "f": self = .floating(n.doubleValue)
        case "Q", "L":
            let u = n.uint64Value
            self = u <= UInt64(Int64.max) ? .integer(Int64(u)) : .unsigned(u)
        default: self = .integer(n.int64Value)
        }
    }
}
