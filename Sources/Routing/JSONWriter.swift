import EventLoop

/// Deterministic JSON output for everything Routing writes (VoIP and alert payloads, outcome
/// records): keys in the order the caller appends them (or sorted by UTF-8 bytes for the
/// producer's dictionaries), no whitespace, `/` and non-ASCII left as they are, control
/// characters escaped. The same value always gives the same bytes, on every platform.
///
/// Runs once or more per event on the loop thread, so it writes through a pointer into room
/// made ahead (`write(upTo:_:)`), one capacity and uniqueness check per string or key rather
/// than per byte or per `Array.append`.
struct JSONWriter {
    /// `storage[..<count]` is the output; the rest is zeroed room to write into.
    private var storage: [UInt8]
    private var count = 0

    init(capacity: Int = 256) { storage = Array(repeating: 0, count: capacity) }

    /// The output so far.
    var bytes: [UInt8] { Array(storage[..<count]) }

    /// The output, without a copy; the writer is done with.
    consuming func finish() -> [UInt8] {
        storage.removeSubrange(count...)
        return storage
    }

    /// Makes room for up to `n` bytes, lets `body` write them from the pointer it gets, and
    /// keeps as many as `body` says it wrote.
    private mutating func write(upTo n: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        if storage.count - count < n {
            storage.append(contentsOf: repeatElement(0, count: max(n, storage.count)))
        }
        let start = count
        count += storage.withUnsafeMutableBufferPointer { body($0.baseAddress! + start) }
    }

    mutating func byte(_ b: UInt8) {
        write(upTo: 1) { p in
            p[0] = b
            return 1
        }
    }

    mutating func raw(_ s: StaticString) {
        write(upTo: s.utf8CodeUnitCount) { p in
            p.update(from: s.utf8Start, count: s.utf8CodeUnitCount)
            return s.utf8CodeUnitCount
        }
    }

    /// A string: `"` and `\` escaped, control characters as `\n`, `\r`, `\t`, `\b`, `\f` or
    /// `\u00xx`; everything else, `/` and non-ASCII included, as it is.
    mutating func string(_ s: String) {
        s.withUTF8Bytes { utf8 in
            // 6 bytes at most per input byte (`\u00xx`), and the quotes.
            write(upTo: 6 * utf8.count + 2) { p in JSONWriter.escape(utf8, into: p) }
        }
    }

    /// Writes `utf8` quoted and escaped at `p`; returns the bytes written. Scans 8 bytes at a
    /// time and copies the runs that need no escaping (usually the whole string) at once.
    private static func escape(_ utf8: UnsafeBufferPointer<UInt8>, into p: UnsafeMutablePointer<UInt8>) -> Int {
        var o = 0
        p[o] = UInt8(ascii: "\"")
        o += 1
        if let base = utf8.baseAddress {
            let n = utf8.count
            var run = 0  // the first byte not copied yet
            var k = 0
            while k < n {
                if n - k >= 8 && !needsEscape(UnsafeRawPointer(base + k).loadUnaligned(as: UInt64.self)) {
                    k += 8
                    continue
                }
                for j in k..<min(k + 8, n) {
                    let c = base[j]
                    guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
                    (p + o).update(from: base + run, count: j - run)
                    o += j - run
                    run = j + 1
                    o += escapeSequence(c, into: p + o)
                }
                k += 8
            }
            (p + o).update(from: base + run, count: n - run)
            o += n - run
        }
        p[o] = UInt8(ascii: "\"")
        return o + 1
    }

    /// True when one of the 8 bytes of `w` is below 0x20, `"` or `\` (the classic "has a zero
    /// byte" and "has a byte less than n" bit tricks; exact for the word as a whole).
    static func needsEscape(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = w ^ (ones &* 0x22)
        let backslash = w ^ (ones &* 0x5C)
        let zeroInQuote = (quote &- ones) & ~quote
        let zeroInBackslash = (backslash &- ones) & ~backslash
        let control = (w &- ones &* 0x20) & ~w
        return (zeroInQuote | zeroInBackslash | control) & highs != 0
    }

