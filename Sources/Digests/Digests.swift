// Digests: SHA-256, HMAC-SHA256 and lower-case hex on OpenSSL 3, for every module that hashes
// or signs: CallStorage's retry MACs, Webhooks' signatures, DeadLetters' event digests and
// IngestEndpoint's API-key hashes. Owns no state but a keyed MAC's OpenSSL context; no I/O,
// no knowledge of what it hashes.
import COpenSSL

/// Lower-case hexadecimal, two digits per byte: how pushgw writes every digest and MAC.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lower-case hex digits.
    public static func lowercase(_ bytes: some Collection<UInt8>) -> String {
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for b in bytes {
            text.append(digits[Int(b >> 4)])
            text.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes that `hex` spells in lower-case digits; nil for an odd count or any other
    /// character (upper-case digits included: what pushgw wrote is what it reads back).
    public static func bytes(lowercase hex: String) -> [UInt8]? {
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

/// SHA-256 (OpenSSL's one-shot `EVP_Digest`).
public enum SHA256 {
    public static let digestBytes = 32

    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &size, EVP_sha256(), nil)
        }
        precondition(ok == 1 && size == UInt32(digestBytes), "SHA-256 failed")
        return Array(digest.prefix(digestBytes))
    }

    /// The digest as lower-case hex (64 digits).
    public static func hex(_ bytes: [UInt8]) -> String { Hex.lowercase(digest(bytes)) }
}

/// An HMAC-SHA256 key with its OpenSSL context (`EVP_MAC`), set up once and reset for each
/// MAC, so a key used again and again (the retry signer's) pays its setup once.
///
/// Invariant: `context` holds `key`; it is freed with the key. Not thread-safe: owned by
/// one thread (the loop's, for the router).
public final class HMACSHA256 {
    public static let macBytes = 32

    private let context: OpaquePointer

    /// Nil when OpenSSL cannot set the key up (no HMAC in the provider).
    public init?(key: [UInt8]) {
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
        self.context = context
    }

    deinit { EVP_MAC_CTX_free(context) }

    /// The MAC of `parts` written one after the other.
    public func mac(_ parts: [UInt8]...) -> [UInt8] {
        // A NULL key re-initialises the context with the key it was given at creation.
        guard EVP_MAC_init(context, nil, 0, nil) == 1 else { preconditionFailure("EVP_MAC_init failed") }
        for part in parts {
            guard part.withUnsafeBufferPointer({ EVP_MAC_update(context, $0.baseAddress, $0.count) }) == 1 else {
                preconditionFailure("EVP_MAC_update failed")
            }
        }
        var out = [UInt8](repeating: 0, count: Self.macBytes)
        var written = 0
        guard EVP_MAC_final(context, &out, &written, out.count) == 1, written == Self.macBytes else {
            preconditionFailure("HMAC-SHA256 failed")
        }
        return out
    }

    /// Whether two MACs (or digests) are equal, in time that does not depend on where they differ.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && CRYPTO_memcmp(a, b, a.count) == 0
    }
}
