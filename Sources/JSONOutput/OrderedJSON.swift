// JSONOutput: the one writer of JSON off the hot path (docs/architecture.md, "JSON: which code
// reads and writes it"): the log lines, the command line's and the console's `--json` output
// and audit records, the provider token's header and claims, and the strings of the APNs
// simulator's request log (`OrderedJSON.quote`). Owns `OrderedJSON` and
// `EmbeddedJSON`. Must not: read JSON into values (Foundation's `JSONSerialization` does, off the hot path;
// Routing's `JSONParser` on it), or run per event on the loop (Routing's `JSONWriter` does).
// No dependency, so every module that writes JSON for people or scripts can use it.
import Foundation

/// A JSON value for output: keys in the order given (scripts read `--json` lines; people read
/// the same keys in the same order every time), or sorted (`init(loggable:)`). Every string and
/// key is escaped by the writer (`"`, `\\`, control characters), `/` and non-ASCII are left
/// as they are (no `\/`); the one piece of JSON text written as it is, `EmbeddedJSON`, was
/// checked to be JSON when it was made.
public indirect enum OrderedJSON: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    /// A finite number; written as an integer when it is one below 2^53 (as
    /// `JSONSerialization` wrote it: `1`, not `1.0`), else in Swift's shortest spelling.
    case double(Double)
    case string(String)
    case array([OrderedJSON])
    case object([(String, OrderedJSON)])
    /// JSON text that was checked to be one JSON value (`EmbeddedJSON.init?`), written as it is.
    case embedded(EmbeddedJSON)

    /// An optional string, `null` when nil.
    public static func string(_ s: String?) -> OrderedJSON { s.map { .string($0) } ?? .null }
    /// An optional integer, `null` when nil.
    public static func int<N: BinaryInteger>(_ n: N?) -> OrderedJSON { n.map { .int(Int64($0)) } ?? .null }

    /// A log line's fields (`[String: Any]` and what it holds), with keys sorted: strings,
    /// booleans, integers, floating-point numbers (non-finite ones as strings), arrays,
    /// dictionaries with string keys, nil as `null`; any other value as its description, so a
    /// field never drops its line.
    public init(loggable value: Any) {
        switch value {
        case let s as String: self = .string(s)
        case let s as Substring: self = .string(String(s))
        case let b as Bool: self = .bool(b)
        case let n as Int: self = .int(Int64(n))
        case let n as any BinaryInteger: self = Int64(exactly: n).map { .int($0) } ?? .string(String(describing: n))
        case let d as Double: self = d.isFinite ? .double(d) : .string(String(d))
        case let a as [Any]: self = .array(a.map { OrderedJSON(loggable: $0) })
        case let o as [String: Any]:
            self = .object(o.sorted { $0.key < $1.key }.map { ($0.key, OrderedJSON(loggable: $0.value)) })
        case let f as Float: self = f.isFinite ? .double(Double(f)) : .string(String(f))
        default:
            // An optional boxed in `Any` (a field of type `T?`): its value, or null.
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .optional {
                self = mirror.children.first.map { OrderedJSON(loggable: $0.value) } ?? .null
            } else {
                self = .string(String(describing: value))
            }
        }
    }

    /// Compact text, keys in the order given. Written as UTF-8 bytes and made a `String` once
    /// (appending piece by piece to a `String` cost ~40,000 instructions for a log line).
    public var text: String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case let .bool(b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case let .int(n): out.append(contentsOf: String(n).utf8)
        case let .double(d):
            precondition(d.isFinite, "JSON has no infinite or NaN number")
            if d.rounded() == d && abs(d) < 9.007_199_254_740_992e15 {
                out.append(contentsOf: String(Int64(d)).utf8)
            } else {
                out.append(contentsOf: String(d).utf8)
            }
        case let .string(s): OrderedJSON.quote(s, into: &out)
        case let .embedded(json): out.append(contentsOf: json.text.utf8)
        case let .array(items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(fields):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                OrderedJSON.quote(key, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `s` as a JSON string literal: `"`, `\\` and the control characters escaped,
    /// every other byte as it is. Also for writers of JSON lines byte by byte (the simulator's
    /// request log).
    public static func quote(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            for c in utf8 {
                switch c {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(c)
                case UInt8(ascii: "\n"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: "\\u00".utf8)
                    out.append(hex[Int(c >> 4)])
                    out.append(hex[Int(c & 0xF)])
                default: out.append(c)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// JSON text kept as it was written (a dead letter's event, shown with its keys and numbers as
/// the producer spelled them), made only from text that is one JSON value.
public struct EmbeddedJSON: Sendable {
    /// The text, one valid JSON value.
    public let text: String

    /// Nil when `text` is not one JSON value (objects, arrays and scalars alike).
    public init?(_ text: String) {
        guard (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil else { return nil }
        self.text = text
    }
}
