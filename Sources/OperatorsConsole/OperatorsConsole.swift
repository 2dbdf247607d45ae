import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient

/// The operators' console (docs/operations.md, "Console"): pages under `/console/` for the
/// gateway's health, its dead letters and the audit trail, served from the admin endpoint.
///
/// It reads and changes dead letters only through `DeadLetterOperations`, the code behind
/// `pushgw dead`, and writes the same audit records. Every page does a bounded amount of work
/// on the loop (a page of entries, one or a few pipelined Redis round trips), so a page view
/// never holds up routing.
///
/// Access: signing in with the admin token or the read-only token opens a session (a cookie,
/// `ConsoleSessions`); `ConsoleGate` checks every request before anything runs. Whether a
/// token may be checked at all is the caller's guess limit (`SignInCheck.throttled`, a 429);
/// a wrong token is answered 401 at once and logged.
///
/// One routing table (`handle`, `serve`); the pages live in extensions by concern:
/// `+SignIn`, `+DeadLetters` (list, detail, previews), `+Changes` (replays, purges, jobs and
/// their Cancel, the audit trail), `+Fleet` (the sum of every gateway's figures, and the live
/// gateways), `+Tail` (the newest results or feedback of an app, refreshed), `+Webhooks` (the webhook dead letters and their replay), `+Pauses` (an
/// app's Pause and Resume buttons), `+Refusals` (the warning before replaying an app whose
/// credential APNs refused), `+Search` (the
/// search box of every page: a call or a device token, read through `CallLookup` as `pushgw
/// calls show` and `tokens show` read them).
///
/// Loop-owned: create it and call `handle` on the loop thread of the operations' connection.
public final class OperatorsConsole {
    /// The most dead letters one preview lists, and one replay or purge from the console acts on.
    public static let maxTargets = 1_000
    /// A preview of "all matching" stops after this many entries read, or this long after its
    /// request came, and offers to go on from there.
    static let previewScanLimit = 20_000
    static let previewDeadlineMs: Int64 = 2_000
    /// Dead letters per page of the list, and entries read per app for one page.
    static let pageSize = 25
    static let scanLimit = 200
    static let auditPageSize = 50
    static let keptJobs = 20

    public enum LogLevel: Sendable { case info, warn }

    public let loop: EventLoop
    let operations: DeadLetterOperations
    let signInCheck: (String, HTTPRequest) -> SignInCheck
    let readOnlyAvailable: Bool
    let figures: () -> ConsoleFigures
    /// Receives the console's log lines: sign-ins, refusals, replays and purges (never a token).
    public var log: (LogLevel, String, [(String, String)]) -> Void = { _, _, _ in }
    /// With ring receipts on, an app's VoIP tokens suspected of iOS's silent ban (at most
    /// `limit`, the most recently marked first, and whether there are more); nil: not shown.
    public var suspectedVoipTokens: ((_ app: String, _ limit: Int,
                                      _ completion: @escaping (Result<(tokens: [String], more: Bool), ConsoleReadError>) -> Void) -> Void)?
    /// Suspected VoIP tokens an app card lists.
    static let suspectedShown = 20
    /// The last hour of outcomes; the gateway's record hook calls `recordOutcome`.
    public internal(set) var history = OutcomeHistory()
    /// The fleet's figures in Redis (`+Fleet`): what `history` counted is added there
    /// (`flushFleetFigures`), and the fleet page reads the sum; nil: no fleet page.
    public var fleet: FleetFigureStore?
    /// What this gateway says of itself on the fleet page, written at each flush; nil: nothing.
    public var fleetCard: (() -> GatewayCard)?
    var fleetFlushInFlight = false
    var sessions = ConsoleSessions()
    /// The last `keptJobs` replays and purges started here, by number (`+Changes`).
    var jobs: [Int: ConsoleJob] = [:]
    var jobCount = 0
    let random: () -> String

    /// - Parameters:
    ///   - operations: the dead-letter operations on a Redis connection the caller owns.
    ///   - readOnlyAvailable: a read-only token is configured (the sign-in page says so).
    ///   - signIn: what a token presented in the sign-in form signs in as (compared in
    ///     constant time by the caller, under its guess limits), given the request it came in.
    ///   - figures: the gateway's figures of this moment, read without I/O.
    public init(loop: EventLoop, operations: DeadLetterOperations, readOnlyAvailable: Bool,
                signIn: @escaping (_ token: String, _ request: HTTPRequest) -> SignInCheck,
                figures: @escaping () -> ConsoleFigures) {
        self.loop = loop
        self.operations = operations
        self.readOnlyAvailable = readOnlyAvailable
        self.signInCheck = signIn
        self.figures = figures
        random = {
            var generator = SystemRandomNumberGenerator()
            return (0..<4).map { _ in
                let s = String(generator.next() as UInt64, radix: 16)
                return String(repeating: "0", count: 16 - s.count) + s
            }.joined()
        }
    }

