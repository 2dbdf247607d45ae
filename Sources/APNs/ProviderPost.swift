/// A request of another push provider that an `ApnsClient` pool carries beside APNs pushes:
/// a POST of `body` to `path` on the pool's host, with the request's own bearer token (FCM's
/// `messages:send` with an OAuth 2.0 access token, and the token exchange itself). The pool
/// gives it everything it gives a push — the queue and its two budgets, streams, GOAWAY and
/// REFUSED_STREAM resends, PING, timeouts, reconnects — and answers it with what the stream
/// received; the provider's own module reads the answer (docs/architecture.md, "FCM").
public struct ProviderPost: Sendable, Equatable {
    /// `:path`, such as `/v1/projects/acme/messages:send`.
    public let path: String
    /// `content-type` of `body`.
    public let contentType: String
    /// Sent as `authorization: Bearer …`; nil sends no `authorization`.
    public let bearerToken: String?
    public let body: [UInt8]

    public init(path: String, contentType: String = "application/json", bearerToken: String?, body: [UInt8]) {
        self.path = path
        self.contentType = contentType
        self.bearerToken = bearerToken
        self.body = body
    }
}

/// What the server answered a `ProviderPost`: any status is an answer (the provider's module
/// classifies it), as a rejection is for a push.
public struct ProviderPostAnswer: Sendable, Equatable {
    /// The HTTP `:status`.
    public let status: Int
    /// The body, its first 16 KiB.
    public let body: [UInt8]
    /// `retry-after` in seconds, when the answer had one (FCM's 429 and 503).
    public let retryAfterSeconds: Int64?

    public init(status: Int, body: [UInt8], retryAfterSeconds: Int64? = nil) {
        self.status = status
        self.body = body
        self.retryAfterSeconds = retryAfterSeconds
    }
}
