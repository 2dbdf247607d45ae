// Pure parsers for the stream commands' replies. They never touch a connection, so the
// tests feed them hand-built `RedisReply` values; the router's reads parse hiredis's reply in
// place through the same code (`RedisReplyNode`).

import EventLoop

/// One stream entry: its id and its fields.
///
/// Invariant: `id` is a stream id (`ms-seq`). Field names are decoded as UTF-8; values are kept
/// as the bytes Redis holds (a producer's event may be anything, and a dead letter must keep
/// it exactly). A repeated field name keeps its last value (Redis allows repeats, pushgw
/// writes none).
public struct StreamEntry: Equatable, Sendable {
    /// The entry id, as Redis returned it.
    public let id: String
    /// The entry's field values by name, byte for byte.
    public let values: [String: [UInt8]]

    public init(id: String, values: [String: [UInt8]]) {
        self.id = id
        self.values = values
    }

    /// An entry whose values are texts.
    public init(id: String, fields: [String: String]) {
        self.init(id: id, values: fields.mapValues { Array($0.utf8) })
    }

    /// The values as text, bytes that are not UTF-8 replaced by U+FFFD: for fields pushgw
    /// writes itself (reasons, results, counts), which are always text. Read a producer's
    /// `event` through `values`.
    public var fields: [String: String] { values.mapValues { String(decoding: $0, as: UTF8.self) } }

    /// The milliseconds part of `id`: when Redis added the entry (unix ms, Redis' clock);
    /// nil when `id` does not start with digits.
    public var timeMs: Int64? {
        // Over the contiguous bytes (every entry read is timed; walking the `UTF8View` cost
        // ~600 instructions for an id's 13 digits).
        return id.withUTF8Bytes { utf8 -> Int64? in
            var value: Int64 = 0
            var digits = 0
            for byte in utf8 {
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { break }
                guard digits < 18 else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                digits += 1
            }
            return digits > 0 ? value : nil
        }
    }
}

/// Parsers of stream replies. Each throws `RedisError.unexpectedReply` on a reply of the
/// wrong shape and never traps. Inlinable: the stores (another module) then parse hiredis's
/// reply through code specialized for it, not through the protocol's witness table, once
/// per field of every entry the router reads.
public enum StreamReplies {
    /// One entry `[id, [f1, v1, f2, v2, …]]`. An entry whose fields are nil (deleted while
    /// pending, seen when re-reading history) returns nil.
    @inlinable
    public static func entry<R: RedisReplyNode>(_ reply: R) throws -> StreamEntry? {
        guard reply.elementCount == 2, let id = reply.element(at: 0).string else {
            throw RedisError.unexpectedReply("stream entry \(reply)")
        }
        let flat = reply.element(at: 1)
        if flat.isNull { return nil }
        guard let count = flat.elementCount, count % 2 == 0 else {
            throw RedisError.unexpectedReply("fields of stream entry \(id)")
        }
        var values: [String: [UInt8]] = [:]
        values.reserveCapacity(count / 2)
        var i = 0
        while i < count {
            guard let name = flat.element(at: i).string, let value = flat.element(at: i + 1).bytes else {
                throw RedisError.unexpectedReply("field of stream entry \(id)")
            }
            values[name] = value
            i += 2
        }
        return StreamEntry(id: id, values: values)
    }

    /// A list of entries (XRANGE, XREVRANGE, XCLAIM, one stream of XREADGROUP).
    /// Entries with nil fields are returned in `deletedIDs`.
    @inlinable
    public static func entryList<R: RedisReplyNode>(_ reply: R) throws -> (entries: [StreamEntry], deletedIDs: [String]) {
        if reply.isNull { return ([], []) }
        guard let count = reply.elementCount else { throw RedisError.unexpectedReply("entry list \(reply)") }
        var entries: [StreamEntry] = []
        entries.reserveCapacity(count)
        var deleted: [String] = []
        for k in 0..<count {
            let item = reply.element(at: k)
            if let entry = try entry(item) {
                entries.append(entry)
            } else if let id = item.element(at: 0).string {
                deleted.append(id)
            }
        }
        return (entries, deleted)
    }

    /// XRANGE / XREVRANGE: the entries in reply order.
    @inlinable
    public static func range<R: RedisReplyNode>(_ reply: R) throws -> [StreamEntry] {
        try entryList(reply).entries
    }

    /// XREAD / XREADGROUP: `[[stream, [entries…]], …]`, or nil when BLOCK timed out.
    /// Returns the entries per stream key, in reply order; streams without entries are absent.
    @inlinable
    public static func read<R: RedisReplyNode>(_ reply: R) throws -> [String: [StreamEntry]] {
        if reply.isNull { return [:] }
        guard let count = reply.elementCount else { throw RedisError.unexpectedReply("XREADGROUP \(reply)") }
        var result: [String: [StreamEntry]] = [:]
        for k in 0..<count {
            let stream = reply.element(at: k)
            guard stream.elementCount == 2, let key = stream.element(at: 0).string else {
                throw RedisError.unexpectedReply("XREADGROUP stream \(stream)")
            }
            let entries = try entryList(stream.element(at: 1)).entries
            if !entries.isEmpty { result[key, default: []].append(contentsOf: entries) }
        }
        return result
    }
}
