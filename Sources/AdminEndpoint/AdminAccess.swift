import Foundation
import GatewayConfiguration
import JSONOutput

/// The admin API's bearer token, read from `admin.token_file`.
///
/// A secret: it never prints. `description`, `debugDescription` and reflection show
/// `<redacted>`, so interpolating it into a log line or an error cannot leak it; the bytes
/// are reachable only by `matches(authorization:)`.
package struct AdminToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable, Sendable {
    private let bytes: [UInt8]

    /// A token from its text; surrounding white space (a file's final newline) is dropped.
    /// Nil when nothing is left.
    package init?(_ text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        bytes = Array(trimmed.utf8)
    }

    /// Reads the token file; a token `config check` would refuse (`AdminTokenFile`: too
    /// short, too little entropy) is refused here too. The error names the file and the
    /// problem, never its content.
    package static func load(file: String) throws(AdminTokenError) -> AdminToken {
        switch AdminTokenFile.read(file) {
        case let .success(text):
            guard let token = AdminToken(text) else { throw AdminTokenError(file: file, problem: "is empty") }
            return token
        case let .failure(problem):
            throw AdminTokenError(file: file, problem: problem.text)
        }
    }

    /// Whether `presented` (a token typed into the console's sign-in form) is this token, in
    /// the same constant time as `matches(authorization:)`.
    package func matches(presented: String) -> Bool {
        AdminToken.constantTimeEqual(Array(presented.trimmingCharacters(in: .whitespacesAndNewlines).utf8)[...], bytes)
    }

    /// Whether an `Authorization` header value is `Bearer <this token>` (scheme case-insensitive,
    /// RFC 6750). The comparison takes the same time wherever the first difference is, and
    /// depends on the length of the stored token only, so timing reveals nothing of it.
    package func matches(authorization: String?) -> Bool {
        guard let authorization else { return false }
        let header = Array(authorization.utf8)
        let scheme = Array("bearer".utf8)
        guard header.count > scheme.count + 1, header[scheme.count] == 0x20 else { return false }
        for i in 0..<scheme.count where header[i] | 0x20 != scheme[i] { return false }  // | 0x20: ASCII lower case
        var start = scheme.count
        while start < header.count, header[start] == 0x20 { start += 1 }
        return AdminToken.constantTimeEqual(header[start...], bytes)
    }

    /// True when `presented` equals `expected`; the loop always runs `expected.count` times.
    package static func constantTimeEqual(_ presented: ArraySlice<UInt8>, _ expected: [UInt8]) -> Bool {
        var difference: UInt8 = presented.count == expected.count ? 0 : 1
        let base = presented.startIndex
        for i in 0..<expected.count {
            let p: UInt8 = i < presented.count ? presented[base + i] : 0
            difference |= p ^ expected[i]
        }
        return difference == 0
    }

    package var description: String { "<redacted>" }
    package var debugDescription: String { "<redacted>" }
    package var customMirror: Mirror { Mirror(self, children: []) }
}

/// `admin.token_file` could not give a token.
package struct AdminTokenError: Error, Equatable, CustomStringConvertible {
    package let file: String
    package let problem: String
    package var description: String { "admin.token_file \(file) \(problem)" }
}

/// Who may see what on the admin endpoint (`AdminRoutes.handle` applies it).
///
/// `/metrics`, `/healthz` and `/readyz` are open (the endpoint listens on loopback by default;
/// a scraper or a probe has no token). Everything else is the admin API and needs
/// `Authorization: Bearer <token>`: 403 without a configured token file, 401 without the
/// right token, 429 while the guess limits (`CredentialGuard`) keep the client's tokens
/// unchecked; an unknown path is a 404 once authenticated.
package enum AdminAccess {
    /// The paths anyone may read.
    static let openPaths: Set<String> = ["/metrics", "/healthz", "/readyz"]
}

