import DeadLetters
import EventLoop
import Foundation
import CallStorage
import JSONOutput

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

    private let loop: EventLoop
    private let operations: DeadLetterOperations
    private let signInCheck: (String, ConsoleRequest) -> SignInCheck
    private let readOnlyAvailable: Bool
    private let figures: () -> ConsoleFigures
    /// Receives the console's log lines: sign-ins, refusals, replays and purges (never a token).
    public var log: (LogLevel, String, [(String, String)]) -> Void = { _, _, _ in }
    /// The last hour of outcomes; the gateway's record hook calls `recordOutcome`.
    public private(set) var history = OutcomeHistory()
    private var sessions = ConsoleSessions()
    private var jobs: [Int: ConsoleJob] = [:]
    private var jobCount = 0
    private let random: () -> String

    /// - Parameters:
    ///   - operations: the dead-letter operations on a Redis connection the caller owns.
    ///   - readOnlyAvailable: a read-only token is configured (the sign-in page says so).
    ///   - signIn: what a token presented in the sign-in form signs in as (compared in
    ///     constant time by the caller, under its guess limits), given the request it came in.
    ///   - figures: the gateway's figures of this moment, read without I/O.
    public init(loop: EventLoop, operations: DeadLetterOperations, readOnlyAvailable: Bool,
                signIn: @escaping (_ token: String, _ request: ConsoleRequest) -> SignInCheck,
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

    /// The console holds no timers of its own; kept for its owner's symmetric shutdown.
    public func close() {}

    private var apps: [String] { operations.policies.keys.sorted() }

    // MARK: Requests

    /// Answers `request` (a path under `/console`) through `respond`, now or after a few Redis
    /// round trips. Every answer carries the security headers (`securityHeaders`).
    public func handle(_ request: ConsoleRequest, respond: @escaping (ConsoleResponse) -> Void) {
        loop.assertInLoop()
        let answer: (ConsoleResponse) -> Void = { response in
            var r = response
            r.headers += OperatorsConsole.securityHeaders
            respond(r)
        }
        let method = request.method == "HEAD" ? "GET" : request.method
        guard method == "GET" || method == "POST" else {
            return answer(ConsoleResponse(status: 405, contentType: "text/plain; charset=utf-8", body: "the console answers GET, HEAD and POST\n",
                                          headers: [("Allow", "GET, HEAD, POST")]))
        }
        switch (method, request.path) {
        case ("GET", "/console"), ("GET", "/console/"): return answer(.redirect("/console/overview"))
        case ("GET", "/console/static/console.css"):
            return answer(ConsoleResponse(status: 200, contentType: "text/css; charset=utf-8", body: ConsoleAssets.css))
        case ("GET", "/console/static/console.js"):
            return answer(ConsoleResponse(status: 200, contentType: "text/javascript; charset=utf-8", body: ConsoleAssets.javascript))
        case ("GET", "/console/signin"):
            return answer(.html(200, ConsolePages.signIn(problem: nil, readOnlyAvailable: readOnlyAvailable)))
        case ("POST", "/console/signin"):
            return signIn(request, answer)
        default:
            break
        }

        let now = Clock.unixMs()
        let session = sessions.find(request.cookie(ConsoleSessions.cookieName), nowMs: now)
        let changes = method == "POST" && (request.path == "/console/dead/replay" || request.path == "/console/dead/purge")
        let verdict = ConsoleGate.check(request, session: session, changes: changes)
        guard verdict == .allowed, let session else { return answer(refusal(verdict, request, session)) }
        return serve(request, method: method, session: session) { response in
            var r = response
            r.signedIn = true
            answer(r)
        }
    }

    /// Answers a request `ConsoleGate` allowed, of a live session.
    private func serve(_ request: ConsoleRequest, method: String, session: ConsoleSession,
                       _ answer: @escaping (ConsoleResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let path = request.path
        switch method {
        case "POST":
            switch path {
            case "/console/signout":
                sessions.close(session.id)
                return answer(.redirect("/console/signin", headers: [("Set-Cookie", ConsoleSessions.expiredCookie(secure: request.isTLS))]))
            case "/console/dead/replay": return change(.replay, request, session, answer)
            case "/console/dead/purge": return change(.purge, request, session, answer)
            default: return answer(notFound(viewer))
            }
        default:
            switch path {
            case "/console/overview": return overview(viewer, answer)
            case "/console/dead": return deadList(request, viewer, answer)
            case "/console/dead/preview": return preview(request, viewer, answer)
            case "/console/audit": return auditTrail(request, viewer, answer)
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
    public static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "same-origin"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]

    private static func viewer(_ session: ConsoleSession) -> ConsolePages.Viewer {
        ConsolePages.Viewer(name: session.name, role: session.role, csrf: session.csrf)
    }

    private func notFound(_ viewer: ConsolePages.Viewer?) -> ConsoleResponse {
        .html(404, ConsolePages.message(title: "Not found", viewer: viewer, text: "No such page.", back: ("/console/overview", "Overview")))
    }

    /// The answer to a request `ConsoleGate` did not allow: a GET without a session goes to
    /// the sign-in page; everything else is a 403 that says why and changes nothing.
    private func refusal(_ verdict: ConsoleGate.Verdict, _ request: ConsoleRequest, _ session: ConsoleSession?) -> ConsoleResponse {
        let viewer = session.map(OperatorsConsole.viewer)
        switch verdict {
        case .allowed:
            preconditionFailure("an allowed request is answered, not refused")
        case .signInFirst:
            if request.method != "POST" { return .redirect("/console/signin") }
            return refused(request, 403, "Sign in first: this form has no live session; nothing changed.", viewer: nil, why: "no session")
        case .readOnly:
            return refused(request, 403, "Signed in read-only: replays and purges need the admin token; nothing changed.",
                           viewer: viewer, why: "read-only session")
        case .badCSRF:
            return refused(request, 403, "The form's CSRF token is missing or stale: reload the page and try again; nothing changed.",
                           viewer: viewer, why: "bad CSRF token")
        case .crossOrigin:
            return refused(request, 403, "This request came from a page of another origin; nothing changed.", viewer: viewer,
                           why: "cross-origin request")
        }
    }

    private func refused(_ request: ConsoleRequest, _ status: Int, _ text: String, viewer: ConsolePages.Viewer?, why: String) -> ConsoleResponse {
        log(.warn, "console request refused", [("path", request.path), ("why", why), ("from", request.peer ?? "?")])
        return .html(status, ConsolePages.message(title: "Refused", viewer: viewer, text: text, back: ("/console/dead", "Dead letters")))
    }

    // MARK: Sign-in

    private func signIn(_ request: ConsoleRequest, _ answer: @escaping (ConsoleResponse) -> Void) {
        guard ConsoleGate.isSameOrigin(request) else {
            return answer(refused(request, 403, "This sign-in came from a page of another origin.", viewer: nil, why: "cross-origin sign-in"))
        }
        let form = request.formItems
        let token = form.first { $0.0 == "token" }?.1 ?? ""
        let given = (form.first { $0.0 == "name" }?.1 ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let check: SignInCheck = token.isEmpty ? .wrong : signInCheck(token, request)
        let role: ConsoleRole
        switch check {
        case let .signedIn(r):
            role = r
        case .wrong:
            log(.warn, "console sign-in refused: wrong token", [("from", request.peer ?? "?")])
            return answer(.html(401, ConsolePages.signIn(problem: "That token is not valid.", readOnlyAvailable: readOnlyAvailable)))
        case let .throttled(seconds):
            // Not checked, not logged one by one: the guess limits log each burst.
            return answer(.html(429, ConsolePages.signIn(problem: "Too many wrong tokens from this address: try again in \(seconds) s.",
                                                         readOnlyAvailable: readOnlyAvailable),
                                headers: [("Retry-After", String(seconds))]))
        }
        let name = given.isEmpty ? "console" : String(given.prefix(64))
        let session = sessions.open(role: role, name: name, nowMs: Clock.unixMs(), random: random)
        log(.info, "console sign-in", [("role", role.rawValue), ("name", name), ("from", request.peer ?? "?")])
        var signedIn = ConsoleResponse.redirect("/console/overview", headers: [("Set-Cookie", ConsoleSessions.cookie(session, secure: request.isTLS))])
        signedIn.signedIn = true
        answer(signedIn)
    }

    // MARK: Pages

    private func overview(_ viewer: ConsolePages.Viewer, _ answer: @escaping (ConsoleResponse) -> Void) {
        let figures = figures()
        let ids = figures.apps.map(\.id)
        operations.pendingTrims(apps: ids, horizonMs: 0) { [weak self] pending in
            guard let self else { return }
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
                                                retention: self.operations.policy(app.id))
            }
            answer(.html(200, ConsolePages.overview(viewer: viewer, figures: figures, apps: apps, redisError: redisError, nowMs: now)))
        }
    }

    /// Reads the list's filters from `items` (names prefixed by `prefix` in a confirmation
    /// form): the text as given and the filter, or the problem with it.
    private func filters(_ items: [(String, String)], prefix: String = "", nowMs: Int64)
        -> (ConsolePages.ListFilters, DeadLetterFilter, String?) {
        func value(_ name: String) -> String {
            (items.first { $0.0 == prefix + name }?.1 ?? "").trimmingCharacters(in: .whitespaces)
        }
        let text = ConsolePages.ListFilters(app: value("app"), reason: value("reason"), call: value("call"), since: value("since"),
                                            olderThan: value("older"))
        var filter = DeadLetterFilter(apps: apps)
        var problem: String?
        if !text.app.isEmpty {
            if operations.policies[text.app] == nil { problem = "No app \"\(text.app)\" in the config." } else { filter.apps = [text.app] }
        }
        if !text.reason.isEmpty { filter.reason = text.reason }
        if !text.call.isEmpty { filter.callID = text.call }
        if !text.since.isEmpty {
            if let ms = TimeArgument.instant(text.since, nowMs: nowMs) { filter.sinceMs = ms } else {
                problem = "Newer than: \(TimeArgument.forms), not \(DeadFormat.quoted(text.since))."
            }
        }
        if !text.olderThan.isEmpty {
            if let ms = TimeArgument.instant(text.olderThan, nowMs: nowMs) { filter.beforeMs = ms } else {
                problem = "Older than: \(TimeArgument.forms), not \(DeadFormat.quoted(text.olderThan))."
            }
        }
        return (text, filter, problem)
    }

    private func deadList(_ request: ConsoleRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (ConsoleResponse) -> Void) {
        let now = Clock.unixMs()
        let items = request.queryItems
        let (text, filter, problem) = filters(items, nowMs: now)
        let before = items.first { $0.0 == "before" }.flatMap { DeadLetterReference($0.1) }
        let render = { [apps] (records: [DeadLetterRecord], next: DeadLetterReference?, scanned: Int, problem: String?) in
            answer(.html(problem == nil ? 200 : 400,
                         ConsolePages.deadList(viewer: viewer, apps: apps, filters: text, records: records, next: next?.text,
                                               scanned: scanned, problem: problem, nowMs: now)))
        }
        if let problem { return render([], nil, 0, problem) }
        operations.listing(apps: filter.apps ?? apps, filter: filter, before: before, limit: OperatorsConsole.pageSize,
                           scanLimit: OperatorsConsole.scanLimit) { result in
            switch result {
            case let .success(listing): render(listing.records, listing.next, listing.scanned, nil)
            case let .failure(error): render([], nil, 0, "Redis: \(error)")
            }
        }
    }

    private func deadLetter(_ rest: String, _ viewer: ConsolePages.Viewer, _ answer: @escaping (ConsoleResponse) -> Void) {
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map { OperatorsConsole.pathComponent($0) }
        guard parts.count == 2, operations.policies[parts[0]] != nil, DeadLetterRecord.isEntryID(parts[1]) else {
            return answer(notFound(viewer))
        }
        operations.find([DeadLetterReference(app: parts[0], id: parts[1])], among: [parts[0]]) { result in
            switch result {
            case let .success(records):
                answer(.html(200, ConsolePages.deadLetter(viewer: viewer, record: records[0], ringTimeoutMs: self.operations.ringTimeoutMs(records[0].app),
                                                          nowMs: Clock.unixMs())))
            case .failure(.notFound):
                answer(.html(404, ConsolePages.message(title: "Not found", viewer: viewer,
                                                       text: "No dead letter \(parts[1]) in app \(parts[0]): replayed, purged or trimmed.",
                                                       back: ("/console/dead", "Dead letters"))))
            case let .failure(error):
                answer(.html(503, ConsolePages.message(title: "Unavailable", viewer: viewer, text: "\(error)", back: nil)))
            }
        }
    }

    /// A path component, percent-decoded (`+` stays `+`).
    static func pathComponent(_ text: Substring) -> String {
        FormData.unescape(Substring(text.replacingOccurrences(of: "+", with: "%2B")))
    }

    /// One dead letter of a preview: what the page shows of it, not its event, rendered as it
    /// is read (a step of the scan renders its rows, so the answer only joins them).
    struct PreviewRow: Sendable {
        let app: String
        let id: String
        let forecast: ReplayForecast
        /// Its `<tr>` and its confirmation form's hidden input.
        let html: String
        let input: String

        init(_ record: DeadLetterRecord, action: ConsolePages.Action, forecast: ReplayForecast, nowMs: Int64) {
            app = record.app
            id = record.id
            self.forecast = forecast
            (html, input) = ConsolePages.previewRow(record, action: action, forecast: forecast, nowMs: nowMs)
        }
    }

    /// How far a preview's scan went.
    struct PreviewScan: Sendable {
        /// Entries read.
        var scanned = 0
        /// Where the next preview goes on (`APP/ID`); nil when the scan reached the end.
        var next: DeadLetterReference?
        /// Why it stopped before the end, for the page: nil at the end.
        var stoppedBecause: String?
    }

    /// The dead letters a preview lists: the named ones (at most `maxTargets`), or those the
    /// filters select, oldest first, from `from` on: a bounded step at a time
    /// (`DeadLetterOperations.walk`), each step on its own loop turn, until `maxTargets` are
    /// found, `previewScanLimit` entries were read, or `previewDeadlineMs` passed since the
    /// request came (the request's deadline stops the work, not only its answer). Only a row
    /// per dead letter is kept, never its event.
    private func previewRows(action: ConsolePages.Action, references: [DeadLetterReference], all: Bool, filter: DeadLetterFilter,
                             from: DeadLetterReference?,
                             completion: @escaping (Result<([PreviewRow], PreviewScan), DeadLetterOperationError>) -> Void) {
        let nowMs = Clock.unixMs()
        var rows: [PreviewRow] = []
        guard all else {
            let named = Array(references.prefix(OperatorsConsole.maxTargets))
            operations.findEach(named, among: apps, each: { [operations] record in
                rows.append(PreviewRow(record, action: action, forecast: operations.forecast(record, nowMs: nowMs), nowMs: nowMs))
            }) { result in
                completion(result.map { _ in (rows, PreviewScan(scanned: named.count)) })
            }
            return
        }
        let deadline = Clock.monotonicMs() + OperatorsConsole.previewDeadlineMs
        var scan = PreviewScan()
        operations.walk(apps: filter.apps ?? apps, filter: filter, from: from, onPage: { [operations] app, page, proceed in
            scan.scanned += page.scanned
            for record in page.records {
                guard rows.count < OperatorsConsole.maxTargets else {
                    // Full: go on after the last one listed.
                    scan.next = rows.last.map { DeadLetterReference(app: $0.app, id: $0.id) }
                    scan.stoppedBecause = "the console lists at most \(OperatorsConsole.maxTargets) at once"
                    return proceed(false)
                }
                rows.append(PreviewRow(record, action: action, forecast: operations.forecast(record, nowMs: nowMs), nowMs: nowMs))
            }
            if Clock.monotonicMs() >= deadline {
                scan.stoppedBecause = "a preview scans for at most \(OperatorsConsole.previewDeadlineMs / 1000) s"
            } else if scan.scanned >= OperatorsConsole.previewScanLimit {
                scan.stoppedBecause = "a preview reads at most \(OperatorsConsole.previewScanLimit) entries"
            }
            proceed(scan.stoppedBecause == nil)
        }, completion: { result in
            switch result {
            case let .failure(error): completion(.failure(.redis(error)))
            case let .success(position):
                if scan.next == nil { scan.next = position }
                if scan.next == nil { scan.stoppedBecause = nil }
                completion(.success((rows, scan)))
            }
        })
    }

    private func preview(_ request: ConsoleRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (ConsoleResponse) -> Void) {
        let now = Clock.unixMs()
        let items = request.queryItems
        let choice = items.first { $0.0 == "action" }?.1 ?? ""
        let action: ConsolePages.Action = choice.hasPrefix("purge") ? .purge : .replay
        let all = choice.hasSuffix("-all")
        let (text, filter, problem) = filters(items, nowMs: now)
        let references = items.filter { $0.0 == "ids" }.compactMap { DeadLetterReference($0.1) }
        let fromText = items.first { $0.0 == "from" }?.1 ?? ""
        let from = DeadLetterReference(fromText)
        let rateText = items.first { $0.0 == "rate" }?.1 ?? ""
        let rate = rateText.isEmpty ? ReplayRate.default : ReplayRate(parsing: rateText)
        let back = ("/console/dead?" + FormData.encode(text.items), "Back to the dead letters")
        func message(_ s: String) { answer(.html(400, ConsolePages.message(title: "Nothing to do", viewer: viewer, text: s, back: back))) }
        if let problem { return message(problem) }
        guard let rate else { return message(OperatorsConsole.rateProblem(rateText)) }
        if !fromText.isEmpty && from?.app == nil { return message("The scan's cursor must be APP/ID, not \(DeadFormat.quoted(fromText)).") }
        if !all && references.isEmpty { return message("Select dead letters first, or choose \"all matching\".") }
        previewRows(action: action, references: references, all: all, filter: filter, from: from) { result in
            switch result {
            case let .success((rows, scan)):
                var more: String?
                if let next = scan.next {
                    more = "/console/dead/preview?" + FormData.encode([("action", choice)] + text.items + [("rate", rate.description),
                                                                                                        ("from", next.text)])
                }
                answer(.html(200, ConsolePages.preview(viewer: viewer, action: action, rows: rows, filters: all ? text : nil, rate: rate,
                                                       scan: scan, more: more, cappedNamed: !all && references.count > OperatorsConsole.maxTargets,
                                                       nowMs: Clock.unixMs())))
            case let .failure(error): message("\(error); nothing would be done.")
            }
        }
    }

    /// Why the rate a form gave is refused.
    static func rateProblem(_ text: String) -> String {
        "The rate must be \(ReplayRate.forms), not \(DeadFormat.quoted(text)); nothing was done."
    }

    /// The confirmation of a preview: the very dead letters it listed (`APP/ID` each), acted on
    /// by a job that reads each one just before it acts (those gone meanwhile are skipped).
    private func change(_ action: ConsolePages.Action, _ request: ConsoleRequest, _ session: ConsoleSession,
                        _ answer: @escaping (ConsoleResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let items = request.formItems
        let (text, filter, _) = filters(items, prefix: "f-", nowMs: Clock.unixMs())
        let wasAll = !text.isEmpty
        let references = items.filter { $0.0 == "ids" }.compactMap { DeadLetterReference($0.1) }
        let rateText = items.first { $0.0 == "rate" }?.1 ?? ""
        guard let rate = rateText.isEmpty ? ReplayRate.default : ReplayRate(parsing: rateText) else {
            return answer(.html(400, ConsolePages.message(title: "Nothing done", viewer: viewer, text: OperatorsConsole.rateProblem(rateText),
                                                          back: ("/console/dead", "Dead letters"))))
        }
        guard !references.isEmpty, references.count <= OperatorsConsole.maxTargets,
              references.allSatisfy({ $0.app.map { operations.policies[$0] != nil } ?? false }) else {
            return answer(.html(400, ConsolePages.message(title: "Nothing done", viewer: viewer,
                                                          text: "Confirm a preview of 1 to \(OperatorsConsole.maxTargets) dead letters of configured apps (APP/ID each).",
                                                          back: ("/console/dead", "Dead letters"))))
        }
        let who = [("via", OrderedJSON.string("console")), ("access", .string(session.role.rawValue)), ("from", .string(request.peer ?? "?"))]
        let job = newJob(action, requested: references.count, rate: action == .replay ? rate : nil)
        let auditFilter = wasAll ? filter : nil
        switch action {
        case .replay:
            operations.replayPaced(references, pacer: ReplayPacer(rate: rate, startMs: Clock.monotonicMs()), onStep: { reference, step in
                switch step {
                case let .replayed(r, entry, forecast):
                    job.stepDone("replayed \(r.app)/\(r.id) -> calls entry \(entry)  call \(r.callID ?? "-")  (replay #\(r.replays + 1)): "
                                 + forecast.text(nowMs: Clock.unixMs()))
                case let .skipped(r, forecast):
                    job.stepGone("skipped \(r.app)/\(r.id): " + forecast.text(nowMs: Clock.unixMs()))
                case .gone:
                    job.stepGone("skipped \(reference.text): gone meanwhile (replayed or purged by someone else)")
                }
            }, completion: { [weak self] summary in
                if let failure = summary.failure { job.failure = "Redis failed: \(failure); the rest was not replayed" }
                let record = AuditRecord(timeMs: Clock.unixMs(), verb: "replay", user: session.name, ids: summary.replayed,
                                         requested: references.count, done: summary.replayed.count, filter: auditFilter,
                                         options: [("rate", .string(rate.description))] + who)
                self?.finish(job, record)
            })
        case .purge:
            operations.purge(references) { [weak self] summary in
                for id in summary.ids { job.stepDone("purged \(id)") }
                if let failure = summary.failure { job.failure = "Redis failed: \(failure); the rest was not purged" }
                let record = AuditRecord(timeMs: Clock.unixMs(), verb: "purge", user: session.name, ids: summary.ids,
                                         requested: references.count, done: summary.purged, filter: auditFilter, options: who)
                job.counted(done: summary.purged)
                self?.finish(job, record)
            }
        }
        answer(.redirect("/console/jobs/\(job.number)"))
    }

    private func newJob(_ action: ConsolePages.Action, requested: Int, rate: ReplayRate?) -> ConsoleJob {
        jobCount += 1
        let job = ConsoleJob(number: jobCount, action: action, requested: requested, rate: rate)
        jobs[job.number] = job
        jobs[job.number - OperatorsConsole.keptJobs] = nil
        return job
    }

    /// Logs the action and writes its audit record to the audit stream, as `pushgw dead` does.
    private func finish(_ job: ConsoleJob, _ record: AuditRecord) {
        log(.info, "dead letters \(record.verb)", [("user", record.user), ("requested", String(record.requested)),
                                                   ("done", String(record.done)), ("via", "console")])
        operations.audit(record) { [weak self] result in
            if case let .failure(error) = result {
                job.failure = (job.failure.map { $0 + "; " } ?? "") + "the audit record was not written: \(error)"
                self?.log(.warn, "console audit record not written", [("verb", record.verb), ("error", "\(error)")])
            }
            job.finish()
        }
    }

    private func auditTrail(_ request: ConsoleRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (ConsoleResponse) -> Void) {
        let before = request.queryItems.first { $0.0 == "before" }.map(\.1).flatMap { DeadLetterRecord.isEntryID($0) ? "(" + $0 : nil }
        operations.auditTrail(count: OperatorsConsole.auditPageSize + 1, before: before) { result in
            switch result {
            case let .success(entries):
                let shown = Array(entries.prefix(OperatorsConsole.auditPageSize))
                let next = entries.count > OperatorsConsole.auditPageSize ? shown.last?.id : nil
                answer(.html(200, ConsolePages.audit(viewer: viewer, entries: shown, next: next, problem: nil)))
            case let .failure(error):
                answer(.html(503, ConsolePages.audit(viewer: viewer, entries: [], next: nil, problem: "Redis: \(error)")))
            }
        }
    }
}
