import CNGHTTP2
import EventLoop

/// Moves bytes between an nghttp2 session and a `TLSStream`; shared by the APNs client and
/// the simulator's server so both write frames the same, cheap way.
///
/// Why it exists: nghttp2 hands out frames one by one, and writing each on its own made ~7×
/// more TLS records and syscalls than h2load (measured with
/// `bufferevent_openssl`). `flush` copies them into the stream's contiguous output, which
/// `TLSStream` writes as few records.
public enum HTTP2Wire {
    /// Bytes of output buffered in the stream above which `flush` stops asking nghttp2 for
    /// more; the stream's drain callback resumes it. Keeps memory flat when the peer is slow.
    public static let outputHighWater = 256 * 1024
    static let recordSize = 16 * 1024

    /// Feeds received bytes to the session. Returns nghttp2's error code on a fatal protocol
    /// error (the connection must then be closed), or nil.
    public static func receive(_ session: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        let n = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        return n < 0 ? Int32(n) : nil
    }

    /// Writes everything nghttp2 wants to send (up to `outputHighWater` buffered) into the
    /// stream. Returns nghttp2's error code on a fatal error, or nil. Must not be called from
    /// inside an nghttp2 callback.
    public static func flush(_ session: OpaquePointer, to stream: TLSStream) -> Int32? {
        var more = true
        while more && stream.isOpen && stream.pendingOutputBytes < outputHighWater {
            var failure: Int32?
            var leftover: UnsafeRawBufferPointer?
            stream.withReservedOutput(capacity: recordSize) { region in
                var used = 0
                while true {
                    var chunk: UnsafePointer<UInt8>?
                    let n = nghttp2_session_mem_send(session, &chunk)
                    if n < 0 { failure = Int32(n); return used }
                    guard n > 0, let chunk else { more = false; return used }
                    let fits = min(n, region.count - used)
                    (region.baseAddress! + used).copyMemory(from: chunk, byteCount: fits)
                    used += fits
                    if fits < n {
                        // nghttp2's chunk stays valid until its next call: append the rest after commit.
                        leftover = UnsafeRawBufferPointer(start: chunk + fits, count: n - fits)
                        return used
                    }
                    if used == region.count { return used }
                }
            }
            if let failure { return failure }
            if let leftover { stream.write(leftover) }
        }
        return nil
    }

    /// True while nghttp2 has nothing more to read or write: the session may be dropped.
    public static func isFinished(_ session: OpaquePointer) -> Bool {
        nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }
}

/// A list of HTTP/2 header fields laid out for `nghttp2_submit_*`, which copies them.
/// Build it, then call `withNV` to get the `nghttp2_nv` array for the duration of a call.
public struct HeaderList {
    private var storage: [UInt8] = []
    private var fields: [(nameAt: Int, nameLen: Int, valueAt: Int, valueLen: Int, flags: UInt8)] = []

    public init() {
        storage.reserveCapacity(1024)
        fields.reserveCapacity(12)
    }

    /// Appends a field. `sensitive` sends it never-indexed (unique values like `:path`).
    public mutating func add(_ name: String, _ value: String, neverIndex: Bool = false) {
        let nameAt = storage.count
        name.withUTF8Bytes { storage.append(contentsOf: $0) }
        let valueAt = storage.count
        value.withUTF8Bytes { storage.append(contentsOf: $0) }
        fields.append((nameAt, valueAt - nameAt, valueAt, storage.count - valueAt,
                       neverIndex ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
    }

    /// Number of fields.
    public var count: Int { fields.count }

    /// Calls `body` with the `nghttp2_nv` array; the pointers are valid only during the call.
    public func withNV<R>(_ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
        storage.withUnsafeBufferPointer { bytes in
            let base = UnsafeMutablePointer(mutating: bytes.baseAddress!)
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: fields.count) { nva in
                for (i, f) in fields.enumerated() {
                    nva[i] = nghttp2_nv(name: base + f.nameAt, value: base + f.valueAt,
                                        namelen: f.nameLen, valuelen: f.valueLen, flags: f.flags)
                }
                return body(UnsafePointer(nva.baseAddress!), fields.count)
            }
        }
    }
}
