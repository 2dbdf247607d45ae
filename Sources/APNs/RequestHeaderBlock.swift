import CNGHTTP2
import EventLoop

/// Lays out one push's request headers as an `nghttp2_nv` array in scratch memory owned by
/// a connection, reused for every request (nghttp2 copies the fields on submit).
///
/// Why not `HeaderList`: building Swift arrays and strings per request cost more than the
/// rest of our per-request code together; this writes bytes straight into fixed buffers.
///
/// Every write is bounded: a field is laid out only after checking that its bytes and its
/// slot fit, and a push whose headers would not fit is refused with `RequestHeadersTooLarge`
/// (nothing is truncated, nothing written past the buffers). `PushNotification` bounds the
/// token and the topic, so only a bug or an absurd bearer token can get there.
final class RequestHeaderBlock {
    static let byteCapacity = 16 * 1024
    static let fieldCapacity = 12
    private let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: byteCapacity)
    private let fields = UnsafeMutablePointer<nghttp2_nv>.allocate(capacity: fieldCapacity)
    private var used = 0
    private var count = 0
    private let authority: String
    /// End of the bytes that stay from one request to the next: `:method`, `:scheme` and
    /// `:authority` (written by the first build), then `authorization` while the token is the
    /// same. `pseudoEnd` 0: the pseudo-headers are not laid out yet.
    private var pseudoEnd = 0
    private var fixedEnd = 0
    /// The token `authorization` currently holds (nil: none written).
    private var cachedBearer: String?
    private var bearerField = nghttp2_nv()

    init(authority: String) {
        self.authority = authority
    }

    deinit {
        bytes.deallocate()
        fields.deallocate()
    }

    /// The fields for `n`, valid until the next call. `bearerToken` nil = certificate auth.
    ///
    /// The three constant pseudo-headers and the JWT (the same for up to an hour) are kept from
    /// the previous request; only the push's own fields are laid out again.
    /// - Throws: `RequestHeadersTooLarge` when the fields would not fit; the block stays usable.
    func build(_ n: PushNotification, bearerToken: String?) throws(RequestHeadersTooLarge) -> (UnsafePointer<nghttp2_nv>, Int) {
        try startRequest(bearerToken: bearerToken, scheme: .apns)
        try add(":path", prefix: "/3/device/", n.deviceToken, neverIndex: true)
        try addBearer()
        try add("apns-push-type", n.pushType.rawValue)
        try add("apns-topic", n.topic)
        try add("apns-priority", n.priority == .immediate ? "10" : n.priority == .conserve ? "5" : "1")
        if let e = n.expiration { try add("apns-expiration", decimal: e, neverIndex: e != 0) }
        if let id = n.apnsID { try add("apns-id", id, neverIndex: true) }
        if let c = n.collapseID { try add("apns-collapse-id", c, neverIndex: true) }
        return (UnsafePointer(fields), count)
    }

    /// The fields for another provider's POST (`ProviderPost`: FCM's send and token exchange),
    /// valid until the next call: the same pseudo-headers and kept `authorization`, its path
    /// (the same for every message of a project, so HPACK indexes it) and content type.
    func build(_ post: ProviderPost) throws(RequestHeadersTooLarge) -> (UnsafePointer<nghttp2_nv>, Int) {
        try startRequest(bearerToken: post.bearerToken, scheme: .oauth)
        try add(":path", post.path)
        try addBearer()
        try add("content-type", post.contentType)
        return (UnsafePointer(fields), count)
    }

    /// How `authorization` spells its scheme: Apple's documents write `bearer`, OAuth 2.0
    /// (RFC 6750) and Google `Bearer`. Schemes are case-insensitive (RFC 9110), but each is
    /// sent as its provider documents it.
    private enum BearerScheme { case apns, oauth }
    private var cachedScheme = BearerScheme.apns

    /// Lays out (or keeps) the three constant pseudo-headers and the bearer token, and starts
    /// the request's own fields after them.
    private func startRequest(bearerToken: String?, scheme: BearerScheme) throws(RequestHeadersTooLarge) {
        if pseudoEnd == 0 {
            used = 0
            count = 0
            try add(":method", "POST")
            try add(":scheme", "https")
            try add(":authority", authority)
            pseudoEnd = used
            fixedEnd = used
            cachedBearer = nil
        }
        if bearerToken != cachedBearer || scheme != cachedScheme {
            // Forget the old token first: if the new one does not fit, none is cached.
            used = pseudoEnd
            count = 3
            cachedBearer = nil
            fixedEnd = used
            if let bearerToken {
                switch scheme {
                case .apns: try add("authorization", prefix: "bearer ", bearerToken)
                case .oauth: try add("authorization", prefix: "Bearer ", bearerToken)
                }
                bearerField = fields[3]
            }
            cachedBearer = bearerToken
            cachedScheme = scheme
            fixedEnd = used
        }
        used = fixedEnd
        count = 3
    }

    /// The kept `authorization` field, when there is a token.
    private func addBearer() throws(RequestHeadersTooLarge) {
        guard cachedBearer != nil else { return }
        try reserve(bytes: 0, for: "authorization")
        fields[count] = bearerField
        count += 1
    }

    /// Checks that a field of `bytes` bytes (name and value) and its slot fit.
    private func reserve(bytes needed: Int, for name: StaticString) throws(RequestHeadersTooLarge) {
        guard count < RequestHeaderBlock.fieldCapacity, needed <= RequestHeaderBlock.byteCapacity - used else {
            throw RequestHeadersTooLarge(field: "\(name)", bytes: used + needed, fields: count + 1)
        }
    }

    private func add(_ name: StaticString, prefix: StaticString = "", _ value: String,
                     neverIndex: Bool = false) throws(RequestHeadersTooLarge) {
        try reserve(bytes: name.utf8CodeUnitCount + prefix.utf8CodeUnitCount + value.utf8.count, for: name)
        let nameAt = bytes + used
        copy(name)
        let valueAt = bytes + used
        copy(prefix)
        copy(value)
        fields[count] = nghttp2_nv(name: nameAt, value: valueAt, namelen: name.utf8CodeUnitCount,
                                   valuelen: bytes + used - valueAt,
                                   flags: UInt8(neverIndex ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue))
        count += 1
    }

    /// A field with a decimal value, written without building a String (`String(e)` per
    /// request showed up in callgrind).
    ///
    /// `neverIndex` for values that change per push (a timestamp would only churn the HPACK
    /// table). `apns-expiration: 0`, the usual VoIP value, is left to nghttp2 to index: it
    /// then costs one byte instead of a Huffman-coded literal in every request, on both ends.
    private func add(_ name: StaticString, decimal value: Int64, neverIndex: Bool) throws(RequestHeadersTooLarge) {
        var v = UInt64(max(0, value))  // PushNotification rejects a negative expiration
        var n = 1
        var rest = v / 10
        while rest > 0 { n += 1; rest /= 10 }
        try reserve(bytes: name.utf8CodeUnitCount + n, for: name)
        let nameAt = bytes + used
        copy(name)
        let valueAt = bytes + used
        for i in stride(from: n - 1, through: 0, by: -1) {
            valueAt[i] = UInt8(truncatingIfNeeded: 0x30 + v % 10)
            v /= 10
        }
        used += n
        fields[count] = nghttp2_nv(name: nameAt, value: valueAt, namelen: name.utf8CodeUnitCount,
                                   valuelen: n,
                                   flags: UInt8(neverIndex ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : NGHTTP2_NV_FLAG_NONE.rawValue))
        count += 1
    }

    /// Copies `s`; the caller reserved room for it.
    private func copy(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        guard n > 0 else { return }
        (bytes + used).update(from: s.utf8Start, count: n)
        used += n
    }

    /// Copies `s`; the caller reserved room for `s.utf8.count` bytes. Bounded again here, so
    /// a string whose count changed under us (it cannot) would be cut, never overflow.
    private func copy(_ s: String) {
        s.withUTF8Bytes { utf8 in
            let n = min(utf8.count, RequestHeaderBlock.byteCapacity - used)
            if n > 0 { (bytes + used).update(from: utf8.baseAddress!, count: n) }
            used += n
        }
    }
}

