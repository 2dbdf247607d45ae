import EventLoop
import Foundation

/// A JSON value as `JSONParser` reads it: the input of `CallEvent.decode`, and what the VoIP
/// payload is written back from. A plain enum, so reading a field costs a `switch` rather
/// than the dynamic casts of `Any` that `JSONSerialization`'s output needs.
///
/// Numbers keep the distinctions `JSONSerialization` made, since the VoIP payload is written
/// back as it used to be: `1` is `.int`, `1.0` and `1e2` are `.double` (written `1.0`, `100.0`).
enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits (see `JSONParser.number`).
    case int(Int64)
    /// A number written without fraction or exponent above `Int64.max` that fits in 64 bits.
    case uint(UInt64)
    /// A number with a fraction or an exponent, or an integer too large for `.int`/`.uint`.
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// The members in document order, duplicates kept; see `JSONObject`.
    case object(JSONObject)

    /// The JSON type, for messages.
    var kind: JSONKind {
        switch self {
        case .null: return .null
        case .bool: return .boolean
        case .int, .uint, .double: return .number
        case .string: return .string
        case .array: return .array
        case .object: return .object
        }
    }
}

/// The JSON type of a value, for messages ("expected a string, got number").
enum JSONKind: String {
    case string, boolean, number, object, array, null
}

/// One member of a JSON object.
struct JSONMember: Equatable, Sendable {
    let key: String
    var value: JSONValue
}

/// The members of a JSON object in document order. A key written twice reads as a dictionary
/// built member by member would (which is what `JSONSerialization` did): the last value wins,
/// under the first spelling of the key, keys being equal when Swift's `String ==` says so.
struct JSONObject: Equatable, Sendable {
    var members: [JSONMember]

    /// The value of the last member named `name`; nil when there is none. `name` is made of
    /// ASCII letters, digits and `_` other than `K`, and is compared byte by byte, which for
    /// such a name agrees with `String ==` (which takes canonical equivalents as equal): the
    /// only ASCII characters with another canonical spelling are `K` (U+212A KELVIN SIGN), `;`
    /// and `` ` ``, so no other string normalizes to such a name.
    func last(_ name: StaticString) -> JSONValue? {
        let n = name.utf8CodeUnitCount
        var i = members.endIndex
        while i > members.startIndex {
            i -= 1
            guard members[i].key.utf8.count == n else { continue }
            if members[i].key.withUTF8Bytes({ memcmp($0.baseAddress!, name.utf8Start, n) == 0 }) { return members[i].value }
        }
        return nil
    }

    /// The members with duplicates merged (first key, last value), in order of first appearance.
    var unique: [JSONMember] {
        // Pairwise below 16 members (no allocation); a dictionary above, so 10,000 keys in a
        // 64 KiB event cannot cost 50 million comparisons.
        if members.count <= 16 {
            var hasDuplicate = false
            outer: for i in members.indices {
                for j in members.indices where j > i && members[i].key == members[j].key {
                    hasDuplicate = true
                    break outer
                }
            }
            guard hasDuplicate else { return members }
        }
        var out: [JSONMember] = []
        var positions: [String: Int] = [:]
        out.reserveCapacity(members.count)
        for m in members {
            if let p = positions[m.key] {
                out[p].value = m.value
            } else {
                positions[m.key] = out.count
                out.append(m)
            }
        }
        return out
    }
}

/// Why bytes are not JSON: a short problem, the byte offset where it was found, and the keys
/// of the object members it was found in (outermost first; empty at the top level).
struct JSONSyntaxError: Error, Equatable, CustomStringConvertible {
    let problem: String
    let offset: Int
    var keys: [String] = []
    var description: String { "\(problem) at byte \(offset)" }
    /// The member keys joined with dots (`voip.callerName`), quoted at most in part
    /// (`InvalidEvent.quote`: a path 64 levels deep is cut); nil at the top level.
    var field: String? { keys.isEmpty ? nil : InvalidEvent.quote(keys.joined(separator: ".")) }
}

