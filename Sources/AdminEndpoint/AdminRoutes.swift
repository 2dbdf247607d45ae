import Foundation
import HTTPMessages

extension HTTPRequest {
    /// The `Authorization` header (the first); nil when absent.
    package var authorization: String? { headers["authorization"] }
}

extension HTTPResponse {
    /// A JSON body `{"error": message}`.
    package static func error(_ status: Int, _ message: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        let data = (try? JSONSerialization.data(withJSONObject: ["error": message], options: [.sortedKeys])) ?? Data()
        return HTTPResponse(status: status, contentType: "application/json", body: String(decoding: data, as: UTF8.self),
                            headers: headers)
    }
}

/// What the admin endpoint answers, its one routing table: `/metrics`, `/healthz`, `/readyz`
/// for anyone, the admin API (routes added with `addRoute`) behind the bearer token
/// (`AdminAccess`), and sections with access rules of their own that may answer later (the
/// console under `/console`, added with `addSection`).
///
/// Independent of HTTP plumbing: `answer` (and `handle`, for what answers at once) maps a
/// request to a response, so the rules are tested without sockets and `AdminServer` only
/// carries bytes. Loop-owned.
package final class AdminRoutes {
    package typealias Handler = (HTTPRequest) -> HTTPResponse
    /// A handler that answers through its second argument, once, now or later on the loop.
    package typealias AnsweringHandler = (HTTPRequest, @escaping (HTTPResponse) -> Void) -> Void

    private let token: AdminToken?
    private let metrics: () -> String
    private let readiness: () -> Readiness
    private let guesses: CredentialGuard?
    private var api: [String: Handler] = [:]
    /// Path prefixes (`/console`) whose paths their own handler answers, in the order added.
    private var sections: [(prefix: String, handler: AnsweringHandler)] = []

    /// - Parameters:
    ///   - token: the admin API's token; nil closes the admin API (403).
    ///   - metrics: renders the Prometheus text of a scrape.
    ///   - readiness: evaluates `/readyz`.
    ///   - guesses: the guess limits every presented token is checked under (nil: none, for
    ///     tests of the rules alone).
    package init(token: AdminToken?, metrics: @escaping () -> String, readiness: @escaping () -> Readiness,
                 guesses: CredentialGuard? = nil) {
        self.token = token
        self.metrics = metrics
        self.readiness = readiness
        self.guesses = guesses
    }

    /// What a request's `Authorization` proves: nothing (none sent, or no token configured),
    /// the token, a wrong token (counted by the guess limits), or nothing because the guess
    /// limits do not let it be checked now.
    private enum Presented {
        case none, right, wrong
        case unchecked(retryAfterSeconds: Int)
    }

    private func presented(_ request: HTTPRequest) -> Presented {
        guard let token, request.authorization != nil else { return .none }
        if case let .wait(seconds) = guesses?.admit(request.peer) { return .unchecked(retryAfterSeconds: seconds) }
        if token.matches(authorization: request.authorization) { return .right }
        guesses?.failed(request.peer, via: "bearer")
        return .wrong
    }

    /// Adds an admin API route at `path` (exact match), reachable with the bearer token only.
    package func addRoute(_ path: String, handler: @escaping Handler) {
        precondition(!AdminAccess.openPaths.contains(path), "\(path) is an open path")
        api[path] = handler
    }

    /// Adds a section: `prefix` and every path under `prefix/` go to `handler`, which checks
    /// access itself (the console's sessions) and may answer after a few Redis round trips.
    package func addSection(_ prefix: String, handler: @escaping AnsweringHandler) {
        precondition(!AdminAccess.openPaths.contains(prefix) && api[prefix] == nil, "\(prefix) is a route already")
        sections.append((prefix, handler))
    }

    /// Answers `request` through `respond`: a section's path by its handler (now or later),
    /// every other path at once (`handle`).
    package func answer(_ request: HTTPRequest, respond: @escaping (HTTPResponse) -> Void) {
        if let section = sections.first(where: { request.path == $0.prefix || request.path.hasPrefix($0.prefix + "/") }) {
            return section.handler(request, respond)
        }
        respond(handle(request))
    }

    /// Answers a request of the open paths or the admin API (not of a section).
    package func handle(_ request: HTTPRequest) -> HTTPResponse {
        if AdminAccess.openPaths.contains(request.path) {
            guard request.method == "GET" || request.method == "HEAD" else {
                return .error(405, "\(request.path) answers GET and HEAD only", headers: ["Allow": "GET, HEAD"])
            }
            switch request.path {
            case "/healthz":
                // Answered on the loop: if this runs, the loop runs.
                return HTTPResponse(status: 200, contentType: "text/plain; charset=utf-8", body: "ok\n")
            case "/readyz":
                // Open, but its problems' details only to the bearer token (`Readiness.json`);
                // a token that may not be checked now gets what anyone gets.
                let r = readiness()
                let detailed: Bool
                if case .right = presented(request) { detailed = true } else { detailed = false }
                var response = HTTPResponse(status: r.isReady ? 200 : 503, contentType: "application/json", body: r.json(detailed: detailed))
                response.trusted = detailed
                return response
            default:
                return HTTPResponse(status: 200, contentType: PrometheusText.contentType, body: metrics())
            }
        }
        guard token != nil else { return .error(403, "the admin API is closed: no admin.token_file is configured") }
        switch presented(request) {
        case .right:
            var response = api[request.path].map { $0(request) } ?? .error(404, "no such path: \(request.path)")
            response.trusted = true
            return response
        case let .unchecked(seconds):
            return .error(429, "too many wrong tokens from this address: try again in \(seconds) s", headers: ["Retry-After": String(seconds)])
        case .none, .wrong:
            return .error(401, "this path needs Authorization: Bearer with the admin token",
                          headers: ["WWW-Authenticate": "Bearer realm=\"pushgw\""])
        }
    }
}