/// A push whose request headers do not fit the connection's header block (16 KiB in 12
/// fields): it is refused before anything is written.
struct RequestHeadersTooLarge: Error, Equatable, CustomStringConvertible {
    /// The field that did not fit.
    let field: String
    /// The bytes the headers would need up to and including it, and the fields.
    let bytes: Int
    let fields: Int

    var description: String {
        "request headers too large at \(field) (\(bytes) bytes in \(fields) fields; at most "
            + "\(RequestHeaderBlock.byteCapacity) bytes in \(RequestHeaderBlock.fieldCapacity) fields)"
    }
}

/// The pushes in flight on one connection, each knowing its slot: O(1) insert and remove,
/// and a list to settle when the connection dies (`nghttp2_session_del` reports nothing).
/// Lookups by stream id go through nghttp2's stream user data instead of a hash table.
struct InFlightTable {
    private(set) var pushes: [PendingPush] = []

    var count: Int { pushes.count }
    var isEmpty: Bool { pushes.isEmpty }

    mutating func insert(_ push: PendingPush) {
        push.slot = pushes.count
        pushes.append(push)
    }

    /// Removes `push`; false when it was not in the table.
    @discardableResult
    mutating func remove(_ push: PendingPush) -> Bool {
        let slot = push.slot
        guard slot >= 0, slot < pushes.count, pushes[slot] === push else { return false }
        let last = pushes.removeLast()
        if slot < pushes.count {
            pushes[slot] = last
            last.slot = slot
        }
        push.slot = -1
        return true
    }

    mutating func removeAll() -> [PendingPush] {
        let all = pushes
        for p in all { p.slot = -1 }
        pushes.removeAll()
        return all
    }
}