/// A single-pass recursive-descent parser of RFC 8259 JSON over UTF-8 bytes, built to accept
/// exactly what `JSONSerialization.jsonObject(with:options: .fragmentsAllowed)` accepted on
/// Linux (which `CallEvent.decode` used before) and to read it the same way:
///
/// - whitespace is space, tab, LF and CR; a UTF-8 byte order mark at the start is skipped;
/// - a trailing comma before `]` or `}` is accepted (`[1,]`, `{"a":1,}`), an empty one is not;
/// - strings must be valid UTF-8 without raw control characters; `\uXXXX` surrogates must pair;
///   a byte order mark that opens a run of raw bytes (at the start, or just after an escape)
///   is dropped, as `String(bytes:encoding:)` did for each run;
/// - numbers follow the JSON grammar (no leading zero, no `+`, no bare `.`); an integer is
///   `.int` when it fits, `.uint` when it is positive and fits in 64 bits, and `.double`
///   otherwise, except that a negative integer of 19 digits or more is `.double`; a double is
///   rounded as `JSONSerialization` rounded it (`double(_:)`), and refused when infinite;
/// - input in UTF-16 or UTF-32 (told by a byte order mark or by zero bytes among the first
///   four, the rule of `JSONSerialization`) is converted to UTF-8 first.
///
/// One deliberate difference: nesting is bounded at `maxDepth` (64) levels, not 512, which
/// also bounds the recursion. Input size is bounded by the caller (`CallEvent.maxEventBytes`).
/// `strict` parsing refuses trailing commas, as RFC 8259 does (the config file: `JSONStrictness`).
struct JSONParser {
    /// Deepest nesting of arrays and objects accepted.
    static let maxDepth = 64

    private let p: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    /// Refuse a trailing comma (`[1,]`) instead of accepting it.
    private let strict: Bool
    /// Reused for strings with escapes.
    private var scratch: [UInt8] = []

    private init(_ p: UnsafeBufferPointer<UInt8>, strict: Bool) {
        self.p = p
        self.strict = strict
    }

    /// Parses one JSON text (any value at the top, as with `.fragmentsAllowed`).
    static func parse(_ bytes: [UInt8], strict: Bool = false) throws(JSONSyntaxError) -> JSONValue {
        if let utf8 = try convertedToUTF8(bytes) { return try parseUTF8(utf8, skippingBOM: false, strict: strict) }
        return try parseUTF8(bytes, skippingBOM: true, strict: strict)
    }

