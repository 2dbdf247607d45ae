import HTTPMessages

/// Who signed in to the console, and what they may do.
public enum ConsoleRole: String, Equatable, Sendable {
    /// Signed in with the admin token (`admin.token_file`): sees everything, replays and purges.
    case admin
    /// Signed in with the read-only token (`admin.readonly_token_file`): sees everything,
    /// changes nothing.
    case readOnly = "read-only"

    public var mayChange: Bool { self == .admin }
}

/// What a token presented at sign-in signs in as (the owner decides: it compares the tokens
/// and keeps the guess limits).
public enum SignInCheck: Equatable, Sendable {
    case signedIn(ConsoleRole)
    /// Neither token: 401.
    case wrong
    /// Too many wrong tokens from this address, or from all: not checked; 429 with
    /// `Retry-After`.
    case throttled(retryAfterSeconds: Int)
}

/// One signed-in browser.
struct ConsoleSession: Equatable, Sendable {
    /// The cookie's value: 32 random bytes, hex.
    let id: String
    /// The CSRF token every POST of this session carries: 32 other random bytes, hex.
    let csrf: String
    let role: ConsoleRole
    /// The name the operator gave at sign-in, for the audit trail.
    let name: String
    /// Unix ms.
    let createdMs: Int64
    var lastSeenMs: Int64
}

/// The console's sessions, in memory (a restart signs everyone out). A session ends
/// `lifetimeMs` after sign-in, or `idleMs` after its last request. Each role has its own
/// slots (`slots(for:)`): a sign-in beyond them ends the oldest session of the same role, so
/// the read-only token, however often it signs in, never ends an admin's session. Pure: the
/// caller passes the time and the random source.
struct ConsoleSessions {
    static let cookieName = "pushgw_console"
    static let lifetimeMs: Int64 = 8 * 3_600_000
    static let idleMs: Int64 = 3_600_000

    /// Sessions of `role` alive at once, at most (256 in all).
    static func slots(for role: ConsoleRole) -> Int {
        switch role {
        case .admin: return 64
        case .readOnly: return 192
        }
    }

    private var sessions: [String: ConsoleSession] = [:]

    var count: Int { sessions.count }

    mutating func open(role: ConsoleRole, name: String, nowMs: Int64, random: () -> String) -> ConsoleSession {
        sessions = sessions.filter { isAlive($0.value, nowMs: nowMs) }
        let sameRole = sessions.values.filter { $0.role == role }
        if sameRole.count >= ConsoleSessions.slots(for: role), let oldest = sameRole.min(by: { $0.createdMs < $1.createdMs }) {
            sessions[oldest.id] = nil
        }
        let session = ConsoleSession(id: random(), csrf: random(), role: role, name: name, createdMs: nowMs, lastSeenMs: nowMs)
        sessions[session.id] = session
        return session
    }

    /// The live session of cookie value `id`, its last-seen time moved to now; nil (and the
    /// session forgotten) when it expired.
    mutating func find(_ id: String?, nowMs: Int64) -> ConsoleSession? {
        guard let id, let session = sessions[id] else { return nil }
        guard isAlive(session, nowMs: nowMs) else {
            sessions[id] = nil
            return nil
        }
        sessions[id]!.lastSeenMs = nowMs
        return sessions[id]
    }

    private func isAlive(_ session: ConsoleSession, nowMs: Int64) -> Bool {
        nowMs - session.createdMs < ConsoleSessions.lifetimeMs && nowMs - session.lastSeenMs < ConsoleSessions.idleMs
    }

    mutating func close(_ id: String) { sessions[id] = nil }

    /// The `Set-Cookie` value for `session`: HttpOnly (no script reads it), SameSite=Strict (no
    /// other site's page sends it), Path=/console, Max-Age of the lifetime, and Secure when the
    /// request came over TLS.
    static func cookie(_ session: ConsoleSession, secure: Bool) -> String {
        "\(cookieName)=\(session.id); Path=/console; Max-Age=\(lifetimeMs / 1000); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The `Set-Cookie` value that removes the cookie.
    static func expiredCookie(secure: Bool) -> String {
        "\(cookieName)=; Path=/console; Max-Age=0; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }
}

/// Whether a console request may proceed: the pure decision before any work. GET and HEAD
/// never change anything and need a session; a POST that changes something needs the admin
/// role, the session's CSRF token in its form, and no sign of coming from another origin.
enum ConsoleGate {
    enum Verdict: Equatable {
        case allowed
        /// No (live) session: go to the sign-in page.
        case signInFirst
        /// 403: the read-only token cannot change anything.
        case readOnly
        /// 403: the form's CSRF token is missing or not the session's.
        case badCSRF
        /// 403: `Origin` names another origin, or `Sec-Fetch-Site` says cross-site.
        case crossOrigin
    }

    /// - Parameter changes: the request would change something (replay, purge).
    static func check(_ request: HTTPRequest, session: ConsoleSession?, changes: Bool) -> Verdict {
        guard let session else { return .signInFirst }
        guard request.method == "POST" else { return .allowed }
        guard isSameOrigin(request) else { return .crossOrigin }
        let presented = request.formItems.first { $0.0 == "csrf" }?.1 ?? ""
        guard constantTimeEqual(presented, session.csrf) else { return .badCSRF }
        if changes && !session.role.mayChange { return .readOnly }
        return .allowed
    }

    /// False when the browser says the request comes from a page of another origin:
    /// `Sec-Fetch-Site` other than `same-origin` / `none`, or an `Origin` header that is not
    /// this endpoint's (`http://HOST` or `https://HOST`), `Origin: null` included. A browser
    /// sends `null` from a sandboxed frame, a `data:` page or a redirect chain — the ways
    /// another site posts the sign-in form to sign a victim in as the attacker (login CSRF);
    /// the console's own pages, under `Referrer-Policy: same-origin`, send their origin. A
    /// client that sends neither header (curl, a script holding the cookie) still needs the
    /// CSRF token beyond the sign-in.
    static func isSameOrigin(_ request: HTTPRequest) -> Bool {
        if let site = request.headers["sec-fetch-site"], site != "same-origin", site != "none" { return false }
        if let origin = request.headers["origin"] {
            guard let host = request.headers["host"] else { return false }
            return origin == "http://" + host || origin == "https://" + host
        }
        return true
    }

    /// Compares in time that depends on the expected length only.
    static func constantTimeEqual(_ presented: String, _ expected: String) -> Bool {
        let p = Array(presented.utf8), e = Array(expected.utf8)
        var difference: UInt8 = p.count == e.count ? 0 : 1
        for i in 0..<e.count { difference |= (i < p.count ? p[i] : 0) ^ e[i] }
        return difference == 0
    }
}
