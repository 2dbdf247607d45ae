import COpenSSL

/// Signs and checks the internal `retry` field of calls entries (docs/protocol.md, "Keys"):
/// anyone who may `XADD` to an app's calls stream can write a `retry` field, so a retry is
/// trusted only with a valid `retry_mac` beside it, an HMAC-SHA256 that only pushgw can make.
///
/// - **What is signed**: a version tag, the app id, the raw event (length-prefixed) and the
///   snapshot JSON, so a signed retry cannot be moved to another app, given another event or
///   another history.
/// - **The key**: 32 random bytes per deployment, kept in Redis (`GatewayKeys.retrySigningKey`,
///   out of every producer's reach) and created by the first gateway that registers
///   (`SET NX`). Each process proposes its own key at every heartbeat and adopts what Redis
///   holds (`adopt`), so a Redis that lost the key (a restart without persistence) gets the
///   running gateways' key back at their next beat. Keys adopted before stay valid for
///   checking (`recentKeys` of them), so a retry signed just before a change still passes.
/// - **Cost**: one `EVP_MAC` context per key, initialised once and reset per use; measured with
///   `pushgw-bench retry-mac` (docs/architecture.md, "Retries"). Only retries pay it: a call's
///   first push signs nothing.
///
/// Loop-owned (its contexts are reused), like the router that holds it.
public final class RetrySigner {
    /// Bytes of a key, and of a MAC.
    public static let keyBytes = 32
    /// Keys kept for checking besides the current one.
    public static let recentKeys = 3
    /// The field of a calls entry that carries the MAC, as 64 lower-case hex digits.
    public static let field = "retry_mac"

    private struct Key {
        let hex: String
        let context: OpaquePointer
    }

    /// The signing key first, then the recent ones.
    private var keys: [Key] = []

    /// A signer with a fresh random key (what this process proposes until it adopts the
    /// deployment's).
    public init() {
        var bytes = [UInt8](repeating: 0, count: Self.keyBytes)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { preconditionFailure("RAND_bytes failed: no entropy") }
        guard adopt(Self.hex(bytes)) else { preconditionFailure("a fresh key is a valid key") }
    }

    deinit {
        for key in keys { EVP_MAC_CTX_free(key.context) }
    }

    /// The current key, hex: what this process signs with and proposes to Redis.
    public var keyHex: String { keys[0].hex }

    /// Makes `hex` (64 hex digits, the deployment's key as Redis holds it) the signing key; the
    /// previous one stays valid for checking. False, and nothing changes, for a value that is
    /// not a key.
    @discardableResult
    public func adopt(_ hex: String) -> Bool {
        if let first = keys.first, first.hex == hex { return true }
        guard let bytes = Self.bytes(hex: hex), bytes.count == Self.keyBytes, let context = Self.context(key: bytes) else { return false }
        if let known = keys.firstIndex(where: { $0.hex == hex }) {
            keys.insert(keys.remove(at: known), at: 0)
            EVP_MAC_CTX_free(context)
            return true
        }
        keys.insert(Key(hex: hex, context: context), at: 0)
        while keys.count > 1 + Self.recentKeys { EVP_MAC_CTX_free(keys.removeLast().context) }
        return true
    }

    /// The MAC of a retry of `app` for `event` with snapshot `state`, as the `retry_mac` field holds it.
    public func sign(app: String, event: [UInt8], state: [UInt8]) -> String {
        Self.hex(mac(keys[0].context, app: app, event: event, state: state))
    }

    /// Whether `mac` (the `retry_mac` field's bytes) was made by pushgw for these values, with
    /// the current key or a recent one. Compared in constant time.
    public func verifies(_ mac: [UInt8]?, app: String, event: [UInt8], state: [UInt8]) -> Bool {
        guard let mac, mac.count == 2 * Self.keyBytes, let given = Self.bytes(hex: String(decoding: mac, as: UTF8.self)) else {
            return false
        }
        return keys.contains { key in
            let expected = self.mac(key.context, app: app, event: event, state: state)
            return CRYPTO_memcmp(expected, given, expected.count) == 0
        }
    }

    // MARK: OpenSSL

    private static let tag = Array("pushgw retry v1\0".utf8)

    private func mac(_ context: OpaquePointer, app: String, event: [UInt8], state: [UInt8]) -> [UInt8] {
        // A NULL key re-initialises the context with the key it was given at creation.
        guard EVP_MAC_init(context, nil, 0, nil) == 1 else { preconditionFailure("EVP_MAC_init failed") }
        var length = UInt64(event.count).bigEndian
        let ok = Self.tag.withUnsafeBufferPointer { EVP_MAC_update(context, $0.baseAddress, $0.count) } == 1
            && Array(app.utf8 + [0]).withUnsafeBufferPointer { EVP_MAC_update(context, $0.baseAddress, $0.count) } == 1
            && withUnsafeBytes(of: &length) { EVP_MAC_update(context, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), 8) } == 1
            && event.withUnsafeBufferPointer { EVP_MAC_update(context, $0.baseAddress, $0.count) } == 1
            && state.withUnsafeBufferPointer { EVP_MAC_update(context, $0.baseAddress, $0.count) } == 1
        var out = [UInt8](repeating: 0, count: Self.keyBytes)
        var written = 0
        guard ok, EVP_MAC_final(context, &out, &written, out.count) == 1, written == Self.keyBytes else {
            preconditionFailure("HMAC-SHA256 failed")
        }
        return out
    }

    /// An HMAC-SHA256 context holding `key`.
    private static func context(key: [UInt8]) -> OpaquePointer? {
        guard let algorithm = EVP_MAC_fetch(nil, "HMAC", nil) else { return nil }
        defer { EVP_MAC_free(algorithm) }
        guard let context = EVP_MAC_CTX_new(algorithm) else { return nil }
        let ok = "digest".withCString { name in
            "SHA256".withCString { digest in
                var params = [OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: digest), 0), OSSL_PARAM_construct_end()]
                return key.withUnsafeBufferPointer { EVP_MAC_init(context, $0.baseAddress, $0.count, &params) } == 1
            }
        }
        guard ok else {
            EVP_MAC_CTX_free(context)
            return nil
        }
        return context
    }

    // MARK: Hex

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        for i in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }
}
