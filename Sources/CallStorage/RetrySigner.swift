import COpenSSL
import Digests

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
/// - **Cost**: one `EVP_MAC` context per key (`HMACSHA256`), initialised once and reset per use; measured with
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
        let mac: HMACSHA256
    }

    /// The signing key first, then the recent ones.
    private var keys: [Key] = []

    /// A signer with a fresh random key (what this process proposes until it adopts the
    /// deployment's).
    public init() {
        var bytes = [UInt8](repeating: 0, count: Self.keyBytes)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { preconditionFailure("RAND_bytes failed: no entropy") }
        guard adopt(Hex.lowercase(bytes)) else { preconditionFailure("a fresh key is a valid key") }
    }

    /// The current key, hex: what this process signs with and proposes to Redis.
    public var keyHex: String { keys[0].hex }

    /// Makes `hex` (64 hex digits, the deployment's key as Redis holds it) the signing key; the
    /// previous one stays valid for checking. False, and nothing changes, for a value that is
    /// not a key.
    @discardableResult
    public func adopt(_ hex: String) -> Bool {
        if let first = keys.first, first.hex == hex { return true }
        if let known = keys.firstIndex(where: { $0.hex == hex }) {
            keys.insert(keys.remove(at: known), at: 0)
            return true
        }
        guard let bytes = Hex.bytes(lowercase: hex), bytes.count == Self.keyBytes, let mac = HMACSHA256(key: bytes) else { return false }
        keys.insert(Key(hex: hex, mac: mac), at: 0)
        if keys.count > 1 + Self.recentKeys { keys.removeLast(keys.count - 1 - Self.recentKeys) }
        return true
    }

    /// The MAC of a retry of `app` for `event` with snapshot `state`, as the `retry_mac` field holds it.
    public func sign(app: String, event: [UInt8], state: [UInt8]) -> String {
        Hex.lowercase(mac(keys[0].mac, app: app, event: event, state: state))
    }

    /// Whether `mac` (the `retry_mac` field's bytes) was made by pushgw for these values, with
    /// the current key or a recent one. Compared in constant time.
    public func verifies(_ mac: [UInt8]?, app: String, event: [UInt8], state: [UInt8]) -> Bool {
        guard let mac, mac.count == 2 * Self.keyBytes, let given = Hex.bytes(lowercase: String(decoding: mac, as: UTF8.self)) else {
            return false
        }
        return keys.contains { key in
            HMACSHA256.equal(self.mac(key.mac, app: app, event: event, state: state), given)
        }
    }

    // MARK: The MAC

    private static let tag = Array("pushgw retry v1\0".utf8)

    private func mac(_ key: HMACSHA256, app: String, event: [UInt8], state: [UInt8]) -> [UInt8] {
        var length = UInt64(event.count).bigEndian
        let lengthBytes = withUnsafeBytes(of: &length) { Array($0) }
        return key.mac(Self.tag, Array(app.utf8) + [0], lengthBytes, event, state)
    }
}
