import CNGHTTP2

/// Lays out one push's request headers as an `nghttp2_nv` array in scratch memory owned by
/// a connection, reused for every request (nghttp2 copies the fields on submit).
///
/// Why not `HeaderList`: building Swift arrays and strings per request cost more than the
/// rest of our per-request code together; this writes bytes straight into fixed buffers.
final class RequestHeaderBlock {
    private static let byteCapacity = 16 * 1024
    private static let fieldCapacity = 12
    private let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: byteCapacity)
    private let fields = UnsafeMutablePointer<nghttp2_nv>.allocate(capacity: fieldCapacity)
    private var used = 0
    private var count = 0
    /// End of the bytes that stay from one request to the next: `:method`, `:scheme` and
    /// `:authority` (written once), then `authorization` while the token is the same.
    private var pseudoEnd = 0
    private var fixedEnd = 0
    /// The token `authorization` currently holds (nil: none written).
    private var cachedBearer: String?
    private var bearerField = nghttp2_nv()

    init(authority: String) {
        add(":method", "POST")
        add(":scheme", "https")
        add(":authority", authority)
        pseudoEnd = used
        fixedEnd = used
    }

    deinit {
        bytes.deallocate()
        fields.deallocate()
    }

    /// The fields for `n`, valid until the next call. `bearerToken` nil = certificate auth.
    ///
    /// The three constant pseudo-headers and the JWT (the same for up to an hour) are kept from
    /// the previous request; only the push's own fields are laid out again.
    func build(_ n: PushNotification, bearerToken: String?) -> (UnsafePointer<nghttp2_nv>, Int) {
        if bearerToken != cachedBearer {
            used = pseudoEnd
            count = 3
            if let bearerToken {
                add("authorization", prefix: "bearer ", bearerToken)
                bearerField = fields[3]
            }
            cachedBearer = bearerToken
            fixedEnd = used
        }
        used = fixedEnd
        count = 3
        add(":path", prefix: "/3/device/", n.deviceToken, neverIndex: true)
        if cachedBearer != nil {
            fields[count] = bearerField
            count += 1
        }
        add("apns-push-type", n.pushType.rawValue)
        add("apns-topic", n.topic)
        add("apns-priority", n.priority == .immediate ? "10" : n.priority == .conserve ? "5" : "1")
        if let e = n.expiration { add("apns-expiration", decimal: e, neverIndex: e != 0) }
        if let id = n.apnsID { add("apns-id", id, neverIndex: true) }
        if let c = n.collapseID { add("apns-collapse-id", c, neverIndex: true) }
        return (UnsafePointer(fields), count)
    }

    private func add(_ name: StaticString, prefix: StaticString = "", _ value: String, neverIndex: Bool = false) {
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
    private func add(_ name: StaticString, decimal value: Int64, neverIndex: Bool) {
        let nameAt = bytes + used
        copy(name)
        let valueAt = bytes + used
        var v = UInt64(max(0, value))  // PushNotification rejects a negative expiration
        var n = 1
        var rest = v / 10
        while rest > 0 { n += 1; rest /= 10 }
        n = min(n, RequestHeaderBlock.byteCapacity - used)
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

    private func copy(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        guard n > 0 else { return }
        (bytes + used).update(from: s.utf8Start, count: n)
        used += n
    }

    private func copy(_ s: String) {
        // Native strings are contiguous UTF-8: copy without the `var` copy that `withUTF8` needs.
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { utf8 in
            let n = min(utf8.count, RequestHeaderBlock.byteCapacity - used)
            if n > 0 { (bytes + used).update(from: utf8.baseAddress!, count: n) }
            used += n
        }
        if done == nil {
            for b in s.utf8 where used < RequestHeaderBlock.byteCapacity {
                bytes[used] = b
                used += 1
            }
        }
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
