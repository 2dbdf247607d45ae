import AdminEndpoint
import CallStorage
import EventLoop
import Foundation
import HTTPMessages
import RedisClient
import Routing

/// The routing table of the producers' HTTP API (docs/protocol.md, "The HTTP API";
/// docs/http-api.yaml): a request in, one answer out through `respond`, after at most a few
/// Redis round trips (a `?wait` polls the result key until its time is up).
///
/// In order, each step answering before the next can write anything: the path and method
/// (404, 405), the API key (401 none or wrong, 403 another app's, 429 while the client's
/// wrong keys wait: `CredentialGuard`), the app's request rate (429, `AppRequestRate`), the
/// body's size (413) and the event (400, with the router's own reason text:
/// `CallEvent.decode`), the `Idempotency-Key` (400 when it is not the call id); then the
/// event is added (202), or the id's first outcome answers (409), or Redis refuses (503).
/// Loop-owned.
package final class IngestRoutes {
    /// An app as the API serves it: its keys and its routing policy (for the validation).
    package struct App: Sendable {
        package let keys: AppKeys
        package let policy: AppRoutingPolicy
        /// Its retention windows: where a call's compact record is read once its detail expired.
        package let retention: RetentionWindows
        package init(keys: AppKeys, policy: AppRoutingPolicy, retention: RetentionWindows = .defaults) {
            self.keys = keys
            self.policy = policy
            self.retention = retention
        }
    }

    /// The longest `?wait`, and how often a wait reads the result key.
    package static let longestWaitMs: Int64 = 30_000
    static let pollEveryMs: Int64 = 50

    private let loop: EventLoop
    private let intake: CallIntake
    private var apps: [String: App]
    private var keys: APIKeys
    private var rate: AppRequestRate
    private let guesses: CredentialGuard
    /// Waits running now, so `close()` can end them.
    private var waits: [Int: LoopTimer] = [:]
    private var waitSerial = 0

    package init(loop: EventLoop, intake: CallIntake, apps: [String: App], keys: APIKeys, rate: AppRequestRate,
                 guesses: CredentialGuard) {
        self.loop = loop
        self.intake = intake
        self.apps = apps
        self.keys = keys
        self.rate = rate
        self.guesses = guesses
    }

    /// Serves a reloaded config's apps, keys and rates from the next request on (a request in
    /// flight finishes as it started).
    package func update(apps: [String: App], keys: APIKeys, rate: AppRequestRate) {
        self.apps = apps
        self.keys = keys
        self.rate = rate
    }

    /// Ends the waits in flight (their answers are not sent).
    package func close() {
        for timer in waits.values { timer.close() }
        waits = [:]
    }

    /// What a path asks for.
    enum Route: Equatable {
        case submit(app: String)
        case read(app: String, id: String)
        /// `cancel`, `answer`, `decline` or `ringing`: the call-in-progress event of that kind.
        case progress(app: String, id: String, kind: CallEvent.Kind)
    }

    /// The path action of each call-in-progress event kind.
    static let progressActions: [String: CallEvent.Kind] = [
        "cancel": .callCancelled, "answer": .callAnswered, "decline": .callDeclined, "ringing": .callRinging,
    ]

    /// `/v1/apps/{app}/calls[/{id}[/{action}]]`; the id percent-decoded. Nil for any other path.
    static func route(_ path: String) -> Route? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 5, parts[0].isEmpty, parts[1] == "v1", parts[2] == "apps", !parts[3].isEmpty, parts[4] == "calls"
        else { return nil }
        let app = parts[3]
        switch parts.count {
        case 5: return .submit(app: app)
        case 6, 7:
            guard let id = parts[5].removingPercentEncoding, !id.isEmpty else { return nil }
            if parts.count == 6 { return .read(app: app, id: id) }
            return progressActions[parts[6]].map { .progress(app: app, id: id, kind: $0) }
        default: return nil
        }
    }

    package func answer(_ request: HTTPRequest, respond: @escaping (HTTPResponse) -> Void) {
        guard let route = IngestRoutes.route(request.path) else {
            return respond(.problem(404, "not_found", "no such path: the API's paths are under /v1/apps/APP/calls (docs/http-api.yaml)"))
        }
        let method: String
        switch route {
        case .read: method = "GET"
        default: method = "POST"
        }
        guard request.method == method else {
            return respond(.problem(405, "method_not_allowed", "\(request.path) answers \(method) only", headers: ["Allow": method]))
        }
        let app: String
        switch route {
        case let .submit(a), let .read(a, _), let .progress(a, _, _): app = a
        }
        if let refusal = authenticate(request, app: app) { return respond(refusal) }
        guard let served = apps[app] else {
            // A key of an app the gateway does not route (`config check` refuses such an
            // `ingest.apps` entry; a config built in code may have one).
            return respond(.problem(404, "unknown_app", "no app \(app) is configured"))
        }
        if let waitMs = rate.take(app, nowMs: Clock.monotonicMs()) {
            let seconds = max(1, (waitMs + 999) / 1000)
            return respond(.problem(429, "rate_limited", "app \(app) is over its request rate: try again in \(seconds) s",
                                    headers: ["Retry-After": String(seconds)]))
        }
        let wait: Int64?
        switch IngestRoutes.waitMs(request.queryItems) {
        case let .success(ms): wait = ms
        case let .failure(problem): return respond(problem.response)
        }
        switch route {
        case .submit:
            submit(request, app: served, wait: wait, respond: respond)
        case let .progress(_, id, kind):
            progress(kind, of: id, request: request, app: served, wait: wait, respond: respond)
        case let .read(_, id):
            read(id, namespace: .call, app: served, until: wait.map { Clock.monotonicMs() + $0 }, respond: respond)
        }
    }

    /// Nil when the request's key is `app`'s; else the refusal. Only a wrong key counts as a
    /// guess: none at all is a client without its key, another app's key is a real key.
    private func authenticate(_ request: HTTPRequest, app: String) -> HTTPResponse? {
        let authorization = request.headers["authorization"]
        guard authorization != nil else {
            return .problem(401, "unauthenticated", "this API needs Authorization: Bearer with an API key of app \(InvalidEvent.quote(app))",
                            headers: ["WWW-Authenticate": "Bearer realm=\"pushgw\""])
        }
        if case let .wait(seconds) = guesses.admit(request.peer) {
            return .problem(429, "too_many_wrong_keys", "too many wrong API keys from this address: try again in \(seconds) s",
                            headers: ["Retry-After": String(seconds)])
        }
        switch keys.check(authorization: authorization) {
        case let .app(owner) where owner == app:
            return nil
        case .app:
            return .problem(403, "forbidden", "this API key is not one of app \(InvalidEvent.quote(app))'s")
        case .none, .wrong:
            guesses.failed(request.peer, via: "ingest")
            return .problem(401, "unauthenticated", "the API key is not one this gateway knows",
                            headers: ["WWW-Authenticate": "Bearer realm=\"pushgw\", error=\"invalid_token\""])
        }
    }

    private func submit(_ request: HTTPRequest, app: App, wait: Int64?, respond: @escaping (HTTPResponse) -> Void) {
        let nowMs = Clock.unixMs()
        let event: CallEvent
        switch IngestRoutes.validate(request.body, app: app, nowMs: nowMs) {
        case let .success(valid): event = valid
        case let .failure(problem): return respond(problem.response)
        }
        guard event.kind == .incomingCall else {
            return respond(.problem(400, "invalid_event", "invalid_event: type: this path takes incoming_call events; cancel with POST "
                                    + "/v1/apps/\(app.keys.app)/calls/ID/cancel", field: "type"))
        }
        if let problem = IngestRoutes.idempotencyProblem(request, id: event.id) { return respond(problem.response) }
        let until = wait.map { min(Clock.monotonicMs() + $0, Clock.monotonicMs() + max(0, event.deadlineMs - nowMs)) }
        add(event.id, namespace: .call, bytes: request.body, app: app, until: until, respond: respond)
    }

    /// `POST …/calls/{id}/cancel|answer|decline|ringing`: writes that event of call `id`. The
    /// body is empty or a JSON object whose only field is `device` (required for an answer and
    /// a decline, optional for a receipt, none for a cancel). An end's own result is keyed in
    /// the cancels' namespace, a receipt's by call and device (docs/protocol.md).
    private func progress(_ kind: CallEvent.Kind, of id: String, request: HTTPRequest, app: App, wait: Int64?,
                          respond: @escaping (HTTPResponse) -> Void) {
        var object: [String: Any] = ["v": 1, "id": id, "type": kind.rawValue]
        if !request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            guard let given = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else {
                return respond(.problem(400, "invalid_event", "invalid_event: body: expected empty or a JSON object such as "
                                        + "{\"device\":\"bob-iphone\"}", field: "body"))
            }
            if let other = given.keys.sorted().first(where: { $0 != "device" }) {
                return respond(.problem(400, "invalid_event", "invalid_event: \(InvalidEvent.quote(other)): not a field of this request "
                                        + "(only device)", field: other))
            }
            if let device = given["device"] {
                guard kind != .callCancelled else {
                    return respond(.problem(400, "invalid_event", "invalid_event: device: a cancel ends the call on every device",
                                            field: "device"))
                }
                object["device"] = device
            }
        }
        let bytes = Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data())
        // The same checks as any event: the id's and the device's lengths, a device required.
        let event: CallEvent
        switch IngestRoutes.validate(bytes, app: app, nowMs: Clock.unixMs()) {
        case let .success(valid): event = valid
        case let .failure(problem): return respond(problem.response)
        }
        if let problem = IngestRoutes.idempotencyProblem(request, id: id) { return respond(problem.response) }
        let namespace: ResultEntry.Namespace = kind == .callRinging ? .ringing : .cancel
        let keyed = kind == .callRinging ? ResultEntry.ringingID(id, device: event.device) : id
        add(id, keyed: keyed, namespace: namespace, bytes: bytes, app: app, until: wait.map { Clock.monotonicMs() + $0 }, respond: respond)
    }

    /// Adds event `bytes` of call `id`, its result keyed `keyed` (the id itself but for a
    /// receipt, keyed by call and device) in `namespace`.
    private func add(_ id: String, keyed: String? = nil, namespace: ResultEntry.Namespace, bytes: [UInt8], app: App, until: Int64?,
                     respond: @escaping (HTTPResponse) -> Void) {
        let keyed = keyed ?? id
        intake.submit(app.keys, id: keyed, namespace: namespace, event: bytes) { [weak self] result in
            guard let self else { return }
            switch result {
            case let .success(.added(entry)):
                let accepted = HTTPResponse.json(202, ["status": "accepted", "id": id, "entry": entry])
                guard let until else { return respond(accepted) }
                self.poll(id, keyed: keyed, namespace: namespace, app: app, until: until, entry: entry, respond: respond)
            case let .success(.duplicate(first, json)):
                var body: [String: Any] = ["error": "duplicate", "first_outcome": first,
                                           "message": "\(id) already has an outcome (\(first)): nothing was sent again"]
                body["result"] = try? JSONSerialization.jsonObject(with: Data(json.utf8))
                respond(.json(409, body))
            case let .failure(error):
                respond(IngestRoutes.unavailable(error))
            }
        }
    }

    /// `GET …/calls/{id}`: the result (200), in flight (202), or none (404); with `until`, reads
    /// again until a result or the time is up.
    private func read(_ id: String, namespace: ResultEntry.Namespace, app: App, until: Int64?,
                      respond: @escaping (HTTPResponse) -> Void) {
        intake.result(app.keys, id: id, namespace: namespace, window: app.retention) { [weak self] result in
            switch result {
            case let .success(.result(json)):
                respond(.json(200, ["status": "done", "id": id, "result": (try? JSONSerialization.jsonObject(with: Data(json.utf8))) ?? json]))
            case let .success(.detailExpired(first)):
                respond(.json(200, ["status": "detail_expired", "id": id, "first_outcome": first]))
            case let .success(stored):
                if let until, Clock.monotonicMs() < until, let self {
                    return self.later { self.read(id, namespace: namespace, app: app, until: until, respond: respond) }
                }
                if stored == .inFlight { return respond(.json(202, ["status": "in_flight", "id": id])) }
                respond(.problem(404, "unknown_call", "no result for \(id) (none yet, or older than the app's result window, 24 h by default): a call waiting to be read, "
                                 + "or for a retry, has none"))
            case let .failure(error):
                respond(IngestRoutes.unavailable(error))
            }
        }
    }

    /// After an add with `?wait`: the result (200) once it is there, else at `until` the
    /// accepted answer (202), `in_flight` when a gateway routes it.
    private func poll(_ id: String, keyed: String, namespace: ResultEntry.Namespace, app: App, until: Int64, entry: String,
                      respond: @escaping (HTTPResponse) -> Void) {
        intake.result(app.keys, id: keyed, namespace: namespace, window: app.retention) { [weak self] result in
            switch result {
            case let .success(.result(json)):
                respond(.json(200, ["status": "done", "id": id, "entry": entry,
                                    "result": (try? JSONSerialization.jsonObject(with: Data(json.utf8))) ?? json]))
            case let .success(stored):
                if Clock.monotonicMs() < until, let self {
                    return self.later { self.poll(id, keyed: keyed, namespace: namespace, app: app, until: until, entry: entry, respond: respond) }
                }
                respond(.json(202, ["status": stored == .inFlight ? "in_flight" : "accepted", "id": id, "entry": entry]))
            case .failure:
                // The event is in the stream: the wait only ends early.
                respond(.json(202, ["status": "accepted", "id": id, "entry": entry]))
            }
        }
    }

    private func later(_ step: @escaping () -> Void) {
        waitSerial += 1
        let serial = waitSerial
        let timer = LoopTimer(loop: loop) { [weak self] in
            self?.waits.removeValue(forKey: serial)?.close()
            step()
        }
        waits[serial] = timer
        timer.schedule(afterMs: IngestRoutes.pollEveryMs)
    }

    // MARK: Checks (pure)

    /// A refusal before anything is written.
    struct Problem: Error, Equatable {
        let response: HTTPResponse
    }

    /// The body as the router will read it: over the event limit 413, invalid 400 with the
    /// dead letter's reason (`invalid_event: FIELD: …`) and the field.
    static func validate(_ body: [UInt8], app: App, nowMs: Int64) -> Result<CallEvent, Problem> {
        guard body.count <= CallEvent.maxEventBytes else {
            return .failure(Problem(response: .problem(413, "too_large", "invalid_event: event: \(body.count) bytes, over the "
                                                       + "\(CallEvent.maxEventBytes)-byte limit", field: "event")))
        }
        do {
            return .success(try CallEvent.decode(body, entryTimeMs: nowMs, policy: app.policy))
        } catch {
            return .failure(Problem(response: .problem(400, "invalid_event", "invalid_event: \(error.description)",
                                                       field: error.field ?? "event")))
        }
    }

    /// An `Idempotency-Key` that is not the call id: 400 (the call id is the idempotency key).
    static func idempotencyProblem(_ request: HTTPRequest, id: String) -> Problem? {
        let given = request.headers.values("idempotency-key")
        guard !given.isEmpty else { return nil }
        guard given.count == 1, given[0] == id else {
            return Problem(response: .problem(400, "idempotency_key_mismatch",
                                              "Idempotency-Key must be the call id (\(InvalidEvent.quote(id))): the id is the idempotency key",
                                              field: "Idempotency-Key"))
        }
        return nil
    }

    /// `?wait=5s`, `500ms` or `5` (seconds), at most `longestWaitMs`; nil without `wait`.
    static func waitMs(_ query: [(String, String)]) -> Result<Int64?, Problem> {
        guard let text = query.last(where: { $0.0 == "wait" })?.1 else { return .success(nil) }
        var digits = Substring(text), scale: Int64 = 1000
        if digits.hasSuffix("ms") {
            digits = digits.dropLast(2); scale = 1
        } else if digits.hasSuffix("s") {
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.count <= 6, digits.allSatisfy(\.isASCII), let n = Int64(digits), n >= 0,
              n * scale <= longestWaitMs else {
            return .failure(Problem(response: .problem(400, "invalid_wait", "wait=\(InvalidEvent.quote(text)) is not a time of at most "
                                                       + "\(longestWaitMs / 1000) s (write 5s or 500ms)", field: "wait")))
        }
        return .success(n * scale)
    }

    /// Redis did not take the write: 503, `redis_refuses_writes` when Redis refuses writes as a
    /// whole (`RedisError.writeRefusal`), `redis_unavailable` otherwise. Nothing was added.
    static func unavailable(_ error: RedisError) -> HTTPResponse {
        if let refusal = error.writeRefusal {
            return .problem(503, "redis_refuses_writes", "Redis refuses writes (\(refusal.code)): nothing was written; send it again "
                            + "with the same id", headers: ["Retry-After": "1"])
        }
        return .problem(503, "redis_unavailable", "Redis did not answer: send it again with the same id", headers: ["Retry-After": "1"])
    }
}

extension HTTPResponse {
    /// `object` as a JSON body.
    static func json(_ status: Int, _ object: [String: Any], headers: HTTPHeaders = [:]) -> HTTPResponse {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return HTTPResponse(status: status, contentType: "application/json", body: String(decoding: data, as: UTF8.self), headers: headers)
    }

    /// An error of the API: `{"error": code, "message": message}` (and `field` when one is at fault).
    static func problem(_ status: Int, _ code: String, _ message: String, field: String? = nil,
                        headers: HTTPHeaders = [:]) -> HTTPResponse {
        var object: [String: Any] = ["error": code, "message": message]
        if let field { object["field"] = field }
        return json(status, object, headers: headers)
    }
}
