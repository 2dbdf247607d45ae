// Webhooks: what a delivery of a result to a receiver is, without any I/O: its signature,
// its headers, and what to do after each attempt (docs/webhooks.md). The role that reads the
// deliveries from Redis and POSTs them is GatewayRoles' WebhooksRole.
import Digests

/// `Pushgw-Signature: t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`: the receiver
/// recomputes it over the raw body it got and compares in constant time (docs/webhooks.md).
public enum WebhookSignature {
    public static let headerName = "Pushgw-Signature"

    /// The header's value for `body` signed at `unixSeconds`.
    public static func value(secret: [UInt8], unixSeconds: Int64, body: [UInt8]) -> String {
        "t=\(unixSeconds),v1=\(hex(mac(secret: secret, message: Array("\(unixSeconds).".utf8) + body)))"
    }

    /// HMAC-SHA256 of `message` under `secret`.
    public static func mac(secret: [UInt8], message: [UInt8]) -> [UInt8] {
        guard let key = HMACSHA256(key: secret) else { preconditionFailure("OpenSSL has no HMAC-SHA256") }
        return key.mac(message)
    }

    static func hex(_ bytes: [UInt8]) -> String { Hex.lowercase(bytes) }
}