    private static func parseUTF8(_ bytes: [UInt8], skippingBOM: Bool, strict: Bool) throws(JSONSyntaxError) -> JSONValue {
        let result: Result<JSONValue, JSONSyntaxError> = bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer, strict: strict)
            return Result { () throws(JSONSyntaxError) in try parser.document(skippingBOM: skippingBOM) }
        }
        return try result.get()
    }

    // MARK: Structure

    private mutating func document(skippingBOM: Bool) throws(JSONSyntaxError) -> JSONValue {
        if skippingBOM && p.count >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF { i = 3 }
        skipWhitespace()
        let v = try value()
        skipWhitespace()
        guard i == p.count else { throw unexpected("after the value") }
        return v
    }

    private mutating func value() throws(JSONSyntaxError) -> JSONValue {
        guard i < p.count else { throw fail("unexpected end of input") }
        switch p[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw unexpected("where a value should start")
        }
    }

    private mutating func object() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        var members: [JSONMember] = []
        skipWhitespace()
        if i < p.count && p[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return .object(JSONObject(members: members))
        }
        // Room for the usual event or VoIP dictionary at once; the tree is short-lived.
        members.reserveCapacity(8)
        while true {
            guard i < p.count else { throw fail("unexpected end of input in an object") }
            guard p[i] == UInt8(ascii: "\"") else { throw unexpected("where a member name should start") }
            let key = try string()
            skipWhitespace()
            guard i < p.count else { throw fail("unexpected end of input in an object") }
            guard p[i] == UInt8(ascii: ":") else { throw unexpected("after a member name (expected ':')") }
            i += 1
            skipWhitespace()
            let v: JSONValue
            do {
                v = try value()
            } catch {
                var inside = error
                inside.keys.insert(key, at: 0)
                throw inside
            }
            members.append(JSONMember(key: key, value: v))
            if try endOfMember(closing: UInt8(ascii: "}")) { break }
        }
        depth -= 1
        return .object(JSONObject(members: members))
    }

    private mutating func array() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < p.count && p[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return .array(elements)
        }
        elements.reserveCapacity(8)
        while true {
            elements.append(try value())
            if try endOfMember(closing: UInt8(ascii: "]")) { break }
        }
        depth -= 1
        return .array(elements)
    }

    /// After an element: true past the closing bracket, false past a comma (whitespace skipped
    /// both times). A comma directly followed by the closing bracket ends the container too.
    private mutating func endOfMember(closing: UInt8) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard i < p.count else { throw fail("unexpected end of input in an \(closing == UInt8(ascii: "]") ? "array" : "object")") }
        if p[i] == closing {
            i += 1
            return true
        }
        guard p[i] == UInt8(ascii: ",") else {
            throw unexpected("(expected ',' or '\(Character(Unicode.Scalar(closing)))')")
        }
        i += 1
        skipWhitespace()
        if i < p.count && p[i] == closing {
            guard !strict else { throw fail("a trailing comma before '\(Character(Unicode.Scalar(closing)))'") }
            i += 1
            return true
        }
        return false
    }

    /// Steps past an opening bracket, one level deeper.
    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        guard depth <= JSONParser.maxDepth else { throw fail("nested deeper than \(JSONParser.maxDepth) levels") }
        i += 1
    }

    /// `true`, `false` or `null`; `p[i]` is its first letter.
    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let n = word.utf8CodeUnitCount
        for k in 0..<n {
            guard i < p.count else { throw fail("unexpected end of input in \(word)") }
            guard p[i] == word.utf8Start[k] else { throw unexpected("in \(word)") }
            i += 1
        }
    }

    private mutating func skipWhitespace() {
        while i < p.count {
            switch p[i] {
            case 0x20, 0x0A, 0x0D, 0x09: i += 1
            default: return
            }
        }
    }

    // MARK: Strings

    /// A string; `p[i]` is its opening quote. Strings without escapes, nearly all of them,
    /// become a `String` straight from the input bytes.
    private mutating func string() throws(JSONSyntaxError) -> String {
        i += 1
        let start = i
        let n = p.count
        let base = p.baseAddress!  // not nil: there is at least the opening quote
        var k = i
        var bits: UInt64 = 0  // every byte or-ed in: bit 7 set when one is not ASCII
        // 8 bytes at a time while none is a quote, a backslash or a control character.
        while n - k >= 8 {
            let w = UnsafeRawPointer(base + k).loadUnaligned(as: UInt64.self)
            if JSONWriter.needsEscape(w) { break }
            bits |= w
            k += 8
        }
        while k < n {
            let c = base[k]
            if c == UInt8(ascii: "\"") {
                let first = JSONParser.afterByteOrderMark(base, start, k)
                let bytes = UnsafeBufferPointer(start: base + first, count: k - first)
                i = k + 1
                if bits & 0x8080_8080_8080_8080 == 0 { return String(decoding: bytes, as: UTF8.self) }
                guard let s = String(validating: bytes, as: UTF8.self) else { throw invalidUTF8(at: start) }
                return s
            }
            i = k
            if c == UInt8(ascii: "\\") { return try escapedString(from: start) }
            if c < 0x20 { throw fail("unescaped control character in a string") }
            bits |= UInt64(c)
            k += 1
        }
        i = k
        throw fail("unterminated string", at: start - 1)
    }

    /// The rest of a string that has an escape at `p[i]`, unescaped into `scratch`.
    private mutating func escapedString(from start: Int) throws(JSONSyntaxError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: p[JSONParser.afterByteOrderMark(p.baseAddress!, start, i)..<i]))
        var segmentStart = false  // just after an escape
        while i < p.count {
            if segmentStart {
                segmentStart = false
                i = JSONParser.afterByteOrderMark(p.baseAddress!, i, p.count)
                guard i < p.count else { break }
            }
            let c = p[i]
            switch c {
            case UInt8(ascii: "\""):
                i += 1
                guard let s = String(validating: scratch, as: UTF8.self) else { throw invalidUTF8(at: start) }
                return s
            case UInt8(ascii: "\\"):
                i += 1
                guard i < p.count else { break }
                let e = p[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(e)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"): try unicodeEscape()
                default:
                    i -= 2
                    throw fail("invalid escape sequence")
                }
                segmentStart = true
            case 0x00..<0x20:
                throw fail("unescaped control character in a string")
            default:
                // Raw bytes are checked as UTF-8 with the whole string: an escape always
                // produces a complete scalar, so it cannot make an invalid sequence valid.
                scratch.append(c)
                i += 1
            }
        }
        throw fail("unterminated string", at: start - 1)
    }

    /// `from`, or past the UTF-8 byte order mark that starts `base[from..<end]`.
    /// `JSONSerialization` made a string of each run of raw bytes between quotes and escapes
    /// with `String(bytes:encoding: .utf8)`, which drops such a mark; so does this parser.
    private static func afterByteOrderMark(_ base: UnsafePointer<UInt8>, _ from: Int, _ end: Int) -> Int {
        end - from >= 3 && base[from] == 0xEF && base[from + 1] == 0xBB && base[from + 2] == 0xBF ? from + 3 : from
    }

    /// `\uXXXX` (its `\u` consumed), or a surrogate pair `\uD83D\uDE00`, appended as UTF-8.
    private mutating func unicodeEscape() throws(JSONSyntaxError) {
        let first = try hex4()
        var scalar: UInt32
        switch first {
        case 0xD800...0xDBFF:
            guard p.count - i >= 2, p[i] == UInt8(ascii: "\\"), p[i + 1] == UInt8(ascii: "u") else {
                throw fail("unpaired surrogate \\u\(String(first, radix: 16))")
            }
            i += 2
            let second = try hex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw fail("unpaired surrogate \\u\(String(first, radix: 16))") }
            scalar = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
        case 0xDC00...0xDFFF:
            throw fail("unpaired surrogate \\u\(String(first, radix: 16))")
        default:
            scalar = UInt32(first)
        }
        // Unicode.Scalar accepts every value built above.
        scratch.append(contentsOf: UTF8.encode(Unicode.Scalar(scalar)!)!)
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt16 {
        guard p.count - i >= 4 else { throw fail("unexpected end of input in a \\u escape") }
        var v: UInt16 = 0
        for _ in 0..<4 {
            let c = p[i]
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
            default: throw unexpected("in a \\u escape")
            }
            v = v << 4 | UInt16(d)
            i += 1
        }
        return v
    }

    // MARK: Numbers

    /// A number; `p[i]` is `-` or a digit. See the type's comment for which case it becomes.
    private mutating func number() throws(JSONSyntaxError) -> JSONValue {
        let start = i
        let negative = p[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var magnitude: UInt64 = 0
        var overflow = false
        let digitsStart = i
        guard i < p.count, isDigit(p[i]) else {
            throw i < p.count ? unexpected("in a number") : fail("unexpected end of input in a number")
        }
        if p[i] == UInt8(ascii: "0") {
            i += 1
            if i < p.count && isDigit(p[i]) { throw fail("number with a leading zero") }
        } else {
            while i < p.count, isDigit(p[i]) {
                let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(p[i] &- UInt8(ascii: "0")))
                magnitude = sum
                overflow = overflow || o1 || o2
                i += 1
            }
        }
        let digits = i - digitsStart
        var integral = true
        if i < p.count && p[i] == UInt8(ascii: ".") {
            integral = false
            i += 1
            try digitRun("after the decimal point")
        }
        if i < p.count && (p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E")) {
            integral = false
            i += 1
            if i < p.count && (p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-")) { i += 1 }
            try digitRun("in the exponent")
        }
        if integral {
            if negative {
                if digits <= 18 { return .int(-Int64(magnitude)) }
            } else if !overflow {
                return magnitude <= UInt64(Int64.max) ? .int(Int64(magnitude)) : .uint(magnitude)
            }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: p[start..<i]), as: UTF8.self)
        guard let d = JSONParser.double(text) else { throw fail("number \(InvalidEvent.quote(text)) is out of range", at: start) }
        return .double(d)
    }

    /// The double `JSONSerialization` made of a number that is not a 64-bit integer, rounding
    /// included, so that VoIP payloads keep their bytes: a number written with more than 17
    /// characters before its exponent (a lower-case `e`; sign and point count) and an exponent
    /// within ±128 went through `Decimal`, whose conversion to `Double` is not the nearest
    /// (`0.30000000000000004` reads as 0.3000000000000001); any other through `Double(_:)`.
    /// Nil when the result is infinite.
    static func double(_ text: String) -> Double? {
        let e = text.utf8.firstIndex(of: UInt8(ascii: "e"))
        let mantissaLength = text.utf8.distance(from: text.utf8.startIndex, to: e ?? text.utf8.endIndex)
        var exponent = 0
        if let e, let parsed = Int(text[text.utf8.index(after: e)...]) { exponent = parsed }
        if mantissaLength > 17, (-128...127).contains(exponent), let decimal = Decimal(string: text), decimal.isFinite {
            return NSDecimalNumber(decimal: decimal).doubleValue
        }
        guard let d = Double(text), d.isFinite else { return nil }
        return d
    }

    private mutating func digitRun(_ place: String) throws(JSONSyntaxError) {
        guard i < p.count else { throw fail("unexpected end of input in a number") }
        guard isDigit(p[i]) else { throw unexpected("\(place) (expected a digit)") }
        while i < p.count && isDigit(p[i]) { i += 1 }
    }

    private func isDigit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }

    // MARK: Errors

    private func fail(_ problem: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(problem: problem, offset: offset ?? i)
    }

    /// "unexpected 'x' <place>", or "unexpected byte 0xFF" for what is not printable ASCII.
    private func unexpected(_ place: String) -> JSONSyntaxError {
        let c = p[i]
        let shown = (0x21..<0x7F).contains(c) ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x\(String(c, radix: 16, uppercase: true))"
        return fail("unexpected \(shown) \(place)")
    }

    private func invalidUTF8(at start: Int) -> JSONSyntaxError {
        fail("invalid UTF-8 in a string", at: start)
    }

    // MARK: Other encodings

    /// The input converted to UTF-8 when a byte order mark or the zero bytes among the first
    /// four say UTF-16 or UTF-32 (`JSONSerialization`'s rule); nil for UTF-8 input.
    static func convertedToUTF8(_ b: [UInt8]) throws(JSONSyntaxError) -> [UInt8]? {
        guard let (encoding, skip) = otherEncoding(b) else { return nil }
        guard let s = String(bytes: b[skip...], encoding: encoding) else {
            throw JSONSyntaxError(problem: "not valid \(encoding)", offset: 0)
        }
        return Array(s.utf8)
    }

    /// The offset of the first byte of `bytes` that is not part of valid UTF-8 (RFC 3629: no
    /// overlong forms, no surrogates, nothing above U+10FFFF), or nil when all of it is.
    /// Runs of ASCII are skipped 8 bytes at a time; other characters go through the standard
    /// library's UTF-8 parser.
    static func firstInvalidUTF8Byte(_ bytes: [UInt8]) -> Int? {
        bytes.withUnsafeBufferPointer { p -> Int? in
            guard let base = p.baseAddress else { return nil }
            let n = p.count
            var i = 0
            while i < n {
                if n - i >= 8 && UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    i += 8
                    continue
                }
                if base[i] < 0x80 {
                    i += 1
                    continue
                }
                var parser = Unicode.UTF8.ForwardParser()
                var input = UnsafeBufferPointer(rebasing: p[i...]).makeIterator()
                switch parser.parseScalar(from: &input) {
                case let .valid(encoded): i += encoded.count
                case .error: return i
                case .emptyInput: return nil
                }
            }
            return nil
        }
    }

    /// UTF-16 or UTF-32, and the byte order mark's length, when a mark or the zero bytes among
    /// the first four say so (`JSONSerialization`'s rule); nil for UTF-8.
    static func otherEncoding(_ b: [UInt8]) -> (String.Encoding, skip: Int)? {
        let encoding: String.Encoding
        var skip = 0
        let n = b.count
        if n >= 4 && b[0] == 0 && b[1] == 0 && b[2] == 0xFE && b[3] == 0xFF {
            (encoding, skip) = (.utf32BigEndian, 4)
        } else if n >= 4 && b[0] == 0xFF && b[1] == 0xFE && b[2] == 0 && b[3] == 0 {
            (encoding, skip) = (.utf32LittleEndian, 4)
        } else if n >= 2 && b[0] == 0xFF && b[1] == 0xFE {
            (encoding, skip) = (.utf16LittleEndian, 2)
        } else if n >= 2 && b[0] == 0xFE && b[1] == 0xFF {
            (encoding, skip) = (.utf16BigEndian, 2)
        } else if n >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
            return nil
        } else if n >= 4 {
            switch (b[0], b[1], b[2], b[3]) {
            case (0, 0, 0, _): encoding = .utf32BigEndian
            case (_, 0, 0, 0): encoding = .utf32LittleEndian
            case (0, _, 0, _): encoding = .utf16BigEndian
            case (_, 0, _, 0): encoding = .utf16LittleEndian
            default: return nil
            }
        } else if n >= 2 {
            switch (b[0], b[1]) {
            case (0, _): encoding = .utf16BigEndian
            case (_, 0): encoding = .utf16LittleEndian
            default: return nil
            }
        } else {
            return nil
        }
        return (encoding, skip)
    }
}