    /// The escape of `c` at `p` (2 or 6 bytes); returns its length.
    private static func escapeSequence(_ c: UInt8, into p: UnsafeMutablePointer<UInt8>) -> Int {
        p[0] = UInt8(ascii: "\\")
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): p[1] = c
        case 0x0A: p[1] = UInt8(ascii: "n")
        case 0x0D: p[1] = UInt8(ascii: "r")
        case 0x09: p[1] = UInt8(ascii: "t")
        case 0x08: p[1] = UInt8(ascii: "b")
        case 0x0C: p[1] = UInt8(ascii: "f")
        default:
            let hex: StaticString = "0123456789abcdef"
            p[1] = UInt8(ascii: "u")
            p[2] = UInt8(ascii: "0")
            p[3] = UInt8(ascii: "0")
            p[4] = hex.utf8Start[Int(c >> 4)]
            p[5] = hex.utf8Start[Int(c & 0xF)]
            return 6
        }
        return 2
    }

    /// Decimal digits, as `String(v)` gives them, without making a String.
    mutating func int(_ v: Int64) {
        write(upTo: 20) { p in
            if v < 0 { p[0] = UInt8(ascii: "-") }
            let sign = v < 0 ? 1 : 0
            return sign + JSONWriter.digits(v.magnitude, into: p + sign)
        }
    }

    mutating func unsigned(_ v: UInt64) {
        write(upTo: 20) { p in JSONWriter.digits(v, into: p) }
    }

    private static func digits(_ v: UInt64, into p: UnsafeMutablePointer<UInt8>) -> Int {
        var n = 1
        var t = v
        while t >= 10 {
            t /= 10
            n += 1
        }
        var m = v
        var k = n
        repeat {
            k -= 1
            p[k] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m % 10)
            m /= 10
        } while m > 0
        return n
    }

    /// An object whose members are written by `body` through `ObjectWriter`.
    mutating func object(_ body: (inout ObjectWriter) -> Void) {
        byte(UInt8(ascii: "{"))
        // The members are written by this writer, lent to `o` (swapped, not copied, so the
        // storage stays uniquely referenced and is never copied on write).
        var o = ObjectWriter(writer: JSONWriter(capacity: 0))
        swap(&self, &o.writer)
        body(&o)
        swap(&self, &o.writer)
        byte(UInt8(ascii: "}"))
    }

    /// `"key":` for a literal key (one that needs no escaping), after a comma unless `first`.
    fileprivate mutating func key(_ k: StaticString, first: Bool) {
        let n = k.utf8CodeUnitCount
        write(upTo: n + 4) { p in
            var o = 0
            if !first {
                p[0] = UInt8(ascii: ",")
                o = 1
            }
            p[o] = UInt8(ascii: "\"")
            (p + o + 1).update(from: k.utf8Start, count: n)
            p[o + 1 + n] = UInt8(ascii: "\"")
            p[o + 2 + n] = UInt8(ascii: ":")
            return o + 3 + n
        }
    }

    /// A parsed value, objects with duplicate keys merged (`JSONObject.unique`) and keys sorted
    /// by UTF-8 bytes; numbers as `JSONSerialization` read them (`1`, `1.5`, `100.0`).
    mutating func value(_ value: JSONValue) {
        switch value {
        case .null: raw("null")
        case let .bool(b): b ? raw("true") : raw("false")
        case let .int(i): int(i)
        case let .uint(u): unsigned(u)
        case let .double(d):
            // Swift's shortest round-trip form ("1.5", "1e-07", "1e+300") is valid JSON.
            guard d.isFinite else { return raw("null") }
            var text = d.description
            text.withUTF8 { utf8 in
                write(upTo: utf8.count) { p in
                    p.update(from: utf8.baseAddress!, count: utf8.count)
                    return utf8.count
                }
            }
        case let .string(s): string(s)
        case let .array(elements):
            byte(UInt8(ascii: "["))
            for i in elements.indices {
                if i > 0 { byte(UInt8(ascii: ",")) }
                self.value(elements[i])
            }
            byte(UInt8(ascii: "]"))
        case let .object(o):
            sortedObject(o.unique)
        }
    }

    /// An object of distinct members, written in the order of their keys' UTF-8 bytes.
    mutating func sortedObject(_ members: [JSONMember]) {
        byte(UInt8(ascii: "{"))
        // Sorts (first 8 bytes of the key, big-endian, zero-padded; index) pairs on the stack:
        // most comparisons are then one integer comparison, and no member is moved.
        withUnsafeTemporaryAllocation(of: (prefix: UInt64, index: Int).self, capacity: members.count) { buffer in
            var order = buffer
            for i in members.indices {
                order.initializeElement(at: i, to: (JSONWriter.sortPrefix(members[i].key), i))
            }
            order.sort { a, b in
                a.prefix != b.prefix ? a.prefix < b.prefix : JSONWriter.utf8Less(members[a.index].key, members[b.index].key)
            }
            for k in order.indices {
                if k > 0 { byte(UInt8(ascii: ",")) }
                let m = members[order[k].index]
                string(m.key)
                byte(UInt8(ascii: ":"))
                self.value(m.value)
            }
            _ = order.deinitialize()
        }
        byte(UInt8(ascii: "}"))
    }

    /// The first 8 UTF-8 bytes of `key` as a big-endian number, zero-padded: keys whose
    /// prefixes differ sort as their prefixes do.
    private static func sortPrefix(_ key: String) -> UInt64 {
        return key.withUTF8Bytes { utf8 in
            var prefix: UInt64 = 0
            for k in 0..<min(8, utf8.count) {
                prefix |= UInt64(utf8[k]) << (56 - 8 * k)
            }
            return prefix
        }
    }

    /// True when `a`'s UTF-8 bytes sort before `b`'s.
    static func utf8Less(_ a: String, _ b: String) -> Bool {
        return a.withUTF8Bytes { x in
            b.withUTF8Bytes { y in
                for k in 0..<min(x.count, y.count) where x[k] != y[k] { return x[k] < y[k] }
                return x.count < y.count
            }
        }
    }
}

