import CHiredis

/// A Redis reply read where it lies: a copied `RedisReply`, or hiredis's own reply tree
/// during the command's callback (`HiredisReply`). The stream parsers are written once
/// against it, so the router's large XREADGROUP replies become `StreamEntry`s without first
/// being copied into a `RedisReply` tree (one allocation per element saved, five per entry).
public protocol RedisReplyNode: CustomStringConvertible {
    /// A nil reply (or nil element).
    var isNull: Bool { get }
    /// The element count of an array reply; nil for other kinds.
    var elementCount: Int? { get }
    /// Element `index` of an array reply (`0 ..< elementCount`).
    func element(at index: Int) -> Self
    /// A bulk or status reply as text; nil for other kinds.
    var string: String? { get }
    /// A bulk or status reply's bytes, exactly as Redis sent them; nil for other kinds.
    var bytes: [UInt8]? { get }
}

extension RedisReply: RedisReplyNode {
    public var elementCount: Int? {
        if case .array(let items) = self { return items.count }
        return nil
    }

    public func element(at index: Int) -> RedisReply {
        guard case .array(let items) = self else { preconditionFailure("element(at:) of a reply that is not an array") }
        return items[index]
    }

    public var bytes: [UInt8]? {
        switch self {
        case .bulk(let bytes): return bytes
        case .status(let text): return Array(text.utf8)
        default: return nil
        }
    }
}

/// hiredis's reply, valid only inside the callback that received it (hiredis frees it when
/// the callback returns): `RedisConnection` hands one to in-place decoders and keeps it
/// from escaping.
public struct HiredisReply: RedisReplyNode {
    private let reply: UnsafePointer<redisReply>

    init(_ reply: UnsafePointer<redisReply>) {
        self.reply = reply
    }

    /// Whether Redis answered with an error.
    var isError: Bool { reply.pointee.type == REDIS_REPLY_ERROR }

    public var isNull: Bool { reply.pointee.type == REDIS_REPLY_NIL }

    public var elementCount: Int? {
        reply.pointee.type == REDIS_REPLY_ARRAY ? reply.pointee.elements : nil
    }

    public func element(at index: Int) -> HiredisReply {
        precondition(index >= 0 && index < (elementCount ?? 0), "element(at:) out of range")
        // hiredis fills every element of an array it hands over.
        return HiredisReply(UnsafePointer(reply.pointee.element[index]!))
    }

    public var string: String? {
        let r = reply.pointee
        guard r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_STATUS else { return nil }
        guard let str = r.str else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: str, count: r.len), as: UTF8.self)
    }

    public var bytes: [UInt8]? {
        let r = reply.pointee
        guard r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_STATUS else { return nil }
        guard let str = r.str else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: str, count: r.len))
    }

    /// The reply copied, for messages.
    public var copied: RedisReply { RedisReply(copying: reply) }

    public var description: String { copied.description }
}