/// What RFC 8259 refuses and `JSONSerialization` accepts, for the config file, whose error text
/// promises no trailing commas: the first such problem of a document, with its line and column.
public enum JSONStrictness {
    /// `a trailing comma before '}' at line 12, column 5`; nil when `bytes` is strict JSON or
    /// not JSON at all (the caller's parser reports that).
    public static func problem(in bytes: [UInt8]) -> String? {
        guard (try? JSONParser.parse(bytes)) != nil else { return nil }
        do {
            _ = try JSONParser.parse(bytes, strict: true)
            return nil
        } catch {
            var line = 1, column = 1
            for b in bytes.prefix(error.offset) {
                if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
            }
            return "\(error.problem) at line \(line), column \(column)"
        }
    }
}

/// Keys written more than once in the same object of a JSON document, which most readers
/// (`JSONSerialization` among them) resolve silently by keeping the last: the config reader
/// warns about them.
public enum JSONDuplicateKeys {
    /// The key path of each duplicated key (outermost first, the key itself last), in document
    /// order; nil when `bytes` is not JSON that `JSONParser` reads.
    public static func paths(in bytes: [UInt8]) -> [[String]]? {
        guard let root = try? JSONParser.parse(bytes) else { return nil }
        var found: [[String]] = []
        var path: [String] = []
        func walk(_ value: JSONValue) {
            switch value {
            case let .object(o):
                var seen = Set<String>()
                var reported = Set<String>()
                for m in o.members {
                    if !seen.insert(m.key).inserted, reported.insert(m.key).inserted { found.append(path + [m.key]) }
                }
                for m in o.unique {
                    path.append(m.key)
                    walk(m.value)
                    path.removeLast()
                }
            case let .array(items):
                for item in items { walk(item) }
            case .null, .bool, .int, .uint, .double, .string:
                break
            }
        }
        walk(root)
        return found
    }
}
