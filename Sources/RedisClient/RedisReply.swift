import CHiredis

/// A Redis reply as a Swift value, copied out of hiredis's `redisReply` before the reply
/// callback returns (hiredis frees the C reply right after).
///
/// Invariant: a value never refers to C memory. Nesting is bounded by `maxDepth`; a deeper
/// reply (which Redis never sends to pushgw) becomes `.error` at the cut.
public enum RedisReply: Equatable, Sendable {
    /// A bulk string, binary-safe.
    case bulk([UInt8])
    /// A status reply (`+OK`, `+PONG`).
    case status(String)
    /// An integer reply.
    case integer(Int64)
    /// An array reply (also a Lua table).
    case array([RedisReply])
    /// A nil bulk string or nil array (also Lua `false`).
    case null
    /// An error reply nested in an array (a top-level error reply is `RedisError.server`).
    case error(String)

    /// How deep `init(copying:)` follows nested arrays.
    public static let maxDepth = 16

    /// Copies a hiredis reply, recursively, at most `maxDepth` levels deep.
    public init(copying reply: UnsafePointer<redisReply>, depth: Int = 0) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            self = .bulk(r.str.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: r.len)) } ?? [])
        case REDIS_REPLY_STATUS:
            self = .status(RedisReply.text(r.str, r.len))
        case REDIS_REPLY_ERROR:
            self = .error(RedisReply.text(r.str, r.len))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_ARRAY:
            guard depth < RedisReply.maxDepth else {
                self = .error("reply nested deeper than \(RedisReply.maxDepth) levels")
                return
            }
            var items: [RedisReply] = []
            items.reserveCapacity(r.elements)
            for i in 0..<r.elements {
                if let element = r.element[i] {
                    items.append(RedisReply(copying: element, depth: depth + 1))
                } else {
                    items.append(.null)
                }
            }
            self = .array(items)
        default:
            self = .error("unknown hiredis reply type \(r.type)")
        }
    }

    private static func text(_ str: UnsafeMutablePointer<CChar>?, _ len: Int) -> String {
        guard let str else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: str, count: len), as: UTF8.self)
    }

    // MARK: Accessors (nil when the reply is of another kind)

    /// A bulk or status reply as text (UTF-8, invalid bytes replaced).
    public var string: String? {
        switch self {
        case .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        default: return nil
        }
    }

    /// An integer reply, or a bulk string holding a decimal integer (Redis returns both).
    public var integer: Int64? {
        switch self {
        case .integer(let value): return value
        case .bulk(let bytes): return Int64(String(decoding: bytes, as: UTF8.self))
        default: return nil
        }
    }

    /// A time Redis printed (a decimal integer, or a sorted-set score such as `1.7e+12`, `inf`
    /// or `nan`) as whole milliseconds: nil unless it is finite and within ±9e15 (year
    /// 287,000), so a value read back from Redis never traps a conversion or a sum.
    public static func milliseconds(_ text: String) -> Int64? {
        if let n = Int64(text) { return abs(n) <= 9_000_000_000_000_000 ? n : nil }
        guard let d = Double(text), d.isFinite, abs(d) <= 9e15 else { return nil }
        return Int64(d.rounded(.down))
    }

    /// The elements of an array reply.
    public var array: [RedisReply]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// Whether this is a nil reply.
    public var isNull: Bool { self == .null }
}

extension RedisReply: CustomStringConvertible {
    /// A short rendering for messages and test failures (bulk strings as text).
    public var description: String {
        switch self {
        case .bulk(let bytes): return "\"\(String(decoding: bytes.prefix(200), as: UTF8.self))\""
        case .status(let text): return "+\(text)"
        case .integer(let value): return ":\(value)"
        case .array(let items): return "[" + items.prefix(20).map(\.description).joined(separator: ", ") + (items.count > 20 ? ", …]" : "]")
        case .null: return "nil"
        case .error(let message): return "-\(message)"
        }
    }
}
