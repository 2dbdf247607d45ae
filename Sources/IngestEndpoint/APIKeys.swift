import AdminEndpoint
import COpenSSL
import DeadLetters

/// The producers' API keys (docs/protocol.md, "The HTTP API"): per app, the SHA-256 of each
/// key, from the config (`ingest.apps.APP.api_keys`). Pure.
///
/// A key is checked by its hash: the config holds no secret, and a presented key is hashed
/// once, then compared with every hash of every app in constant time (no early exit, the same
/// work whichever hash matches or none), so timing tells nothing of a key or of which app's
/// it is.
package struct APIKeys: Sendable {
    /// The hashes' bytes, with their app.
    private let hashes: [(app: String, digest: [UInt8])]

    /// `keyHashes`: app id → the hashes (64 lower-case hex digits each, as the config checked).
    package init(keyHashes: [String: [String]]) {
        hashes = keyHashes.keys.sorted().flatMap { app in keyHashes[app]!.compactMap { APIKeys.bytes(hex: $0).map { (app, $0) } } }
    }

    /// What a presented key proves.
    package enum Verdict: Equatable, Sendable {
        /// No key was presented (no `Authorization: Bearer …`).
        case none
        /// A key of no app.
        case wrong
        /// A key of `app`.
        case app(String)
    }

    /// The verdict on an `Authorization` header (`Bearer KEY`, scheme in any case).
    package func check(authorization: String?) -> Verdict {
        guard let key = APIKeys.bearer(authorization) else { return .none }
        let digest = APIKeys.bytes(hex: EventDigest.of(Array(key.utf8)))!
        var found: String?
        for entry in hashes where AdminToken.constantTimeEqual(digest[...], entry.digest) && found == nil {
            found = entry.app
        }
        return found.map(Verdict.app) ?? .wrong
    }

    /// The key of `Bearer KEY`; nil for another scheme or none.
    static func bearer(_ authorization: String?) -> String? {
        guard let authorization, authorization.utf8.count > 7,
              authorization.prefix(7).lowercased() == "bearer " else { return nil }
        let key = authorization.dropFirst(7).drop { $0 == " " }
        return key.isEmpty ? nil : String(key)
    }

    /// A new key: `pgw_` and 64 hex digits of OpenSSL's random bytes (256 bits).
    package static func newKey() -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { preconditionFailure("RAND_bytes failed: no entropy") }
        return "pgw_" + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// What the config holds for `key`: its SHA-256, lower-case hex.
    package static func hash(_ key: String) -> String { EventDigest.of(Array(key.utf8)) }

    private static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}

/// Each app's request rate on the HTTP API: a token bucket per app, refilled at its
/// `requests_per_second` up to its `burst` (`ingest.apps.APP`), so one app's flood leaves
/// the others their share. Pure: the caller passes the time.
package struct AppRequestRate: Sendable {
    package struct Bucket: Equatable, Sendable {
        package var perSecond: Int
        package var burst: Int
        package init(perSecond: Int, burst: Int) {
            self.perSecond = perSecond
            self.burst = burst
        }
    }

    private let buckets: [String: Bucket]
    private var tokens: [String: (left: Double, atMs: Int64)] = [:]

    package init(buckets: [String: Bucket]) { self.buckets = buckets }

    /// Takes one request of `app` at `nowMs`: nil when allowed, else the milliseconds until the
    /// bucket holds one again (the `Retry-After`). An app without a bucket is not limited here
    /// (it has no key either: its requests are refused before).
    package mutating func take(_ app: String, nowMs: Int64) -> Int64? {
        guard let bucket = buckets[app] else { return nil }
        let perMs = Double(bucket.perSecond) / 1000
        var state = tokens[app] ?? (Double(bucket.burst), nowMs)
        state.left = min(Double(bucket.burst), state.left + Double(max(0, nowMs - state.atMs)) * perMs)
        state.atMs = nowMs
        defer { tokens[app] = state }
        guard state.left >= 1 else { return Int64(((1 - state.left) / perMs).rounded(.up)) }
        state.left -= 1
        return nil
    }
}