/// Writes the members of one JSON object; `JSONWriter.object` adds the braces. Member names
/// are literals written as they are (none needs escaping).
struct ObjectWriter {
    fileprivate var writer: JSONWriter
    private var count = 0

    fileprivate init(writer: JSONWriter) { self.writer = writer }

    private mutating func key(_ k: StaticString) {
        writer.key(k, first: count == 0)
        count += 1
    }

    mutating func string(_ k: StaticString, _ v: String?) {
        guard let v else { return }
        key(k); writer.string(v)
    }

    mutating func int(_ k: StaticString, _ v: Int64?) {
        guard let v else { return }
        key(k); writer.int(v)
    }

    mutating func bool(_ k: StaticString, _ v: Bool) {
        key(k)
        if v { writer.raw("true") } else { writer.raw("false") }
    }

    mutating func object(_ k: StaticString, _ body: (inout ObjectWriter) -> Void) {
        key(k); writer.object(body)
    }

    /// An object of distinct members under `k`, keys in UTF-8 order (`JSONWriter.sortedObject`).
    mutating func sorted(_ k: StaticString, _ members: [JSONMember]) {
        key(k); writer.sortedObject(members)
    }

    mutating func array<T>(_ k: StaticString, _ elements: [T], _ body: (inout JSONWriter, T) -> Void) {
        key(k)
        writer.byte(UInt8(ascii: "["))
        for i in elements.indices {
            if i > 0 { writer.byte(UInt8(ascii: ",")) }
            body(&writer, elements[i])
        }
        writer.byte(UInt8(ascii: "]"))
    }
}