    /// Counts a recorded call in the overview's history (the router's record hook).
    public func recordOutcome(app: String, outcome: String, cause: String?, latencyMs: Int64?) {
        history.record(app: app, outcome: outcome, cause: cause, latencyMs: latencyMs, nowMs: Clock.unixMs())
    }

    /// Counts a ring in the overview's history: a device's receipt `latencyMs` after its call's XADD.
    public func recordRing(app: String, latencyMs: Int64) {
        history.recordRing(app: app, latencyMs: latencyMs, nowMs: Clock.unixMs())
    }

    /// The console holds no timers of its own; kept for its owner's symmetric shutdown.
    public func close() {}

    var apps: [String] { operations.policies.keys.sorted() }

    // MARK: Requests

    /// Answers `request` (a path under `/console`) through `respond`, now or after a few Redis
    /// round trips. Every answer carries the security headers (`securityHeaders`).
    public func handle(_ request: HTTPRequest, respond: @escaping (HTTPResponse) -> Void) {
        loop.assertInLoop()
        let answer: (HTTPResponse) -> Void = { response in
            var r = response
            r.headers += OperatorsConsole.securityHeaders
            respond(r)
        }
        let method = request.method == "HEAD" ? "GET" : request.method
        guard method == "GET" || method == "POST" else {
            return answer(HTTPResponse(status: 405, contentType: "text/plain; charset=utf-8", body: "the console answers GET, HEAD and POST\n",
                                          headers: ["Allow": "GET, HEAD, POST"]))
        }
        switch (method, request.path) {
        case ("GET", "/console"), ("GET", "/console/"): return answer(.redirect("/console/overview"))
        case ("GET", "/console/static/console.css"):
            return answer(HTTPResponse(status: 200, contentType: "text/css; charset=utf-8", body: ConsoleAssets.css))
        case ("GET", "/console/static/console.js"):
            return answer(HTTPResponse(status: 200, contentType: "text/javascript; charset=utf-8", body: ConsoleAssets.javascript))
        case ("GET", "/console/signin"):
            return answer(.html(200, ConsolePages.signIn(problem: nil, readOnlyAvailable: readOnlyAvailable)))
        case ("POST", "/console/signin"):
            return signIn(request, answer)
        default:
            break
        }

        let now = Clock.unixMs()
        let session = sessions.find(request.cookie(ConsoleSessions.cookieName), nowMs: now)
        let changes = method == "POST"
            && (request.path == "/console/dead/replay" || request.path == "/console/dead/purge" || request.path == "/console/webhooks/replay"
                || request.path == "/console/apps/pause" || request.path == "/console/apps/resume" || request.path == "/console/jobs/cancel")
        let verdict = ConsoleGate.check(request, session: session, changes: changes)
        guard verdict == .allowed, let session else { return answer(refusal(verdict, request, session)) }
        return serve(request, method: method, session: session) { response in
            var r = response
            r.trusted = true
            answer(r)
        }
    }