/// Whether this process should receive work, and if not, why (`/readyz`).
package struct Readiness: Equatable, Sendable {
    /// One reason not to be ready.
    package struct Problem: Equatable, Sendable {
        /// `redis`, `redis_writes`, `apns` or `draining` (apps are reported per app, not here).
        package var check: String
        package var detail: String
        /// The APNs pool concerned (`apns` problems only).
        package var credential: String? = nil
        package var environment: String? = nil
        /// The Redis node concerned (`redis_writes` problems only).
        package var node: String? = nil
    }

    /// An APNs pool that cannot connect: since how long (ms) and why.
    package struct UnreachablePool: Equatable, Sendable {
        package var credential: String
        package var environment: String
        package var forMs: Int64
        package var reason: String?

        package init(credential: String, environment: String, forMs: Int64, reason: String?) {
            self.credential = credential
            self.environment = environment
            self.forMs = forMs
            self.reason = reason
        }
    }

    package var problems: [Problem]
    package var isReady: Bool { problems.isEmpty }

    /// Ready when Redis answered a PING at most `maxPingAgeMs` ago and no node refuses writes,
    /// every APNs pool can connect, and the process is not draining. About the process only: an
    /// app APNs refuses is reported per app (`/status`, `pushgw_app_unhealthy`, the console),
    /// never here, since an orchestrator acting on readiness would take every other app's calls
    /// down with it.
    ///
    /// - Parameters:
    ///   - nowMs, lastPingOkMs: monotonic milliseconds; `lastPingOkMs` nil = never.
    ///   - lastPingError: the last PING's failure, for the detail.
    ///   - unreachablePools: APNs pools whose connects fail, one problem each.
    ///   - refusingWrites: Redis nodes that refused the last write probe → Redis' answer
    ///     (`RedisProbe.refusingWrites`), one problem each.
    package static func evaluate(nowMs: Int64, lastPingOkMs: Int64?, maxPingAgeMs: Int64, lastPingError: String?,
                                draining: Bool, unreachablePools: [UnreachablePool] = [],
                                refusingWrites: [String: String] = [:]) -> Readiness {
        var problems: [Problem] = []
        if draining { problems.append(Problem(check: "draining", detail: "the process is draining for shutdown")) }
        if let last = lastPingOkMs, nowMs - last <= maxPingAgeMs {
            // fresh
        } else {
            var detail = lastPingOkMs.map { "no successful PING for \(nowMs - $0) ms" }
                ?? "no successful PING yet"
            if let lastPingError { detail += " (last error: \(lastPingError))" }
            problems.append(Problem(check: "redis", detail: detail))
        }
        // Redis answers a PING while it refuses writes, and no outcome can be recorded then.
        for node in refusingWrites.keys.sorted() {
            problems.append(Problem(check: "redis_writes", detail: "refuses writes: " + refusingWrites[node]!, node: node))
        }
        for pool in unreachablePools.sorted(by: { ($0.credential, $0.environment) < ($1.credential, $1.environment) }) {
            var detail = "cannot connect to APNs for \(pool.forMs / 1000) s"
            if let reason = pool.reason { detail += " (last error: \(reason))" }
            problems.append(Problem(check: "apns", detail: detail, credential: pool.credential,
                                    environment: pool.environment))
        }
        return Readiness(problems: problems)
    }

    /// `{"ready":true}` or `{"ready":false,"problems":[{"check":…,"detail":…},…]}`.
    /// Without `detailed` (an anonymous probe), each problem says which check failed but not
    /// its detail: that text carries errors from Redis and APNs, which can name the Redis user,
    /// hosts and addresses, and `/readyz` answers anyone who reaches the port. The bearer
    /// token gets the details.
    package func json(detailed: Bool = true) -> String {
        var object: [String: Any] = ["ready": isReady]
        if !isReady {
            object["problems"] = problems.map { p -> [String: Any] in
                var o: [String: Any] = ["check": p.check]
                if detailed { o["detail"] = p.detail }
                if let credential = p.credential { o["credential"] = credential }
                if let environment = p.environment { o["environment"] = environment }
                if detailed, let node = p.node { o["node"] = node }
                return o
            }
        }
        return OrderedJSON(loggable: object).text
    }
}
