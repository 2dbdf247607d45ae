// Webhooks: what a delivery of a result to a receiver is, without any I/O: its signature,
// its headers, and what to do after each attempt (docs/webhooks.md). The role that reads the
// deliveries from Redis and POSTs them is GatewayRoles' WebhooksRole.
import COpenSSL

/// `Pushgw-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`: the receiver
/// recomputes it over the raw body it got and compares in constant time (docs/webhooks.md).
public enum WebhookSignature {
    public static let headerName = "Pushgw-Signature"

    /// The header's value for `body` signed at `unixSeconds`.
    public static func value(secret: [UInt8], unixSeconds: Int64, body: [UInt8]) -> String {
        "t=\(unixSeconds),v1=\(hex(mac(secret: secret, message: Array("\(unixSeconds).".utf8) + body)))"
    }

    /// HMAC-SHA256 of `message` under `secret` (OpenSSL's one-shot HMAC).
    public static func mac(secret: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        secret.withUnsafeBytes { key in
            message.withUnsafeBytes { data in
                _ = HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), data.bindMemory(to: UInt8.self).baseAddress,
                         data.count, &out, &length)
            }
        }
        return out
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for b in bytes {
            text.append(digits[Int(b >> 4)])
            text.append(digits[Int(b & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
