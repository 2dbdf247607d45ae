import AdminEndpoint
import EventLoop
import COpenSSL
import Digests

/// The producers' API keys (docs/protocol.md, "The HTTP API"): per app, the SHA-256 of each
/// key, from the config (`ingest.apps.APP.api_keys`). Pure.
///
/// A key is checked by its hash: the config holds no secret, and a presented key is hashed
/// once, then compared with every hash of every app in constant time (no early exit, the same
/// work whichever hash matches or none), so timing tells nothing of a key or of which app's
/// it is.
package struct APIKeys: Sendable {
    /// The hashes (their lower-case hex digits' bytes), with their app.
    private let hashes: [(app: String, digest: [UInt8])]

    /// `keyHashes`: app id → the hashes (64 hex digits each, as the config checked).
    package init(keyHashes: [String: [String]]) {
        hashes = keyHashes.keys.sorted().flatMap { app in keyHashes[app]!.map { (app, Array($0.lowercased().utf8)) } }
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
        let digest = Array(APIKeys.hash(key).utf8)
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
        return "pgw_" + Hex.lowercase(bytes)
    }

    /// What the config holds for `key`: its SHA-256, lower-case hex.
    package static func hash(_ key: String) -> String { SHA256.hex(Array(key.utf8)) }
}

/// Each app's request rate on the HTTP API: a token bucket per app, refilled at its
/// `requests_per_second` up to its `burst` (`ingest.apps.APP`), so one app's flood leaves
/// the others their share. Pure: the caller passes the time.
package struct AppRequestRate: Sendable {
    private var buckets: [String: TokenBucket]

    package init(buckets: [String: TokenBucket]) { self.buckets = buckets }

    /// Takes one request of `app` at `nowMs`: nil when allowed, else the milliseconds until the
    /// bucket holds one again (the `Retry-After`). An app without a bucket is not limited here
    /// (it has no key either: its requests are refused before).
    package mutating func take(_ app: String, nowMs: Int64) -> Int64? {
        buckets[app]?.take(nowMs: nowMs)
    }
}