    /// Answers a request `ConsoleGate` allowed, of a live session.
    func serve(_ request: HTTPRequest, method: String, session: ConsoleSession,
                       _ answer: @escaping (HTTPResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let path = request.path
        switch method {
        case "POST":
            switch path {
            case "/console/signout":
                sessions.close(session.id)
                return answer(.redirect("/console/signin", headers: ["Set-Cookie": ConsoleSessions.expiredCookie(secure: request.isTLS)]))
            case "/console/dead/replay": return change(.replay, request, session, answer)
            case "/console/dead/purge": return change(.purge, request, session, answer)
            case "/console/webhooks/replay": return webhookReplay(request, session, answer)
            case "/console/apps/pause": return pause(request, session, resumes: false, answer)
            case "/console/apps/resume": return pause(request, session, resumes: true, answer)
            case "/console/jobs/cancel": return cancelJob(request, session, answer)
            default: return answer(notFound(viewer))
            }
        default:
            switch path {
            case "/console/overview": return overview(viewer, answer)
            case "/console/fleet": return fleetPage(viewer, answer)
            case "/console/tail": return tail(request, viewer, answer)
            case "/console/dead": return deadList(request, viewer, answer)
            case "/console/dead/preview": return preview(request, viewer, answer)
            case "/console/audit": return auditTrail(request, viewer, answer)
            case "/console/webhooks": return webhookDeadList(viewer, answer)
            case "/console/search": return search(request, viewer, answer)
            default:
                if path.hasPrefix("/console/dead/") { return deadLetter(String(path.dropFirst("/console/dead/".count)), viewer, answer) }
                if path.hasPrefix("/console/jobs/"), let n = Int(path.dropFirst("/console/jobs/".count)), let job = jobs[n] {
                    return answer(.html(200, ConsolePages.job(viewer: viewer, job: job)))
                }
                return answer(notFound(viewer))
            }
        }
    }

    /// The headers of every console answer: no script but the console's own file (no inline
    /// script, no `eval`), no style but its stylesheet, no framing, no referrer to other
    /// sites (`same-origin`: the console's own forms then carry their `Origin`, which
    /// `ConsoleGate` checks; `no-referrer` made browsers send `Origin: null`), no sniffing.
    public static let securityHeaders: HTTPHeaders = [
        "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
        "Cross-Origin-Opener-Policy": "same-origin",
    ]

    static func viewer(_ session: ConsoleSession) -> ConsolePages.Viewer {
        ConsolePages.Viewer(name: session.name, role: session.role, csrf: session.csrf)
    }

    func notFound(_ viewer: ConsolePages.Viewer?) -> HTTPResponse {
        .html(404, ConsolePages.message(title: "Not found", viewer: viewer, text: "No such page.", back: ("/console/overview", "Overview")))
    }

    /// The answer to a request `ConsoleGate` did not allow: a GET without a session goes to
    /// the sign-in page; everything else is a 403 that says why and changes nothing.
    func refusal(_ verdict: ConsoleGate.Verdict, _ request: HTTPRequest, _ session: ConsoleSession?) -> HTTPResponse {
        let viewer = session.map(OperatorsConsole.viewer)
        switch verdict {
        case .allowed:
            preconditionFailure("an allowed request is answered, not refused")
        case .signInFirst:
            if request.method != "POST" { return .redirect("/console/signin") }
            return refused(request, 403, "Sign in first: this form has no live session; nothing changed.", viewer: nil, why: "no session")
        case .readOnly:
            return refused(request, 403, "Signed in read-only: replays, purges, pauses and cancels need the admin token; nothing changed.",
                           viewer: viewer, why: "read-only session")
        case .badCSRF:
            return refused(request, 403, "The form's CSRF token is missing or stale: reload the page and try again; nothing changed.",
                           viewer: viewer, why: "bad CSRF token")
        case .crossOrigin:
            return refused(request, 403, "This request came from a page of another origin; nothing changed.", viewer: viewer,
                           why: "cross-origin request")
        }
    }

    func refused(_ request: HTTPRequest, _ status: Int, _ text: String, viewer: ConsolePages.Viewer?, why: String) -> HTTPResponse {
        log(.warn, "console request refused", [("path", request.path), ("why", why), ("from", request.peer ?? "?")])
        return .html(status, ConsolePages.message(title: "Refused", viewer: viewer, text: text, back: ("/console/dead", "Dead letters")))
    }

    // MARK: Overview

    func overview(_ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let figures = figures()
        let receiptApps = figures.apps.filter(\.ringReceipts).map(\.id)
        suspectedTokens(of: receiptApps) { [weak self] suspected in
            self?.overview(viewer, figures: figures, suspected: suspected, answer)
        }
    }

    /// The suspected VoIP tokens of `apps`, one read per app, answered together.
    private func suspectedTokens(of apps: [String],
                                 _ completion: @escaping ([String: Result<(tokens: [String], more: Bool), ConsoleReadError>]) -> Void) {
        guard let read = suspectedVoipTokens, !apps.isEmpty else { return completion([:]) }
        var found: [String: Result<(tokens: [String], more: Bool), ConsoleReadError>] = [:]
        for app in apps {
            read(app, Self.suspectedShown) { result in
                found[app] = result
                if found.count == apps.count { completion(found) }
            }
        }
    }

    private func overview(_ viewer: ConsolePages.Viewer, figures: ConsoleFigures,
                          suspected: [String: Result<(tokens: [String], more: Bool), ConsoleReadError>],
                          _ answer: @escaping (HTTPResponse) -> Void) {
        let ids = figures.apps.map(\.id)
        let configured = ids.filter { operations.policies[$0] != nil }
        operations.pendingTrims(apps: ids, horizonMs: 0) { [weak self] pending in
            self?.pauses(of: configured) { pauses in
                self?.renderOverview(viewer, figures: figures, suspected: suspected, pending: pending, pauses: pauses, answer)
            }
        }
    }

    /// The overview of what was read for it: dead-letter trims and pauses per app.
    private func renderOverview(_ viewer: ConsolePages.Viewer, figures: ConsoleFigures,
                                suspected: [String: Result<(tokens: [String], more: Bool), ConsoleReadError>],
                                pending: [String: Result<DeadLetterStore.PendingTrim, RedisError>],
                                pauses: [String: Result<AppPauseStore.Pause?, ConsoleReadError>],
                                _ answer: @escaping (HTTPResponse) -> Void) {
        let now = Clock.unixMs()
        var redisError: String?
        let apps = figures.apps.map { app -> ConsolePages.AppOverview in
            var dead: DeadLetterStore.PendingTrim?
            switch pending[app.id] {
            case let .success(p)?: dead = p
            case let .failure(error)?: redisError = "\(error)"
            case nil: break
            }
            return ConsolePages.AppOverview(app: app, last5: self.history.window(app: app.id, minutes: 5, nowMs: now),
                                            last60: self.history.window(app: app.id, minutes: 60, nowMs: now),
                                            series: self.history.series(app: app.id, nowMs: now), dead: dead,
                                            retention: self.operations.policy(app.id), suspected: suspected[app.id],
                                            pause: pauses[app.id])
        }
        answer(.html(200, ConsolePages.overview(viewer: viewer, figures: figures, apps: apps, redisError: redisError, nowMs: now)))
    }
}
